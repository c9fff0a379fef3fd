#include "core/mkl/unsupervised_mkl.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "core/mkl/box_projection.h"
#include "core/mkl/kernel_classifier.h"
#include "core/mkl/svm.h"

namespace kls {
namespace {

// Term i of the objective for bases S under kernel column κ:
// ½‖x_i − Σ_{j∈S} κ_j x_j‖² + γ₁ Σ_{j∈S} κ_j ‖x_i − x_j‖², from P = XXᵀ.
double PointTerm(const Eigen::MatrixXd& p, const Eigen::VectorXd& kappa, const std::vector<int>& s, int i,
                 double gamma1) {
  double quad = 0.0, lin = 0.0;
  for (int a : s) {
    for (int b : s) quad += kappa[a] * kappa[b] * p(a, b);
    const double dist = std::max(0.0, p(i, i) + p(a, a) - 2.0 * p(i, a));
    lin += kappa[a] * (gamma1 * dist - p(i, a));
  }
  return 0.5 * p(i, i) + 0.5 * quad + lin;
}

double QpObjective(const Eigen::MatrixXd& w, const Eigen::VectorXd& q, const Eigen::VectorXd& x) {
  return 0.5 * x.dot(w * x) + q.dot(x);
}

}  // namespace

Status UmklOptions::Validate() const {
  if (!(gamma1 >= 0) || !std::isfinite(gamma1)) {
    return InvalidArgumentError("options.gamma1 = " + FormatNumber(gamma1) + " must be finite and >= 0");
  }
  if (num_bases < 1) return InvalidArgumentError("options.num_bases = " + std::to_string(num_bases) + " must be >= 1");
  if (max_iterations < 1) {
    return InvalidArgumentError("options.max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("tolerance", tolerance));
  if (!(sparse_coding_lambda_fraction > 0 && sparse_coding_lambda_fraction < 1)) {
    return InvalidArgumentError("options.sparse_coding_lambda_fraction = " +
                                FormatNumber(sparse_coding_lambda_fraction) + " must be in (0, 1)");
  }
  if (sparse_coding_max_sweeps < 1) {
    return InvalidArgumentError("options.sparse_coding_max_sweeps = " + std::to_string(sparse_coding_max_sweeps) +
                                " must be >= 1");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("qp_tolerance", qp_tolerance));
  if (qp_max_iterations < 1) {
    return InvalidArgumentError("options.qp_max_iterations = " + std::to_string(qp_max_iterations) +
                                " must be >= 1");
  }
  return OkStatus();
}

Eigen::VectorXd ProjectOntoSimplex(const Eigen::VectorXd& v) {
  // Largest ρ with u_ρ − (Σ_{k<=ρ} u_k − 1)/ρ > 0 on the sorted u; shift by τ.
  std::vector<double> u(v.data(), v.data() + v.size());
  std::sort(u.begin(), u.end(), std::greater<double>());
  double sum = 0.0, tau = 0.0;
  for (std::size_t k = 0; k < u.size(); ++k) {
    sum += u[k];
    const double t = (sum - 1.0) / static_cast<double>(k + 1);
    if (u[k] - t > 0) tau = t;
  }
  return (v.array() - tau).cwiseMax(0.0).matrix();
}

StatusOr<SimplexQpResult> SolveSimplexQp(const Eigen::MatrixXd& w, const Eigen::VectorXd& q, double tolerance,
                                         int max_iterations) {
  return GuardExceptions("SolveSimplexQp", [&]() -> StatusOr<SimplexQpResult> {
    const Eigen::Index m = q.size();
    if (m == 0) return InvalidArgumentError("simplex QP: q is empty");
    if (w.rows() != m || w.cols() != m) {
      return InvalidArgumentError("simplex QP: W is " + std::to_string(w.rows()) + "x" + std::to_string(w.cols()) +
                                  " but q has " + std::to_string(m) + " entries");
    }
    if (!w.allFinite() || !q.allFinite()) return InvalidArgumentError("simplex QP: non-finite W or q");
    KLS_RETURN_IF_ERROR(CheckPositiveOption("tolerance", tolerance));
    // Step 1/L with L >= λ_max(W) (Gershgorin). A (near) zero W makes the
    // problem linear: the huge step then lands on the best vertex at once.
    double lip = w.cwiseAbs().rowwise().sum().maxCoeff();
    lip = std::max({lip, 1e-12 * q.cwiseAbs().maxCoeff(), 1e-300});
    SimplexQpResult r;
    Eigen::VectorXd x = Eigen::VectorXd::Constant(m, 1.0 / static_cast<double>(m));
    Eigen::VectorXd z = x;
    double fx = QpObjective(w, q, x), t = 1.0;
    for (int k = 1; k <= max_iterations; ++k) {
      r.iterations = k;
      const Eigen::VectorXd xn = ProjectOntoSimplex(z - (w * z + q) / lip);
      const double fn = QpObjective(w, q, xn);
      if (fn > fx) {  // function-value restart of the momentum
        z = x;
        t = 1.0;
        continue;
      }
      const double tn = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t));
      z = xn + ((t - 1.0) / tn) * (xn - x);
      x = xn;
      fx = fn;
      t = tn;
      const Eigen::VectorXd g = w * x + q;
      if ((x - ProjectOntoSimplex(x - g / lip)).cwiseAbs().maxCoeff() <= tolerance) break;
    }
    // Polish: on the support S the KKT conditions are W_SS x_S + q_S = λ1,
    // 1ᵀx_S = 1. Accept the exact solve if it stays feasible, satisfies
    // g_t >= λ off the support and does not raise the objective.
    std::vector<int> s;
    const double cut = 1e-9 * x.maxCoeff();
    for (Eigen::Index j = 0; j < m; ++j)
      if (x[j] > cut) s.push_back(static_cast<int>(j));
    const Eigen::Index ns = static_cast<Eigen::Index>(s.size());
    Eigen::MatrixXd kkt = Eigen::MatrixXd::Zero(ns + 1, ns + 1);
    Eigen::VectorXd rhs(ns + 1);
    for (Eigen::Index a = 0; a < ns; ++a) {
      for (Eigen::Index b = 0; b < ns; ++b) kkt(a, b) = w(s[a], s[b]);
      kkt(a, ns) = -1.0;
      kkt(ns, a) = 1.0;
      rhs[a] = -q[s[a]];
    }
    rhs[ns] = 1.0;
    Eigen::FullPivLU<Eigen::MatrixXd> lu(kkt);
    if (lu.isInvertible()) {
      const Eigen::VectorXd sol = lu.solve(rhs);
      Eigen::VectorXd xp = Eigen::VectorXd::Zero(m);
      bool feasible = sol.allFinite();
      for (Eigen::Index a = 0; a < ns && feasible; ++a) {
        xp[s[a]] = sol[a];
        feasible = sol[a] >= 0;
      }
      if (feasible) {
        const double lambda = sol[ns];
        const Eigen::VectorXd g = w * xp + q;
        const double slack = 1e-9 * (g.cwiseAbs().maxCoeff() + 1e-300);
        for (Eigen::Index j = 0; j < m && feasible; ++j)
          if (xp[j] == 0.0) feasible = g[j] >= lambda - slack;
        const double fp = QpObjective(w, q, xp);
        if (feasible && fp <= fx + 1e-12 * (std::abs(fx) + 1e-300)) {
          x = xp;
          fx = fp;
          r.polished = true;
        }
      }
    }
    r.x = x;
    r.objective = fx;
    return r;
  });
}

std::vector<int> GreedyLocalBases(const Eigen::VectorXd& kappa, const Eigen::MatrixXd& p,
                                  const Eigen::VectorXd& linear, int i, int b) {
  const Eigen::Index n = kappa.size();
  std::vector<char> used(static_cast<std::size_t>(n), 0);
  used[static_cast<std::size_t>(i)] = 1;
  // run_j = Σ_{t∈B} U_tj = κ_j Σ_{t∈B} κ_t P_tj, kept up to date in O(n) per pick.
  Eigen::VectorXd run = Eigen::VectorXd::Zero(n);
  std::vector<int> chosen;
  const int target = static_cast<int>(std::min<Eigen::Index>(b, n - 1));
  while (static_cast<int>(chosen.size()) < target) {
    int best = -1;
    double best_inc = std::numeric_limits<double>::infinity();
    for (Eigen::Index j = 0; j < n; ++j) {
      if (used[static_cast<std::size_t>(j)]) continue;
      // Protocol 4, line 9: 2Σ_{t∈B} U_tj + U_jj + ṽ_j.
      const double inc = 2.0 * kappa[j] * run[j] + kappa[j] * kappa[j] * p(j, j) + linear[j];
      if (inc < best_inc) {
        best_inc = inc;
        best = static_cast<int>(j);
      }
    }
    if (best < 0) break;
    used[static_cast<std::size_t>(best)] = 1;
    chosen.push_back(best);
    run += kappa[best] * p.col(best);
  }
  return chosen;
}

std::vector<int> SparseCodingBases(const Eigen::MatrixXd& x, int i, double lambda_fraction, int max_sweeps) {
  const Eigen::Index n = x.rows();
  const Eigen::VectorXd xi = x.row(i).transpose();
  const Eigen::VectorXd corr = x * xi;  // x_jᵀx_i
  double lmax = 0.0;
  for (Eigen::Index j = 0; j < n; ++j)
    if (j != i) lmax = std::max(lmax, std::abs(corr[j]));
  const double lambda = lambda_fraction * lmax;
  const Eigen::VectorXd sq = x.rowwise().squaredNorm();
  Eigen::VectorXd d = Eigen::VectorXd::Zero(n);
  Eigen::VectorXd res = xi;  // x_i − Σ d_j x_j
  const double stop = 1e-10 * std::max(xi.norm(), 1e-300);
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    double change = 0.0;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (j == i || sq[j] <= 0) continue;
      const double rho = x.row(j).dot(res) + sq[j] * d[j];
      const double dn = (rho > lambda ? rho - lambda : rho < -lambda ? rho + lambda : 0.0) / sq[j];  // soft threshold
      if (dn != d[j]) {
        res -= (dn - d[j]) * x.row(j).transpose();
        change = std::max(change, std::abs(dn - d[j]) * std::sqrt(sq[j]));
        d[j] = dn;
      }
    }
    if (change <= stop) break;
  }
  std::vector<int> s;
  for (Eigen::Index j = 0; j < n; ++j)
    if (d[j] != 0.0) s.push_back(static_cast<int>(j));
  return s;
}

