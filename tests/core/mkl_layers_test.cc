// Two-layer MKL (thesis Protocols 2 and 3) and unsupervised MKL (Protocol 4):
// gradients against finite differences, KKT conditions of the inner SVM and
// of the simplex QP, monotone objectives, brute-force agreement on tiny
// instances, and the stored classifier reproducing the training decision
// values.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <string>

#include "core/data/csv_reader.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/kernel_classifier.h"
#include "core/mkl/mkl_protocol.h"
#include "core/mkl/svm.h"
#include "core/mkl/two_layer_mkl.h"
#include "core/mkl/unsupervised_mkl.h"

namespace kls {
namespace {

// A small labeled problem: the first `n` ionosphere points, standardized.
struct Small {
  Eigen::MatrixXd x_raw, x;
  Eigen::VectorXd y;
  std::vector<BaseKernelSpec> bank;
  std::vector<Eigen::MatrixXd> kernels;
};

Small LoadSmall(int n, bool single_features) {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/ionosphere.csv");
  EXPECT_TRUE(data.ok());
  Small s;
  s.x_raw = data->features.topRows(n);
  // Drop constant columns of the subset (feature 2 of ionosphere is all zero).
  std::vector<int> keep;
  for (int j = 0; j < s.x_raw.cols(); ++j)
    if ((s.x_raw.col(j).array() - s.x_raw(0, j)).abs().maxCoeff() > 0) keep.push_back(j);
  Eigen::MatrixXd xr(n, keep.size());
  for (std::size_t j = 0; j < keep.size(); ++j) xr.col(j) = s.x_raw.col(keep[j]);
  s.x_raw = xr;
  std::vector<int> labels(data->labels.begin(), data->labels.begin() + n);
  s.y = SignLabels(labels, 1);
  auto prep = PrepareMklData(s.x_raw, true, single_features);
  EXPECT_TRUE(prep.ok());
  s.x = prep->x;
  s.bank = prep->bank;
  s.kernels = EvaluateKernels(s.bank, s.x, s.x);
  return s;
}

double DualValue(const Eigen::MatrixXd& k, const Eigen::VectorXd& alpha, const Eigen::VectorXd& y) {
  const Eigen::VectorXd u = alpha.cwiseProduct(y);
  return alpha.sum() - 0.5 * u.dot(k * u);
}

// F(μ) = max_α D(α, μ) with a tight SVM.
double TwoLayerF(const std::vector<Eigen::MatrixXd>& kernels, const Eigen::VectorXd& y, const Eigen::VectorXd& mu,
                 double c) {
  SvmOptions o;
  o.c = c;
  o.tolerance = 1e-9;
  auto svm = TrainSvm(TwoLayerKernel(kernels, mu), y, o);
  EXPECT_TRUE(svm.ok());
  return svm->dual_objective + mu.sum();
}

// SVM dual KKT: box, αᵀy = 0, and the margin conditions on f = K(α∘y) + b.
void ExpectSvmKkt(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const SvmSolution& svm, double c,
                  double tol) {
  EXPECT_GE(svm.alpha.minCoeff(), 0.0);
  EXPECT_LE(svm.alpha.maxCoeff(), c);
  EXPECT_NEAR(svm.alpha.dot(y), 0.0, 1e-8 * c * y.size());
  const Eigen::VectorXd f = SvmDecision(k, y, svm);
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    const double yf = y[i] * f[i];
    if (svm.alpha[i] <= 0) EXPECT_GE(yf, 1 - tol) << i;
    else if (svm.alpha[i] >= c) EXPECT_LE(yf, 1 + tol) << i;
    else EXPECT_NEAR(yf, 1.0, tol) << i;
  }
}

TEST(TwoLayerMkl, GradientMatchesFiniteDifferencesAndDanskin) {
  Small s = LoadSmall(40, /*single_features=*/false);
  const int m = static_cast<int>(s.kernels.size());
  Eigen::VectorXd mu = Eigen::VectorXd::LinSpaced(m, 0.5, 8.0);
  const double c = 1.0;
  SvmOptions o;
  o.c = c;
  o.tolerance = 1e-9;
  const Eigen::MatrixXd k2 = TwoLayerKernel(s.kernels, mu);
  auto svm = TrainSvm(k2, s.y, o);
  ASSERT_TRUE(svm.ok());
  const Eigen::VectorXd grad = TwoLayerGradient(s.kernels, k2, svm->alpha, s.y);
  for (int d = 0; d < m; ++d) {
    const double h = 1e-5;
    Eigen::VectorXd mp = mu, mm = mu;
    mp[d] += h;
    mm[d] -= h;
    // (4.5) is the derivative of J(α, μ) = −D(α, μ) at fixed α ...
    const double jp = -(DualValue(TwoLayerKernel(s.kernels, mp), svm->alpha, s.y) + mp.sum());
    const double jm = -(DualValue(TwoLayerKernel(s.kernels, mm), svm->alpha, s.y) + mm.sum());
    EXPECT_NEAR(grad[d], (jp - jm) / (2 * h), 1e-6 * (1 + std::abs(grad[d]))) << d;
    // ... and, by Danskin's theorem, minus the derivative of F(μ) = max_α D.
    const double fd = (TwoLayerF(s.kernels, s.y, mp, c) - TwoLayerF(s.kernels, s.y, mm, c)) / (2 * h);
    EXPECT_NEAR(-grad[d], fd, 2e-3 * (1 + std::abs(grad[d]))) << d;
  }
}

TEST(TwoLayerMkl, MonotoneFeasibleAndStationaryWithKktInnerSvm) {
  Small s = LoadSmall(60, /*single_features=*/false);
  TwoLayerMklOptions o;
  o.c = 10;
  o.max_iterations = 400;
  o.tolerance = 1e-12;
  o.svm_tolerance = 1e-8;
  o.seed = 3;
  auto r = SolveTwoLayerMkl(s.kernels, s.y, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GE(r->stats.iterations, 2);
  EXPECT_GE(r->weights.minCoeff(), 0.0);  // μ ∈ ℝ₊ᵐ (4.2)
  for (std::size_t i = 1; i < r->stats.objective_history.size(); ++i)
    EXPECT_LE(r->stats.objective_history[i], r->stats.objective_history[i - 1]) << i;
  const Eigen::MatrixXd k2 = TwoLayerKernel(s.kernels, r->weights);
  ExpectSvmKkt(k2, s.y, r->svm, o.c, 1e-4);
  EXPECT_NEAR(r->objective, DualValue(k2, r->svm.alpha, s.y) + r->weights.sum(), 1e-9 * std::abs(r->objective));
  // Stationarity of min F over μ >= 0: ∇F = −∇J; μ_t > 0 ⇒ ∇F_t ≈ 0,
  // μ_t = 0 ⇒ ∇F_t >= 0 (the projected gradient vanishes).
  const Eigen::VectorXd grad_f = -TwoLayerGradient(s.kernels, k2, r->svm.alpha, s.y);
  const Eigen::VectorXd pg = r->weights - (r->weights - grad_f).cwiseMax(0.0);
  EXPECT_LE(pg.cwiseAbs().maxCoeff(), 2e-3 * (1 + grad_f.cwiseAbs().maxCoeff())) << pg.transpose();
}

TEST(TwoLayerMkl, AgreesWithGridSearchOnTinyInstances) {
  Small s = LoadSmall(30, /*single_features=*/false);
  // One kernel (the Gaussian of width 2), then two kernels: F on a fine grid.
  const std::vector<Eigen::MatrixXd> one = {s.kernels[4]};
  TwoLayerMklOptions o;
  o.c = 10;
  o.tolerance = 1e-10;
  o.max_iterations = 300;
  o.svm_tolerance = 1e-9;
  auto r1 = SolveTwoLayerMkl(one, s.y, o);
  ASSERT_TRUE(r1.ok()) << r1.status();
  double best = 1e300, best_mu = 0;
  for (double mu = 0; mu <= 200; mu += 0.25) {
    const double f = TwoLayerF(one, s.y, Eigen::VectorXd::Constant(1, mu), o.c);
    if (f < best) best = f, best_mu = mu;
  }
  EXPECT_LE(r1->objective, best + 1e-4 * std::abs(best)) << "grid argmin " << best_mu << " ours " << r1->weights[0];
  EXPECT_NEAR(r1->weights[0], best_mu, 0.5);
  const std::vector<Eigen::MatrixXd> two = {s.kernels[2], s.kernels[11]};
  auto r2 = SolveTwoLayerMkl(two, s.y, o);
  ASSERT_TRUE(r2.ok()) << r2.status();
  double best2 = 1e300;
  for (double a = 0; a <= 120; a += 2)
    for (double b = 0; b <= 120; b += 2) best2 = std::min(best2, TwoLayerF(two, s.y, Eigen::Vector2d(a, b), o.c));
  EXPECT_LE(r2->objective, best2 + 1e-4 * std::abs(best2));
  // Bad input names the field.
  o.c = -1;
  auto bad = SolveTwoLayerMkl(one, s.y, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("options.c"), std::string::npos);
}

TEST(TwoLayerMkl, ClassifierReproducesTrainingDecisionValues) {
  Small s = LoadSmall(80, /*single_features=*/true);
  TwoLayerMklClassifierOptions o;
  o.protocol.c_grid = {1.0};
  o.solver.seed = 5;
  auto model = TrainTwoLayerMklClassifier(s.x_raw, s.y, o);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->classifier.combination, KernelCombination::kExponential);
  EXPECT_EQ(model->bank_size, static_cast<int>(s.bank.size()));
  // The same solve by hand: identical μ and α (deterministic seed).
  TwoLayerMklOptions so = o.solver;
  so.c = 1.0;
  auto fit = SolveTwoLayerMkl(s.kernels, s.y, so);
  ASSERT_TRUE(fit.ok());
  const Eigen::VectorXd f_train = SvmDecision(TwoLayerKernel(s.kernels, fit->weights), s.y, fit->svm);
  auto f_model = model->classifier.DecisionValues(s.x_raw);
  ASSERT_TRUE(f_model.ok());
  EXPECT_LE((*f_model - f_train).cwiseAbs().maxCoeff(), 1e-9 * (1 + f_train.cwiseAbs().maxCoeff()));
  EXPECT_GE(SignAccuracy(*f_model, s.y), 0.9);
  for (Eigen::Index t = 0; t < model->classifier.weights.size(); ++t) EXPECT_GT(model->classifier.weights[t], 0.0);
  // Nested CV over a grid reports one accuracy per C.
  o.protocol.c_grid = {0.1, 10.0};
  o.protocol.cv_folds = 3;
  o.solver.max_iterations = 10;
  auto cv = TrainTwoLayerMklClassifier(s.x_raw, s.y, o);
  ASSERT_TRUE(cv.ok()) << cv.status();
  EXPECT_EQ(cv->cv_accuracy.size(), 2u);
}

TEST(InfiniteTwoLayerMkl, NewKernelGradientAscentIsStationaryAndMatchesGrid) {
  Small s = LoadSmall(60, /*single_features=*/false);
  SvmOptions so;
  so.c = 10;
  auto svm = TrainSvm(TwoLayerKernel(s.kernels, Eigen::VectorXd::Constant(s.kernels.size(), 3.0)), s.y, so);
  ASSERT_TRUE(svm.ok());
  const Eigen::VectorXd u = svm->alpha.cwiseProduct(s.y);
  const Eigen::MatrixXd d2 = SquaredDistances(s.x, s.x);
  // (4.7) (sign corrected) against central differences of (4.6).
  for (double theta : {0.003, 0.05, 0.7}) {
    double v, g, vp, vm, dummy;
    NewKernelObjective(d2, u, theta, &v, &g);
    const double h = 1e-6 * theta;
    NewKernelObjective(d2, u, theta + h, &vp, &dummy);
    NewKernelObjective(d2, u, theta - h, &vm, &dummy);
    EXPECT_NEAR(g, (vp - vm) / (2 * h), 1e-5 * (std::abs(g) + 1e-3 * std::abs(v)));
    // Direct evaluation of (4.6).
    const Eigen::MatrixXd e = (-theta * d2).array().exp().exp();
    EXPECT_NEAR(v, 0.5 * u.dot(e * u), 1e-10 * std::abs(v));
  }
  // Brute force: J(α, θ) on a fine log grid; ascent from the grid's best
  // neighbour must not end below the grid maximum, and ends stationary.
  double best = -1e300, best_theta = 0;
  for (double lt = -12; lt <= 4; lt += 0.01) {
    double v, g;
    NewKernelObjective(d2, u, std::exp(lt), &v, &g);
    if (v > best) best = v, best_theta = std::exp(lt);
  }
  const NewKernelResult nk = FindNewKernel(d2, u, best_theta * 1.3, 200, 1e-14);
  for (std::size_t i = 1; i < nk.history.size(); ++i) EXPECT_GE(nk.history[i], nk.history[i - 1]);
  EXPECT_GE(nk.objective, best - 1e-9 * std::abs(best));
  double v, g;
  NewKernelObjective(d2, u, nk.theta, &v, &g);
  EXPECT_LE(std::abs(g) * nk.theta, 1e-4 * std::abs(v));  // dJ/d(log θ) ≈ 0
}

TEST(InfiniteTwoLayerMkl, AddsKernelsByTheColumnGenerationTestAndPredicts) {
  Small s = LoadSmall(80, /*single_features=*/false);
  auto theta0 = InfiniteInitialKernels(s.x);
  ASSERT_TRUE(theta0.ok());
  EXPECT_EQ(theta0->size(), 13u);
  InfiniteTwoLayerMklOptions o;
  o.inner.c = 10;
  o.inner.max_iterations = 40;
  o.max_new_kernels = 3;
  auto r = SolveInfiniteTwoLayerMkl(s.x, s.y, *theta0, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kernels.size(), 13u + r->added_theta.size());
  EXPECT_EQ(r->weights.size(), static_cast<Eigen::Index>(r->kernels.size()));
  EXPECT_GE(r->weights.minCoeff(), 0.0);
  ASSERT_EQ(r->j_theta.size(), r->j_mu.size());
  // Every added kernel passed J(α, θ) > J(α, μ); a converged run stopped on the opposite.
  for (std::size_t i = 0; i < r->added_theta.size(); ++i) EXPECT_GT(r->j_theta[i], r->j_mu[i]);
  if (r->stats.termination == Termination::kConverged && r->j_theta.size() > r->added_theta.size())
    EXPECT_LE(r->j_theta.back(), r->j_mu.back());
  for (std::size_t k = 13; k < r->kernels.size(); ++k) {
    EXPECT_NEAR(EvaluateKernel(r->kernels[k], s.x, s.x).trace(), 1.0, 1e-12);  // unit trace like Θ₀
  }
  // Classifier: same decision values as the final SVM on exp(Σ μ_t K_t).
  InfiniteTwoLayerMklClassifierOptions co;
  co.solver = o;
  co.protocol.c_grid = {10.0};
  auto model = TrainInfiniteTwoLayerMklClassifier(s.x_raw, s.y, co);
  ASSERT_TRUE(model.ok()) << model.status();
  const Eigen::VectorXd f_train =
      SvmDecision(CombinedKernel(r->kernels, r->weights, KernelCombination::kExponential, s.x, s.x), s.y, r->svm);
  auto f_model = model->classifier.DecisionValues(s.x_raw);
  ASSERT_TRUE(f_model.ok());
  EXPECT_LE((*f_model - f_train).cwiseAbs().maxCoeff(), 1e-9 * (1 + f_train.cwiseAbs().maxCoeff()));
  o.max_new_kernels = -1;
  EXPECT_FALSE(SolveInfiniteTwoLayerMkl(s.x, s.y, *theta0, o).ok());
}

// Global minimizer of ½xᵀWx + qᵀx on the simplex by enumerating supports S:
// the KKT system on S, x_S > 0, and g_j >= λ off S.
Eigen::VectorXd SimplexQpByEnumeration(const Eigen::MatrixXd& w, const Eigen::VectorXd& q) {
  const int m = static_cast<int>(q.size());
  double best = 1e300;
  Eigen::VectorXd arg;
  for (int mask = 1; mask < (1 << m); ++mask) {
    std::vector<int> s;
    for (int j = 0; j < m; ++j)
      if (mask >> j & 1) s.push_back(j);
    const int ns = static_cast<int>(s.size());
    Eigen::MatrixXd kkt = Eigen::MatrixXd::Zero(ns + 1, ns + 1);
    Eigen::VectorXd rhs(ns + 1);
    for (int a = 0; a < ns; ++a) {
      for (int b = 0; b < ns; ++b) kkt(a, b) = w(s[a], s[b]);
      kkt(a, ns) = -1;
      kkt(ns, a) = 1;
      rhs[a] = -q[s[a]];
    }
    rhs[ns] = 1;
    Eigen::FullPivLU<Eigen::MatrixXd> lu(kkt);
    if (!lu.isInvertible()) continue;
    const Eigen::VectorXd sol = lu.solve(rhs);
    Eigen::VectorXd x = Eigen::VectorXd::Zero(m);
    bool ok = true;
    for (int a = 0; a < ns; ++a) ok = ok && sol[a] >= -1e-12, x[s[a]] = std::max(0.0, sol[a]);
    if (!ok) continue;
    const double f = 0.5 * x.dot(w * x) + q.dot(x);
    if (f < best) best = f, arg = x;
  }
  // Vertices (covers singular W where no KKT system on a larger support is invertible).
  for (int j = 0; j < m; ++j) {
    Eigen::VectorXd x = Eigen::VectorXd::Unit(m, j);
    const double f = 0.5 * x.dot(w * x) + q.dot(x);
    if (f < best) best = f, arg = x;
  }
  return arg;
}

TEST(UnsupervisedMkl, SimplexQpMatchesEnumerationAndKkt) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> gauss;
  for (int trial = 0; trial < 150; ++trial) {
    const int m = 1 + trial % 7;
    const int rank = 1 + trial % (m + 2);  // includes singular W
    Eigen::MatrixXd b(rank, m);
    for (int i = 0; i < rank; ++i)
      for (int j = 0; j < m; ++j) b(i, j) = gauss(rng);
    const Eigen::MatrixXd w = b.transpose() * b;
    Eigen::VectorXd q(m);
    for (int j = 0; j < m; ++j) q[j] = gauss(rng);
    auto r = SolveSimplexQp(w, q);
    ASSERT_TRUE(r.ok());
    EXPECT_GE(r->x.minCoeff(), 0.0);
    EXPECT_NEAR(r->x.sum(), 1.0, 1e-12);
    const Eigen::VectorXd ref = SimplexQpByEnumeration(w, q);
    const double fref = 0.5 * ref.dot(w * ref) + q.dot(ref);
    EXPECT_LE(r->objective, fref + 1e-9 * (1 + std::abs(fref))) << "trial " << trial;
    // KKT: g_t = λ on the support, g_t >= λ elsewhere.
    const Eigen::VectorXd g = w * r->x + q;
    double lambda = 1e300;
    for (int j = 0; j < m; ++j) lambda = std::min(lambda, g[j]);
    for (int j = 0; j < m; ++j)
      if (r->x[j] > 1e-8) EXPECT_NEAR(g[j], lambda, 1e-6 * (1 + g.cwiseAbs().maxCoeff())) << trial;
  }
  // Projection: KKT of the simplex projection (x = max(v − τ, 0), Σx = 1).
  Eigen::VectorXd v(5);
  v << 0.3, -2, 1.7, 0.31, 0.9;
  const Eigen::VectorXd p = ProjectOntoSimplex(v);
  EXPECT_NEAR(p.sum(), 1.0, 1e-14);
  EXPECT_NEAR(p[2] - p[4], 0.8, 1e-14);
  EXPECT_EQ(p[1], 0.0);
  EXPECT_FALSE(SolveSimplexQp(Eigen::MatrixXd::Identity(2, 2), Eigen::VectorXd::Ones(3)).ok());
}

