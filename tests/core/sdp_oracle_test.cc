// The CSDP oracle itself, on SDPs with known optima.
#include "tests/test_util/sdp_oracle.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>

namespace kls::test_util {
namespace {

TEST(SdpOracle, MaxEigenvalueAsSdp) {
  if (!CsdpAvailable()) GTEST_SKIP() << "csdp not installed";
  // max tr(C X) s.t. tr(X) = 1, X ⪰ 0  has optimum λ_max(C).
  Eigen::MatrixXd c(3, 3);
  c << 2, 1, 0, 1, 3, 1, 0, 1, 4;
  SdpOracle sdp;
  const int b = sdp.AddBlock(3);
  const int k = sdp.AddConstraint(1.0);
  for (int i = 0; i < 3; ++i) {
    sdp.AddCoefficient(k, b, i, i, 1.0);
    for (int j = i; j < 3; ++j) sdp.AddObjective(b, i, j, c(i, j));
  }
  auto sol = sdp.Solve();
  ASSERT_TRUE(sol.ok()) << sol.status();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(c);
  EXPECT_NEAR(sol->primal_objective, eig.eigenvalues().maxCoeff(), 1e-6);
  EXPECT_NEAR(sol->y[0], eig.eigenvalues().maxCoeff(), 1e-6);
  EXPECT_NEAR(sol->blocks[b].trace(), 1.0, 1e-7);
}

TEST(SdpOracle, LinearProgramInDiagonalBlock) {
  if (!CsdpAvailable()) GTEST_SKIP() << "csdp not installed";
  // max x1 + 2 x2 s.t. x1 + x2 + s = 4 (s slack), x >= 0  →  x2 = 4, optimum 8.
  SdpOracle sdp;
  const int b = sdp.AddDiagonalBlock(3);
  const int k = sdp.AddConstraint(4.0);
  for (int i = 0; i < 3; ++i) sdp.AddCoefficient(k, b, i, i, 1.0);
  sdp.AddObjective(b, 0, 0, 1.0);
  sdp.AddObjective(b, 1, 1, 2.0);
  auto sol = sdp.Solve();
  ASSERT_TRUE(sol.ok()) << sol.status();
  EXPECT_NEAR(sol->primal_objective, 8.0, 1e-6);
  EXPECT_NEAR(sol->blocks[b](1, 0), 4.0, 1e-6);
}

}  // namespace
}  // namespace kls::test_util
