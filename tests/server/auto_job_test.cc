// `method auto` through the server (server/jobs/families/auto.cc): the
// leaderboard in the summary, the winner learned and stored with its scaling,
// a plain kernel stored when it wins, resume between candidates from the
// job's checkpoint, and bad options named at submit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <string>

#include "core/data/feature_scaling.h"
#include "core/data/synthetic.h"
#include "kls/v1/families/auto.pb.h"
#include "server/jobs/proto_convert.h"
#include "server/jobs/solver_dispatch.h"
#include "test_server.h"
#include "tests/test_util/label_pairs.h"

namespace kls::server {
namespace {

using kls::testing::Ref;
using kls::testing::TestCsv;
using ::testing::HasSubstr;
using ::testing::Not;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

kls::v1::SubmitJobRequest AutoRequest(const std::string& dataset_id, const kls::v1::AutoOptions& o) {
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(dataset_id);
  r.mutable_family_options()->PackFrom(o);
  return r;
}

class AutoJobTest : public kls::testing::ServerJobTest {};

TEST_F(AutoJobTest, EveryCandidateIsScoredAndTheBestIsLearnedAndStored) {
  // Wine's raw columns differ in range by ~1000x: z-scored candidates must win.
  const Dataset wine = TestCsv("wine.csv");
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(wine.labels, 300, 31);
  const std::string id = Upload(wine, pairs);
  ASSERT_FALSE(id.empty());
  kls::v1::AutoOptions o;
  o.set_max_seconds(0);  // no budget: every candidate is scored, on all folds or (screened out) on fold 0
  const kls::v1::Job job = Run(AutoRequest(id, o), "wine-auto");
  ASSERT_EQ(job.state(), kls::v1::SUCCEEDED) << job.error();
  EXPECT_EQ(job.method(), "auto");
  const std::string& s = job.summary_json();
  // 5 families and 3 plain kernels (linear, RBF, the graph's diffusion kernel), each raw and z-scored.
  const int scored = Count(s, "\"status\":\"scored\",\"value\""), screened = Count(s, "\"status\":\"screened\",\"value\"");
  EXPECT_EQ(scored + screened, 16) << s;  // candidates (the refinement has "from")
  EXPECT_GE(scored, 2) << s;              // the best learned and the best plain one at least
  EXPECT_EQ(Count(s, "\"screen_mean\":"), 16) << s;
  EXPECT_THAT(s, HasSubstr("\"chosen_folds\":3"));
  // The winner's value refined on the same folds (core/npkl/auto_select.h), and the value learned.
  EXPECT_THAT(s, HasSubstr("\"chosen_value\":"));
  EXPECT_THAT(s, HasSubstr("\"refine\":{\"candidate\":"));
  EXPECT_EQ(Count(s, "\"kind\":\"plain\""), 6);
  EXPECT_EQ(Count(s, "\"scaling\":\"zscore\",\"kind\""), 8);
  EXPECT_THAT(s, ::testing::ContainsRegex("\\{\"name\":\"diffusion\",\"scaling\":\"none\",\"kind\":\"plain\","
                                           "\"status\":\"(scored|screened)\""));
  EXPECT_THAT(s, HasSubstr("\"auto\":{\"score\":\"threshold\",\"folds\":3,\"budget_seconds\":0,"));
  EXPECT_THAT(s, HasSubstr("@zscore\""));
  EXPECT_THAT(s, HasSubstr("\"auto_note\":\"auto chose "));
  // The winner ran as its own family would: its scaling and certificate are in the summary.
  EXPECT_THAT(s, HasSubstr("\"scaling\":\"zscore\",\"certificate\""));
  EXPECT_THAT(s, Not(HasSubstr("baseline_guard")));

  // The chosen candidate is the best learned one, unless a plain kernel leads it by the margin.
  const std::regex entry("\\{\"name\":\"([a-z_/]+)\",\"scaling\":\"([a-z]+)\",\"kind\":\"([a-z]+)\","
                         "\"status\":\"scored\",\"value\":[0-9.e+-]+,\"mean\":([0-9.e+-]+)");
  double best[2] = {-1, -1};  // learned, plain
  std::string key[2];
  for (auto it = std::sregex_iterator(s.begin(), s.end(), entry); it != std::sregex_iterator(); ++it) {
    const int kind = (*it)[3].str() == "plain" ? 1 : 0;
    const double mean = std::stod((*it)[4]);
    if (mean > best[kind]) {
      best[kind] = mean;
      key[kind] = (*it)[1].str() + "@" + (*it)[2].str();
    }
  }
  std::smatch margin;
  ASSERT_TRUE(std::regex_search(s, margin, std::regex("\"margin\":([0-9.e+-]+)")));
  const bool plain_wins = best[1] >= best[0] + std::stod(margin[1]);
  EXPECT_THAT(s, HasSubstr("\"chosen\":\"" + key[plain_wins ? 1 : 0] + "\""));
  EXPECT_GT(best[0], 0.85);

  auto kernel = client_->ExportKernel(Ref("wine-auto"));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->embedding.rows(), wine.features.rows());
}

TEST_F(AutoJobTest, AWinningPlainKernelIsStoredWithExactFeatureQueries) {
  const Dataset wine = TestCsv("wine.csv");
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(wine.labels, 200, 32);
  const std::string id = Upload(wine, pairs);
  ASSERT_FALSE(id.empty());
  kls::v1::AutoOptions o;
  o.add_candidates("linear");
  kls::v1::SubmitJobRequest r = AutoRequest(id, o);
  r.set_scaling(kls::v1::SubmitJobRequest::ZSCORE);  // set: the only scaling tried
  const kls::v1::Job job = Run(r, "wine-linear");
  ASSERT_EQ(job.state(), kls::v1::SUCCEEDED) << job.error();
  const std::string& s = job.summary_json();
  EXPECT_EQ(Count(s, "\"status\":\"scored\""), 1) << s;
  EXPECT_THAT(s, HasSubstr("\"chosen\":\"linear@zscore\""));
  EXPECT_THAT(s, HasSubstr("the plain kernel is stored"));

  // V = zscore(X), and a raw row maps to its own stored row.
  auto scaler = FeatureScaler::Fit(wine.features, FeatureScaling::kZScore);
  ASSERT_TRUE(scaler.ok());
  const Eigen::MatrixXd xs = *scaler->Apply(wine.features);
  auto exported = client_->ExportKernel(Ref("wine-linear"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->embedding.cols(), xs.cols());
  EXPECT_LE((exported->embedding - xs).cwiseAbs().maxCoeff(), 1e-9);
  kls::v1::EmbedRequest e;
  *e.mutable_kernel() = Ref("wine-linear");
  e.set_dim(static_cast<int>(wine.features.cols()));
  for (int j = 0; j < wine.features.cols(); ++j) e.add_features(wine.features(40, j));
  auto row = client_->Embed(e);
  ASSERT_TRUE(row.ok()) << row.status();
  for (int c = 0; c < xs.cols(); ++c) EXPECT_NEAR(row->values(c), xs(40, c), 1e-9);
}

// On two moons the k-NN graph's diffusion kernel beats the plain linear and
// RBF kernels on held-out pairs: auto stores it (its factor, n rows).
TEST_F(AutoJobTest, OnTwoMoonsTheGraphsDiffusionKernelWinsAndIsStored) {
  auto moons = MakeTwoMoons(300, 0.05, 3);
  ASSERT_TRUE(moons.ok()) << moons.status();
  const std::string id = Upload(*moons, test_util::RandomLabelPairs(moons->labels, 400, 36));
  ASSERT_FALSE(id.empty());
  kls::v1::AutoOptions o;
  for (const char* c : {"linear", "rbf", "diffusion"}) o.add_candidates(c);
  o.set_clusters(2);
  o.set_max_seconds(0);  // no budget (the default's reference, the linear kernel, takes a millisecond)
  kls::v1::SubmitJobRequest r = AutoRequest(id, o);
  r.set_scaling(kls::v1::SubmitJobRequest::NONE);
  const kls::v1::Job job = Run(r, "moons-diffusion");
  ASSERT_EQ(job.state(), kls::v1::SUCCEEDED) << job.error();
  const std::string& s = job.summary_json();
  // The diffusion kernel scored on all folds; linear and RBF, far behind on fold 0, may be screened out.
  EXPECT_EQ(Count(s, "\"status\":\"scored\",\"value\"") + Count(s, "\"status\":\"screened\",\"value\""), 3) << s;
  EXPECT_THAT(s, HasSubstr("{\"name\":\"diffusion\",\"scaling\":\"none\",\"kind\":\"plain\",\"status\":\"scored\""));
  EXPECT_THAT(s, HasSubstr("\"chosen\":\"diffusion@none\""));
  EXPECT_THAT(s, HasSubstr("auto chose diffusion on raw features (beta "));
  EXPECT_THAT(s, HasSubstr("the plain kernel is stored"));
  auto kernel = client_->ExportKernel(Ref("moons-diffusion"));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_EQ(kernel->embedding.rows(), 300);
  EXPECT_NEAR(kernel->embedding.row(7).norm(), 1.0, 1e-9);  // the normalized kernel: unit diagonal
}

// The job's checkpoint after each evaluation holds the leaderboard so far; a
// resumed run takes the screened candidates from it instead of screening them
// again. The test marks the first entry (the reference, scored on all folds
// in the screening; screen_seconds = 123) in the checkpoint taken after the
// screening: the resumed leaderboard must show the mark.
TEST(AutoResumeTest, FinishedCandidatesComeFromTheCheckpoint) {
  const Dataset wine = TestCsv("wine.csv");
  store::StoredDataset data;
  data.data = wine;
  data.constraints = test_util::RandomLabelPairs(wine.labels, 200, 33);
  kls::v1::AutoOptions o;
  o.set_max_seconds(0);
  for (const char* c : {"kl_admm", "linear", "bcd_npkl/square"}) o.add_candidates(c);
  kls::v1::SubmitJobRequest r;
  r.mutable_family_options()->PackFrom(o);
  r.set_scaling(kls::v1::SubmitJobRequest::ZSCORE);
  auto spec = SpecFromRequest(r);
  ASSERT_TRUE(spec.ok()) << spec.status();

  std::vector<Checkpoint> saved;
  SolveControl first;
  first.checkpoint = [&](const Checkpoint& c) {
    saved.push_back(c);
    if (c.iteration == 3) first.cancel.Cancel();  // after the screening of the three
  };
  auto interrupted = RunSolverJob(*spec, data, nullptr, first);
  ASSERT_FALSE(interrupted.ok());
  EXPECT_EQ(interrupted.status().code(), StatusCode::kCancelled) << interrupted.status();
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_EQ(saved.back().solver, "auto/1");

  // Mark the first entry: [u64 length][leaderboard JSON]...
  std::string bytes = saved.back().bytes;
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), sizeof(n));
  std::string json = bytes.substr(sizeof(n), n);
  json = std::regex_replace(json, std::regex("\"screen_seconds\":[0-9.e+-]+"), "\"screen_seconds\":123.0",
                            std::regex_constants::format_first_only);
  // The leaderboard as written now ({"entries":[…]}), and as written before
  // the refinement existed (the entries' array alone): both resume.
  const std::string prefix = "{\"entries\":";
  ASSERT_EQ(json.rfind(prefix, 0), 0u) << json;
  const std::string old_form = json.substr(prefix.size(), json.size() - prefix.size() - 1);
  ASSERT_EQ(old_form.front(), '[');
  for (const std::string& board : {json, old_form}) {
    const uint64_t m = board.size();
    std::string marked(reinterpret_cast<const char*>(&m), sizeof(m));
    marked += board + bytes.substr(sizeof(n) + n);
    auto resume = std::make_shared<Checkpoint>(saved.back());
    resume->bytes = marked;

    SolveControl second;
    second.resume_from = resume;
    auto resumed = RunSolverJob(*spec, data, nullptr, second);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    const std::string& s = resumed->summary_notes;
    EXPECT_THAT(s, HasSubstr("\"name\":\"kl_admm\",\"scaling\":\"zscore\""));
    EXPECT_THAT(s, HasSubstr("\"screen_seconds\":123,"));  // restored, not screened again
    // The reference (kl_admm, scored on all folds in the screening) and the
    // screened-out ones are restored whole; the leaders got their other folds in this run.
    const int screened = Count(s, "\"status\":\"screened\",\"value\"");
    EXPECT_EQ(Count(s, "\"restored\":true"), screened + 1) << s;
    EXPECT_EQ(Count(s, "\"status\":\"scored\",\"value\"") + screened, 3) << s;
    EXPECT_GT(resumed->kernel.num_points(), 0);
  }
}