TEST(UnsupervisedMkl, MuProblemEqualsObjectiveAndGreedyPicksMinimalIncrease) {
  Small s = LoadSmall(25, /*single_features=*/true);
  const int n = static_cast<int>(s.x.rows());
  std::vector<std::vector<int>> bases(n);
  std::mt19937_64 rng(4);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (j != i && rng() % 5 == 0) bases[i].push_back(j);
  const double g1 = 0.7;
  const UmklMuProblem mp = BuildUmklMuProblem(s.x, s.bank, bases, g1);
  std::uniform_real_distribution<double> unif(0, 1);
  for (int trial = 0; trial < 5; ++trial) {
    Eigen::VectorXd mu(s.bank.size());
    for (Eigen::Index t = 0; t < mu.size(); ++t) mu[t] = unif(rng);
    mu /= mu.sum();
    const Eigen::MatrixXd k = CombinedKernel(s.bank, mu, KernelCombination::kLinear, s.x, s.x);
    const double direct = UmklObjective(s.x, k, bases, g1);
    EXPECT_NEAR(0.5 * mu.dot(mp.w * mu) + mp.q.dot(mu) + mp.constant, direct, 1e-9 * std::abs(direct));
  }
  // Greedy (Protocol 4, lines 7–11): each pick is the candidate with the
  // smallest increase of J(d) = dᵀUd + ṽᵀd, recomputed from scratch here.
  const Eigen::MatrixXd p = s.x * s.x.transpose();
  Eigen::VectorXd mu = Eigen::VectorXd::Constant(s.bank.size(), 1.0 / s.bank.size());
  const Eigen::MatrixXd k = CombinedKernel(s.bank, mu, KernelCombination::kLinear, s.x, s.x);
  const int i = 3;
  const Eigen::VectorXd kappa = k.col(i);
  Eigen::VectorXd lin(n);
  for (int j = 0; j < n; ++j) lin[j] = kappa[j] * (2 * g1 * (s.x.row(i) - s.x.row(j)).squaredNorm() - 2 * p(i, j));
  auto jd = [&](const std::vector<int>& set) {
    double v = 0;
    for (int a : set) {
      v += lin[a];
      for (int b : set) v += kappa[a] * kappa[b] * p(a, b);
    }
    return v;
  };
  const std::vector<int> greedy = GreedyLocalBases(kappa, p, lin, i, 4);
  ASSERT_EQ(greedy.size(), 4u);
  std::vector<int> prefix;
  for (int pick : greedy) {
    EXPECT_NE(pick, i);
    double best = 1e300;
    int arg = -1;
    for (int j = 0; j < n; ++j) {
      if (j == i || std::find(prefix.begin(), prefix.end(), j) != prefix.end()) continue;
      std::vector<int> t = prefix;
      t.push_back(j);
      if (jd(t) < best) best = jd(t), arg = j;
    }
    EXPECT_EQ(pick, arg);
    prefix.push_back(pick);
  }
  // B = 1 is exact: compare with every single basis.
  const std::vector<int> one = GreedyLocalBases(kappa, p, lin, i, 1);
  for (int j = 0; j < n; ++j)
    if (j != i) EXPECT_LE(jd(one), jd({j}) + 1e-15);
  // Sparse coding (5.5) with λ < λ_max: a nonempty support that excludes i.
  const std::vector<int> sc = SparseCodingBases(s.x, i, 0.1, 1000);
  EXPECT_FALSE(sc.empty());
  for (int j : sc) EXPECT_NE(j, i);
}

