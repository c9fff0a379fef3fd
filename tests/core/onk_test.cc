// Optimal neighborhood kernel (onk paper): the exact projection onto
// P = {0 <= x <= C, xᵀy = 0} (§4.2) against brute-force QP solutions, the
// ONK solvers (CGD, accelerated, level method) against each other and their
// optimality conditions, and the ONK classifier on ionosphere.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/data/csv_reader.h"
#include "core/mkl/box_projection.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/onk.h"
#include "core/mkl/svm.h"

namespace kls {
namespace {

// ---------------------------------------------------------------------------
// Brute-force references for min ½‖x − v‖² over P.

// Enumerates all 3ⁿ assignments (lower / upper / free) of the KKT system
// (16)–(20) and returns the x of the assignment that satisfies every KKT
// condition (primal and dual feasibility). Exponential: n <= 9.
Eigen::VectorXd ProjectByActiveSetEnumeration(const Eigen::VectorXd& v, const Eigen::VectorXd& y, double c) {
  const int n = static_cast<int>(v.size());
  int total = 1;
  for (int i = 0; i < n; ++i) total *= 3;
  Eigen::VectorXd best;
  double best_obj = std::numeric_limits<double>::infinity();
  std::vector<int> state(n);
  for (int code = 0; code < total; ++code) {
    int r = code;
    for (int i = 0; i < n; ++i) {
      state[i] = r % 3;  // 0 lower, 1 upper, 2 free
      r /= 3;
    }
    // λ range allowed by the dual signs of the bound indices; λ fixed by the
    // equality when some index is free.
    double lam_lo = -1e300, lam_hi = 1e300, sum_free = 0, sum_upper = 0;
    int nfree = 0;
    for (int i = 0; i < n; ++i) {
      if (state[i] == 2) {
        sum_free += y[i] * v[i];
        ++nfree;
      } else if (state[i] == 1) {
        sum_upper += c * y[i];
      }
    }
    double lam;
    if (nfree > 0) {
      lam = (sum_free + sum_upper) / nfree;
    } else {
      if (std::abs(sum_upper) > 1e-12 * (1 + c)) continue;
      lam = std::numeric_limits<double>::quiet_NaN();
    }
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
      // μ_i = −(v_i − λ y_i) >= 0 at the lower bound, ν_i = v_i − λ y_i − C >= 0 at the upper,
      // 0 <= v_i − λ y_i <= C when free: each is a half-line in λ (y_i = ±1).
      auto need_ge = [&](double coef_lam, double rhs) {  // coef·λ >= rhs
        if (coef_lam > 0) lam_lo = std::max(lam_lo, rhs / coef_lam);
        else lam_hi = std::min(lam_hi, rhs / coef_lam);
      };
      if (state[i] == 0) need_ge(y[i], v[i]);             // λ y_i >= v_i
      if (state[i] == 1) need_ge(-y[i], c - v[i]);         // v_i − λ y_i >= C
      if (state[i] == 2) {
        need_ge(-y[i], -v[i]);        // v_i − λ y_i >= 0
        need_ge(y[i], v[i] - c);      // v_i − λ y_i <= C
      }
    }
    const double tol = 1e-12 * (1 + v.cwiseAbs().maxCoeff() + c);
    if (nfree > 0) ok = lam >= lam_lo - tol && lam <= lam_hi + tol;
    else ok = lam_lo <= lam_hi + tol;
    if (!ok) continue;
    Eigen::VectorXd x(n);
    for (int i = 0; i < n; ++i) x[i] = state[i] == 0 ? 0.0 : state[i] == 1 ? c : v[i] - lam * y[i];
    const double obj = 0.5 * (x - v).squaredNorm();
    if (obj < best_obj) {
      best_obj = obj;
      best = x;
    }
  }
  return best;
}

// Sweeps all 2n breakpoints of h (eq. 22) in sorted order: on each piece
// between consecutive breakpoints h is linear, so its root candidate is A/F
// from the piece's free set; x(λ) = clip(v − λy) is the exact projection onto
// {box, xᵀy = h(λ)}, so the candidate with the smallest |h| is π_P(v). An
// O(n²) reference independent of the median search.
Eigen::VectorXd ProjectBySortedSweep(const Eigen::VectorXd& v, const Eigen::VectorXd& y, double c) {
  const int n = static_cast<int>(v.size());
  auto x_of = [&](double lam) {
    Eigen::VectorXd x(n);
    for (int i = 0; i < n; ++i) x[i] = std::min(std::max(v[i] - lam * y[i], 0.0), c);
    return x;
  };
  std::vector<double> b;
  for (int i = 0; i < n; ++i) {
    const double a = y[i] > 0 ? v[i] - c : -v[i];
    b.push_back(a);
    b.push_back(a + c);
  }
  std::sort(b.begin(), b.end());
  std::vector<double> candidates = b;
  for (std::size_t k = 0; k + 1 < b.size(); ++k) {
    const double mid = 0.5 * (b[k] + b[k + 1]);
    double a_sum = 0;
    int f = 0;
    for (int i = 0; i < n; ++i) {
      const double t = v[i] - mid * y[i];
      if (t <= 0) continue;
      if (t >= c) {
        a_sum += c * y[i];
      } else {
        a_sum += y[i] * v[i];
        ++f;
      }
    }
    if (f > 0) candidates.push_back(a_sum / f);
  }
  Eigen::VectorXd best = Eigen::VectorXd::Zero(n);  // one label only: P = {0}
  double best_h = std::numeric_limits<double>::infinity();
  for (double lam : candidates) {
    const Eigen::VectorXd x = x_of(lam);
    const double h = std::abs(x.dot(y));
    if (h < best_h) {
      best_h = h;
      best = x;
    }
  }
  return best;
}

Eigen::VectorXd RandomLabels(int n, std::mt19937_64& rng, bool both = true) {
  std::bernoulli_distribution coin(0.5);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) y[i] = coin(rng) ? 1.0 : -1.0;
  if (both && n >= 2) {
    y[0] = 1;
    y[1] = -1;
  }
  return y;
}

