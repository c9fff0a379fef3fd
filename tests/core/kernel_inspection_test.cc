// InspectKernel (core/serving/kernel_inspection.h) against a dense Eigen
// computation of K = V Vᵀ on small random factors, on both sides of the
// factor (r ≤ n: the r × r Gram VᵀV; r > n: the n × n V Vᵀ): eigenvalues
// equal K's, the coordinates give K's best rank-2 approximation (up to sign),
// the heat map is K's submatrix, sampling is deterministic for a seed, and
// items come sorted by label.
#include "core/serving/kernel_inspection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include <Eigen/Eigenvalues>

namespace kls {
namespace {

using ::testing::HasSubstr;

LearnedKernel::Embedding RandomFactor(int n, int r, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  LearnedKernel::Embedding v(n, r);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < r; ++j) v(i, j) = normal(rng) * (1.0 + j);  // distinct spectrum
  return v;
}

std::vector<int> RandomLabels(int n, int classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> labels(static_cast<size_t>(n));
  for (int& l : labels) l = static_cast<int>(rng() % static_cast<uint64_t>(classes));
  return labels;
}

// Checks eigenvalues, trace, coordinates and heat map against dense K.
void ExpectMatchesDense(const LearnedKernel::Embedding& v, const KernelInspection& got, int spectrum) {
  const Eigen::MatrixXd k = v * v.transpose();
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> dense(k);
  const Eigen::Index n = k.rows();
  const double tol = 1e-9 * k.norm();

  EXPECT_NEAR(got.trace, k.trace(), tol);
  const Eigen::Index expected_count = std::min<Eigen::Index>(spectrum, std::min(v.rows(), v.cols()));
  ASSERT_EQ(static_cast<Eigen::Index>(got.eigenvalues.size()), expected_count);
  for (Eigen::Index t = 0; t < expected_count; ++t) {
    EXPECT_NEAR(got.eigenvalues[static_cast<size_t>(t)], dense.eigenvalues()(n - 1 - t), tol) << "eigenvalue " << t;
    if (t > 0) {
      EXPECT_GE(got.eigenvalues[static_cast<size_t>(t - 1)], got.eigenvalues[static_cast<size_t>(t)]);
    }
  }

  // (x, y) over the sample reproduce K's best rank-2 approximation there.
  Eigen::MatrixXd rank2 = Eigen::MatrixXd::Zero(n, n);
  for (int t = 0; t < 2 && t < std::min(v.rows(), v.cols()); ++t) {
    const Eigen::VectorXd w = dense.eigenvectors().col(n - 1 - t);
    rank2 += dense.eigenvalues()(n - 1 - t) * w * w.transpose();
  }
  const size_t s = got.items.size();
  ASSERT_EQ(got.x.size(), s);
  ASSERT_EQ(got.y.size(), s);
  for (size_t a = 0; a < s; ++a) {
    for (size_t b = 0; b < s; ++b) {
      const double from_coordinates = got.x[a] * got.x[b] + got.y[a] * got.y[b];
      EXPECT_NEAR(from_coordinates, rank2(got.items[a], got.items[b]), tol) << a << ", " << b;
    }
  }
  // Each coordinate is ±√λ_k w_k (up to one sign per coordinate).
  for (int t = 0; t < 2 && t < std::min(v.rows(), v.cols()); ++t) {
    const Eigen::VectorXd w = dense.eigenvectors().col(n - 1 - t) * std::sqrt(dense.eigenvalues()(n - 1 - t));
    const std::vector<double>& c = t == 0 ? got.x : got.y;
    double plus = 0, minus = 0;
    for (size_t a = 0; a < s; ++a) {
      plus = std::max(plus, std::abs(c[a] - w(got.items[a])));
      minus = std::max(minus, std::abs(c[a] + w(got.items[a])));
    }
    EXPECT_LT(std::min(plus, minus), 1e-7 * std::sqrt(k.norm())) << "coordinate " << t;
  }

  const Eigen::Index m = static_cast<Eigen::Index>(got.heatmap_items.size());
  ASSERT_EQ(got.heatmap.rows(), m);
  ASSERT_EQ(got.heatmap.cols(), m);
  for (Eigen::Index a = 0; a < m; ++a)
    for (Eigen::Index b = 0; b < m; ++b)
      EXPECT_NEAR(got.heatmap(a, b), k(got.heatmap_items[static_cast<size_t>(a)],
                                         got.heatmap_items[static_cast<size_t>(b)]), tol);
}

TEST(KernelInspection, TallFactorMatchesTheDenseKernel) {
  const LearnedKernel::Embedding v = RandomFactor(60, 5, 1);
  InspectionOptions o;
  o.sample = 100;  // every item
  o.heatmap = 20;
  auto got = InspectKernel(v, {}, o);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->items.size(), 60u);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(got->items[static_cast<size_t>(i)], i);  // no labels: by index
  EXPECT_EQ(got->heatmap_items.size(), 20u);
  ExpectMatchesDense(v, *got, o.spectrum);
}