TEST(UnsupervisedMkl, ObjectiveDecreasesMuOnSimplexAndKktAtFixedPoint) {
  Small s = LoadSmall(60, /*single_features=*/true);
  UmklOptions o;
  o.num_bases = 5;
  o.tolerance = 1e-15;
  o.max_iterations = 50;
  auto r = SolveUmkl(s.x, s.bank, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->weights.minCoeff(), 0.0);
  EXPECT_NEAR(r->weights.sum(), 1.0, 1e-12);
  ASSERT_FALSE(r->stats.objective_history.empty());
  for (std::size_t i = 1; i < r->stats.objective_history.size(); ++i)
    EXPECT_LE(r->stats.objective_history[i], r->stats.objective_history[i - 1] * (1 + 1e-12) + 1e-12) << i;
  for (const auto& b : r->bases) EXPECT_EQ(b.size(), 5u);  // |B_i| = B after a D-step
  if (r->stats.termination == Termination::kConverged) {
    // D did not change in the last D-step, so μ solves the μ-step QP for the
    // final D: check its KKT conditions.
    const UmklMuProblem mp = BuildUmklMuProblem(s.x, s.bank, r->bases, o.gamma1);
    const Eigen::VectorXd g = mp.w * r->weights + mp.q;
    const double lambda = g.minCoeff();
    for (Eigen::Index t = 0; t < g.size(); ++t)
      if (r->weights[t] > 1e-8) EXPECT_NEAR(g[t], lambda, 1e-6 * (1 + g.cwiseAbs().maxCoeff())) << t;
    auto qp = SolveSimplexQp(mp.w, mp.q);
    ASSERT_TRUE(qp.ok());
    EXPECT_NEAR(0.5 * r->weights.dot(mp.w * r->weights) + mp.q.dot(r->weights), qp->objective,
                1e-9 * (1 + std::abs(qp->objective)));
  }
  o.num_bases = 0;
  auto bad = SolveUmkl(s.x, s.bank, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("options.num_bases"), std::string::npos);
}

