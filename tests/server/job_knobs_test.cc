// Job knobs through the in-process service (issue 25): feature scaling
// (SubmitJobRequest.scaling, stored with the kernel and applied to feature
// queries), graph connectivity repair (GraphSpec.connect, qsdp REGMVU),
// C / γ by cross-validation (SubmitJobRequest.cross_validation) and learning
// from appended pairs (DatasetHeader.base_dataset_id, SubmitJobRequest.warm_start).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/eval/kernel_kmeans.h"
#include "core/eval/metrics.h"
#include "server/jobs/families/qsdp.h"
#include "server/jobs/proto_convert.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "tests/test_util/label_pairs.h"
#include "test_server.h"

namespace kls::server {
namespace {

using kls::testing::Ref;
using kls::testing::TestCsv;

using ::testing::HasSubstr;
using ::testing::Not;

// Columns standardized by the test itself (mean, sample standard deviation).
Eigen::MatrixXd Standardized(const Eigen::MatrixXd& x) {
  Eigen::MatrixXd z = x.rowwise() - x.colwise().mean();
  for (Eigen::Index j = 0; j < z.cols(); ++j) z.col(j) /= std::sqrt(z.col(j).squaredNorm() / (z.rows() - 1));
  return z;
}

class JobKnobsTest : public kls::testing::ServerJobTest {
 protected:
  // The evaluation protocol of docs/reproduction/README.md: kernel k-means on the
  // stored embedding (10 restarts), pair accuracy against the labels.
  double PairAccuracyOf(const std::string& kernel, const std::vector<int>& labels, LearnedKernel::Embedding* v) {
    auto exported = client_->ExportKernel(Ref(kernel));
    EXPECT_TRUE(exported.ok()) << exported.status();
    if (!exported.ok()) return 0;
    *v = exported->embedding;
    KMeansOptions o;
    o.num_clusters = 3;
    auto clusters = KernelKMeans(Eigen::MatrixXd(*v), o);
    EXPECT_TRUE(clusters.ok()) << clusters.status();
    auto accuracy = PairAccuracy(labels, clusters->assignment);
    EXPECT_TRUE(accuracy.ok());
    return accuracy.ok() ? *accuracy : 0;
  }
};

// SimpleNPKL on wine under the thesis protocol (§3.5.1: binary 5-NN graph,
// must-link components 70 % of n, C = 1, B = 1, square hinge loss): raw
// features, the same raw upload with scaling ZSCORE, and an upload the test
// standardized itself. ZSCORE gives exactly the standardized kernel and its
// accuracy; raw features lose about 25 points; the raw job's summary says why.
TEST_F(JobKnobsTest, WineWithZscoreScalingGivesTheStandardizedAccuracy) {
  const Dataset wine = TestCsv("wine.csv");
  auto constraints = GenerateComponentProtocol(wine.labels, 0.7, 1);
  ASSERT_TRUE(constraints.ok()) << constraints.status();
  const std::string raw_id = Upload(wine, *constraints);
  Dataset pre = wine;
  pre.features = Standardized(wine.features);
  const std::string pre_id = Upload(pre, *constraints);

  kls::v1::SubmitJobRequest r;
  r.mutable_simple_npkl()->set_loss(kls::v1::SQUARE_HINGE);
  r.set_dataset_id(raw_id);
  Run(r, "wine-raw");  // the default: no scaling
  r.set_scaling(kls::v1::SubmitJobRequest::ZSCORE);
  const kls::v1::Job zjob = Run(r, "wine-z");
  r.set_dataset_id(pre_id);
  r.set_scaling(kls::v1::SubmitJobRequest::NONE);
  Run(r, "wine-pre");

  LearnedKernel::Embedding v_raw, v_z, v_pre;
  const double raw = PairAccuracyOf("wine-raw", wine.labels, &v_raw);
  const double z = PairAccuracyOf("wine-z", wine.labels, &v_z);
  const double standardized = PairAccuracyOf("wine-pre", wine.labels, &v_pre);
  std::printf("wine SimpleNPKL-SHL pair accuracy: raw %.1f %%, scaling zscore %.1f %%, pre-standardized %.1f %%\n",
              100 * raw, 100 * z, 100 * standardized);
  ASSERT_EQ(v_z.rows(), v_pre.rows());
  const Eigen::MatrixXd k_z = v_z * v_z.transpose(), k_pre = v_pre * v_pre.transpose();
  EXPECT_LE((k_z - k_pre).norm(), 1e-6 * k_pre.norm());
  EXPECT_NEAR(z, standardized, 1e-9);
  EXPECT_GE(z, 0.85);  // thesis Table 3.2: 85.0
  EXPECT_LE(raw, z - 0.10);

  // Summaries: the scaling used; the raw job carries the range hint; Job.summary_json = KernelInfo's.
  auto raw_info = client_->GetKernel(Ref("wine-raw"));
  auto z_info = client_->GetKernel(Ref("wine-z"));
  ASSERT_TRUE(raw_info.ok() && z_info.ok());
  EXPECT_THAT(raw_info->summary_json(), HasSubstr("\"scaling\":\"none\",\"feature_range_ratio\":"));
  EXPECT_THAT(raw_info->summary_json(), HasSubstr("consider scaling ZSCORE"));
  EXPECT_THAT(z_info->summary_json(), HasSubstr("\"scaling\":\"zscore\""));
  EXPECT_THAT(z_info->summary_json(), Not(HasSubstr("hint")));
  EXPECT_EQ(zjob.summary_json(), z_info->summary_json());

  // Feature queries with raw wine rows are scaled like the training rows: the
  // extension of a training row's raw features is its own embedding row, and
  // TopK by those features answers exactly like TopK by the item.
  for (int i : {0, 1, 70, 100, 177}) {
    SCOPED_TRACE(i);
    kls::v1::EmbedRequest e;
    *e.mutable_kernel() = Ref("wine-z");
    e.set_dim(static_cast<int>(wine.features.cols()));
    for (int j = 0; j < wine.features.cols(); ++j) e.add_features(wine.features(i, j));
    auto row = client_->Embed(e);
    ASSERT_TRUE(row.ok()) << row.status();
    ASSERT_EQ(row->values_size(), v_z.cols());
    for (int c = 0; c < v_z.cols(); ++c) EXPECT_NEAR(row->values(c), v_z(i, c), 1e-9);

    kls::v1::TopKRequest q;
    *q.mutable_kernel() = Ref("wine-z");
    q.set_k(5);
    for (int j = 0; j < wine.features.cols(); ++j) q.mutable_features()->add_values(wine.features(i, j));
    kls::v1::TopKRequest by_item = q;
    by_item.set_item(i);
    auto top = client_->TopK(q);
    auto want = client_->TopK(by_item);
    ASSERT_TRUE(top.ok() && want.ok()) << top.status() << want.status();
    ASSERT_EQ(top->items_size(), want->items_size());
    for (int t = 0; t < top->items_size(); ++t) EXPECT_EQ(top->items(t).index(), want->items(t).index());
  }
}

// onk and mkl z-score inside the classifier, so a job scaled ZSCORE or MINMAX
// classifies raw rows exactly like the unscaled job: Classify applies the
// stored scaling first (without it, the raw rows would meet statistics of
// scaled data). The onk kernel is Gaussian-based (K_ii is the largest entry
// of row i), so TopK by a raw row's features returns that row first.
TEST_F(JobKnobsTest, ClassifyAndTopKApplyTheStoredScalingToRawRows) {
  const Dataset wine = TestCsv("wine.csv");
  const std::string id = Upload(wine);
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_onk()->set_c(1.0);
  r.mutable_onk()->set_rho(10.0);
  r.mutable_onk()->set_positive_class(0);
  Run(r, "onk-raw");
  r.set_scaling(kls::v1::SubmitJobRequest::ZSCORE);
  const kls::v1::Job z = Run(r, "onk-z");
  EXPECT_THAT(z.summary_json(), HasSubstr("\"scaling\":\"zscore\""));
  r.set_scaling(kls::v1::SubmitJobRequest::MINMAX);
  const kls::v1::Job scaled = Run(r, "onk-minmax");
  EXPECT_THAT(scaled.summary_json(), HasSubstr("\"scaling\":\"minmax\""));

  for (int i = 0; i < wine.features.rows(); i += 11) {
    SCOPED_TRACE(i);
    kls::v1::TopKRequest q;
    *q.mutable_kernel() = Ref("onk-z");
    q.set_k(3);
    for (int j = 0; j < wine.features.cols(); ++j) q.mutable_features()->add_values(wine.features(i, j));
    auto top = client_->TopK(q);
    ASSERT_TRUE(top.ok()) << top.status();
    ASSERT_GE(top->items_size(), 1);
    EXPECT_EQ(top->items(0).index(), i);
  }

  kls::v1::ClassifyRequest c;
  c.set_dim(static_cast<int>(wine.features.cols()));
  for (int i = 0; i < wine.features.rows(); i += 7)
    for (int j = 0; j < wine.features.cols(); ++j) c.add_features(wine.features(i, j) * 1.01);
  *c.mutable_kernel() = Ref("onk-raw");
  auto plain = client_->Classify(c);
  for (const char* kernel : {"onk-z", "onk-minmax"}) {
    SCOPED_TRACE(kernel);
    *c.mutable_kernel() = Ref(kernel);
    auto via_scaling = client_->Classify(c);
    ASSERT_TRUE(plain.ok() && via_scaling.ok()) << plain.status() << via_scaling.status();
    ASSERT_EQ(plain->decision_values_size(), via_scaling->decision_values_size());
    int correct = 0;
    for (int t = 0; t < plain->decision_values_size(); ++t) {
      EXPECT_NEAR(via_scaling->decision_values(t), plain->decision_values(t),
                  1e-6 * (1 + std::abs(plain->decision_values(t))));
      EXPECT_EQ(via_scaling->labels(t), plain->labels(t));
      correct += via_scaling->labels(t) == (wine.labels[7 * t] == 0 ? 0 : -1);
    }
    EXPECT_GE(correct, plain->decision_values_size() - 2);
  }
}

// Three far-apart chains of 12 points (unit spacing): the 4-NN graph has 3 components.
Dataset ThreeClusters() {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g;
  Dataset d;
  d.features.resize(36, 2);
  for (int i = 0; i < 36; ++i) d.features.row(i) << 100.0 * (i / 12) + (i % 12) + 0.1 * g(rng), 0.1 * g(rng);
  return d;
}

// RegMVU (SQLP paper eq. (11)) is unbounded on a disconnected graph: by default
// (graph.connect MST) the job joins the components and lists the edges it
// added; CONNECT_ERROR fails as before; GROW_K reports the k it reached.
TEST_F(JobKnobsTest, RegMvuOnADisconnectedGraphJoinsItsComponentsByDefault) {
  const std::string id = Upload(ThreeClusters());
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_qsdp()->set_problem(kls::v1::QsdpKernelOptions::REGMVU);
  r.mutable_qsdp()->set_m(5);
  const kls::v1::Job joined = Run(r, "mvu");
  EXPECT_THAT(joined.summary_json(), HasSubstr("\"graph_connect\":{\"mode\":\"mst\",\"components\":3,\"k\":4,"
                                               "\"k_used\":4,\"added_edges\":[["));
  auto info = client_->GetKernel(Ref("mvu"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary_json(), joined.summary_json());
  // Two edges, each between clusters (indices 0–11, 12–23, 24–35).
  const std::string& s = joined.summary_json();
  const std::string edges = s.substr(s.find("\"added_edges\":[") + 15);
  int a = 0, b = 0, c = 0, d = 0;
  double da = 0, db = 0;
  ASSERT_EQ(std::sscanf(edges.c_str(), "[%d,%d,%lf],[%d,%d,%lf]]", &a, &b, &da, &c, &d, &db), 6) << edges;
  EXPECT_NE(a / 12, b / 12);
  EXPECT_NE(c / 12, d / 12);
  EXPECT_GT(da, 20.0);
  EXPECT_GT(db, 20.0);

  r.mutable_graph()->set_connect(kls::v1::GraphSpec::CONNECT_ERROR);
  const kls::v1::Job refused = Finish(r, "mvu-error");
  EXPECT_EQ(refused.state(), kls::v1::FAILED);
  EXPECT_THAT(refused.error(), HasSubstr("the 4-NN graph has 3 connected components; RegMVU (11) is unbounded "
                                         "unless it is connected"));

  r.mutable_graph()->set_connect(kls::v1::GraphSpec::GROW_K);
  r.mutable_qsdp()->set_neighbors(3);  // bound min(35, 12) reaches the other clusters
  const kls::v1::Job grown = Run(r, "mvu-grow");
  EXPECT_THAT(grown.summary_json(), HasSubstr("\"mode\":\"grow_k\",\"components\":3,\"k\":3,\"k_used\":12,"
                                              "\"added_edges\":[]"));
}

// GraphSpec.search (issue 41): the summary's "graph" member names the k-NN
// search used — exact by default at this size, IVF when asked, with the recall
// measured against the exact neighbours of sampled points.
TEST_F(JobKnobsTest, GraphSearchIsChosenAndReportedInTheSummary) {
  const kls::test_util::LabelledPoints blobs = kls::test_util::TwoBlobs(400, 3);
  Dataset d;
  d.features = blobs.x;
  const std::string id = Upload(d, kls::test_util::RandomLabelPairs(blobs.labels, 300, 4));
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_bcd_npkl();
  r.mutable_graph()->set_k(8);
  r.set_baseline_guard(false);
  const kls::v1::Job exact = Run(r, "graph-default");
  EXPECT_THAT(exact.summary_json(), HasSubstr("\"graph\":{\"search\":\"exact\",\"k\":8,"));
  EXPECT_THAT(exact.summary_json(), Not(HasSubstr("\"recall\"")));
  r.mutable_graph()->set_search(kls::v1::GraphSpec::IVF);
  const kls::v1::Job ivf = Run(r, "graph-ivf");
  const std::string& s = ivf.summary_json();
  ASSERT_THAT(s, HasSubstr("\"graph\":{\"search\":\"ivf\",\"k\":8,"));
  double recall = 0;
  ASSERT_EQ(std::sscanf(s.c_str() + s.find("\"recall\":"), "\"recall\":%lf", &recall), 1) << s;
  EXPECT_GE(recall, 0.95);  // 400 points: one cell, every pair compared
  EXPECT_THAT(s, HasSubstr("\"recall_sample\":400"));
  EXPECT_THAT(s, HasSubstr("\"cells\":1,\"probes\":1}"));  // the IVF search's own report
  r.mutable_graph()->set_search(static_cast<kls::v1::GraphSpec::Search>(9));
  auto bad = client_->SubmitJob(r);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "graph.search = 9 is not one of AUTO, EXACT, IVF, HNSW");
}

TEST_F(JobKnobsTest, BadKnobsAreInvalidArgumentNamingFieldAndValue) {
  const std::string id = Upload(ThreeClusters());
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_kl_admm();
  r.set_scaling(static_cast<kls::v1::SubmitJobRequest::Scaling>(7));
  auto job = client_->SubmitJob(r);
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), "scaling = 7 is not one of NONE, ZSCORE, MINMAX");
  r.set_scaling(kls::v1::SubmitJobRequest::ZSCORE);
  r.mutable_graph()->set_connect(static_cast<kls::v1::GraphSpec::Connect>(9));
  job = client_->SubmitJob(r);
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), "graph.connect = 9 is not one of CONNECT_ERROR, GROW_K, MST");
  r.clear_graph();
  r.mutable_social_strength();
  job = client_->SubmitJob(r);
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("scaling = ZSCORE does not apply to social_strength"));
}

