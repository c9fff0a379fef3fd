// Kernel k-means on a factored kernel: recovery of separated blobs, Lloyd
// fixed-point and mean invariants, determinism, the dense-kernel path, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "core/eval/kernel_kmeans.h"
#include "core/eval/metrics.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

struct Blobs {
  Eigen::MatrixXd points;
  std::vector<int> labels;
};

// num_blobs Gaussian blobs (sd 1) whose centers sit `separation` apart along
// the first axis; point i belongs to blob i % num_blobs (labels interleaved,
// so cluster ids cannot follow from the row order).
Blobs MakeBlobs(int num_blobs, int per_blob, int dim, double separation, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  Blobs b;
  const int n = num_blobs * per_blob;
  b.points.resize(n, dim);
  b.labels.resize(n);
  for (int i = 0; i < n; ++i) {
    b.labels[i] = i % num_blobs;
    for (int j = 0; j < dim; ++j) b.points(i, j) = noise(rng) + (j == 0 ? separation * b.labels[i] : 0.0);
  }
  return b;
}

Eigen::MatrixXd RandomMatrix(int n, int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd x(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x(i, j) = g(rng);
  return x;
}

// Invariants every result must satisfy: ids in range, no empty cluster,
// centers are the cluster means, objective is the sum of squared distances.
void ExpectValidResult(const Eigen::MatrixXd& v, int k, const KMeansResult& r) {
  const int n = static_cast<int>(v.rows());
  ASSERT_EQ(static_cast<int>(r.assignment.size()), n);
  ASSERT_EQ(r.centers.rows(), k);
  ASSERT_EQ(r.centers.cols(), v.cols());
  std::vector<int> count(k, 0);
  Eigen::MatrixXd sums = Eigen::MatrixXd::Zero(k, v.cols());
  double objective = 0.0;
  for (int i = 0; i < n; ++i) {
    ASSERT_GE(r.assignment[i], 0);
    ASSERT_LT(r.assignment[i], k);
    ++count[r.assignment[i]];
    sums.row(r.assignment[i]) += v.row(i);
    objective += (v.row(i) - r.centers.row(r.assignment[i])).squaredNorm();
  }
  for (int c = 0; c < k; ++c) {
    ASSERT_GT(count[c], 0) << "cluster " << c << " is empty";
    EXPECT_LE((sums.row(c) / count[c] - r.centers.row(c)).cwiseAbs().maxCoeff(), 1e-10) << "cluster " << c;
  }
  EXPECT_NEAR(r.objective, objective, 1e-9 * (1.0 + objective));
}

TEST(KernelKMeans, RecoversSeparatedBlobs) {
  const Blobs b = MakeBlobs(3, 20, 5, 20.0, 1);
  KMeansOptions o;
  o.num_clusters = 3;
  o.seed = 123;
  auto r = KernelKMeans(b.points, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValidResult(b.points, 3, *r);
  auto pa = PairAccuracy(b.labels, r->assignment);
  auto nmi = NormalizedMutualInformation(b.labels, r->assignment);
  ASSERT_TRUE(pa.ok() && nmi.ok());
  EXPECT_EQ(*pa, 1.0);
  EXPECT_DOUBLE_EQ(*nmi, 1.0);
  EXPECT_EQ(r->termination, Termination::kConverged);
  EXPECT_GE(r->best_restart, 0);
  EXPECT_LT(r->best_restart, o.restarts);
  EXPECT_GE(r->iterations, 1);
  // Within-blob scatter of 60 points in 5-D with sd 1 is about 60·5 = 300, far
  // below any clustering that merges two blobs (≥ 20²·20/2 = 4000 extra).
  EXPECT_LT(r->objective, 500.0);
}

TEST(KernelKMeans, ConvergedResultIsALloydFixedPoint) {
  // Tolerance 0: stop only when the assignment is stable, so every point must
  // be (up to rounding) at least as close to its own center as to any other.
  const Eigen::MatrixXd v = RandomMatrix(400, 3, 17);
  KMeansOptions o;
  o.num_clusters = 6;
  o.restarts = 3;
  o.tolerance = 0.0;
  o.max_iterations = 1000;
  auto r = KernelKMeans(v, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->termination, Termination::kConverged);
  ExpectValidResult(v, 6, *r);
  for (int i = 0; i < v.rows(); ++i) {
    const double own = (v.row(i) - r->centers.row(r->assignment[i])).squaredNorm();
    for (int c = 0; c < 6; ++c) {
      EXPECT_LE(own, (v.row(i) - r->centers.row(c)).squaredNorm() + 1e-9) << "point " << i;
    }
  }
}

TEST(KernelKMeans, MoreRestartsNeverWorse) {
  // Restart 0 uses the same derived seed in both runs, so the best of 8 can
  // only match or improve on it.
  const Eigen::MatrixXd v = RandomMatrix(300, 4, 5);
  KMeansOptions one;
  one.num_clusters = 8;
  one.restarts = 1;
  KMeansOptions many = one;
  many.restarts = 8;
  auto r1 = KernelKMeans(v, one);
  auto r8 = KernelKMeans(v, many);
  ASSERT_TRUE(r1.ok() && r8.ok());
  EXPECT_LE(r8->objective, r1->objective);
  EXPECT_EQ(r1->best_restart, 0);
}

TEST(KernelKMeans, SameSeedSameResultAcrossThreadCounts) {
  // n = 1000 spans several 256-row assignment blocks.
  const Eigen::MatrixXd v = RandomMatrix(1000, 6, 42);
  KMeansOptions o;
  o.num_clusters = 7;
  o.restarts = 3;
  o.seed = 9;
  auto a = KernelKMeans(v, o);
  auto b = KernelKMeans(v, o);
  KMeansOptions threaded = o;
  threaded.num_threads = 3;
  auto c = KernelKMeans(v, threaded);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->assignment, b->assignment);
  EXPECT_EQ(a->objective, b->objective);
  EXPECT_EQ(a->centers, b->centers);
  EXPECT_EQ(a->assignment, c->assignment);
  EXPECT_EQ(a->objective, c->objective);
  EXPECT_EQ(a->best_restart, c->best_restart);
  ExpectValidResult(v, 7, *a);

  // A different seed is a different random stream (on unstructured data the
  // local optimum it reaches is very unlikely to be bit-identical).
  KMeansOptions other = o;
  other.seed = 10;
  auto d = KernelKMeans(v, other);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(a->objective, d->objective);
}

TEST(KernelKMeans, DenseLinearKernelMatchesFactored) {
  const Blobs b = MakeBlobs(3, 20, 5, 20.0, 2);
  const Eigen::MatrixXd k = b.points * b.points.transpose();  // linear kernel X Xᵀ
  KMeansOptions o;
  o.num_clusters = 3;
  auto dense = KernelKMeansDense(k, o);
  auto factored = KernelKMeans(b.points, o);
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_TRUE(factored.ok());
  auto pa = PairAccuracy(b.labels, dense->assignment);
  ASSERT_TRUE(pa.ok());
  EXPECT_EQ(*pa, 1.0);
  // The feature-space objective does not depend on which factor V is used.
  EXPECT_NEAR(dense->objective, factored->objective, 1e-8 * factored->objective);
}

TEST(KernelKMeans, DenseClampsNegativeEigenvalues) {
  // K = X Xᵀ − 0.5 u uᵀ for a unit u orthogonal to X's columns has one
  // eigenvalue −0.5 whose direction must be discarded, leaving X Xᵀ's geometry.
  const Blobs b = MakeBlobs(2, 10, 2, 20.0, 4);
  const Eigen::MatrixXd& x = b.points;
  Eigen::VectorXd u = RandomMatrix(20, 1, 8).col(0);
  // Project out span(X) with an orthonormal basis Q of X's two columns.
  const Eigen::MatrixXd q = x.householderQr().householderQ() * Eigen::MatrixXd::Identity(20, 2);
  u -= q * (q.transpose() * u);
  u.normalize();
  const Eigen::MatrixXd k = x * x.transpose() - 0.5 * u * u.transpose();
  KMeansOptions o;
  o.num_clusters = 2;
  auto dense = KernelKMeansDense(k, o);
  auto factored = KernelKMeans(x, o);
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_TRUE(factored.ok());
  EXPECT_EQ(dense->centers.cols(), 2);  // rank of the PSD part
  EXPECT_NEAR(dense->objective, factored->objective, 1e-8 * factored->objective);
}

TEST(KernelKMeans, DuplicatePointsNeverLeaveEmptyClusters) {
  // Only two distinct rows but three clusters: seeding must pick a duplicate
  // and the empty-cluster rule must still give every cluster a member.
  Eigen::MatrixXd v(6, 2);
  v << 0, 0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5;
  KMeansOptions o;
  o.num_clusters = 3;
  o.restarts = 4;
  auto r = KernelKMeans(v, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValidResult(v, 3, *r);
  EXPECT_NEAR(r->objective, 0.0, 1e-12);
}

TEST(KernelKMeans, ExtremeClusterCounts) {
  const Eigen::MatrixXd v = RandomMatrix(12, 3, 6);
  KMeansOptions o;
  o.num_clusters = 12;  // every point alone
  auto all = KernelKMeans(v, o);
  ASSERT_TRUE(all.ok()) << all.status();
  ExpectValidResult(v, 12, *all);
  EXPECT_NEAR(all->objective, 0.0, 1e-12);
  EXPECT_EQ(std::set<int>(all->assignment.begin(), all->assignment.end()).size(), 12u);

  o.num_clusters = 1;  // one cluster: the total scatter about the mean
  auto one = KernelKMeans(v, o);
  ASSERT_TRUE(one.ok());
  ExpectValidResult(v, 1, *one);
  const Eigen::RowVectorXd mean = v.colwise().mean();
  EXPECT_NEAR(one->objective, (v.rowwise() - mean).squaredNorm(), 1e-10);
}

TEST(KernelKMeans, CancelledBeforeStartStillReturnsAClustering) {
  const Blobs b = MakeBlobs(3, 20, 5, 20.0, 3);
  KMeansOptions o;
  o.num_clusters = 3;
  SolveControl control;
  control.cancel.Cancel();
  auto r = KernelKMeans(b.points, o, control);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->termination, Termination::kCancelled);
  EXPECT_EQ(r->iterations, 0);
  EXPECT_EQ(r->best_restart, 0);
  ExpectValidResult(b.points, 3, *r);
}

TEST(KernelKMeans, ReportsProgressOncePerIteration) {
  const Eigen::MatrixXd v = RandomMatrix(200, 3, 12);
  KMeansOptions o;
  o.num_clusters = 4;
  o.restarts = 1;
  SolveControl control;
  std::vector<double> objectives;
  control.progress = [&](const ProgressEvent& e) { objectives.push_back(e.objective); };
  auto r = KernelKMeans(v, o, control);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(static_cast<int>(objectives.size()), r->iterations);
  for (size_t t = 1; t < objectives.size(); ++t) {
    EXPECT_LE(objectives[t], objectives[t - 1] * (1 + 1e-12)) << "Lloyd must not increase the objective";
  }
}

TEST(KernelKMeans, Errors) {
  const Eigen::MatrixXd v = RandomMatrix(3, 2, 1);
  KMeansOptions o;
  o.num_clusters = 5;
  auto too_many = KernelKMeans(v, o);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.status().message(), HasSubstr("options.num_clusters = 5 but the embedding has 3 rows"));

  o.num_clusters = 0;
  auto zero = KernelKMeans(v, o);
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("options.num_clusters = 0"));

  KMeansOptions bad;
  bad.restarts = 0;
  EXPECT_THAT(bad.Validate().message(), HasSubstr("options.restarts = 0"));
  bad = KMeansOptions();
  bad.max_iterations = 0;
  EXPECT_THAT(bad.Validate().message(), HasSubstr("options.max_iterations = 0"));
  bad = KMeansOptions();
  bad.tolerance = -1.0;
  EXPECT_FALSE(bad.Validate().ok());
  bad.tolerance = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(bad.Validate().ok());
  bad = KMeansOptions();
  bad.num_threads = -1;
  EXPECT_FALSE(bad.Validate().ok());
  EXPECT_TRUE(KMeansOptions().Validate().ok());

  auto empty = KernelKMeans(Eigen::MatrixXd(0, 3), KMeansOptions());
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("empty"));

  Eigen::MatrixXd nan = RandomMatrix(4, 2, 2);
  nan(1, 1) = std::numeric_limits<double>::infinity();
  auto nonfinite = KernelKMeans(nan, KMeansOptions());
  ASSERT_FALSE(nonfinite.ok());
  EXPECT_THAT(nonfinite.status().message(), HasSubstr("V[1][1] = inf is not finite"));

  auto not_square = KernelKMeansDense(Eigen::MatrixXd::Zero(3, 4), KMeansOptions());
  ASSERT_FALSE(not_square.ok());
  EXPECT_EQ(not_square.status().code(), StatusCode::kInvalidArgument);
  Eigen::MatrixXd asym = Eigen::MatrixXd::Identity(4, 4);
  asym(0, 1) = 1.0;
  auto asymmetric = KernelKMeansDense(asym, KMeansOptions());
  ASSERT_FALSE(asymmetric.ok());
  EXPECT_THAT(asymmetric.status().message(), HasSubstr("symmetric"));
  KMeansOptions five;
  five.num_clusters = 5;
  auto dense_too_many = KernelKMeansDense(Eigen::MatrixXd::Identity(3, 3), five);
  ASSERT_FALSE(dense_too_many.ok());
  EXPECT_THAT(dense_too_many.status().message(), HasSubstr("options.num_clusters = 5 but the kernel has 3 rows"));
}

}  // namespace
}  // namespace kls