TEST(UnsupervisedMkl, ClassifierReproducesTrainingDecisionValues) {
  Small s = LoadSmall(80, /*single_features=*/true);
  UmklClassifierOptions o;
  o.protocol.c_grid = {0.1, 1.0, 10.0};
  o.protocol.cv_folds = 3;
  o.solver.num_bases = 5;
  auto model = TrainUmklClassifier(s.x_raw, s.y, o);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->classifier.combination, KernelCombination::kLinear);
  EXPECT_EQ(model->cv_accuracy.size(), 3u);
  auto fit = SolveUmkl(s.x, s.bank, o.solver);
  ASSERT_TRUE(fit.ok());
  const Eigen::MatrixXd k = CombinedKernel(s.bank, fit->weights, KernelCombination::kLinear, s.x, s.x);
  SvmOptions so;
  so.c = model->c;
  auto svm = TrainSvm(k, s.y, so);
  ASSERT_TRUE(svm.ok());
  const Eigen::VectorXd f_train = SvmDecision(k, s.y, *svm);
  auto f_model = model->classifier.DecisionValues(s.x_raw);
  ASSERT_TRUE(f_model.ok());
  EXPECT_LE((*f_model - f_train).cwiseAbs().maxCoeff(), 1e-9 * (1 + f_train.cwiseAbs().maxCoeff()));
  EXPECT_NEAR(model->classifier.weights.sum(), 1.0, 1e-12);
}

