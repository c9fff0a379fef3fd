// The data the web console reads, in-process:
//   Kernels.Inspect — the answer equals core's InspectKernel on the stored
//     factor, with labels and keys from the kernel's data set (none after the
//     data set is deleted; keys only for an imported kernel); errors name the
//     field.
//   DatasetInfo.class_sizes / must_link / cannot_link — in Upload and Get
//     (also for an append), not in List.
//   Jobs.History — ConvergenceHistory's thinning and its summary_json form;
//     a job running here (in-memory points, complete = false), on another
//     replica (its last progress), cancelled, and a finished job through the
//     RPC (stored history, increasing iterations, complete = true), with the
//     history left out of KernelInfo / Job summaries.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/serving/kernel_inspection.h"
#include "kls/v1/jobs.grpc.pb.h"
#include "kls/v1/kernels.grpc.pb.h"
#include "server/jobs/convergence_history.h"
#include "server/jobs/job_manager.h"
#include "server/jobs/proto_convert.h"
#include "server/kls_server.h"
#include "iris_subset.h"
#include "temp_dir.h"
#include "test_server.h"
#include "test_store.h"

namespace kls::server {
namespace {

using kls::testing::Ref;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

LearnedKernel::Embedding RandomFactor(int n, int r, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  LearnedKernel::Embedding v(n, r);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < r; ++j) v(i, j) = normal(rng) * (1.0 + j);
  return v;
}

ProgressEvent Report(int iteration) {
  ProgressEvent e;
  e.iteration = iteration;
  e.objective = 100.0 / iteration;
  e.primal_residual = 1.0 / iteration;
  e.dual_residual = 0.5 / iteration;
  e.elapsed_seconds = 0.01 * iteration;
  return e;
}

std::vector<int> Iterations(const std::vector<ProgressEvent>& points) {
  std::vector<int> out;
  for (const ProgressEvent& p : points) out.push_back(p.iteration);
  return out;
}

// ---- ConvergenceHistory and its summary_json form ---------------------------

TEST(ConvergenceHistory, KeepsEveryOtherPointWhenFullAndDoublesTheStride) {
  ConvergenceHistory h(4);
  for (int i = 0; i < 4; ++i) h.Add(Report(i + 1));
  EXPECT_THAT(Iterations(h.Points()), ElementsAre(1, 3, 4));  // thinned to 1, 3; the latest appended
  EXPECT_EQ(h.stride(), 2);
  h.Add(Report(5));
  EXPECT_THAT(Iterations(h.Points()), ElementsAre(1, 3, 5));
  h.Add(Report(6));
  EXPECT_THAT(Iterations(h.Points()), ElementsAre(1, 3, 5, 6));
  h.Add(Report(7));
  EXPECT_THAT(Iterations(h.Points()), ElementsAre(1, 5, 7));
  EXPECT_EQ(h.stride(), 4);
  EXPECT_TRUE(ConvergenceHistory().Points().empty());
}

TEST(ConvergenceHistory, LongRunsStayBoundedAndCoverTheWholeRun) {
  ConvergenceHistory h;  // 2000 points
  for (int i = 1; i <= 2000; ++i) h.Add(Report(i));
  // The 2000th report filled it: thinned to 1000 odd iterations plus the latest.
  EXPECT_EQ(h.Points().size(), 1001u);
  for (int i = 2001; i <= 100'000; ++i) h.Add(Report(i));
  const std::vector<ProgressEvent> points = h.Points();
  ASSERT_LE(points.size(), 2000u);
  EXPECT_GE(points.size(), 1000u);
  EXPECT_EQ(points.front().iteration, 1);
  EXPECT_EQ(points.back().iteration, 100'000);
  for (size_t t = 1; t < points.size(); ++t) {
    EXPECT_GT(points[t].iteration, points[t - 1].iteration);
    EXPECT_LE(points[t].iteration - points[t - 1].iteration, h.stride()) << t;  // no gap wider than the stride
  }
  EXPECT_EQ(h.reports(), 100'000);
}

TEST(ConvergenceHistory, SummaryJsonRoundTripsAndIsLeftOutOfTheApi) {
  std::vector<ProgressEvent> points = {Report(1), Report(2), Report(3)};
  points[1].dual_residual = std::numeric_limits<double>::quiet_NaN();  // → 0
  const std::string summary = R"({"method":"kl_admm","iterations":3,"certificate":{"gap":0.5}})";
  const std::string with = WithConvergence(summary, points);
  EXPECT_THAT(with, HasSubstr(R"(,"convergence":{"iteration":[1,2,3],"objective":[100,50,33.33333333],)"));
  EXPECT_THAT(with, HasSubstr(R"("dual_residual":[0.5,0,0.1666666667])"));
  EXPECT_EQ(WithoutConvergence(with), summary);
  EXPECT_EQ(WithoutConvergence(summary), summary);
  auto back = ConvergenceFromSummary(with);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[2].iteration, 3);
  EXPECT_NEAR((*back)[2].objective, 100.0 / 3, 1e-8);
  EXPECT_EQ((*back)[1].dual_residual, 0.0);
  EXPECT_DOUBLE_EQ((*back)[0].elapsed_seconds, 0.01);
  EXPECT_FALSE(ConvergenceFromSummary(summary).has_value());

  // An empty object, no points, and a member that is not last.
  EXPECT_EQ(WithConvergence("{}", points).substr(0, 16), R"({"convergence":{)");
  EXPECT_EQ(WithoutConvergence(WithConvergence("{}", points)), "{}");
  EXPECT_EQ(WithConvergence(summary, {}), summary);
  const std::string first = R"({"convergence":{"iteration":[1]},"method":"x"})";
  EXPECT_EQ(WithoutConvergence(first), R"({"method":"x"})");
  EXPECT_FALSE(ConvergenceFromSummary(first).has_value());  // arrays missing: malformed
}

TEST(ConvergenceHistory, GapAndStepArraysAreWrittenWhenASolverReportsThem) {
  std::vector<ProgressEvent> points = {Report(1), Report(2), Report(3)};
  // Without a gap or step anywhere the member has only the five arrays.
  EXPECT_THAT(WithConvergence("{}", points), Not(HasSubstr("\"gap\"")));
  EXPECT_THAT(WithConvergence("{}", points), Not(HasSubstr("\"step\"")));
  points[0].gap = 0.25;  // the first point has no step, the second no gap
  points[1].step = 0.5;
  points[2].gap = 1e-5;
  points[2].step = 0.125;
  const std::string with = WithConvergence("{}", points);
  EXPECT_THAT(with, HasSubstr(R"("gap":[0.25,null,1e-05])"));
  EXPECT_THAT(with, HasSubstr(R"("step":[null,0.5,0.125])"));
  EXPECT_EQ(WithoutConvergence(with), "{}");
  auto back = ConvergenceFromSummary(with);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0].gap, 0.25);
  EXPECT_TRUE(std::isnan((*back)[1].gap));
  EXPECT_EQ((*back)[2].gap, 1e-5);
  EXPECT_TRUE(std::isnan((*back)[0].step));
  EXPECT_EQ((*back)[2].step, 0.125);
  // A stored history from before the arrays existed reads with NaN.
  auto old = ConvergenceFromSummary(WithConvergence("{}", {Report(1)}));
  ASSERT_TRUE(old.has_value());
  EXPECT_TRUE(std::isnan((*old)[0].gap));
  // Arrays of another length are malformed.
  EXPECT_FALSE(ConvergenceFromSummary(R"({"convergence":{"iteration":[1],"objective":[1],"primal_residual":[0],)"
                                      R"("dual_residual":[0],"elapsed_seconds":[0],"gap":[1,2]}})")
                   .has_value());
}

// ---- JobManager::History ------------------------------------------------------

class JobHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = kls::testing::OpenTestStore(dir_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
    auto ds = store_->PutDataset("iris150", testing::IrisWithPairs(150));
    ASSERT_TRUE(ds.ok()) << ds.status();
    dataset_id_ = ds->id;
  }