// Defaults: no scaling for every family (also for records stored before the
// field existed); graph.connect MST, copied into the RegMVU options.
TEST(JobKnobsDefaults, UnsetScalingIsNoneAndUnsetConnectIsMst) {
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id("d");
  r.mutable_simple_npkl();
  auto simple = JobRecordFromSubmit(r);
  ASSERT_TRUE(simple.ok());
  EXPECT_EQ(ParseJobSpec("simple_npkl", simple->options_json)->scaling, FeatureScaling::kNone);
  EXPECT_EQ(ParseJobSpec("simple_npkl", "{\"simple_npkl\":{}}")->scaling, FeatureScaling::kNone);
  r.set_scaling(kls::v1::SubmitJobRequest::MINMAX);
  auto minmax = JobRecordFromSubmit(r);
  ASSERT_TRUE(minmax.ok());
  EXPECT_THAT(minmax->options_json, HasSubstr("\"scaling\":\"MINMAX\""));
  EXPECT_EQ(ParseJobSpec("simple_npkl", minmax->options_json)->scaling, FeatureScaling::kMinMax);
  EXPECT_EQ(ParseJobSpec("qsdp", "{\"qsdp\":{\"problem\":\"REGMVU\"}}")->connect, ConnectMode::kMst);
  auto mvu = ParseJobSpec("qsdp", "{\"graph\":{\"connect\":\"CONNECT_ERROR\"},\"qsdp\":{\"problem\":\"REGMVU\"}}");
  ASSERT_TRUE(mvu.ok()) << mvu.status();
  EXPECT_EQ(mvu->Options<QsdpJobOptions>().mvu_options.connect, ConnectMode::kError);
}