// Checks x ∈ P and the variational inequality ⟨v − x, z − x⟩ <= 0 for random
// feasible z (optimality of a projection onto a convex set).
void ExpectOptimalProjection(const Eigen::VectorXd& v, const Eigen::VectorXd& y, double c, const Eigen::VectorXd& x,
                             std::mt19937_64& rng) {
  const int n = static_cast<int>(v.size());
  const double scale = 1 + c + v.cwiseAbs().maxCoeff();
  EXPECT_GE(x.minCoeff(), 0.0);
  EXPECT_LE(x.maxCoeff(), c);
  EXPECT_NEAR(x.dot(y), 0.0, 1e-12 * scale * n);
  std::uniform_real_distribution<double> u(0, c);
  for (int t = 0; t < 20; ++t) {
    Eigen::VectorXd z(n);
    for (int i = 0; i < n; ++i) z[i] = u(rng);
    double sp = 0, sn = 0;
    for (int i = 0; i < n; ++i) (y[i] > 0 ? sp : sn) += z[i];
    for (int i = 0; i < n; ++i) {
      if (y[i] > 0 && sp > sn) z[i] *= sn / sp;
      if (y[i] < 0 && sn > sp) z[i] *= sp / sn;
    }
    EXPECT_LE((v - x).dot(z - x), 1e-10 * scale * scale * n);
  }
}

// ---------------------------------------------------------------------------
// Projection onto P

TEST(BoxProjection, MatchesActiveSetEnumerationOnSmallInstances) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> g;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + trial % 7;
    const double c = std::pow(10.0, -2 + (trial % 5));
    const Eigen::VectorXd y = RandomLabels(n, rng);
    Eigen::VectorXd v(n);
    for (int i = 0; i < n; ++i) v[i] = c * 1.5 * g(rng);
    auto p = ProjectOntoBoxHyperplane(v, y, c);
    ASSERT_TRUE(p.ok()) << p.status();
    const Eigen::VectorXd ref = ProjectByActiveSetEnumeration(v, y, c);
    ASSERT_EQ(ref.size(), n);
    EXPECT_LE((p->x - ref).cwiseAbs().maxCoeff(), 1e-10 * (1 + c)) << "trial " << trial;
  }
}