  JobManagerOptions Options(int workers) {
    JobManagerOptions o;
    o.workers = workers;
    o.exclusive_store = true;
    o.progress_persist_interval_seconds = 0.0;  // every report reaches the store (the other replica's view)
    return o;
  }

  store::JobRecord EndlessJob() {
    kls::v1::SubmitJobRequest r;
    r.set_dataset_id(dataset_id_);
    r.set_kernel_name("k");
    r.set_deadline_seconds(60);  // a bound if the test fails to cancel it
    r.mutable_kl_admm()->set_max_iterations(100'000'000);
    r.mutable_kl_admm()->set_tolerance(0.0);
    auto rec = JobRecordFromSubmit(r);
    EXPECT_TRUE(rec.ok()) << rec.status();
    return *rec;
  }

  kls::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::string dataset_id_;
};

TEST_F(JobHistoryTest, RunningHereIsTheInMemoryHistoryElsewhereTheLastProgress) {
  JobManager worker(store_.get(), Options(1));
  ASSERT_TRUE(worker.Start().ok());
  JobManagerOptions api_only = Options(-1);
  api_only.exclusive_store = false;
  JobManager other(store_.get(), api_only);  // another replica: no workers, same store
  ASSERT_TRUE(other.Start().ok());

  auto job = worker.Submit(EndlessJob());
  ASSERT_TRUE(job.ok()) << job.status();
  // Wait for a few reports on the running replica.
  const auto end = Clock::now() + std::chrono::seconds(20);
  StatusOr<JobConvergence> here = NotFoundError("unset");
  for (;;) {
    here = worker.History(job->id);
    ASSERT_TRUE(here.ok()) << here.status();
    if (here->points.size() >= 5 || Clock::now() > end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(here->points.size(), 5u);
  EXPECT_FALSE(here->complete);
  for (size_t t = 1; t < here->points.size(); ++t) {
    EXPECT_GT(here->points[t].iteration, here->points[t - 1].iteration);
  }
  EXPECT_GT(here->points.back().max_iterations, 0);

  auto there = other.History(job->id);
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_FALSE(there->complete);
  ASSERT_EQ(there->points.size(), 1u);  // the last persisted progress
  EXPECT_GE(there->points[0].iteration, 1);

  ASSERT_TRUE(worker.Cancel(job->id).ok());
  auto cancelled = other.History(job->id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_TRUE(cancelled->complete);
  EXPECT_LE(cancelled->points.size(), 1u);  // no stored history: its last progress

  EXPECT_EQ(worker.History("job-nope").status().code(), StatusCode::kNotFound);
  other.Shutdown();
  worker.Shutdown();
}

// ---- Through the server -----------------------------------------------------

class ConsoleDataTest : public kls::testing::ServerJobTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ServerJobTest::SetUp());
    auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    kernels_ = kls::v1::Kernels::NewStub(channel);
    jobs_ = kls::v1::Jobs::NewStub(channel);
  }

  grpc::Status Inspect(const kls::v1::InspectKernelRequest& request, kls::v1::KernelInspection* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return kernels_->Inspect(&context, request, response);
  }
  grpc::Status History(const std::string& id, kls::v1::JobHistory* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    kls::v1::GetJobRequest request;
    request.set_id(id);
    return jobs_->History(&context, request, response);
  }

  /// Uploads `n` labelled, keyed points ("item-i", label i % 3) and stores a
  /// random rank-`r` kernel `name` over them; returns the data set's id.
  std::string LabelledKernel(const std::string& name, int n, int r, std::vector<int>* labels,
                             LearnedKernel::Embedding* factor) {
    Dataset data;
    data.features = Eigen::MatrixXd::Random(n, 2);
    for (int i = 0; i < n; ++i) {
      data.labels.push_back((i * 7) % 3);
      data.item_keys.push_back("item-" + std::to_string(i));
    }
    *labels = data.labels;
    const std::string id = Upload(data);
    *factor = RandomFactor(n, r, 5);
    store::KernelRecord record;
    record.name = name;
    record.dataset_id = id;
    record.method = "test";
    auto kernel = LearnedKernel::FromEmbedding(*factor);
    EXPECT_TRUE(kernel.ok());
    EXPECT_TRUE(server_->store()->PutKernel(record, *kernel).ok());
    return id;
  }

  std::unique_ptr<kls::v1::Kernels::Stub> kernels_;
  std::unique_ptr<kls::v1::Jobs::Stub> jobs_;
};

