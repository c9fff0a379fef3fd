// The itml family (server/jobs/families/itml.cc) through the real in-process
// server: a job on wine with label pairs (scaling ZSCORE) stores V = X L and
// the linear map L; feature queries (Embed, TopK by features) answer exactly
// scale(rows) · L; option and data-set errors name the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/data/csv_reader.h"
#include "core/data/feature_scaling.h"
#include "core/metric/itml.h"
#include "kls/v1/families/itml.pb.h"
#include "test_server.h"
#include "tests/test_util/label_pairs.h"

namespace kls::server {
namespace {

using kls::testing::Ref;
using kls::testing::TestCsv;

using ::testing::HasSubstr;

kls::v1::SubmitJobRequest ItmlRequest(const std::string& dataset_id, double gamma) {
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(dataset_id);
  r.set_scaling(kls::v1::SubmitJobRequest::ZSCORE);
  kls::v1::ItmlOptions o;
  o.set_gamma(gamma);
  o.set_max_iterations(200);
  r.mutable_family_options()->PackFrom(o);
  return r;
}

class ItmlJobTest : public kls::testing::ServerJobTest {};

TEST_F(ItmlJobTest, ServedKernelIsXLAndFeatureQueriesMapRowsExactly) {
  const Dataset wine = TestCsv("wine.csv");
  ASSERT_GT(wine.features.rows(), 100);
  const PairwiseConstraints pairs = test_util::RandomLabelPairs(wine.labels, 300, 21);
  const std::string id = Upload(wine, pairs);
  ASSERT_FALSE(id.empty());
  const kls::v1::Job job = Run(ItmlRequest(id, 1.0), "wine-itml");
  ASSERT_EQ(job.state(), kls::v1::SUCCEEDED) << job.error();
  EXPECT_EQ(job.method(), "itml");
  EXPECT_THAT(job.summary_json(), HasSubstr("\"itml\":{\"sweeps\":"));
  EXPECT_THAT(job.summary_json(), HasSubstr("\"skipped_pairs\":0"));
  EXPECT_THAT(job.summary_json(), HasSubstr("\"scaling\":\"zscore\""));

  // The same solve in core, on the same scaled rows and pairs.
  auto scaler = FeatureScaler::Fit(wine.features, FeatureScaling::kZScore);
  ASSERT_TRUE(scaler.ok());
  const Eigen::MatrixXd xs = *scaler->Apply(wine.features);
  ItmlOptions o;
  o.gamma = 1.0;
  o.max_iterations = 200;
  auto want = SolveItml(xs, pairs, o);
  ASSERT_TRUE(want.ok()) << want.status();
  const Eigen::MatrixXd& l = want->factor;

  auto exported = client_->ExportKernel(Ref("wine-itml"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  const Eigen::MatrixXd v = exported->embedding;
  ASSERT_EQ(v.rows(), wine.features.rows());
  ASSERT_EQ(v.cols(), l.cols());
  EXPECT_LE((v - xs * l).cwiseAbs().maxCoeff(), 1e-9 * std::max(1.0, v.cwiseAbs().maxCoeff()));
  // K = X M Xᵀ.
  EXPECT_LE((v * v.transpose() - xs * want->metric * xs.transpose()).cwiseAbs().maxCoeff(), 1e-8);

  // New rows (perturbed wine rows, raw units): Embed returns scale(rows) · L.
  Eigen::MatrixXd rows(3, wine.features.cols());
  rows.row(0) = wine.features.row(5) * 1.03;
  rows.row(1) = wine.features.row(77) * 0.97;
  rows.row(2) = wine.features.row(150);
  const Eigen::MatrixXd expect = *scaler->Apply(rows) * l;
  kls::v1::EmbedRequest e;
  *e.mutable_kernel() = Ref("wine-itml");
  e.set_dim(static_cast<int>(rows.cols()));
  for (int i = 0; i < rows.rows(); ++i)
    for (int j = 0; j < rows.cols(); ++j) e.add_features(rows(i, j));
  auto embedded = client_->Embed(e);
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  ASSERT_EQ(embedded->rank(), l.cols());
  ASSERT_EQ(embedded->values_size(), rows.rows() * l.cols());
  for (int i = 0; i < rows.rows(); ++i)
    for (int c = 0; c < l.cols(); ++c)
      EXPECT_NEAR(embedded->values(i * l.cols() + c), expect(i, c), 1e-9 * std::max(1.0, std::abs(expect(i, c))))
          << i << "," << c;
  // A training row's raw features map to its own stored row.
  kls::v1::EmbedRequest own;
  *own.mutable_kernel() = Ref("wine-itml");
  own.set_dim(static_cast<int>(wine.features.cols()));
  for (int j = 0; j < wine.features.cols(); ++j) own.add_features(wine.features(150, j));
  auto own_row = client_->Embed(own);
  ASSERT_TRUE(own_row.ok()) << own_row.status();
  for (int c = 0; c < v.cols(); ++c) EXPECT_NEAR(own_row->values(c), v(150, c), 1e-9);

  // TopK by features = TopK by the vector scale(row) · L.
  kls::v1::TopKRequest q;
  *q.mutable_kernel() = Ref("wine-itml");
  q.set_k(7);
  for (int j = 0; j < rows.cols(); ++j) q.mutable_features()->add_values(rows(1, j));
  kls::v1::TopKRequest by_vector;
  *by_vector.mutable_kernel() = Ref("wine-itml");
  by_vector.set_k(7);
  for (int c = 0; c < l.cols(); ++c) by_vector.mutable_vector()->add_values(expect(1, c));
  auto top = client_->TopK(q);
  auto top_want = client_->TopK(by_vector);
  ASSERT_TRUE(top.ok() && top_want.ok()) << top.status() << top_want.status();
  ASSERT_EQ(top->items_size(), 7);
  ASSERT_EQ(top->items_size(), top_want->items_size());
  for (int t = 0; t < top->items_size(); ++t) EXPECT_EQ(top->items(t).index(), top_want->items(t).index());

  // The linear map needs no training features: with the data set deleted,
  // feature queries still answer scale(rows) · L.
  const Status deleted = client_->DeleteDataset(id);
  ASSERT_TRUE(deleted.ok()) << deleted;
  auto after = client_->Embed(e);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->values_size(), embedded->values_size());
  for (int t = 0; t < after->values_size(); ++t) EXPECT_EQ(after->values(t), embedded->values(t)) << t;

  // A wrong width names the field.
  kls::v1::EmbedRequest narrow;
  *narrow.mutable_kernel() = Ref("wine-itml");
  narrow.set_dim(2);
  narrow.add_features(1);
  narrow.add_features(2);
  auto bad = client_->Embed(narrow);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("features: 2 features per row"));
}

TEST_F(ItmlJobTest, BadOptionsAndDataSetsWithoutPairsAreRejected) {
  const Dataset wine = TestCsv("wine.csv");
  const std::string id = Upload(wine);  // no pairs
  ASSERT_FALSE(id.empty());
  kls::v1::SubmitJobRequest r = ItmlRequest(id, -1.0);
  auto job = client_->SubmitJob(r);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("itml.gamma = -1 must be positive and finite"));

  kls::v1::ItmlOptions o;
  o.set_lower(0);
  r.mutable_family_options()->PackFrom(o);
  job = client_->SubmitJob(r);
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("itml.lower = 0 must be finite and > 0"));

  o.Clear();  // the core options' Validate names every field the client wrote
  o.set_max_iterations(0);
  r.mutable_family_options()->PackFrom(o);
  job = client_->SubmitJob(r);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("itml.max_iterations = 0 must be >= 1"));
  o.Clear();
  for (double v : {1.0, 0.0, std::nan(""), 1.0}) o.add_prior(v);
  r.mutable_family_options()->PackFrom(o);
  job = client_->SubmitJob(r);
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("itml.prior[2] = nan is not finite"));

  job = client_->SubmitJob(ItmlRequest(id, 1.0));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(), HasSubstr("has no pairwise constraints; itml learns"));
}

}  // namespace
}  // namespace kls::server
