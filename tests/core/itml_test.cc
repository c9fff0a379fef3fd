// ITML (core/metric/itml.h): constraint satisfaction, the KKT conditions of
// problem (4.3), M = M0 without constraints, a metric that separates classes
// Euclidean distance does not, skipped pairs, control, and option errors.
#include "core/metric/itml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <vector>

#include "tests/test_util/label_pairs.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

// Two classes that differ along feature 0 (means ±separation, std `signal`)
// with `noise_dims` features of std `noise` carrying nothing.
struct Labeled {
  Eigen::MatrixXd x;
  std::vector<int> y;
};

Labeled TwoClasses(int n, double separation, double signal, int noise_dims, double noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  Labeled d;
  d.x.resize(n, 1 + noise_dims);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) {
    d.y[i] = i % 2;
    d.x(i, 0) = (d.y[i] ? separation : -separation) + signal * g(rng);
    for (int k = 0; k < noise_dims; ++k) d.x(i, 1 + k) = noise * g(rng);
  }
  return d;
}

double Dist(const Eigen::MatrixXd& m, const Eigen::MatrixXd& x, int i, int j) {
  const Eigen::VectorXd v = x.row(i).transpose() - x.row(j).transpose();
  return v.dot(m * v);
}

// Leave-one-out 1-NN accuracy under d_M.
double LooAccuracy(const Eigen::MatrixXd& m, const Eigen::MatrixXd& x, const std::vector<int>& y) {
  const int n = static_cast<int>(x.rows());
  int right = 0;
  for (int i = 0; i < n; ++i) {
    int best = -1;
    double best_d = INFINITY;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const double dij = Dist(m, x, i, j);
      if (dij < best_d) best_d = dij, best = j;
    }
    right += y[best] == y[i] ? 1 : 0;
  }
  return static_cast<double>(right) / n;
}

void ExpectSymmetricPsd(const Eigen::MatrixXd& m) {
  ASSERT_EQ(m.rows(), m.cols());
  EXPECT_LE((m - m.transpose()).cwiseAbs().maxCoeff(), 1e-12 * std::max(1.0, m.cwiseAbs().maxCoeff()));
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(m);
  EXPECT_GE(eig.eigenvalues().minCoeff(), -1e-10 * std::max(1.0, eig.eigenvalues().maxCoeff()));
}