TEST(BoxProjection, MatchesSortedSweepUpToFiftyPoints) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> g;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 2 + trial % 49;
    const double c = std::exp(std::uniform_real_distribution<double>(-5, 5)(rng));
    const Eigen::VectorXd y = RandomLabels(n, rng);
    Eigen::VectorXd v(n);
    for (int i = 0; i < n; ++i) v[i] = c * 2 * g(rng);
    auto p = ProjectOntoBoxHyperplane(v, y, c);
    ASSERT_TRUE(p.ok());
    const Eigen::VectorXd ref = ProjectBySortedSweep(v, y, c);
    EXPECT_LE((p->x - ref).cwiseAbs().maxCoeff(), 1e-10 * (1 + c)) << "trial " << trial;
    ExpectOptimalProjection(v, y, c, p->x, rng);
  }
}

TEST(BoxProjection, EdgeCases) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  // All entries pushed to the bounds: balanced large positives and negatives.
  {
    Eigen::VectorXd y(6), v(6);
    y << 1, 1, 1, -1, -1, -1;
    v << 50, 60, 70, 55, 65, 75;
    auto p = ProjectOntoBoxHyperplane(v, y, 1.0);
    ASSERT_TRUE(p.ok());
    EXPECT_LE((p->x - Eigen::VectorXd::Ones(6)).cwiseAbs().maxCoeff(), 1e-12);
    v = -v;
    p = ProjectOntoBoxHyperplane(v, y, 1.0);
    ASSERT_TRUE(p.ok());
    EXPECT_LE(p->x.cwiseAbs().maxCoeff(), 1e-12);
  }
  // Tiny and huge C, ties in the breakpoints (integer v), exact roots.
  for (double c : {1e-9, 1e-6, 1.0, 1e6, 1e9}) {
    for (int trial = 0; trial < 40; ++trial) {
      const int n = 2 + trial;
      const Eigen::VectorXd y = RandomLabels(n, rng);
      Eigen::VectorXd v(n);
      for (int i = 0; i < n; ++i) v[i] = trial % 2 ? std::round(3 * g(rng)) : g(rng);
      auto p = ProjectOntoBoxHyperplane(v, y, c);
      ASSERT_TRUE(p.ok());
      const Eigen::VectorXd ref = n <= 9 ? ProjectByActiveSetEnumeration(v, y, c) : ProjectBySortedSweep(v, y, c);
      EXPECT_LE((p->x - ref).cwiseAbs().maxCoeff(), 1e-10 * (1 + c)) << "c " << c << " trial " << trial;
      ExpectOptimalProjection(v, y, c, p->x, rng);
    }
  }
  // One label only: P = {0}.
  Eigen::VectorXd y = Eigen::VectorXd::Ones(5), v = Eigen::VectorXd::Constant(5, 0.3);
  auto p = ProjectOntoBoxHyperplane(v, y, 1.0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->x.cwiseAbs().maxCoeff(), 0.0);
  // A point already in P is its own projection.
  y << 1, -1, 1, -1, 1;
  v << 0.2, 0.5, 0.3, 0.4, 0.4;
  p = ProjectOntoBoxHyperplane(v, y, 1.0);
  ASSERT_TRUE(p.ok());
  EXPECT_LE((p->x - v).cwiseAbs().maxCoeff(), 1e-15);
}