// The k-NN search of a job's graph takes the solver's num_threads where the
// family has one (0 = all cores), one thread otherwise; a stored record
// parses back to the same setting.
TEST(JobKnobsDefaults, GraphSearchTakesTheSolversThreadSetting) {
  EXPECT_EQ(ParseJobSpec("kl_admm", "{\"kl_admm\":{}}")->graph.num_threads, 1);
  EXPECT_EQ(ParseJobSpec("kl_admm", "{\"kl_admm\":{\"num_threads\":2}}")->graph.num_threads, 2);
  EXPECT_EQ(ParseJobSpec("kl_admm", "{\"kl_admm\":{\"num_threads\":0}}")->graph.num_threads, 0);
  EXPECT_EQ(ParseJobSpec("simple_npkl", "{\"simple_npkl\":{\"num_threads\":3}}")->graph.num_threads, 3);
  EXPECT_EQ(ParseJobSpec("bcd_npkl", "{\"bcd_npkl\":{}}")->graph.num_threads, 1);
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id("d");
  r.mutable_kl_admm()->set_num_threads(0);
  auto record = JobRecordFromSubmit(r);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(ParseJobSpec("kl_admm", record->options_json)->graph.num_threads, 0);
}


Dataset Iris() {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(iris.ok()) << iris.status();
  return iris.ok() ? *iris : Dataset();
}

