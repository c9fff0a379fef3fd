// RegPCP / RegMVU QSDPs (SQLP paper eq. (11)–(14)) and their exact solver:
// the smooth basis against a dense eigensolver, the matrix-free operators
// against the paper's dense A and b, and the solver's optimum against the
// paper's Schur-complement SDP (15)–(16) solved by CSDP.
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
#include <cmath>
#include <random>

#include "core/data/csv_reader.h"
#include "core/data/synthetic.h"
#include "core/qsdp/qsdp_solver.h"
#include "core/qsdp/reg_problems.h"
#include "core/qsdp/schur_sdp.h"
#include "core/qsdp/smooth_basis.h"
#include "tests/test_util/sdp_oracle.h"

namespace kls {
namespace {

Eigen::MatrixXd SwissRollPoints(int n, uint64_t seed) {
  auto roll = MakeSwissRoll(n, 0.0, seed);
  EXPECT_TRUE(roll.ok());
  return roll->data.features;
}

Eigen::MatrixXd RandomSymmetric(int m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd a(m, m);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) a(i, j) = g(rng);
  return 0.5 * (a + a.transpose());
}

TEST(SmoothBasisTest, ShiftInvertMatchesDenseEigensolver) {
  const Eigen::MatrixXd x = SwissRollPoints(700, 3);
  RegMvuOptions o;
  o.m = 12;
  auto built = BuildRegMvu(x, o);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_FALSE(built->basis.used_dense);  // n = 700 > dense_threshold: Spectra path
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> dense{Eigen::MatrixXd(built->laplacian)};
  for (int j = 0; j < o.m; ++j) {
    EXPECT_NEAR(built->basis.eigenvalues[j], dense.eigenvalues()[j + 1], 1e-9 * (1 + dense.eigenvalues()[j + 1]));
  }
  EXPECT_NEAR(built->basis.skipped_eigenvalues[0], 0.0, 1e-9);
  const Eigen::MatrixXd& q = built->basis.vectors;
  EXPECT_LT((q.transpose() * q - Eigen::MatrixXd::Identity(o.m, o.m)).norm(), 1e-8);
  EXPECT_LT(built->basis.max_residual, 1e-8);
  // Q ⊥ 1: K = QYQᵀ is centered (MVU constraint (2)).
  EXPECT_LT((q.transpose() * Eigen::VectorXd::Ones(x.rows())).norm(), 1e-8);
}

TEST(SmoothBasisTest, RejectsBadSizes) {
  Eigen::SparseMatrix<double> l(5, 5);
  l.setIdentity();
  auto r = SmoothestEigenvectors(l, 5, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("m = 5"), std::string::npos) << r.status();
  SmoothBasisOptions bad;
  bad.relative_shift = -1;
  r = SmoothestEigenvectors(l, 2, 0, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("relative_shift"), std::string::npos);
}

TEST(QsdpProblemTest, MatrixFreeOperatorsMatchPaperDenseForm) {
  const Eigen::MatrixXd x = SwissRollPoints(150, 5);
  RegPcpOptions o;
  o.m = 5;
  PairwiseConstraints c;
  c.pairs = {{0, 7, PairKind::kMustLink}, {3, 90, PairKind::kCannotLink}, {12, 40, PairKind::kMustLink}};
  auto built = BuildRegPcp(x, c, o);
  ASSERT_TRUE(built.ok()) << built.status();
  const QsdpProblem& p = built->problem;
  const Eigen::MatrixXd a = p.DenseQuadratic();
  const Eigen::VectorXd b = p.DenseLinear();
  for (uint64_t seed = 0; seed < 3; ++seed) {
    const Eigen::MatrixXd y = RandomSymmetric(o.m, seed);
    const Eigen::Map<const Eigen::VectorXd> v(y.data(), o.m * o.m);
    const double dense = v.dot(a * v) + b.dot(v) + p.Constant();  // (14)
    EXPECT_NEAR(p.Objective(y), dense, 1e-10 * (1 + std::abs(dense)));
    // Gradient of (14) is 2Ay + b.
    const Eigen::VectorXd grad = 2 * a * v + b;
    const Eigen::MatrixXd g = p.Gradient(y);
    EXPECT_LT((Eigen::Map<const Eigen::VectorXd>(g.data(), o.m * o.m) - grad).norm(), 1e-9 * (1 + grad.norm()));
  }
  // A ⪰ 0 (the paper's convexity claim).
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(a, Eigen::EigenvaluesOnly);
  EXPECT_GT(eig.eigenvalues()[0], -1e-10 * eig.eigenvalues().maxCoeff());
}

// Solves the SCSDP (15)–(16) with CSDP and returns f at CSDP's Y.
double CsdpObjective(const QsdpProblem& p) {
  test_util::SdpOracle oracle;
  BuildSchurComplementSdp(p, &oracle);
  auto sol = oracle.Solve();
  EXPECT_TRUE(sol.ok()) << sol.status();
  if (!sol.ok()) return NAN;
  const Eigen::MatrixXd y = SchurSdpSolutionY(sol->y, p.dim());
  return p.Objective(y);
}

void ExpectOptimalAndMatchesCsdp(const QsdpProblem& p) {
  auto r = SolveQsdp(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stats.termination, Termination::kConverged);
  EXPECT_LE(r->stats.certificate.gap, 1e-8);
  EXPECT_LE(r->stats.certificate.lower_bound, r->objective);
  // PSD solution.
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(r->y, Eigen::EigenvaluesOnly);
  EXPECT_GE(eig.eigenvalues()[0], -1e-12 * (1 + eig.eigenvalues().maxCoeff()));
  if (!test_util::CsdpAvailable()) GTEST_SKIP() << "csdp not installed";
  const double csdp = CsdpObjective(p);
  const double scale = std::max(1.0, std::abs(csdp));
  EXPECT_NEAR(r->objective, csdp, 1e-6 * scale);
  // The certificate is a true lower bound: no PSD Y (CSDP's included) beats it.
  EXPECT_GE(csdp, r->stats.certificate.lower_bound - 1e-9 * scale);
}

TEST(QsdpSolverTest, RegMvuMatchesCsdpOnSchurComplementSdp) {
  const Eigen::MatrixXd x = SwissRollPoints(200, 11);
  for (int m : {4, 7}) {
    RegMvuOptions o;
    o.m = m;
    auto built = BuildRegMvu(x, o);
    ASSERT_TRUE(built.ok()) << built.status();
    SCOPED_TRACE("m = " + std::to_string(m));
    ExpectOptimalAndMatchesCsdp(built->problem);
  }
}

TEST(QsdpSolverTest, RegPcpMatchesCsdpOnSchurComplementSdp) {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(data.ok()) << data.status();
  auto cons = GeneratePerClassConstraints(data->labels, 5, 5, 7);
  ASSERT_TRUE(cons.ok());
  EXPECT_EQ(cons->size(), 3 * 5 + 3 * 5);
  EXPECT_TRUE(cons->Validate(data->num_points()).ok());
  for (int m : {4, 8}) {
    RegPcpOptions o;
    o.m = m;
    auto built = BuildRegPcp(data->features, *cons, o);
    ASSERT_TRUE(built.ok()) << built.status();
    SCOPED_TRACE("m = " + std::to_string(m));
    ExpectOptimalAndMatchesCsdp(built->problem);
  }
}

TEST(QsdpSolverTest, KktConditionsHoldWithoutPolish) {
  // Pure accelerated projected gradient reaches the same certified optimum.
  const Eigen::MatrixXd x = SwissRollPoints(200, 11);
  RegMvuOptions o;
  o.m = 5;
  auto built = BuildRegMvu(x, o);
  ASSERT_TRUE(built.ok());
  QsdpOptions polish, plain;
  plain.polish_threshold = 0.0;
  plain.gap_tolerance = 1e-7;
  plain.max_iterations = 200000;
  auto a = SolveQsdp(built->problem, polish);
  auto b = SolveQsdp(built->problem, plain);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->polishes, 0);
  EXPECT_NEAR(a->objective, b->objective, 2e-7 * std::max(1.0, std::abs(a->objective)));
  // Complementarity ⟨∇f(Y), Y⟩ ≈ 0 and ∇f(Y) ⪰ 0 at the optimum.
  const Eigen::MatrixXd g = built->problem.Gradient(a->y);
  EXPECT_LT(std::abs(g.cwiseProduct(a->y).sum()), 1e-7 * std::max(1.0, std::abs(a->objective)));
}