TEST(BoxProjection, RoundsAreLogarithmicSoWorkIsLinear) {
  // Every round halves the breakpoints left inside the bracket, so the work
  // is Σ 2n / 2^k = O(n); the round count certifies it deterministically.
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g;
  for (int n : {1000, 100000, 1000000}) {
    const Eigen::VectorXd y = RandomLabels(n, rng);
    Eigen::VectorXd v(n);
    for (int i = 0; i < n; ++i) v[i] = g(rng);
    auto p = ProjectOntoBoxHyperplane(v, y, 0.5);
    ASSERT_TRUE(p.ok());
    EXPECT_LE(p->rounds, static_cast<int>(std::ceil(std::log2(2.0 * n))) + 1) << n;
    EXPECT_NEAR(p->x.dot(y), 0.0, 1e-8);
  }
}

TEST(BoxProjection, RejectsBadInput) {
  Eigen::VectorXd v(3), y(3);
  v << 1, 2, 3;
  y << 1, -1, 0.5;
  auto p = ProjectOntoBoxHyperplane(v, y, 1.0);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("y[2] = 0.5"), std::string::npos) << p.status();
  y << 1, -1, 1;
  p = ProjectOntoBoxHyperplane(v, y, -2.0);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("c = -2"), std::string::npos);
  v[1] = std::nan("");
  p = ProjectOntoBoxHyperplane(v, y, 1.0);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("v[1]"), std::string::npos);
  p = ProjectOntoBoxHyperplane(v, Eigen::VectorXd::Ones(2), 1.0);
  EXPECT_FALSE(p.ok());
}

// ---------------------------------------------------------------------------
// ONK solvers

struct OnkData {
  Eigen::MatrixXd kernel;
  Eigen::VectorXd y;
  Eigen::MatrixXd x;
};

// First n rows of ionosphere, standardized, with the paper's kernel
// exp(−‖x − z‖²/σ_k).
OnkData IonosphereKernel(int n, int sigma_k) {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/ionosphere.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  OnkData d;
  d.x = Standardizer::Fit(data->features).Apply(data->features).topRows(n);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) d.y[i] = data->labels[i] == 1 ? 1.0 : -1.0;
  BaseKernelSpec spec;
  spec.gamma = 1.0 / OnkSigma(d.x, sigma_k);
  d.kernel = EvaluateKernel(spec, d.x, d.x);
  return d;
}

// Projected-gradient optimality residual ‖α − π_P(α − f'(α))‖ (zero iff α is optimal).
double StationarityResidual(const OnkData& d, const Eigen::VectorXd& alpha, double c, double rho) {
  const Eigen::VectorXd g = OnkGradient(d.kernel, d.y, alpha, rho);
  auto p = ProjectOntoBoxHyperplane(alpha - g, d.y, c);
  EXPECT_TRUE(p.ok());
  return (alpha - p->x).norm();
}

TEST(Onk, GradientOracleMatchesFiniteDifferences) {
  const OnkData d = IonosphereKernel(40, 2);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  Eigen::VectorXd a(40), e(40);
  for (int i = 0; i < 40; ++i) a[i] = u(rng);
  for (int i = 0; i < 40; ++i) e[i] = u(rng) - 0.5;
  const double h = 1e-6, rho = 3.0;
  const double fd = (OnkObjective(d.kernel, d.y, a + h * e, rho) - OnkObjective(d.kernel, d.y, a - h * e, rho)) / (2 * h);
  EXPECT_NEAR(fd, OnkGradient(d.kernel, d.y, a, rho).dot(e), 1e-6 * (1 + std::abs(fd)));
}