TEST_F(ConsoleDataTest, InspectAnswersWhatCoreComputesWithTheDataSetsLabelsAndKeys) {
  std::vector<int> labels;
  LearnedKernel::Embedding v;
  LabelledKernel("k", 1500, 6, &labels, &v);

  kls::v1::InspectKernelRequest request;
  *request.mutable_kernel() = Ref("k");
  request.set_spectrum(4);
  request.set_seed(9);
  kls::v1::KernelInspection got;
  const grpc::Status s = Inspect(request, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();

  InspectionOptions o;  // the defaults the request's zeros stand for
  o.spectrum = 4;
  o.seed = 9;
  auto expected = InspectKernel(v, labels, o);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(got.info().name(), "k");
  EXPECT_EQ(got.info().num_points(), 1500);
  ASSERT_EQ(got.eigenvalues_size(), 4);
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got.eigenvalues(t), expected->eigenvalues[static_cast<size_t>(t)]);
  EXPECT_DOUBLE_EQ(got.trace(), v.squaredNorm());
  EXPECT_TRUE(got.has_labels());
  ASSERT_EQ(got.items_size(), 1000);  // sample 0 = 1000
  ASSERT_EQ(got.keys_size(), 1000);
  ASSERT_EQ(got.labels_size(), 1000);
  ASSERT_EQ(got.x_size(), 1000);
  ASSERT_EQ(got.y_size(), 1000);
  for (int t = 0; t < 1000; ++t) {
    const int i = expected->items[static_cast<size_t>(t)];
    EXPECT_EQ(got.items(t), i);
    EXPECT_EQ(got.keys(t), "item-" + std::to_string(i));
    EXPECT_EQ(got.labels(t), labels[static_cast<size_t>(i)]);
    EXPECT_EQ(got.x(t), expected->x[static_cast<size_t>(t)]);
    EXPECT_EQ(got.y(t), expected->y[static_cast<size_t>(t)]);
    if (t > 0) {
      EXPECT_LE(got.labels(t - 1), got.labels(t));  // sorted by label
    }
  }
  ASSERT_EQ(got.heatmap_items_size(), 200);  // heatmap 0 = 200
  ASSERT_EQ(got.heatmap_labels_size(), 200);
  ASSERT_EQ(got.heatmap_size(), 200 * 200);
  for (int a = 0; a < 200; ++a) {
    const int i = static_cast<int>(got.heatmap_items(a));
    EXPECT_EQ(got.heatmap_labels(a), labels[static_cast<size_t>(i)]);
    for (int b = 0; b < 200; b += 37) {
      const int j = static_cast<int>(got.heatmap_items(b));
      EXPECT_NEAR(got.heatmap(a * 200 + b), v.row(i).dot(v.row(j)), 1e-9 * (1 + std::abs(v.row(i).dot(v.row(j)))));
    }
  }

  // The same seed gives the same answer; another seed another sample.
  kls::v1::KernelInspection again;
  ASSERT_TRUE(Inspect(request, &again).ok());
  EXPECT_EQ(again.SerializeAsString(), got.SerializeAsString());
  request.set_seed(10);
  ASSERT_TRUE(Inspect(request, &again).ok());
  EXPECT_NE(std::vector<int64_t>(again.items().begin(), again.items().end()),
            std::vector<int64_t>(got.items().begin(), got.items().end()));
  // A small sample: every item when n <= sample is covered by the core test;
  // here, explicit sizes.
  request.set_sample(50);
  request.set_heatmap(500);  // more than the sample: the whole sample
  ASSERT_TRUE(Inspect(request, &again).ok());
  EXPECT_EQ(again.items_size(), 50);
  EXPECT_EQ(again.heatmap_items_size(), 50);
  EXPECT_EQ(again.heatmap_size(), 2500);
}