TEST(MklLayers, CancellationStopsEverySolverAndTrainer) {
  Small s = LoadSmall(40, /*single_features=*/false);
  SolveControl control;
  control.cancel.Cancel();
  TwoLayerMklOptions o;
  auto r = SolveTwoLayerMkl(s.kernels, s.y, o, control);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.termination, Termination::kCancelled);
  auto u = SolveUmkl(s.x, s.bank, UmklOptions(), control);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->stats.termination, Termination::kCancelled);
  auto inf = SolveInfiniteTwoLayerMkl(s.x, s.y, s.bank, InfiniteTwoLayerMklOptions(), control);
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ(inf->stats.termination, Termination::kCancelled);
  auto t = TrainTwoLayerMklClassifier(s.x_raw, s.y, TwoLayerMklClassifierOptions(), control);
  EXPECT_EQ(t.status().code(), StatusCode::kCancelled);
  auto ti = TrainInfiniteTwoLayerMklClassifier(s.x_raw, s.y, InfiniteTwoLayerMklClassifierOptions(), control);
  EXPECT_EQ(ti.status().code(), StatusCode::kCancelled);
  auto tu = TrainUmklClassifier(s.x_raw, s.y, UmklClassifierOptions(), control);
  EXPECT_EQ(tu.status().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace kls