// cross_validation on each NPKL family: the summary lists every candidate
// with its fold scores and the chosen value; the job learns with it.
TEST_F(JobKnobsTest, CrossValidationChoosesCAndReportsFoldScores) {
  const Dataset iris = Iris();
  auto constraints = GenerateBcdProtocol(iris.labels, 0.3, 1);
  ASSERT_TRUE(constraints.ok());
  const std::string id = Upload(iris, *constraints);
  for (const char* method : {"kl_admm", "bcd_npkl", "simple_npkl"}) {
    kls::v1::SubmitJobRequest r;
    r.set_dataset_id(id);
    if (std::string(method) == "kl_admm") r.mutable_kl_admm();
    if (std::string(method) == "bcd_npkl") r.mutable_bcd_npkl();
    if (std::string(method) == "simple_npkl") r.mutable_simple_npkl();
    r.mutable_cross_validation()->set_folds(3);
    r.mutable_cross_validation()->set_num_threads(2);
    const kls::v1::Job job = Run(r, std::string("cv-") + method);
    SCOPED_TRACE(method);
    EXPECT_THAT(job.summary_json(), HasSubstr("\"cross_validation\":{\"folds\":3,\"score\":\"threshold\",\"best\":"));
    for (const char* v : {"{\"value\":0.1,\"fold_scores\":[", "{\"value\":1,\"fold_scores\":[",
                          "{\"value\":10,\"fold_scores\":["}) {
      EXPECT_THAT(job.summary_json(), HasSubstr(v));
    }
  }
}