TEST_F(ConsoleDataTest, InspectWithoutTheDataSetOrOfAnImportedKernel) {
  std::vector<int> labels;
  LearnedKernel::Embedding v;
  const std::string id = LabelledKernel("gone", 30, 3, &labels, &v);
  ASSERT_TRUE(client_->DeleteDataset(id).ok());
  kls::v1::InspectKernelRequest request;
  *request.mutable_kernel() = Ref("gone");
  kls::v1::KernelInspection got;
  grpc::Status s = Inspect(request, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(got.has_labels());
  EXPECT_EQ(got.items_size(), 30);  // n <= sample: every item, by index
  for (int t = 0; t < 30; ++t) EXPECT_EQ(got.items(t), t);
  EXPECT_EQ(got.keys_size(), 0);
  EXPECT_EQ(got.labels_size(), 0);
  EXPECT_EQ(got.heatmap_labels_size(), 0);
  EXPECT_EQ(got.eigenvalues_size(), 3);  // at most the rank

  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) keys.push_back("doc-" + std::to_string(i));
  ASSERT_TRUE(client_->ImportKernel("keyed", RandomFactor(40, 4, 6), keys).ok());
  ASSERT_TRUE(client_->ImportKernel("plain", RandomFactor(40, 4, 7)).ok());
  *request.mutable_kernel() = Ref("keyed");
  s = Inspect(request, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(got.has_labels());
  ASSERT_EQ(got.keys_size(), 40);
  for (int t = 0; t < 40; ++t) EXPECT_EQ(got.keys(t), "doc-" + std::to_string(got.items(t)));
  *request.mutable_kernel() = Ref("plain");
  s = Inspect(request, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(got.info().method(), "import");
  EXPECT_EQ(got.keys_size(), 0);
  EXPECT_FALSE(got.has_labels());
}

TEST_F(ConsoleDataTest, InspectErrorsNameTheField) {
  ASSERT_TRUE(client_->ImportKernel("k", RandomFactor(20, 2, 8)).ok());
  auto expect = [&](const kls::v1::InspectKernelRequest& r, grpc::StatusCode code, const std::string& text) {
    kls::v1::KernelInspection got;
    const grpc::Status s = Inspect(r, &got);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(text));
  };
  kls::v1::InspectKernelRequest r;
  *r.mutable_kernel() = Ref("nope");
  expect(r, grpc::StatusCode::NOT_FOUND, "nope");
  *r.mutable_kernel() = Ref("k", 7);
  expect(r, grpc::StatusCode::NOT_FOUND, "");
  *r.mutable_kernel() = Ref("k", -1);
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "kernel.version");
  *r.mutable_kernel() = Ref("k");
  r.set_sample(5001);
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "sample = 5001 must be in [0, 5000]");
  r.set_sample(-1);
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "sample = -1");
  r.set_sample(5000);
  r.set_heatmap(501);
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "heatmap = 501 must be in [0, 500]");
  r.set_heatmap(500);
  r.set_spectrum(-1);
  expect(r, grpc::StatusCode::INVALID_ARGUMENT, "spectrum = -1");
  r.set_spectrum(1000);  // more than the rank: the rank's worth
  kls::v1::KernelInspection got;
  ASSERT_TRUE(Inspect(r, &got).ok());
  EXPECT_EQ(got.eigenvalues_size(), 2);
}

