// Graphs: exact k-NN and the normalized Laplacian against brute-force references.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <random>

#include "core/graph/knn.h"
#include "core/graph/laplacian.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

Eigen::MatrixXd RandomPoints(int n, int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd x(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x(i, j) = g(rng);
  return x;
}

// O(n² d) reference: full distance rows, sorted by (distance, index).
std::vector<std::vector<std::pair<double, int>>> BruteKnn(const Eigen::MatrixXd& x, int k) {
  const int n = static_cast<int>(x.rows());
  std::vector<std::vector<std::pair<double, int>>> out(n);
  for (int i = 0; i < n; ++i) {
    std::vector<std::pair<double, int>> all;
    for (int j = 0; j < n; ++j)
      if (j != i) all.emplace_back((x.row(i) - x.row(j)).norm(), j);
    std::sort(all.begin(), all.end());
    all.resize(k);
    out[i] = all;
  }
  return out;
}

TEST(Knn, EqualsBruteForceAcrossBlockSizesAndThreads) {
  const Eigen::MatrixXd x = RandomPoints(301, 7, 1);
  const auto ref = BruteKnn(x, 6);
  for (int threads : {1, 2, 3}) {
    for (int qb : {1, 17, 256}) {
      KnnOptions o;
      o.k = 6;
      o.num_threads = threads;
      o.query_block = qb;
      o.reference_block = 50;
      auto g = ExactKnn(x, o);
      ASSERT_TRUE(g.ok()) << g.status();
      for (int i = 0; i < 301; ++i) {
        for (int t = 0; t < 6; ++t) {
          ASSERT_EQ(g->neighbor(i, t), ref[i][t].second) << "i=" << i << " t=" << t;
          ASSERT_NEAR(g->distance(i, t), ref[i][t].first, 1e-12);
        }
      }
    }
  }
}

TEST(Knn, BadInput) {
  const Eigen::MatrixXd x = RandomPoints(5, 2, 2);
  KnnOptions o;
  o.k = 5;
  auto g = ExactKnn(x, o);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("k = 5 must be less than n = 5"));
  o.k = 0;
  EXPECT_THAT(ExactKnn(x, o).status().message(), HasSubstr("k = 0"));
  o.k = 2;
  EXPECT_THAT(ExactKnn(Eigen::MatrixXd(0, 3), o).status().message(), HasSubstr("empty"));
  Eigen::MatrixXd bad = x;
  bad(1, 1) = std::numeric_limits<double>::infinity();
  EXPECT_THAT(ExactKnn(bad, o).status().message(), HasSubstr("NaN or Inf"));
}

// Dense reference for Δ = (1+δ)I − D^{-1/2} S D^{-1/2} with a symmetrized k-NN S.
Eigen::MatrixXd DenseReferenceLaplacian(const Eigen::MatrixXd& x, int k, bool gaussian, double sigma,
                                        double delta) {
  const int n = static_cast<int>(x.rows());
  const auto ref = BruteKnn(x, k);
  Eigen::MatrixXd s = Eigen::MatrixXd::Zero(n, n);
  for (int i = 0; i < n; ++i) {
    for (auto [d, j] : ref[i]) {
      const double w = gaussian ? std::exp(-d * d / (2 * sigma * sigma)) : 1.0;
      s(i, j) = s(j, i) = w;
    }
  }
  Eigen::VectorXd deg = s.rowwise().sum();
  Eigen::MatrixXd lap = (1 + delta) * Eigen::MatrixXd::Identity(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (s(i, j) != 0) lap(i, j) -= s(i, j) / std::sqrt(deg[i] * deg[j]);
  return lap;
}

TEST(Laplacian, BinaryGraphEqualsDenseReference) {
  const Eigen::MatrixXd x = RandomPoints(120, 4, 3);
  GraphOptions o;
  o.k = 5;
  o.delta = 0.25;
  auto g = BuildGraph(x, o);
  ASSERT_TRUE(g.ok()) << g.status();
  const Eigen::MatrixXd ref = DenseReferenceLaplacian(x, 5, false, 0, 0.25);
  EXPECT_LT((Eigen::MatrixXd(g->laplacian) - ref).cwiseAbs().maxCoeff(), 1e-14);
}

TEST(Laplacian, GaussianGraphWithAutomaticSigma) {
  const Eigen::MatrixXd x = RandomPoints(150, 3, 4);
  GraphOptions o;
  o.k = 5;
  o.weight = EdgeWeight::kGaussian;
  auto g = BuildGraph(x, o);
  ASSERT_TRUE(g.ok()) << g.status();
  // σ = half the mean over points of the mean distance to the 10 nearest neighbours.
  const auto ref10 = BruteKnn(x, 10);
  double total = 0;
  for (auto& row : ref10) {
    double s = 0;
    for (auto& [d, j] : row) s += d;
    total += s / 10;
  }
  const double sigma = 0.5 * total / 150;
  EXPECT_NEAR(g->sigma, sigma, 1e-12);
  const Eigen::MatrixXd ref = DenseReferenceLaplacian(x, 5, true, sigma, 0.0);
  EXPECT_LT((Eigen::MatrixXd(g->laplacian) - ref).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(Laplacian, SymmetricPsdWithSpectrumInZeroToTwo) {
  const Eigen::MatrixXd x = RandomPoints(80, 2, 5);
  GraphOptions o;
  o.k = 4;
  auto g = BuildGraph(x, o);
  ASSERT_TRUE(g.ok());
  const Eigen::MatrixXd lap(g->laplacian);
  EXPECT_LT((lap - lap.transpose()).cwiseAbs().maxCoeff(), 1e-15);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(lap);
  EXPECT_GT(eig.eigenvalues().minCoeff(), -1e-10);
  EXPECT_LT(eig.eigenvalues().maxCoeff(), 2.0 + 1e-10);
  // D^{1/2} 1 is in the null space of the δ = 0 normalized Laplacian.
  Eigen::VectorXd sqrt_deg = Eigen::MatrixXd(g->adjacency).rowwise().sum().cwiseSqrt();
  EXPECT_LT((lap * sqrt_deg).norm(), 1e-10);
}

TEST(Laplacian, IsolatedPointKeepsIdentityRow) {
  Eigen::SparseMatrix<double> s(3, 3);
  s.insert(0, 1) = 1;
  s.insert(1, 0) = 1;
  const Eigen::MatrixXd lap(NormalizedLaplacian(s, 0.5));
  Eigen::MatrixXd expected(3, 3);
  expected << 1.5, -1, 0, -1, 1.5, 0, 0, 0, 1.5;
  EXPECT_EQ(lap, expected);
}

TEST(Laplacian, OptionErrorsNameTheField) {
  const Eigen::MatrixXd x = RandomPoints(10, 2, 6);
  GraphOptions o;
  o.k = 10;
  EXPECT_THAT(BuildGraph(x, o).status().message(), HasSubstr("graph.k = 10"));
  o.k = 3;
  o.delta = -1;
  EXPECT_THAT(BuildGraph(x, o).status().message(), HasSubstr("graph.delta = -1"));
  EXPECT_THAT(BuildGraph(RandomPoints(1, 2, 1), GraphOptions{}).status().message(), HasSubstr("at least 2 points"));
}

}  // namespace
}  // namespace kls
