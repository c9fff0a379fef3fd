// The interior-point QSDP solver (qsdp_ipm.h) and the face/subspace driver
// (qsdp_subspace.h) on RegPCP / RegMVU (SQLP paper eq. (11)–(14)): KKT
// conditions of (13)–(14) (Y ⪰ 0, ∇f(Y) ⪰ 0, ⟨∇f(Y), Y⟩ = 0), the certified
// duality gap, agreement of the dense and low-rank Newton systems, of the
// face method with the full IPM, of the first-order solver (qsdp_solver.h),
// and of CSDP on the paper's Schur-complement SDP (15)–(16).
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
#include <cmath>
#include <random>

#include "core/data/csv_reader.h"
#include "core/data/synthetic.h"
#include "core/qsdp/qsdp_ipm.h"
#include "core/qsdp/qsdp_solver.h"
#include "core/qsdp/qsdp_subspace.h"
#include "core/qsdp/reg_problems.h"
#include "core/qsdp/schur_sdp.h"
#include "tests/test_util/sdp_oracle.h"

namespace kls {
namespace {

QsdpProblem RegMvu(int n, int m, uint64_t seed) {
  auto roll = MakeSwissRoll(n, 0.0, seed);
  EXPECT_TRUE(roll.ok());
  RegMvuOptions o;
  o.m = m;
  auto built = BuildRegMvu(roll->data.features, o);
  EXPECT_TRUE(built.ok()) << built.status();
  return built->problem;
}

QsdpProblem RegPcpIris(int m) {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  auto cons = GeneratePerClassConstraints(data->labels, 5, 5, 7);
  EXPECT_TRUE(cons.ok());
  RegPcpOptions o;
  o.m = m;
  auto built = BuildRegPcp(data->features, *cons, o);
  EXPECT_TRUE(built.ok()) << built.status();
  return built->problem;
}

// KKT of min f(Y) s.t. Y ⪰ 0 at the returned Y, independent of the solver's
// own bookkeeping: Y ⪰ 0, ∇f(Y) ⪰ 0 and ⟨∇f(Y), Y⟩ = 0 up to the tolerance
// (relative to the objective's scale).
void ExpectKkt(const QsdpProblem& p, const Eigen::MatrixXd& y, double objective) {
  const double scale = std::max(1.0, std::abs(objective));
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> ey(y, Eigen::EigenvaluesOnly);
  EXPECT_GE(ey.eigenvalues()[0], -1e-12 * (1 + ey.eigenvalues().maxCoeff()));
  const Eigen::MatrixXd g = p.Gradient(y);
  EXPECT_LT(std::abs(g.cwiseProduct(y).sum()), 1e-7 * scale);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eg(0.5 * (g + g.transpose()), Eigen::EigenvaluesOnly);
  // Directional condition: f(Y + εvvᵀ) cannot decrease faster than the gap allows.
  EXPECT_GE(eg.eigenvalues()[0] * ey.eigenvalues().maxCoeff(), -1e-6 * scale);
}

double CsdpObjective(const QsdpProblem& p) {
  test_util::SdpOracle oracle;
  BuildSchurComplementSdp(p, &oracle);
  auto sol = oracle.Solve();
  EXPECT_TRUE(sol.ok()) << sol.status();
  if (!sol.ok()) return NAN;
  return p.Objective(SchurSdpSolutionY(sol->y, p.dim()));
}

TEST(SvecTest, IsAnIsometryAndSmatInvertsIt) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  Eigen::MatrixXd a(5, 5), b(5, 5);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) a(i, j) = g(rng), b(i, j) = g(rng);
  a = (0.5 * (a + a.transpose())).eval();
  b = (0.5 * (b + b.transpose())).eval();
  EXPECT_EQ(Svec(a).size(), 15);
  EXPECT_NEAR(Svec(a).dot(Svec(b)), a.cwiseProduct(b).sum(), 1e-12);
  EXPECT_LT((Smat(Svec(a), 5) - a).norm(), 1e-14);
}

TEST(QsdpIpmTest, DenseAndLowRankNewtonSystemsReachTheSameCertifiedOptimum) {
  for (int which = 0; which < 2; ++which) {
    const QsdpProblem p = which == 0 ? RegMvu(200, 7, 11) : RegPcpIris(8);
    SCOPED_TRACE(which == 0 ? "RegMVU" : "RegPCP");
    QsdpIpmOptions dense, low;
    dense.newton_system = QsdpNewtonSystem::kDense;
    low.newton_system = QsdpNewtonSystem::kLowRank;
    auto a = SolveQsdpInteriorPoint(p, dense);
    auto b = SolveQsdpInteriorPoint(p, low);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_FALSE(a->low_rank_newton);
    EXPECT_TRUE(b->low_rank_newton);
    for (const QsdpIpmResult* r : {&*a, &*b}) {
      EXPECT_EQ(r->stats.termination, Termination::kConverged);
      EXPECT_LE(r->stats.certificate.gap, 1e-8);
      EXPECT_LE(r->stats.certificate.lower_bound, r->objective);
      EXPECT_LT(r->stats.iterations, 40);  // second-order: tens of iterations, not thousands
      ExpectKkt(p, r->y, r->objective);
    }
    EXPECT_NEAR(a->objective, b->objective, 2e-8 * std::max(1.0, std::abs(a->objective)));
  }
}