TEST_F(ConsoleDataTest, DatasetInfoCountsClassesAndPairsInUploadAndGetNotList) {
  Dataset data;
  data.features = Eigen::MatrixXd::Random(7, 2);
  data.labels = {0, 0, 3, 3, 3, 1, 0};  // class 2 has no point
  PairwiseConstraints pairs;
  pairs.pairs = {{0, 1, PairKind::kMustLink}, {2, 2, PairKind::kMustLink}, {0, 2, PairKind::kCannotLink},
                 {1, 5, PairKind::kCannotLink}, {3, 4, PairKind::kMustLink}};
  UploadOptions o;
  o.name = "counted";
  auto up = client_->UploadDataset(data, pairs, o);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_THAT(std::vector<int64_t>(up->class_sizes().begin(), up->class_sizes().end()), ElementsAre(3, 1, 0, 3));
  EXPECT_EQ(up->must_link(), 3);
  EXPECT_EQ(up->cannot_link(), 2);

  auto got = client_->GetDataset(up->id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(std::vector<int64_t>(got->class_sizes().begin(), got->class_sizes().end()), ElementsAre(3, 1, 0, 3));
  EXPECT_EQ(got->must_link(), 3);
  EXPECT_EQ(got->cannot_link(), 2);
  EXPECT_EQ(got->num_classes(), 4);
  EXPECT_EQ(got->num_constraints(), 5);

  // An append counts the merged pairs.
  PairwiseConstraints more;
  more.pairs = {{5, 6, PairKind::kCannotLink}};
  UploadOptions append;
  append.base_dataset_id = up->id();
  auto appended = client_->UploadDataset(Dataset(), more, append);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(appended->must_link(), 3);
  EXPECT_EQ(appended->cannot_link(), 3);
  EXPECT_EQ(appended->class_sizes_size(), 4);

  // Unlabelled, no pairs; labels used as large ids leave class_sizes empty.
  Dataset plain;
  plain.features = Eigen::MatrixXd::Random(3, 2);
  auto unlabelled = client_->UploadDataset(plain, {}, o);
  ASSERT_TRUE(unlabelled.ok()) << unlabelled.status();
  EXPECT_EQ(unlabelled->class_sizes_size(), 0);
  EXPECT_EQ(unlabelled->must_link(), 0);
  plain.labels = {0, 20000, 5};
  auto ids = client_->UploadDataset(plain, {}, o);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->num_classes(), 20001);
  EXPECT_EQ(ids->class_sizes_size(), 0);

  auto listed = client_->ListDatasets();
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const auto& d : *listed) {
    EXPECT_EQ(d.class_sizes_size(), 0) << d.id();
    EXPECT_EQ(d.must_link() + d.cannot_link(), 0) << d.id();
  }
}

