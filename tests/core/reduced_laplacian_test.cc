// The reduced Laplacian of BCDNPKL's Prop. 1 in its two representations:
// both must equal Δ̃ = Δ_LL − Δ_LU Δ_UU⁻¹ Δ_UL computed densely here, and the
// factored sweep protocol (blocks, carried Z = V Bᵀ, in-block corrections)
// must give exactly the Gauss–Seidel column products V Δ̃_{:,i} with every
// earlier column already updated.
#include "core/npkl/reduced_laplacian.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <random>
#include <vector>

#include "core/graph/laplacian.h"
#include "tests/test_util/random_graph.h"

namespace kls {
namespace {

struct Fixture {
  Eigen::SparseMatrix<double> lap;
  std::vector<int> local;
  Eigen::MatrixXd reduced;  // dense reference Δ̃
  std::vector<int> boundary, interior;
};

// A k-NN Laplacian on random points; every point with index % 5 != 0 (so
// l = 0.8 n) is on the boundary, shuffled so L and U interleave.
Fixture MakeFixture(int n, uint64_t seed) {
  GraphOptions options;
  options.k = 6;
  options.delta = 0.5;
  Fixture f;
  f.lap = test_util::RandomKnnLaplacian(n, 3, seed, options);
  f.local.assign(n, -1);
  int l = 0;
  for (int i = 0; i < n; ++i) {
    if ((i * 7 + 3) % 5 != 0) {
      f.local[i] = l++;
      f.boundary.push_back(i);
    } else {
      f.interior.push_back(i);
    }
  }
  const Eigen::MatrixXd dense(f.lap);
  auto pick = [&](const std::vector<int>& rows, const std::vector<int>& cols) {
    Eigen::MatrixXd m(rows.size(), cols.size());
    for (size_t a = 0; a < rows.size(); ++a)
      for (size_t b = 0; b < cols.size(); ++b) m(a, b) = dense(rows[a], cols[b]);
    return m;
  };
  const Eigen::MatrixXd ll = pick(f.boundary, f.boundary), lu = pick(f.boundary, f.interior),
                        uu = pick(f.interior, f.interior);
  f.reduced = ll - lu * uu.ldlt().solve(lu.transpose());
  return f;
}

class ReducedLaplacianTest : public ::testing::TestWithParam<ReducedLaplacian::Representation> {};

TEST_P(ReducedLaplacianTest, MatchesDenseSchurComplement) {
  const Fixture f = MakeFixture(300, 7);
  auto red = ReducedLaplacian::Build(f.lap, f.local, GetParam());
  ASSERT_TRUE(red.ok()) << red.status();
  ASSERT_EQ(red->l(), static_cast<int>(f.boundary.size()));
  EXPECT_EQ(red->factored(), GetParam() == ReducedLaplacian::Representation::kFactored);
  const double scale = f.reduced.norm();
  for (int i = 0; i < red->l(); ++i) EXPECT_NEAR(red->Diagonal(i), f.reduced(i, i), 1e-12 * scale);

  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  const int r = 5;
  Eigen::MatrixXd v(r, red->l());
  for (int i = 0; i < v.size(); ++i) v.data()[i] = g(rng);
  Eigen::MatrixXd applied;
  red->Apply(v, &applied);
  EXPECT_LE((applied - v * f.reduced).norm(), 1e-11 * scale * v.norm());
  EXPECT_NEAR(red->Quadratic(v), (v * f.reduced * v.transpose()).trace(), 1e-10 * scale * v.squaredNorm());
  EXPECT_NEAR(red->FrobeniusNorm(), scale, 1e-10 * scale);
  // The certificate's single-vector operator (sparse solves when factored).
  const Eigen::VectorXd x = v.row(0).transpose();
  Eigen::VectorXd y(red->l());
  red->ApplyVector(x.data(), y.data());
  EXPECT_LE((y - f.reduced * x).norm(), 1e-11 * scale * x.norm());

  // Harmonic extension −Δ_UU⁻¹ Δ_UL Vᵀ against the dense solve.
  const Eigen::MatrixXd dense(f.lap);
  Eigen::MatrixXd uu(f.interior.size(), f.interior.size()), ul(f.interior.size(), f.boundary.size());
  for (size_t a = 0; a < f.interior.size(); ++a) {
    for (size_t b = 0; b < f.interior.size(); ++b) uu(a, b) = dense(f.interior[a], f.interior[b]);
    for (size_t b = 0; b < f.boundary.size(); ++b) ul(a, b) = dense(f.interior[a], f.boundary[b]);
  }
  const Eigen::MatrixXd expected = -uu.ldlt().solve(ul * v.transpose());
  EXPECT_LE((red->ExtendInterior(v) - expected).norm(), 1e-10 * expected.norm());
}

// Two Gauss–Seidel-style sweeps with arbitrary column changes: every product
// must equal V Δ̃_{:,i} for the V of that moment (predecessors updated).
TEST_P(ReducedLaplacianTest, SweepProtocolSeesEveryEarlierUpdate) {
  const Fixture f = MakeFixture(400, 11);
  auto red = ReducedLaplacian::Build(f.lap, f.local, GetParam());
  ASSERT_TRUE(red.ok()) << red.status();
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g;
  const int r = 4, l = red->l();
  Eigen::MatrixXd v(r, l);
  for (int i = 0; i < v.size(); ++i) v.data()[i] = g(rng);
  Eigen::VectorXd product, delta(r);
  double worst = 0.0;
  for (int sweep = 0; sweep < 2; ++sweep) {
    red->BeginSweep(v, /*resync=*/sweep == 0);
    for (int first = 0; first < l; first += ReducedLaplacian::kBlock) {
      const int width = std::min(ReducedLaplacian::kBlock, l - first);
      red->BeginBlock(first, width);
      for (int i = first; i < first + width; ++i) {
        red->ColumnProduct(v, i, &product);
        worst = std::max(worst, (product - v * f.reduced.col(i)).norm() / (v.norm() * f.reduced.norm()));
        for (int k = 0; k < r; ++k) delta[k] = g(rng);
        v.col(i) += delta;
        red->ColumnChanged(i, delta);
      }
      red->EndBlock();
    }
    EXPECT_NEAR(red->QuadraticAfterSweep(v), (v * f.reduced * v.transpose()).trace(),
                1e-10 * f.reduced.norm() * v.squaredNorm());
  }
  EXPECT_LE(worst, 1e-13);
}

INSTANTIATE_TEST_SUITE_P(Representations, ReducedLaplacianTest,
                         ::testing::Values(ReducedLaplacian::Representation::kDense,
                                           ReducedLaplacian::Representation::kFactored));

TEST(ReducedLaplacian, AutoChoosesFactoredWhenFewInteriorPoints) {
  const Fixture f = MakeFixture(200, 1);  // u = 0.2 n < l / 2
  auto red = ReducedLaplacian::Build(f.lap, f.local);
  ASSERT_TRUE(red.ok()) << red.status();
  EXPECT_TRUE(red->factored());
}

TEST(ReducedLaplacian, SingularInteriorBlockIsAnErrorNamingTheFix) {
  Fixture f = MakeFixture(100, 2);
  // δ = 0 and an interior component without boundary points: make Δ_UU
  // singular by zeroing the rows/columns of one interior point.
  const int g = f.interior.front();
  for (int col = 0; col < f.lap.outerSize(); ++col) {
    for (Eigen::SparseMatrix<double>::InnerIterator it(f.lap, col); it; ++it) {
      if (it.row() == g || it.col() == g) it.valueRef() = 0.0;
    }
  }
  auto red = ReducedLaplacian::Build(f.lap, f.local);
  ASSERT_FALSE(red.ok());
  EXPECT_EQ(red.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(red.status().message().find("delta > 0"), std::string::npos) << red.status();
}

}  // namespace
}  // namespace kls