TEST(KernelInspection, WideFactorUsesTheRowGramAndMatchesTheDenseKernel) {
  const LearnedKernel::Embedding v = RandomFactor(12, 30, 2);  // r > n
  InspectionOptions o;
  o.spectrum = 5;
  auto got = InspectKernel(v, {}, o);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->items.size(), 12u);
  ASSERT_EQ(got->heatmap_items.size(), 12u);
  ExpectMatchesDense(v, *got, o.spectrum);
}

TEST(KernelInspection, SampledRowsMatchTheDenseKernel) {
  const LearnedKernel::Embedding v = RandomFactor(200, 6, 3);
  InspectionOptions o;
  o.sample = 50;
  o.heatmap = 10;
  o.spectrum = 3;
  auto got = InspectKernel(v, RandomLabels(200, 4, 9), o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->items.size(), 50u);
  EXPECT_EQ(std::set<int>(got->items.begin(), got->items.end()).size(), 50u);  // distinct
  EXPECT_EQ(got->heatmap_items.size(), 10u);
  const std::set<int> sampled(got->items.begin(), got->items.end());
  for (int i : got->heatmap_items) EXPECT_TRUE(sampled.count(i)) << i << " is not in the scatter sample";
  ExpectMatchesDense(v, *got, o.spectrum);
}

TEST(KernelInspection, RankOneHasZeroSecondCoordinate) {
  const LearnedKernel::Embedding v = RandomFactor(20, 1, 4);
  auto got = InspectKernel(v, {}, InspectionOptions());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->eigenvalues.size(), 1u);
  for (double y : got->y) EXPECT_EQ(y, 0.0);
  ExpectMatchesDense(v, *got, 64);
}

TEST(KernelInspection, SamplingIsDeterministicForASeed) {
  const LearnedKernel::Embedding v = RandomFactor(500, 4, 5);
  const std::vector<int> labels = RandomLabels(500, 3, 6);
  InspectionOptions o;
  o.sample = 40;
  o.heatmap = 8;
  o.seed = 17;
  auto a = InspectKernel(v, labels, o);
  auto b = InspectKernel(v, labels, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->items, b->items);
  EXPECT_EQ(a->heatmap_items, b->heatmap_items);
  EXPECT_EQ(a->x, b->x);
  EXPECT_EQ(a->y, b->y);
  o.seed = 18;
  auto c = InspectKernel(v, labels, o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->items, c->items);
  EXPECT_EQ(SampleIndices(500, 40, 17), SampleIndices(500, 40, 17));
  EXPECT_NE(SampleIndices(500, 40, 17), SampleIndices(500, 40, 18));
}

TEST(KernelInspection, SampleIsUniformEnough) {
  // Every index appears in about k/n of the samples.
  constexpr int n = 50, k = 10, trials = 4000;
  std::vector<int> hits(n, 0);
  for (int t = 1; t <= trials; ++t)
    for (int i : SampleIndices(n, k, static_cast<uint64_t>(t))) ++hits[static_cast<size_t>(i)];
  for (int i = 0; i < n; ++i) EXPECT_NEAR(hits[static_cast<size_t>(i)], trials * k / n, 120) << i;
}

TEST(KernelInspection, ItemsAreSortedByLabelThenIndex) {
  const LearnedKernel::Embedding v = RandomFactor(300, 3, 7);
  const std::vector<int> labels = RandomLabels(300, 5, 8);
  InspectionOptions o;
  o.sample = 60;
  o.heatmap = 25;
  auto got = InspectKernel(v, labels, o);
  ASSERT_TRUE(got.ok()) << got.status();
  auto sorted = [&](const std::vector<int>& items) {
    for (size_t t = 1; t < items.size(); ++t) {
      const int a = items[t - 1], b = items[t];
      const int la = labels[static_cast<size_t>(a)], lb = labels[static_cast<size_t>(b)];
      if (la > lb || (la == lb && a >= b)) return false;
    }
    return true;
  };
  EXPECT_TRUE(sorted(got->items));
  EXPECT_TRUE(sorted(got->heatmap_items));
  ExpectMatchesDense(v, *got, o.spectrum);
}

TEST(KernelInspection, BadInputsNameTheOption) {
  const LearnedKernel::Embedding v = RandomFactor(10, 2, 9);
  InspectionOptions o;
  o.sample = 0;
  EXPECT_THAT(InspectKernel(v, {}, o).status().message(), HasSubstr("sample = 0"));
  o = InspectionOptions();
  o.heatmap = -1;
  EXPECT_THAT(InspectKernel(v, {}, o).status().message(), HasSubstr("heatmap = -1"));
  o = InspectionOptions();
  o.spectrum = -2;
  EXPECT_THAT(InspectKernel(v, {}, o).status().message(), HasSubstr("spectrum = -2"));
  EXPECT_THAT(InspectKernel(v, {1, 2}, InspectionOptions()).status().message(), HasSubstr("labels has 2 entries"));
  o = InspectionOptions();
  o.spectrum = 0;
  auto none = InspectKernel(v, {}, o);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->eigenvalues.empty());
}

TEST(KernelInspection, StopsOnCancellation) {
  const LearnedKernel::Embedding v = RandomFactor(50, 3, 10);
  SolveControl control;
  control.cancel.Cancel();
  EXPECT_EQ(InspectKernel(v, {}, InspectionOptions(), control).status().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace kls