UmklMuProblem BuildUmklMuProblem(const Eigen::MatrixXd& x, const std::vector<BaseKernelSpec>& bank,
                                 const std::vector<std::vector<int>>& bases, double gamma1) {
  const int n = static_cast<int>(x.rows());
  const int m = static_cast<int>(bank.size());
  const double g1 = gamma1;
  const Eigen::MatrixXd p = x * x.transpose();
  const Eigen::VectorXd pdiag = p.diagonal();
  // Gather A (rows (i, j ∈ B_i), one column per kernel), then
  // W = Aᵀ blkdiag(P_{B_i B_i}) A and q = Aᵀ c.
  std::vector<Eigen::Index> offset(static_cast<std::size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    offset[static_cast<std::size_t>(i) + 1] =
        offset[static_cast<std::size_t>(i)] + static_cast<Eigen::Index>(bases[static_cast<std::size_t>(i)].size());
  const Eigen::Index rows = offset.back();
  Eigen::MatrixXd a(rows, m);
  for (int t = 0; t < m; ++t) {
    const Eigen::MatrixXd kt = EvaluateKernel(bank[static_cast<std::size_t>(t)], x, x);
    for (int i = 0; i < n; ++i) {
      const auto& bi = bases[static_cast<std::size_t>(i)];
      for (std::size_t s = 0; s < bi.size(); ++s)
        a(offset[static_cast<std::size_t>(i)] + static_cast<Eigen::Index>(s), t) = kt(i, bi[s]);
    }
  }
  Eigen::MatrixXd pa(rows, m);  // blkdiag(P_{B_i B_i}) A
  Eigen::VectorXd c(rows);      // γ₁ v_i − p_i on B_i
  for (int i = 0; i < n; ++i) {
    const auto& bi = bases[static_cast<std::size_t>(i)];
    const Eigen::Index o = offset[static_cast<std::size_t>(i)];
    const Eigen::Index nb = static_cast<Eigen::Index>(bi.size());
    if (nb == 0) continue;
    Eigen::MatrixXd pb(nb, nb);
    for (Eigen::Index u = 0; u < nb; ++u) {
      for (Eigen::Index v = 0; v < nb; ++v) pb(u, v) = p(bi[u], bi[v]);
      const double dist = std::max(0.0, pdiag[i] + pdiag[bi[u]] - 2.0 * p(i, bi[u]));
      c[o + u] = g1 * dist - p(i, bi[u]);
    }
    pa.middleRows(o, nb).noalias() = pb * a.middleRows(o, nb);
  }
  UmklMuProblem mp;
  mp.w = a.transpose() * pa;
  mp.w = 0.5 * (mp.w + mp.w.transpose());
  mp.q = a.transpose() * c;
  mp.constant = 0.5 * pdiag.sum();
  return mp;
}

double UmklObjective(const Eigen::MatrixXd& x, const Eigen::MatrixXd& k, const std::vector<std::vector<int>>& bases,
                     double gamma1) {
  double total = 0.0;
  for (std::size_t i = 0; i < bases.size(); ++i) {
    Eigen::RowVectorXd rec = x.row(static_cast<Eigen::Index>(i));
    double dist = 0.0;
    for (int j : bases[i]) {
      rec -= k(static_cast<Eigen::Index>(i), j) * x.row(j);
      dist += k(static_cast<Eigen::Index>(i), j) * (x.row(static_cast<Eigen::Index>(i)) - x.row(j)).squaredNorm();
    }
    total += 0.5 * rec.squaredNorm() + gamma1 * dist;
  }
  return total;
}

StatusOr<UmklResult> SolveUmkl(const Eigen::MatrixXd& x, const std::vector<BaseKernelSpec>& bank,
                               const UmklOptions& options, const SolveControl& control) {
  return GuardExceptions("SolveUmkl", [&]() -> StatusOr<UmklResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const int n = static_cast<int>(x.rows());
    if (n < 2) return InvalidArgumentError("umkl: need at least 2 points, got " + std::to_string(n));
    if (!x.allFinite()) return InvalidArgumentError("umkl: x has a non-finite entry");
    if (bank.empty()) return InvalidArgumentError("umkl: the bank is empty");
    for (const auto& s : bank) KLS_RETURN_IF_ERROR(s.Validate(static_cast<int>(x.cols())));
    const int m = static_cast<int>(bank.size());
    const double g1 = options.gamma1;
    Stopwatch watch;
    const Eigen::MatrixXd p = x * x.transpose();  // P (Protocol 4, line 1)
    const Eigen::VectorXd pdiag = p.diagonal();

    UmklResult r;
    r.weights = Eigen::VectorXd::Constant(m, 1.0 / m);  // μ = 1/m (line 1)
    r.bases.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      r.bases[static_cast<std::size_t>(i)] =
          SparseCodingBases(x, i, options.sparse_coding_lambda_fraction, options.sparse_coding_max_sweeps);
    }
    auto combined = [&](const Eigen::VectorXd& mu) {
      Eigen::MatrixXd k = Eigen::MatrixXd::Zero(n, n);
      for (int t = 0; t < m; ++t)
        if (mu[t] > 0) k.noalias() += mu[t] * EvaluateKernel(bank[static_cast<std::size_t>(t)], x, x);
      return k;
    };
    Eigen::MatrixXd kmat = combined(r.weights);
    r.initial_objective = UmklObjective(x, kmat, r.bases, g1);
    r.stats.setup_seconds = watch.Seconds();
    double prev = r.initial_objective;
    r.stats.termination = Termination::kIterationLimit;
    for (int it = 1; it <= options.max_iterations; ++it) {
      Termination why;
      if (control.ShouldStop(&why)) {
        r.stats.termination = why;
        break;
      }
      // ---- μ-step (5.4)
      const UmklMuProblem mp = BuildUmklMuProblem(x, bank, r.bases, g1);
      const Eigen::MatrixXd& w = mp.w;
      const Eigen::VectorXd& q = mp.q;
      KLS_ASSIGN_OR_RETURN(SimplexQpResult qp, SolveSimplexQp(w, q, options.qp_tolerance, options.qp_max_iterations));
      r.weights = qp.x;
      kmat = combined(r.weights);
      // ---- D-step (5.6): greedy local bases per point, kept when not worse.
      bool changed = false;
      for (int i = 0; i < n; ++i) {
        const Eigen::VectorXd kappa = kmat.col(i);
        Eigen::VectorXd linear(n);
        for (int j = 0; j < n; ++j) {
          const double dist = std::max(0.0, pdiag[i] + pdiag[j] - 2.0 * p(i, j));
          linear[j] = kappa[j] * (2.0 * g1 * dist - 2.0 * p(i, j));  // ṽ = κ ∘ (2γ₁v − 2p)
        }
        std::vector<int> cand = GreedyLocalBases(kappa, p, linear, i, options.num_bases);
        std::sort(cand.begin(), cand.end());
        auto& old = r.bases[static_cast<std::size_t>(i)];
        // The greedy set replaces B_i when B_i is not yet of size B (the
        // sparse-coding initialization), else only when it is not worse.
        if (cand != old && (old.size() != cand.size() ||
                            PointTerm(p, kappa, cand, i, g1) <= PointTerm(p, kappa, old, i, g1))) {
          old = std::move(cand);
          changed = true;
        }
      }
      const double obj = UmklObjective(x, kmat, r.bases, g1);
      r.stats.iterations = it;
      r.stats.objective_history.push_back(obj);
      IterationRow row;
      row.iteration = it;
      row.objective = obj;
      row.seconds = watch.Seconds();
      ReportIteration(control, row, options.max_iterations, &r.stats);
      const bool small = (prev - obj) <= options.tolerance * std::max(std::abs(obj), 1e-300);
      prev = obj;
      if (!changed || small) {
        r.stats.termination = Termination::kConverged;
        break;
      }
    }
    r.objective = UmklObjective(x, kmat, r.bases, g1);
    r.stats.final_objective = r.objective;
    r.stats.solve_seconds = watch.Seconds() - r.stats.setup_seconds;
    return r;
  });
}

