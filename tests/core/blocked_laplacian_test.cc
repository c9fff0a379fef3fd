// The cache-blocked Y·L of core/npkl/blocked_laplacian.h: for every block
// size and thread count it must equal the plain product Y·L to the last bit
// (the blocks only regroup the same additions in the same order), and it
// must agree with Eigen's dense × sparse product to rounding.
#include "core/npkl/blocked_laplacian.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <random>

#include "core/graph/laplacian.h"
#include "tests/test_util/random_graph.h"

namespace kls {
namespace {

Eigen::SparseMatrix<double> RandomKnnLaplacian(int n, uint64_t seed) {
  GraphOptions options;
  options.k = 7;
  options.weight = EdgeWeight::kGaussian;
  return test_util::RandomKnnLaplacian(n, 4, seed, options);
}

// The unblocked loop, written independently: column i accumulates
// L_si y_s over the non-zeros of column i in CSC order.
Eigen::MatrixXd PlainProduct(const Eigen::MatrixXd& y, const Eigen::SparseMatrix<double>& l) {
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(y.rows(), l.cols());
  for (int i = 0; i < l.outerSize(); ++i)
    for (Eigen::SparseMatrix<double>::InnerIterator it(l, i); it; ++it) out.col(i) += it.value() * y.col(it.row());
  return out;
}

TEST(BlockedLaplacian, BitwiseEqualToTheUnblockedProductForEveryBlockSize) {
  const int n = 503, r = 9;
  const Eigen::SparseMatrix<double> l = RandomKnnLaplacian(n, 11);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  Eigen::MatrixXd y(r, n);
  for (int i = 0; i < y.size(); ++i) y(i) = g(rng);
  const Eigen::MatrixXd plain = PlainProduct(y, l);
  const Eigen::MatrixXd eigen = y * l;
  EXPECT_LT((plain - eigen).norm(), 1e-12 * eigen.norm());
  for (int block : {1, 7, 64, 256, 502, 503, 10000}) {
    const BlockedLaplacian blocked(l, block);
    EXPECT_EQ(blocked.num_blocks(), (n + block - 1) / block) << block;
    for (int threads : {1, 2, 3}) {
      Eigen::MatrixXd out;
      blocked.Apply(y, threads, &out);
      ASSERT_EQ(out.rows(), r);
      ASSERT_EQ(out.cols(), n);
      EXPECT_TRUE((out.array() == plain.array()).all()) << "block " << block << " threads " << threads;
    }
  }
}

TEST(BlockedLaplacian, CacheBlockColumnsKeepsSmallFactorsInOneBlock) {
  EXPECT_EQ(BlockedLaplacian::CacheBlockColumns(62, 2000), 2000);  // 1 MB: one block
  // 62 × 32,000 doubles = 15.9 MB: blocks of 2 MiB / (8 · 62) = 4,228 columns.
  EXPECT_EQ(BlockedLaplacian::CacheBlockColumns(62, 32000), 4228);
  // Beyond 16 blocks of 2 MiB the blocks grow: 2000 × 32,000 doubles = 512 MB
  // in 16 blocks of 32 MB = 2,000 columns; 32 × 1,000,000 (256 MB) in blocks
  // of 16 MB = 62,500 columns.
  EXPECT_EQ(BlockedLaplacian::CacheBlockColumns(2000, 32000), 2000);
  EXPECT_EQ(BlockedLaplacian::CacheBlockColumns(32, 1000000), 62500);
  EXPECT_EQ(BlockedLaplacian::CacheBlockColumns(100000, 1000), 256);  // floor
}

}  // namespace
}  // namespace kls