TEST(QsdpIpmTest, MatchesCsdpOnTheSchurComplementSdp) {
  if (!test_util::CsdpAvailable()) GTEST_SKIP() << "csdp not installed";
  for (int which = 0; which < 2; ++which) {
    const QsdpProblem p = which == 0 ? RegMvu(200, 6, 5) : RegPcpIris(6);
    SCOPED_TRACE(which == 0 ? "RegMVU" : "RegPCP");
    auto r = SolveQsdpInteriorPoint(p);
    ASSERT_TRUE(r.ok()) << r.status();
    const double csdp = CsdpObjective(p);
    const double scale = std::max(1.0, std::abs(csdp));
    EXPECT_NEAR(r->objective, csdp, 1e-6 * scale);
    EXPECT_GE(csdp, r->stats.certificate.lower_bound - 1e-9 * scale);  // the certificate bounds every PSD Y
  }
}

TEST(QsdpIpmTest, AgreesWithTheFirstOrderSolver) {
  const QsdpProblem p = RegPcpIris(5);
  auto ipm = SolveQsdpInteriorPoint(p);
  auto fista = SolveQsdp(p);
  ASSERT_TRUE(ipm.ok() && fista.ok());
  EXPECT_EQ(fista->stats.termination, Termination::kConverged);
  EXPECT_NEAR(ipm->objective, fista->objective, 2e-8 * std::max(1.0, std::abs(ipm->objective)));
}

TEST(QsdpSubspaceTest, FaceRoundsReachTheFullProblemsOptimum) {
  // Force the face method on a small problem (full_system_size below n_s and K).
  for (int which = 0; which < 2; ++which) {
    const QsdpProblem p = which == 0 ? RegMvu(300, 14, 4) : RegPcpIris(12);
    SCOPED_TRACE(which == 0 ? "RegMVU" : "RegPCP");
    QsdpSubspaceOptions o;
    o.full_system_size = 10;
    o.initial_dimension = 5;
    o.margin = 3;
    o.growth = 1.0;
    auto faces = SolveQsdpSubspace(p, o);
    ASSERT_TRUE(faces.ok()) << faces.status();
    EXPECT_EQ(faces->stats.termination, Termination::kConverged);
    EXPECT_LE(faces->stats.certificate.gap, 1e-8);
    EXPECT_GE(faces->rounds.size(), 2u);
    ExpectKkt(p, faces->y, faces->objective);
    auto full = SolveQsdpInteriorPoint(p);
    ASSERT_TRUE(full.ok());
    EXPECT_NEAR(faces->objective, full->objective, 2e-8 * std::max(1.0, std::abs(full->objective)));
    // Rounds never increase f (range(Y) is kept in the next face).
    for (size_t i = 1; i < faces->stats.objective_history.size(); ++i) {
      EXPECT_LE(faces->stats.objective_history[i],
                faces->stats.objective_history[i - 1] + 1e-9 * std::max(1.0, std::abs(full->objective)));
    }
  }
}

TEST(QsdpSubspaceTest, SmallProblemsUseOneFullIpmSolve) {
  const QsdpProblem p = RegMvu(200, 6, 2);
  auto r = SolveQsdpSubspace(p);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rounds.size(), 1u);
  EXPECT_EQ(r->rounds[0].dimension, 6);
  EXPECT_LE(r->stats.certificate.gap, 1e-8);
}

TEST(QsdpSubspaceTest, ValidatesOptionsAndHonoursCancellation) {
  const QsdpProblem p = RegMvu(200, 6, 2);
  QsdpSubspaceOptions bad;
  bad.margin = 0;
  auto r = SolveQsdpSubspace(p, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("margin = 0"), std::string::npos) << r.status();
  QsdpSubspaceOptions bad_ipm;
  bad_ipm.ipm.step_fraction = 1.5;
  r = SolveQsdpSubspace(p, bad_ipm);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("step_fraction = 1.5"), std::string::npos) << r.status();
  SolveControl control;
  control.cancel.Cancel();
  auto c = SolveQsdpSubspace(p, {}, control);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->stats.termination, Termination::kCancelled);
  QsdpSubspaceOptions faces;
  faces.full_system_size = 5;
  c = SolveQsdpSubspace(p, faces, control);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->stats.termination, Termination::kCancelled);
}

}  // namespace
}  // namespace kls