TEST(Itml, NoConstraintsReturnsThePrior) {
  const Labeled d = TwoClasses(20, 1.0, 0.2, 2, 1.0, 3);
  ItmlOptions o;
  auto r = SolveItml(d.x, PairwiseConstraints{}, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->converged);
  EXPECT_EQ(r->sweeps, 0);
  EXPECT_LE((r->metric - Eigen::MatrixXd::Identity(3, 3)).cwiseAbs().maxCoeff(), 1e-12);

  Eigen::MatrixXd a(3, 3);
  a << 2, 0.5, 0.1, 0.5, 1, 0.2, 0.1, 0.2, 3;
  o.prior = a;
  r = SolveItml(d.x, PairwiseConstraints{}, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_LE((r->metric - a).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LE((r->factor * r->factor.transpose() - a).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_EQ(r->factor.cols(), 3);
}

TEST(Itml, SatisfiedConstraintsLeaveThePrior) {
  // Bounds that every pair already meets under M0: no projection moves M.
  const Labeled d = TwoClasses(30, 1.0, 0.2, 1, 0.5, 4);
  const PairwiseConstraints c = test_util::RandomLabelPairs(d.y, 60, 5);
  ItmlOptions o;
  o.lower = 1e6;  // every must-link is closer
  o.upper = 1e-9; // every cannot-link is farther
  auto r = SolveItml(d.x, c, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->converged);
  EXPECT_EQ(r->sweeps, 1);
  EXPECT_LE((r->metric - Eigen::MatrixXd::Identity(2, 2)).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_EQ(r->lambda.cwiseAbs().maxCoeff(), 0.0);
}

TEST(Itml, HardConstraintsAreMetOnAFeasibleProblem) {
  // Classes separable along feature 0: scaling feature 0 up and feature 1
  // down meets any bounds l < u, so with a large γ (ξ ≈ ξ0) every must-link
  // ends within l and every cannot-link beyond u.
  const Labeled d = TwoClasses(40, 2.0, 0.1, 1, 1.0, 6);
  const PairwiseConstraints c = test_util::RandomLabelPairs(d.y, 80, 7);
  ItmlOptions o;
  o.gamma = 1e8;
  o.lower = 0.5;
  o.upper = 4.0;
  o.tolerance = 1e-10;
  o.max_iterations = 20000;
  auto r = SolveItml(d.x, c, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->converged) << r->sweeps;
  EXPECT_DOUBLE_EQ(r->lower, 0.5);
  EXPECT_DOUBLE_EQ(r->upper, 4.0);
  for (const Pair& p : c.pairs) {
    const double dm = Dist(r->metric, d.x, p.i, p.j);
    if (p.kind == PairKind::kMustLink) {
      EXPECT_LE(dm, 0.5 * (1 + 1e-4)) << p.i << "," << p.j;
    } else {
      EXPECT_GE(dm, 4.0 * (1 - 1e-4)) << p.i << "," << p.j;
    }
  }
  // Under the identity most of them are violated: the test is not vacuous.
  int violated = 0;
  for (const Pair& p : c.pairs) {
    const double de = Dist(Eigen::MatrixXd::Identity(2, 2), d.x, p.i, p.j);
    violated += (p.kind == PairKind::kMustLink ? de > 0.5 : de < 4.0) ? 1 : 0;
  }
  EXPECT_GT(violated, 20);
  EXPECT_LE(r->max_violation, 1e-4);
  ExpectSymmetricPsd(r->metric);
}

// The KKT conditions of (4.3) at the returned point, for the prior `m0`.
void ExpectKkt(const Eigen::MatrixXd& x, const PairwiseConstraints& c, const ItmlOptions& o, const ItmlResult& r,
               const Eigen::MatrixXd& m0) {
  const int d = static_cast<int>(x.cols());
  // λ >= 0.
  EXPECT_GE(r.lambda.minCoeff(), 0.0);
  // Complementary slackness: λ > 0 only where d_M = ξ; feasibility elsewhere.
  int active = 0;
  for (int k = 0; k < c.size(); ++k) {
    const Pair& p = c.pairs[k];
    const double dm = Dist(r.metric, x, p.i, p.j);
    const double xi = r.slack(k);
    ASSERT_GT(xi, 0.0);
    if (r.lambda(k) > 1e-9) {
      ++active;
      EXPECT_NEAR(dm, xi, 1e-5 * xi) << "constraint " << k << " λ = " << r.lambda(k);
    } else {
      EXPECT_LE(p.sign() * (dm - xi), 1e-5 * xi) << "constraint " << k;
    }
    // Stationarity in ξ: 1/ξ = 1/ξ0 − δλ/γ.
    const double xi0 = p.kind == PairKind::kMustLink ? r.lower : r.upper;
    EXPECT_NEAR(1.0 / xi, 1.0 / xi0 - p.sign() * r.lambda(k) / o.gamma, 1e-9 / xi);
  }
  EXPECT_GT(active, 0);
  // Stationarity in M: M⁻¹ − M0⁻¹ = Σ δ λ (x_i − x_j)(x_i − x_j)ᵀ.
  Eigen::MatrixXd rhs = Eigen::MatrixXd::Zero(d, d);
  for (int k = 0; k < c.size(); ++k) {
    const Pair& p = c.pairs[k];
    const Eigen::VectorXd v = x.row(p.i).transpose() - x.row(p.j).transpose();
    rhs += p.sign() * r.lambda(k) * v * v.transpose();
  }
  const Eigen::MatrixXd lhs = r.metric.inverse() - m0.inverse();
  EXPECT_LE((lhs - rhs).cwiseAbs().maxCoeff(), 1e-6 * std::max(1.0, rhs.cwiseAbs().maxCoeff()))
      << "M^-1 - M0^-1 =\n" << lhs << "\nΣ δλ vvᵀ =\n" << rhs;
}

TEST(Itml, KktConditionsHoldAtConvergence) {
  const Labeled d = TwoClasses(30, 1.0, 0.3, 2, 1.0, 8);
  const PairwiseConstraints c = test_util::RandomLabelPairs(d.y, 50, 9);
  ItmlOptions o;
  o.gamma = 1.0;
  o.tolerance = 1e-12;
  o.max_iterations = 100000;
  auto r = SolveItml(d.x, c, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->converged);
  EXPECT_EQ(r->stats.termination, Termination::kConverged);
  EXPECT_GT(r->lower, 0.0);
  EXPECT_GT(r->upper, r->lower);
  EXPECT_LE(r->max_violation, 1e-5);
  ExpectSymmetricPsd(r->metric);
  ExpectKkt(d.x, c, o, *r, Eigen::MatrixXd::Identity(3, 3));
  EXPECT_LE((r->factor * r->factor.transpose() - r->metric).cwiseAbs().maxCoeff(), 1e-10);
}

TEST(Itml, KktConditionsHoldWithAPriorAndSmallGamma) {
  const Labeled d = TwoClasses(24, 1.0, 0.3, 2, 1.0, 10);
  const PairwiseConstraints c = test_util::RandomLabelPairs(d.y, 40, 11);
  ItmlOptions o;
  o.gamma = 0.1;
  o.tolerance = 1e-12;
  o.max_iterations = 100000;
  Eigen::MatrixXd a(3, 3);
  a << 2, 0.5, 0.1, 0.5, 1, 0.2, 0.1, 0.2, 3;
  o.prior = a;
  auto r = SolveItml(d.x, c, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->converged);
  ExpectKkt(d.x, c, o, *r, a);
  // The objective decreases from the first sweep on... is finite and >= 0.
  ASSERT_FALSE(r->stats.objective_history.empty());
  EXPECT_GE(r->stats.final_objective, 0.0);
}

TEST(Itml, LearnedMetricSeparatesClassesEuclideanDoesNot) {
  // The classes differ along a low-variance axis (means ±0.3, std 0.1);
  // four high-variance noise axes (std 3) dominate the Euclidean distance.
  const Labeled d = TwoClasses(60, 0.3, 0.1, 4, 3.0, 12);
  const PairwiseConstraints c = test_util::RandomLabelPairs(d.y, 300, 13);
  const double euclid = LooAccuracy(Eigen::MatrixXd::Identity(5, 5), d.x, d.y);
  ItmlOptions o;
  auto r = SolveItml(d.x, c, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double learned = LooAccuracy(r->metric, d.x, d.y);
  EXPECT_LT(euclid, 0.75);
  EXPECT_GE(learned, 0.95);
  // The metric weighs the class axis over the noise axis.
  for (int k = 1; k < 5; ++k) EXPECT_GT(r->metric(0, 0), 10.0 * r->metric(k, k)) << k;
}

TEST(Itml, SkipsSelfPairsAndCoincidentPoints) {
  Labeled d = TwoClasses(10, 1.0, 0.2, 1, 1.0, 14);
  d.x.row(3) = d.x.row(5);
  PairwiseConstraints c;
  c.pairs.push_back({2, 2, PairKind::kMustLink});
  c.pairs.push_back({3, 5, PairKind::kCannotLink});
  c.pairs.push_back({0, 1, PairKind::kCannotLink});
  c.pairs.push_back({0, 2, PairKind::kMustLink});
  auto r = SolveItml(d.x, c, ItmlOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->skipped_pairs, 2);
  EXPECT_EQ(r->lambda(0), 0.0);
  EXPECT_EQ(r->lambda(1), 0.0);
  EXPECT_TRUE(r->metric.allFinite());

  // Only uninformative pairs: M = M0.
  PairwiseConstraints only;
  only.pairs = {c.pairs[0], c.pairs[1]};
  r = SolveItml(d.x, only, ItmlOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->skipped_pairs, 2);
  EXPECT_LE((r->metric - Eigen::MatrixXd::Identity(2, 2)).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(Itml, StopsOnCancellationAndReportsProgress) {
  const Labeled d = TwoClasses(30, 1.0, 0.3, 2, 1.0, 15);
  const PairwiseConstraints c = test_util::RandomLabelPairs(d.y, 50, 16);
  ItmlOptions o;
  o.tolerance = 1e-15;
  o.max_iterations = 1000000;
  SolveControl control;
  int reports = 0;
  control.progress = [&](const ProgressEvent& e) {
    EXPECT_EQ(e.iteration, reports + 1);
    if (++reports == 3) control.cancel.Cancel();
  };
  auto r = SolveItml(d.x, c, o, control);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stats.termination, Termination::kCancelled);
  EXPECT_EQ(r->sweeps, 3);
  EXPECT_FALSE(r->converged);
  ExpectSymmetricPsd(r->metric);

  o.max_iterations = 2;
  r = SolveItml(d.x, c, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.termination, Termination::kIterationLimit);
  EXPECT_EQ(r->sweeps, 2);
}

TEST(Itml, ValidateNamesTheField) {
  ItmlOptions o;
  o.gamma = -1;
  EXPECT_EQ(o.Validate().message(), "itml.gamma = -1 must be positive and finite");
  o = ItmlOptions{};
  o.gamma = INFINITY;
  EXPECT_THAT(o.Validate("job.itml").message(), HasSubstr("job.itml.gamma = inf"));
  o = ItmlOptions{};
  o.lower = -2;
  EXPECT_THAT(o.Validate().message(), HasSubstr("itml.lower = -2"));
  o = ItmlOptions{};
  o.upper = NAN;
  EXPECT_THAT(o.Validate().message(), HasSubstr("itml.upper = nan"));
  o = ItmlOptions{};
  o.tolerance = 0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("itml.tolerance = 0"));
  o = ItmlOptions{};
  o.max_iterations = -1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("itml.max_iterations = -1"));
  o = ItmlOptions{};
  o.num_threads = -3;
  EXPECT_THAT(o.Validate().message(), HasSubstr("itml.num_threads = -3"));
  EXPECT_TRUE(ItmlOptions{}.Validate().ok());
  // Unset bounds are the percentiles; a set bound must be > 0 (0 is not "unset").
  o = ItmlOptions{};
  o.lower = 0;
  EXPECT_EQ(o.Validate().message(),
            "itml.lower = 0 must be finite and > 0 (unset = the 5th percentile of the pairs' distances)");
  o = ItmlOptions{};
  o.upper = 0;
  EXPECT_EQ(o.Validate("job.itml").message(),
            "job.itml.upper = 0 must be finite and > 0 (unset = the 95th percentile of the pairs' distances)");
  o = ItmlOptions{};
  o.max_iterations = 0;
  EXPECT_EQ(o.Validate().message(), "itml.max_iterations = 0 must be >= 1");
  // The prior's entries by their row-major index, as the service's repeated field.
  o = ItmlOptions{};
  o.prior = Eigen::MatrixXd::Identity(2, 2);
  o.prior(1, 0) = NAN;
  EXPECT_EQ(o.Validate().message(), "itml.prior[2] = nan is not finite");
  o.prior = Eigen::RowVectorXd::Ones(4);
  o.prior(0, 3) = INFINITY;
  EXPECT_EQ(o.Validate("itml").message(), "itml.prior[3] = inf is not finite");

  // Errors from SolveItml itself.
  const Labeled d = TwoClasses(10, 1.0, 0.2, 1, 1.0, 17);
  o = ItmlOptions{};
  o.gamma = 0;
  auto r = SolveItml(d.x, PairwiseConstraints{}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("itml.gamma = 0"));
  o = ItmlOptions{};
  o.prior = Eigen::MatrixXd::Identity(3, 3);
  r = SolveItml(d.x, PairwiseConstraints{}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("itml.prior is 3 x 3; must be 2 x 2"));
  o.prior = -Eigen::MatrixXd::Identity(2, 2);
  r = SolveItml(d.x, PairwiseConstraints{}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("not positive definite"));
  PairwiseConstraints bad;
  bad.pairs.push_back({0, 99, PairKind::kMustLink});
  r = SolveItml(d.x, bad, ItmlOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("out of range"));
  const Eigen::MatrixXd wide = Eigen::MatrixXd::Zero(2, kItmlMaxDimension + 1);
  r = SolveItml(wide, PairwiseConstraints{}, ItmlOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("O(d^2) per constraint projection"));
}

}  // namespace
}  // namespace kls