TEST(QsdpSolverTest, ValidatesInputAndOptions) {
  QsdpProblem p;
  p.left = Eigen::MatrixXd::Ones(3, 2);
  p.right = Eigen::MatrixXd::Ones(3, 2);
  p.target = Eigen::VectorXd::Ones(3);
  p.weight = Eigen::VectorXd::Ones(3);
  p.weight[1] = -2;
  auto r = SolveQsdp(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("weight[1] = -2"), std::string::npos) << r.status();
  p.weight[1] = 1;
  QsdpOptions o;
  o.gap_tolerance = 0;
  r = SolveQsdp(p, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gap_tolerance"), std::string::npos);
  RegMvuOptions mvu;
  mvu.nu = 0;
  auto b = BuildRegMvu(Eigen::MatrixXd::Random(30, 3), mvu);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("nu = 0"), std::string::npos) << b.status();
}

TEST(QsdpSolverTest, DisconnectedGraphIsRejectedForRegMvu) {
  Eigen::MatrixXd x(20, 2);
  for (int i = 0; i < 20; ++i) x.row(i) << (i < 10 ? 0.0 : 100.0) + 0.1 * i, 0.0;
  RegMvuOptions o;
  o.m = 3;
  o.neighbors = 2;
  auto b = BuildRegMvu(x, o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("the 2-NN graph has 2 connected components"), std::string::npos) << b.status();

  // The MST repair joins the two clusters by their closest pair (9, 10) and the problem is bounded again.
  o.connect = ConnectMode::kMst;
  auto joined = BuildRegMvu(x, o);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->connect.components, 2);
  ASSERT_EQ(joined->connect.added_edges.size(), 1u);
  EXPECT_EQ(joined->connect.added_edges[0].i, 9);
  EXPECT_EQ(joined->connect.added_edges[0].j, 10);
  EXPECT_NEAR(joined->connect.added_edges[0].distance, 100.1, 1e-9);
  auto solved = SolveQsdp(joined->problem, {});
  ASSERT_TRUE(solved.ok()) << solved.status();
  EXPECT_TRUE(solved->y.allFinite());

  // grow_k: clusters of 10 points need k = 10 to touch; the bound 4k = 8 is too small.
  o.connect = ConnectMode::kGrowK;
  auto grown = BuildRegMvu(x, o);
  ASSERT_FALSE(grown.ok());
  EXPECT_NE(grown.status().message().find("grow_k's bound"), std::string::npos) << grown.status();
  o.neighbors = 3;  // bound 12 ≥ 10
  grown = BuildRegMvu(x, o);
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(grown->connect.k_used, 10);
  EXPECT_TRUE(grown->connect.added_edges.empty());
}

TEST(QsdpSolverTest, CancellationStopsTheRun) {
  const Eigen::MatrixXd x = SwissRollPoints(200, 2);
  RegMvuOptions o;
  o.m = 6;
  auto built = BuildRegMvu(x, o);
  ASSERT_TRUE(built.ok());
  SolveControl control;
  control.cancel.Cancel();
  auto r = SolveQsdp(built->problem, {}, control);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.termination, Termination::kCancelled);
}

}  // namespace
}  // namespace kls