// The admm protocol's pairs include the n self pairs (i, i); BCDNPKL's block
// subproblem has no place for them, so the family leaves them out instead of
// failing the job (one data set serves every family).
TEST_F(JobKnobsTest, BcdNpklLearnsOnTheAdmmProtocolsPairsWithTheirSelfPairs) {
  const Dataset iris = Iris();
  ConstraintProtocol admm;
  admm.name = "admm";
  auto constraints = GenerateProtocol(admm, iris.labels, "protocol");
  ASSERT_TRUE(constraints.ok()) << constraints.status();
  int self_pairs = 0;
  for (const Pair& p : constraints->pairs) self_pairs += p.i == p.j ? 1 : 0;
  ASSERT_GT(self_pairs, 0);
  const std::string id = Upload(iris, *constraints);
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_bcd_npkl();
  const kls::v1::Job job = Run(r, "bcd-self-pairs");
  EXPECT_EQ(job.state(), kls::v1::SUCCEEDED) << job.error();
}

TEST_F(JobKnobsTest, CrossValidationAndWarmStartRejectBadValuesNamingTheField) {
  const Dataset iris = Iris();
  auto constraints = GenerateBcdProtocol(iris.labels, 0.3, 1);
  ASSERT_TRUE(constraints.ok());
  const std::string id = Upload(iris, *constraints);
  auto expect_invalid = [&](const kls::v1::SubmitJobRequest& r, const std::string& text) {
    auto job = client_->SubmitJob(r);
    ASSERT_FALSE(job.ok());
    EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(job.status().message(), HasSubstr(text));
  };
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(id);
  r.mutable_bcd_npkl()->set_c(2);
  r.mutable_cross_validation();
  expect_invalid(r, "bcd_npkl.c = 2");
  r.mutable_bcd_npkl()->clear_c();
  r.mutable_cross_validation()->set_folds(1);
  expect_invalid(r, "cross_validation.folds = 1");
  r.mutable_cross_validation()->clear_folds();
  r.mutable_cross_validation()->add_grid(-1);
  expect_invalid(r, "cross_validation.grid[0] = -1");
  r.clear_cross_validation();
  r.mutable_warm_start()->set_kernel_name("");
  expect_invalid(r, "warm_start.kernel_name");
  r.mutable_warm_start()->set_kernel_name("k");
  r.mutable_warm_start()->set_version(-2);
  expect_invalid(r, "warm_start.version = -2");
  kls::v1::SubmitJobRequest q;
  q.set_dataset_id(id);
  q.mutable_mkl();
  q.mutable_cross_validation();
  expect_invalid(q, "cross_validation is set but method = mkl");
}