Status UmklClassifierOptions::Validate() const {
  KLS_RETURN_IF_ERROR(solver.Validate());
  return protocol.Validate();
}

StatusOr<MklClassifierResult> TrainUmklClassifier(const Eigen::MatrixXd& x_raw, const Eigen::VectorXd& y,
                                                  const UmklClassifierOptions& options, const SolveControl& control) {
  return GuardExceptions("TrainUmklClassifier", [&]() -> StatusOr<MklClassifierResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    if (y.size() != x_raw.rows()) {
      return InvalidArgumentError("labels: " + std::to_string(y.size()) + " labels for " +
                                  std::to_string(x_raw.rows()) + " points");
    }
    KLS_RETURN_IF_ERROR(ValidateSignLabels(y, "labels"));
    const MklProtocolOptions& pr = options.protocol;
    KLS_ASSIGN_OR_RETURN(PreparedMklData prep, PrepareMklData(x_raw, pr.standardize, pr.single_feature_kernels));
    KLS_ASSIGN_OR_RETURN(UmklResult fit, SolveUmkl(prep.x, prep.bank, options.solver, control));
    if (fit.stats.termination == Termination::kCancelled) return CancelledError("umkl training cancelled");
    if (fit.stats.termination == Termination::kTimeLimit) return DeadlineExceededError("umkl training passed its deadline");
    std::vector<BaseKernelSpec> kept;
    std::vector<double> wv;
    for (std::size_t t = 0; t < prep.bank.size(); ++t)
      if (fit.weights[static_cast<Eigen::Index>(t)] > 0) {
        kept.push_back(prep.bank[t]);
        wv.push_back(fit.weights[static_cast<Eigen::Index>(t)]);
      }
    Eigen::VectorXd weights = Eigen::Map<Eigen::VectorXd>(wv.data(), static_cast<Eigen::Index>(wv.size()));
    const Eigen::MatrixXd k = CombinedKernel(kept, weights, KernelCombination::kLinear, prep.x, prep.x);
    MklClassifierResult out;
    out.bank_size = static_cast<int>(prep.bank.size());
    out.stats = fit.stats;
    out.c = pr.c_grid.front();
    if (pr.c_grid.size() > 1) {
      for (double c : pr.c_grid) {
        Termination why;
        if (control.ShouldStop(&why)) {
          return why == Termination::kCancelled ? CancelledError("umkl training cancelled")
                                                : DeadlineExceededError("umkl training passed its deadline");
        }
        KLS_ASSIGN_OR_RETURN(double acc, CrossValidateSvm(k, y, c, pr.cv_folds, pr.cv_seed));
        out.cv_accuracy.push_back(acc);
      }
      out.c = pr.c_grid[static_cast<std::size_t>(ArgBestAccuracy(out.cv_accuracy))];
    }
    SvmOptions so;
    so.c = out.c;
    KLS_ASSIGN_OR_RETURN(SvmSolution svm, TrainSvm(k, y, so));
    out.classifier = MakeKernelClassifier(std::move(kept), std::move(weights), KernelCombination::kLinear,
                                          prep.standardizer, prep.x, y, svm);
    out.classifier.positive_class = pr.positive_class;
    out.classifier.negative_class = pr.negative_class;
    return out;
  });
}

}  // namespace kls