// A solver that certifies every iteration (SimpleNPKL): each row carries the
// iterate's gap, Watch's last progress too, and the stored certificate is
// within the job's tolerance with one meaning of "certified".
TEST_F(ConsoleDataTest, SimpleNpklRowsCarryTheIteratesGap) {
  const std::string id = Upload(testing::IrisWithPairs(60).data, testing::IrisWithPairs(60).constraints);
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_simple_npkl()->set_tolerance(1e-4);
  r.mutable_simple_npkl()->set_newton(false);  // gradient steps: a curve of several rows
  const kls::v1::Job job = Run(r, "simple");
  ASSERT_EQ(job.state(), kls::v1::SUCCEEDED);
  ASSERT_TRUE(job.progress().has_gap());
  ASSERT_TRUE(job.certificate().has_gap());
  EXPECT_LE(job.certificate().gap(), 1e-4);
  EXPECT_TRUE(job.certificate().certified());
  EXPECT_THAT(job.summary_json(), Not(HasSubstr("duality_gap")));

  kls::v1::JobHistory history;
  grpc::Status s = History(job.id(), &history);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(history.points_size(), 2);
  for (const auto& point : history.points()) {
    ASSERT_TRUE(point.has_gap()) << point.iteration();
    EXPECT_GE(point.gap(), -1e-9) << point.iteration();  // weak duality
    EXPECT_TRUE(point.has_step()) << point.iteration();
  }
  EXPECT_GT(history.points(0).gap(), history.points(history.points_size() - 1).gap());
}

TEST_F(ConsoleDataTest, HistoryOfAFinishedJobIsStoredWithItsSummary) {
  const std::string id = Upload(testing::IrisWithPairs(60).data, testing::IrisWithPairs(60).constraints);
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_kl_admm()->set_rank(3);
  r.mutable_kl_admm()->set_max_iterations(40);
  r.mutable_kl_admm()->set_tolerance(0.0);  // all 40 iterations
  const kls::v1::Job job = Run(r, "learned");
  ASSERT_EQ(job.state(), kls::v1::SUCCEEDED);

  kls::v1::JobHistory history;
  grpc::Status s = History(job.id(), &history);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(history.id(), job.id());
  EXPECT_TRUE(history.complete());
  ASSERT_GE(history.points_size(), 10);
  EXPECT_EQ(history.points(0).iteration(), 1);
  for (int t = 1; t < history.points_size(); ++t) {
    EXPECT_GT(history.points(t).iteration(), history.points(t - 1).iteration());
    EXPECT_GE(history.points(t).elapsed_seconds(), history.points(t - 1).elapsed_seconds());
  }
  EXPECT_EQ(history.points(history.points_size() - 1).iteration(), job.progress().iteration());

  // Stored in the kernel's summary; the API's summaries leave it out.
  auto record = server_->store()->GetKernelRecord("learned", 0);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_THAT(record->summary_json, HasSubstr("\"convergence\":{\"iteration\":[1,2,"));
  auto info = client_->GetKernel(*ParseKernelRef("learned"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->summary_json(), Not(HasSubstr("convergence")));
  EXPECT_THAT(info->summary_json(), HasSubstr("\"termination\""));
  EXPECT_TRUE(info->has_certificate());
  EXPECT_EQ(job.summary_json(), info->summary_json());
  EXPECT_TRUE(job.has_certificate());

  // The learned kernel carries its data set's labels.
  kls::v1::InspectKernelRequest inspect;
  *inspect.mutable_kernel() = Ref("learned");
  kls::v1::KernelInspection got;
  s = Inspect(inspect, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(got.has_labels());
  EXPECT_EQ(got.items_size(), 60);
  EXPECT_EQ(got.eigenvalues_size(), 3);

  // KL-ADMM certifies at the end, not each iteration: its rows carry a step, no gap.
  for (const auto& point : history.points()) {
    EXPECT_FALSE(point.has_gap()) << point.iteration();
    EXPECT_TRUE(point.has_step()) << point.iteration();
  }
  // The certificate has one name: no second copy of the gap in the summary.
  EXPECT_THAT(info->summary_json(), Not(HasSubstr("duality_gap")));

  s = History("job-nope", &history);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  s = History("", &history);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

}  // namespace
}  // namespace kls::server