// Appending 10 % more pairs makes a new data set sharing the features; a job
// on it warm-started from the base's kernel reaches the cold job's objective
// in fewer iterations, for each NPKL family. A warm start from a kernel of
// other features fails naming the field.
TEST_F(JobKnobsTest, AppendedPairsAndWarmStartReachTheColdObjectiveFaster) {
  const Dataset iris = Iris();
  auto all = GenerateBcdProtocol(iris.labels, 0.3, 2);
  ASSERT_TRUE(all.ok());
  PairwiseConstraints base, extra;
  for (int k = 0; k < all->size(); ++k) (k % 11 == 0 ? extra : base).pairs.push_back(all->pairs[k]);
  const std::string base_id = Upload(iris, base);
  UploadOptions o;
  o.name = "appended";
  o.base_dataset_id = base_id;
  auto appended = client_->UploadDataset(Dataset(), extra, o);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(appended->num_points(), 150);
  EXPECT_EQ(appended->num_constraints(), all->size());
  EXPECT_EQ(appended->num_classes(), 3);
  // Repeating a base pair is rejected, naming the field.
  PairwiseConstraints repeat;
  repeat.pairs.push_back(base.pairs[0]);
  auto bad = client_->UploadDataset(Dataset(), repeat, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("header.base_dataset_id"));

  for (const char* method : {"kl_admm", "bcd_npkl", "simple_npkl"}) {
    SCOPED_TRACE(method);
    kls::v1::SubmitJobRequest r;
    if (std::string(method) == "kl_admm") r.mutable_kl_admm();
    if (std::string(method) == "bcd_npkl") r.mutable_bcd_npkl();
    if (std::string(method) == "simple_npkl") r.mutable_simple_npkl()->set_b(150);
    r.set_dataset_id(base_id);
    Run(r, std::string("base-") + method);
    r.set_dataset_id(appended->id());
    const kls::v1::Job cold = Run(r, std::string("cold-") + method);
    r.mutable_warm_start()->set_kernel_name(std::string("base-") + method);
    const kls::v1::Job warm = Run(r, std::string("warm-") + method);
    EXPECT_THAT(warm.summary_json(), HasSubstr("\"warm_start\":{\"kernel_name\":\"base-"));
    std::printf("%s on iris + 10 %% pairs: cold %d iterations, objective %.9g; warm %d, %.9g\n", method,
                cold.progress().iteration(), cold.progress().objective(), warm.progress().iteration(),
                warm.progress().objective());
    EXPECT_LT(warm.progress().iteration(), cold.progress().iteration());
    EXPECT_NEAR(warm.progress().objective(), cold.progress().objective(),
                1e-3 * std::max(1.0, std::abs(cold.progress().objective())));
  }
  // Other features: wine's kernel cannot warm-start an iris job.
  const Dataset wine = TestCsv("wine.csv");
  auto wc = GenerateBcdProtocol(wine.labels, 0.3, 1);
  ASSERT_TRUE(wc.ok());
  kls::v1::SubmitJobRequest w;
  w.set_dataset_id(Upload(wine, *wc));
  w.mutable_bcd_npkl();
  Run(w, "wine-k");
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(appended->id());
  r.mutable_bcd_npkl();
  r.mutable_warm_start()->set_kernel_name("wine-k");
  const kls::v1::Job failed = Finish(r, "never");
  EXPECT_EQ(failed.state(), kls::v1::FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("warm_start.kernel_name = \"wine-k\""));
}

}  // namespace
}  // namespace kls::server