TEST(Onk, GradientAcceleratedAndLevelAgreeOnTheOptimum) {
  const OnkData d = IonosphereKernel(60, 2);
  for (double rho : {1.0, 100.0}) {
    OnkOptions opt;
    opt.c = 1.0;
    opt.rho = rho;
    opt.tolerance = 1e-11;
    opt.max_iterations = 100000;
    auto cgd = SolveOnk(d.kernel, d.y, opt);
    ASSERT_TRUE(cgd.ok()) << cgd.status();
    EXPECT_EQ(cgd->stats.termination, Termination::kConverged);
    opt.method = OnkMethod::kAccelerated;
    auto acc = SolveOnk(d.kernel, d.y, opt);
    ASSERT_TRUE(acc.ok());
    EXPECT_EQ(acc->stats.termination, Termination::kConverged);
    const double f = cgd->objective;
    EXPECT_LE(std::abs(acc->objective - f), 1e-9 * std::abs(f)) << "rho " << rho;
    // Optimality: fixed point of the gradient-mapping step, feasibility.
    EXPECT_LE(StationarityResidual(d, cgd->alpha, opt.c, rho), 1e-6);
    EXPECT_NEAR(cgd->alpha.dot(d.y), 0.0, 1e-10);
    EXPECT_GE(cgd->alpha.minCoeff(), 0.0);
    EXPECT_LE(cgd->alpha.maxCoeff(), opt.c);
    // and no nearby feasible point does better
    for (int t = 0; t < 20; ++t) {
      Eigen::VectorXd z = cgd->alpha + 0.05 * Eigen::VectorXd::Random(60);
      auto pz = ProjectOntoBoxHyperplane(z, d.y, opt.c);
      ASSERT_TRUE(pz.ok());
      EXPECT_GE(OnkObjective(d.kernel, d.y, pz->x, rho), f - 1e-12 * std::abs(f));
    }
    if (rho == 1.0) {  // the level method is slow at large rho; one setting suffices
      opt.method = OnkMethod::kLevel;
      opt.tolerance = 1e-6;
      opt.max_iterations = 2000;
      auto level = SolveOnk(d.kernel, d.y, opt);
      ASSERT_TRUE(level.ok());
      EXPECT_EQ(level->stats.termination, Termination::kConverged) << "rho " << rho;
      EXPECT_LE(std::abs(level->objective - f), 1e-6 * std::abs(f)) << "rho " << rho;
      // The certified lower bound brackets the gradient optimum.
      EXPECT_LE(level->lower_bound, f + 1e-12 * std::abs(f));
      EXPECT_GE(level->objective, f - 1e-12 * std::abs(f));
      std::printf("rho %g: f* %.12g  cgd %d it / %d products, accelerated %d it, level %d it (gap %.2g)\n", rho, f,
                  cgd->stats.iterations, cgd->function_evaluations, acc->stats.iterations, level->stats.iterations,
                  level->objective - level->lower_bound);
    }
  }
}

TEST(Onk, LearnedKernelIsKPlusRankOneAndPsd) {
  const OnkData d = IonosphereKernel(60, 1);
  OnkOptions opt;
  opt.rho = 0.5;
  auto r = SolveOnk(d.kernel, d.y, opt);
  ASSERT_TRUE(r.ok());
  const Eigen::MatrixXd g = OnkLearnedKernel(d.kernel, d.y, r->alpha, opt.rho);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(g - d.kernel);
  const Eigen::VectorXd ev = eig.eigenvalues();
  const Eigen::VectorXd u = d.y.cwiseProduct(r->alpha);
  EXPECT_NEAR(ev[ev.size() - 1], u.squaredNorm() / (2 * opt.rho), 1e-10);  // eq. (5): one eigenvalue
  EXPECT_LE(ev.head(ev.size() - 1).cwiseAbs().maxCoeff(), 1e-10);
  EXPECT_GE(Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(g).eigenvalues().minCoeff(), -1e-10);
}

TEST(Onk, HonoursCancellationAndRejectsBadInput) {
  const OnkData d = IonosphereKernel(30, 2);
  OnkOptions opt;
  SolveControl control;
  control.cancel.Cancel();
  opt.tolerance = 1e-12;
  auto r = SolveOnk(d.kernel, d.y, opt, control);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.termination, Termination::kCancelled);
  opt.rho = -1;
  r = SolveOnk(d.kernel, d.y, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rho = -1"), std::string::npos);
  opt.rho = 1;
  Eigen::VectorXd y = d.y;
  y[4] = 0;
  r = SolveOnk(d.kernel, y, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("labels[4] = 0"), std::string::npos) << r.status();
  r = SolveOnk(d.kernel.topRows(10), d.y, opt);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(ParseOnkMethod("newton").ok());
}