// The refinement of the winner's value is in the checkpoint once it has run:
// a job killed after it (during the winner's learn) does not run it again. The
// test marks the refinement's seconds (456) in the checkpoint.
TEST(AutoResumeTest, TheRefinementComesFromTheCheckpoint) {
  const Dataset wine = TestCsv("wine.csv");
  store::StoredDataset data;
  data.data = wine;
  data.constraints = test_util::RandomLabelPairs(wine.labels, 200, 35);
  kls::v1::AutoOptions o;
  o.set_max_seconds(0);
  for (const char* c : {"kl_admm", "linear"}) o.add_candidates(c);
  kls::v1::SubmitJobRequest r;
  r.mutable_family_options()->PackFrom(o);
  r.set_scaling(kls::v1::SubmitJobRequest::ZSCORE);
  auto spec = SpecFromRequest(r);
  ASSERT_TRUE(spec.ok()) << spec.status();

  std::vector<std::string> boards;  // the leaderboard JSON of every checkpoint
  SolveControl first;
  std::string refined;  // the first checkpoint's bytes with the refinement in it
  first.checkpoint = [&](const Checkpoint& c) {
    uint64_t n = 0;
    std::memcpy(&n, c.bytes.data(), sizeof(n));
    boards.push_back(c.bytes.substr(sizeof(n), n));
    if (refined.empty() && boards.back().find("\"refine\"") != std::string::npos) refined = c.bytes;
  };
  auto whole = RunSolverJob(*spec, data, nullptr, first);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_GE(boards.size(), 3u);
  EXPECT_EQ(boards[0].find("\"refine\""), std::string::npos);  // after the first candidate: not yet
  ASSERT_FALSE(refined.empty());
  EXPECT_THAT(whole->summary_notes, HasSubstr("\"refine\":{\"candidate\":\"kl_admm@zscore\",\"status\":\"scored\""));

  uint64_t n = 0;
  std::memcpy(&n, refined.data(), sizeof(n));
  std::string json = refined.substr(sizeof(n), n);
  const size_t at = json.find("\"refine\"");
  json = json.substr(0, at) + std::regex_replace(json.substr(at), std::regex("\"seconds\":[0-9.e+-]+"),
                                                 "\"seconds\":456.0", std::regex_constants::format_first_only);
  const uint64_t m = json.size();
  std::string marked(reinterpret_cast<const char*>(&m), sizeof(m));
  marked += json + refined.substr(sizeof(n) + n);
  auto resume = std::make_shared<Checkpoint>(Checkpoint{"auto/1", 2, marked});
  SolveControl second;
  second.resume_from = resume;
  auto resumed = RunSolverJob(*spec, data, nullptr, second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_THAT(resumed->summary_notes, HasSubstr("\"seconds\":456}"));  // restored, not run again
}

TEST_F(AutoJobTest, BadOptionsAreRejectedAtSubmitNamingTheField) {
  const Dataset wine = TestCsv("wine.csv");
  const std::string with_pairs = Upload(wine, test_util::RandomLabelPairs(wine.labels, 100, 34));
  ASSERT_FALSE(with_pairs.empty());
  auto submit = [&](const kls::v1::SubmitJobRequest& r) { return client_->SubmitJob(r).status(); };

  kls::v1::AutoOptions o;
  o.add_candidates("svm");
  Status s = submit(AutoRequest(with_pairs, o));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("auto.candidates[0] = \"svm\" is not one of kl_admm"));

  o.Clear();
  o.set_folds(1);
  EXPECT_THAT(submit(AutoRequest(with_pairs, o)).message(), HasSubstr("auto.folds = 1"));
  o.Clear();
  o.add_grid(-1);
  EXPECT_THAT(submit(AutoRequest(with_pairs, o)).message(), HasSubstr("auto.grid[0] = -1"));
  o.Clear();
  o.set_max_seconds(-5);
  EXPECT_THAT(submit(AutoRequest(with_pairs, o)).message(), HasSubstr("auto.max_seconds = -5"));
  o.Clear();
  o.set_clusters(500);
  EXPECT_THAT(submit(AutoRequest(with_pairs, o)).message(), HasSubstr("auto.clusters = 500 exceeds"));

  kls::v1::SubmitJobRequest cv = AutoRequest(with_pairs, kls::v1::AutoOptions());
  cv.mutable_cross_validation()->set_folds(3);
  EXPECT_THAT(submit(cv).message(), HasSubstr("cross_validation is set but method = auto"));
  kls::v1::SubmitJobRequest k = AutoRequest(with_pairs, kls::v1::AutoOptions());
  k.mutable_graph()->set_k(500);
  EXPECT_EQ(submit(k).code(), StatusCode::kInvalidArgument);

  UploadOptions named;
  named.name = "no-pairs";
  auto bare = client_->UploadDataset(wine, {}, named);
  ASSERT_TRUE(bare.ok()) << bare.status();
  s = submit(AutoRequest(bare->id(), kls::v1::AutoOptions()));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("auto learns from must-link / cannot-link pairs"));
}

}  // namespace
}  // namespace kls::server
