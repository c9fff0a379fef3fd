// The warm-started block eigensolver (core/npkl/block_spectrum.h) against a
// dense eigendecomposition of the same A = Σ w_k S_k − L: positive Ritz
// values equal the positive eigenvalues, A₊ agrees, residuals meet the
// tolerance, a one-column start grows its block, and bad input is named.
#include "core/npkl/block_spectrum.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
#include <random>

#include "core/graph/laplacian.h"
#include "tests/test_util/random_graph.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

struct Case {
  Eigen::SparseMatrix<double> lap;
  std::vector<int> row, col;
  Eigen::VectorXd w;
};

Case MakeCase(int n, int m, uint64_t seed) {
  std::mt19937_64 rng(seed + 1000);
  std::normal_distribution<double> g;
  GraphOptions options;
  options.k = 6;
  Case c;
  c.lap = test_util::RandomKnnLaplacian(n, 3, seed, options);
  std::uniform_int_distribution<int> pick(0, n - 1);
  c.w.resize(m);
  for (int k = 0; k < m; ++k) {
    c.row.push_back(pick(rng));
    c.col.push_back(k % 7 == 0 ? c.row.back() : pick(rng));
    c.w[k] = (k % 3 == 0 ? -1.0 : 1.0) * (0.5 + std::abs(g(rng)));
  }
  return c;
}

TEST(BlockSpectrum, MatchesTheDensePositivePart) {
  const int n = 240;
  Case c = MakeCase(n, 300, 5);
  DualMatrix a(c.lap, c.row, c.col);
  a.set_weights(c.w);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(a.ToDense());
  const Eigen::VectorXd& lambda = eig.eigenvalues();
  int npos = 0;
  for (int i = 0; i < n; ++i) npos += lambda[i] > 0.0;
  ASSERT_GT(npos, 3);
  ASSERT_LT(npos + 8, n / 2);
  Eigen::MatrixXd dense_plus = Eigen::MatrixXd::Zero(n, n);
  for (int i = 0; i < n; ++i)
    if (lambda[i] > 0.0) dense_plus += lambda[i] * eig.eigenvectors().col(i) * eig.eigenvectors().col(i).transpose();

  // Warm start: the dense eigenvectors of a perturbed matrix (weights × 1.1).
  DualMatrix a2(c.lap, c.row, c.col);
  a2.set_weights(1.1 * c.w);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig2(a2.ToDense());
  const Eigen::MatrixXd start = eig2.eigenvectors().rightCols(npos + 4);
  const BlockedLaplacian blocked(c.lap, 37);  // several blocks
  for (const Eigen::MatrixXd& s : {start, Eigen::MatrixXd(Eigen::MatrixXd::Ones(n, 1))}) {
    BlockSpectrumOptions o;
    o.tolerance = 1e-9;
    o.max_iterations = 2000;
    auto r = BlockPositiveSpectrum(a, blocked, s, o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->converged) << "start with " << s.cols() << " columns, " << r->iterations << " iterations";
    ASSERT_EQ(r->spectrum.rank(), npos) << s.cols();
    for (int j = 0; j < npos; ++j) EXPECT_NEAR(r->spectrum.eigenvalues[j], lambda[n - 1 - j], 1e-8) << j;
    EXPECT_LT((r->spectrum.Dense() - dense_plus).norm(), 1e-6 * dense_plus.norm()) << s.cols();
    // Residual of every returned positive pair, recomputed here.
    const Eigen::MatrixXd av = a.Multiply(r->spectrum.eigenvectors);
    const double bound = o.tolerance * std::max(1.0, r->ritz_values[0]);
    for (int j = 0; j < npos; ++j) {
      EXPECT_LE((av.col(j) - r->spectrum.eigenvalues[j] * r->spectrum.eigenvectors.col(j)).norm(), 1.5 * bound);
    }
    EXPECT_GE(r->block.cols() - npos, o.guard_min) << "guards below zero";
  }
}

TEST(BlockSpectrum, BadInputIsNamed) {
  Case c = MakeCase(40, 20, 2);
  DualMatrix a(c.lap, c.row, c.col);
  const BlockedLaplacian blocked(c.lap, 40);
  BlockSpectrumOptions o;
  o.tolerance = -1.0;
  auto r = BlockPositiveSpectrum(a, blocked, Eigen::MatrixXd::Ones(40, 2), o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("tolerance = -1"));
  o = {};
  r = BlockPositiveSpectrum(a, blocked, Eigen::MatrixXd::Ones(39, 2), o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("start: is 39 × 2"));
  r = BlockPositiveSpectrum(a, blocked, Eigen::MatrixXd::Ones(40, 30), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);  // 30 columns > n / 2
}

}  // namespace
}  // namespace kls