TEST(Onk, ValidateNamesTheFieldUnderThePath) {
  OnkOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.rho = -1;
  EXPECT_EQ(o.Validate().message(), "onk.rho = -1 must be finite and > 0");
  EXPECT_EQ(o.Validate("job.onk").message(), "job.onk.rho = -1 must be finite and > 0");
  o.rho = 100;
  o.tolerance = 1;
  EXPECT_EQ(o.Validate("onk").message(), "onk.tolerance = 1 must be in (0, 1)");
  o.tolerance = 1e-6;
  o.max_iterations = 0;
  EXPECT_EQ(o.Validate("onk").message(), "onk.max_iterations = 0 must be >= 1");
}

TEST(Svm, DualSolutionSatisfiesKkt) {
  const OnkData d = IonosphereKernel(120, 2);
  SvmOptions opt;
  opt.c = 2.0;
  opt.tolerance = 1e-6;
  auto svm = TrainSvm(d.kernel, d.y, opt);
  ASSERT_TRUE(svm.ok()) << svm.status();
  EXPECT_NEAR(svm->alpha.dot(d.y), 0.0, 1e-8);
  const Eigen::VectorXd f = SvmDecision(d.kernel, d.y, *svm);
  for (int i = 0; i < 120; ++i) {
    const double margin = d.y[i] * f[i];
    if (svm->alpha[i] < 1e-8) EXPECT_GE(margin, 1 - 1e-4) << i;
    else if (svm->alpha[i] > opt.c - 1e-8) EXPECT_LE(margin, 1 + 1e-4) << i;
    else EXPECT_NEAR(margin, 1.0, 1e-4) << i;
  }
}

TEST(Onk, LearnedKernelClassifiesIonosphere) {
  // Train on 100 points, test on the other 251, kernel extended to unseen
  // points through φ̃(x) = (φ(x), 0) (§2.2): the test block is K's.
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/ionosphere.csv");
  ASSERT_TRUE(data.ok());
  const int n = data->num_points(), ntr = 100;
  std::vector<int> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(4));
  const std::vector<int> tr(perm.begin(), perm.begin() + ntr), te(perm.begin() + ntr, perm.end());
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) y[i] = data->labels[i] == 1 ? 1.0 : -1.0;
  Eigen::MatrixXd xtr(ntr, data->dim()), xte(n - ntr, data->dim());
  for (int i = 0; i < ntr; ++i) xtr.row(i) = data->features.row(tr[i]);
  for (int i = 0; i < n - ntr; ++i) xte.row(i) = data->features.row(te[i]);
  const Standardizer st = Standardizer::Fit(xtr);
  xtr = st.Apply(xtr);
  xte = st.Apply(xte);
  BaseKernelSpec spec;
  spec.gamma = 1.0 / OnkSigma(xtr, 2);
  const Eigen::MatrixXd k = EvaluateKernel(spec, xtr, xtr), kte = EvaluateKernel(spec, xte, xtr);
  const Eigen::VectorXd ytr = SubVector(y, tr), yte = SubVector(y, te);
  SvmOptions so;
  so.c = 10;
  auto decision = [&](double rho) {
    OnkOptions opt;
    opt.c = so.c;
    opt.rho = rho;
    auto onk = SolveOnk(k, ytr, opt);
    EXPECT_TRUE(onk.ok());
    auto svm = TrainSvm(OnkLearnedKernel(k, ytr, onk->alpha, opt.rho), ytr, so);
    EXPECT_TRUE(svm.ok());
    return SvmDecision(kte, ytr, *svm);
  };
  auto base = TrainSvm(k, ytr, so);
  ASSERT_TRUE(base.ok());
  const Eigen::VectorXd base_dec = SvmDecision(kte, ytr, *base);
  // ρ → ∞ gives G → K (§2.2): the same classifier as the base kernel.
  EXPECT_LE((decision(1e12) - base_dec).cwiseAbs().maxCoeff(), 1e-3);
  const double acc = SignAccuracy(decision(1.0), yte);
  EXPECT_GE(acc, 0.8);
}

}  // namespace
}  // namespace kls
