#include "core/metric/itml.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>

#include "core/common/parallel.h"

namespace kls {
namespace {

constexpr int kPercentileSample = 100000;
// Projections between two cancellation/deadline checks inside a sweep.
constexpr int kProjectionsPerCheck = 1 << 16;

struct UsedPair {
  int index;     // into constraints.pairs
  double delta;  // +1 must-link, -1 cannot-link
};

// The value at quantile q (0..1) of `v` (reordered), nearest rank.
double Quantile(std::vector<double>& v, double q) {
  const size_t k = static_cast<size_t>(std::floor(q * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// D_ld(M, M0) + γ Σ D_ld(ξ, ξ0) (paper (4.3)); NaN when M is not positive definite.
double Objective(const Eigen::MatrixXd& m, const Eigen::MatrixXd& m0_inv, double logdet_m0, double gamma,
                 const std::vector<UsedPair>& used, const Eigen::VectorXd& xi, const Eigen::VectorXd& xi0) {
  const int d = static_cast<int>(m.rows());
  Eigen::LLT<Eigen::MatrixXd> llt(m);
  if (llt.info() != Eigen::Success) return std::numeric_limits<double>::quiet_NaN();
  const double logdet_m = 2.0 * llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
  double obj = (m0_inv.cwiseProduct(m)).sum() - (logdet_m - logdet_m0) - d;
  for (const UsedPair& u : used) {
    const double r = xi(u.index) / xi0(u.index);
    obj += gamma * (r - std::log(r) - 1.0);
  }
  return obj;
}

// M0: the identity, or options.prior after checking its shape and symmetry.
StatusOr<Eigen::MatrixXd> PriorMetric(const ItmlOptions& options, int d) {
  if (options.prior.size() == 0) return Eigen::MatrixXd(Eigen::MatrixXd::Identity(d, d));
  if (options.prior.rows() != d || options.prior.cols() != d) {
    return InvalidArgumentError("itml.prior is " + std::to_string(options.prior.rows()) + " x " +
                                std::to_string(options.prior.cols()) + "; must be " + std::to_string(d) + " x " +
                                std::to_string(d) + " (the number of features)");
  }
  const double asym = (options.prior - options.prior.transpose()).cwiseAbs().maxCoeff();
  if (asym > 1e-10 * std::max(1.0, options.prior.cwiseAbs().maxCoeff())) {
    return InvalidArgumentError("itml.prior is not symmetric (max |M0 - M0^T| = " + FormatNumber(asym) + ")");
  }
  return Eigen::MatrixXd(0.5 * (options.prior + options.prior.transpose()));
}

// The pairs that carry information (distinct points at a positive distance),
// with their distances under M0 in `d0`; returns how many were skipped.
int UsedPairs(const Eigen::MatrixXd& x, const PairwiseConstraints& constraints, const Eigen::MatrixXd& m0,
              std::vector<UsedPair>* used, std::vector<double>* d0) {
  const int m = constraints.size();
  int skipped = 0;
  used->reserve(m);
  d0->reserve(m);
  for (int c = 0; c < m; ++c) {
    const Pair& p = constraints.pairs[c];
    if (p.i == p.j) {
      ++skipped;
      continue;
    }
    const Eigen::VectorXd v = x.row(p.i).transpose() - x.row(p.j).transpose();
    if (v.squaredNorm() == 0.0) {
      ++skipped;
      continue;
    }
    used->push_back({c, p.sign()});
    d0->push_back(v.dot(m0 * v));
  }
  return skipped;
}

// The bounds left at 0 in the options (paper §5: 5th / 95th percentiles of
// the distances, over a seeded sample of at most kPercentileSample of them).
void DefaultBounds(const ItmlOptions& options, const std::vector<double>& d0, double* lower, double* upper) {
  *lower = options.lower.value_or(0.0);
  *upper = options.upper.value_or(0.0);
  if ((!options.lower || !options.upper) && !d0.empty()) {
    std::vector<double> sample;
    if (static_cast<int>(d0.size()) <= kPercentileSample) {
      sample = d0;
    } else {
      std::mt19937_64 rng(options.seed);
      std::uniform_int_distribution<size_t> pick(0, d0.size() - 1);
      sample.reserve(kPercentileSample);
      for (int s = 0; s < kPercentileSample; ++s) sample.push_back(d0[pick(rng)]);
    }
    if (!options.lower) *lower = Quantile(sample, 0.05);
    if (!options.upper) *upper = Quantile(sample, 0.95);
  }
}

// One sweep of Bregman projections over the used pairs, updating M, ξ and λ.
// Returns the sweep's largest relative violation; sets *stop (and *stopped)
// on a numerical issue or when the control asks to stop, which it checks
// every kProjectionsPerCheck projections (`since_check` counts across sweeps).
double ProjectionSweep(const Eigen::MatrixXd& x, const PairwiseConstraints& constraints,
                       const std::vector<UsedPair>& used, double gamma, const SolveControl& control,
                       Eigen::MatrixXd* mm, Eigen::VectorXd* xi, Eigen::VectorXd* lambda, int* since_check,
                       Termination* stop, bool* stopped) {
  const double gamma_proj = gamma / (gamma + 1.0);
  const Eigen::Index d = mm->rows();
  Eigen::VectorXd v(d), mv(d);
  double sweep_violation = 0.0;
  for (const UsedPair& u : used) {
    const Pair& pr = constraints.pairs[u.index];
    v = x.row(pr.i).transpose() - x.row(pr.j).transpose();
    mv.noalias() = *mm * v;
    const double p = v.dot(mv);
    const double delta = u.delta;
    double& xi_c = (*xi)(u.index);
    double& lam = (*lambda)(u.index);
    sweep_violation = std::max(sweep_violation, std::max(0.0, delta * (p - xi_c) / xi_c));
    // The exact Bregman projection onto δ (d_M − ξ) <= 0 (see itml.h):
    // after it d_M = ξ (or λ reached 0).
    const double alpha = std::min(lam, delta * gamma_proj * (1.0 / p - 1.0 / xi_c));
    const double beta = delta * alpha / (1.0 - delta * alpha * p);
    xi_c = 1.0 / (1.0 / xi_c + delta * alpha / gamma);  // = γξ / (γ + δαξ)
    lam -= alpha;
    mm->noalias() += beta * mv * mv.transpose();
    if (!std::isfinite(beta) || !std::isfinite(xi_c) || xi_c <= 0.0) {
      *stop = Termination::kNumericalIssue;
      *stopped = true;
      break;
    }
    if (++*since_check >= kProjectionsPerCheck) {
      *since_check = 0;
      Termination why;
      if (control.ShouldStop(&why)) {
        *stop = why;
        *stopped = true;
        break;
      }
    }
  }
  return sweep_violation;
}

// M = L Lᵀ from the symmetric eigendecomposition, eigenvalues clipped at 0:
// result->factor (L, d × rank, columns by decreasing eigenvalue) and result->metric.
Status FactorMetric(const Eigen::MatrixXd& mm, ItmlResult* result) {
  const int d = static_cast<int>(mm.rows());
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(mm);
  if (eig.info() != Eigen::Success) return InternalError("itml: eigendecomposition of the learned metric failed");
  const Eigen::VectorXd& ev = eig.eigenvalues();  // ascending
  const double top = std::max(ev(d - 1), 0.0);
  const double cutoff = top * d * std::numeric_limits<double>::epsilon();
  int r = 0;
  for (int k = 0; k < d; ++k) r += ev(k) > cutoff ? 1 : 0;
  result->factor.resize(d, r);
  for (int k = 0; k < r; ++k) {
    const int src = d - 1 - k;  // descending
    result->factor.col(k) = eig.eigenvectors().col(src) * std::sqrt(ev(src));
  }
  result->metric = result->factor * result->factor.transpose();
  return OkStatus();
}

StatusOr<ItmlResult> SolveItmlImpl(const Eigen::MatrixXd& x, const PairwiseConstraints& constraints,
                                   const ItmlOptions& options, const SolveControl& control) {
  Stopwatch setup_clock;
  KLS_RETURN_IF_ERROR(options.Validate("itml"));
  const int n = static_cast<int>(x.rows());
  const int d = static_cast<int>(x.cols());
  if (n < 1 || d < 1) {
    return InvalidArgumentError("itml: features are " + std::to_string(n) + " x " + std::to_string(d) +
                                "; need at least one point and one feature");
  }
  if (d > kItmlMaxDimension) {
    return InvalidArgumentError("itml: " + std::to_string(d) + " features exceed the limit of " +
                                std::to_string(kItmlMaxDimension) +
                                " (ITML learns a dense d x d metric at O(d^2) per constraint projection; reduce the "
                                "dimension first)");
  }
  if (!x.allFinite()) return InvalidArgumentError("itml: the features contain NaN or infinite values");
  KLS_RETURN_IF_ERROR(constraints.Validate(n));

  // M0 and its inverse.
  KLS_ASSIGN_OR_RETURN(const Eigen::MatrixXd m0, PriorMetric(options, d));
  Eigen::LLT<Eigen::MatrixXd> m0_llt(m0);
  if (m0_llt.info() != Eigen::Success) return InvalidArgumentError("itml.prior is not positive definite");
  const Eigen::MatrixXd m0_inv = m0_llt.solve(Eigen::MatrixXd::Identity(d, d));
  const double logdet_m0 = 2.0 * m0_llt.matrixL().toDenseMatrix().diagonal().array().log().sum();

  ItmlResult result;
  const int m = constraints.size();
  result.lambda = Eigen::VectorXd::Zero(m);
  result.slack = Eigen::VectorXd::Zero(m);

  // The pairs that carry information, and their distances under M0.
  std::vector<UsedPair> used;
  std::vector<double> d0;
  result.skipped_pairs += UsedPairs(x, constraints, m0, &used, &d0);

  // The bounds (paper §5: 5th / 95th percentiles of the distances).
  double lower = 0.0, upper = 0.0;
  DefaultBounds(options, d0, &lower, &upper);
  result.lower = lower;
  result.upper = upper;

  // ξ0 and ξ (Algorithm 1: ξ_c(i,j) starts at the pair's bound), λ = 0, M = M0.
  Eigen::VectorXd xi0 = Eigen::VectorXd::Zero(m);
  for (const UsedPair& u : used) xi0(u.index) = u.delta > 0 ? lower : upper;
  Eigen::VectorXd& xi = result.slack;
  xi = xi0;
  Eigen::VectorXd& lambda = result.lambda;
  Eigen::MatrixXd mm = m0;

  const int max_sweeps = options.max_iterations;
  const double gamma = options.gamma;
  result.stats.setup_seconds = setup_clock.Seconds();
  Stopwatch solve_clock;
  result.stats.termination = Termination::kIterationLimit;

  Eigen::VectorXd v(d);
  Eigen::VectorXd lambda_old;
  bool stopped = used.empty();
  if (used.empty()) {
    result.converged = true;
    result.stats.termination = Termination::kConverged;
  }
  int since_check = 0;
  for (int sweep = 0; !stopped && sweep < max_sweeps; ++sweep) {
    lambda_old = lambda;
    const double sweep_violation = ProjectionSweep(x, constraints, used, gamma, control, &mm, &xi, &lambda,
                                                   &since_check, &result.stats.termination, &stopped);
    if (stopped) break;
    mm = 0.5 * (mm + mm.transpose()).eval();
    result.sweeps = sweep + 1;
    const double norm_sum = lambda.lpNorm<1>() + lambda_old.lpNorm<1>();
    const double change = norm_sum == 0.0 ? 0.0 : (lambda - lambda_old).lpNorm<1>() / norm_sum;
    const double obj = Objective(mm, m0_inv, logdet_m0, gamma, used, xi, xi0);
    result.stats.objective_history.push_back(obj);
    IterationRow row;
    row.iteration = result.sweeps;
    row.objective = obj;
    row.primal_residual = sweep_violation;
    row.dual_residual = change;
    row.seconds = solve_clock.Seconds();
    ReportIteration(control, row, max_sweeps, &result.stats);
    if (change < options.tolerance) {
      result.converged = true;
      result.stats.termination = Termination::kConverged;
      break;
    }
    Termination why;
    if (control.ShouldStop(&why)) {
      result.stats.termination = why;
      break;
    }
  }
  result.stats.iterations = result.sweeps;
  result.stats.solve_seconds = solve_clock.Seconds();
  mm = 0.5 * (mm + mm.transpose()).eval();

  // The final violation, relative to the slack-adjusted bound.
  for (const UsedPair& u : used) {
    const Pair& pr = constraints.pairs[u.index];
    v = x.row(pr.i).transpose() - x.row(pr.j).transpose();
    const double p = v.dot(mm * v);
    result.max_violation = std::max(result.max_violation, u.delta * (p - xi(u.index)) / xi(u.index));
  }
  result.max_violation = std::max(result.max_violation, 0.0);
  result.stats.final_objective = result.stats.objective_history.empty()
                                     ? Objective(mm, m0_inv, logdet_m0, gamma, used, xi, xi0)
                                     : result.stats.objective_history.back();

  KLS_RETURN_IF_ERROR(FactorMetric(mm, &result));
  return result;
}

}  // namespace

Status ItmlOptions::Validate(std::string_view path) const {
  const std::string p(path);
  if (!(gamma > 0.0) || !std::isfinite(gamma)) {
    return InvalidArgumentError(p + ".gamma = " + FormatNumber(gamma) + " must be positive and finite");
  }
  if (lower && (!(*lower > 0.0) || !std::isfinite(*lower))) {
    return InvalidArgumentError(p + ".lower = " + FormatNumber(*lower) +
                                " must be finite and > 0 (unset = the 5th percentile of the pairs' distances)");
  }
  if (upper && (!(*upper > 0.0) || !std::isfinite(*upper))) {
    return InvalidArgumentError(p + ".upper = " + FormatNumber(*upper) +
                                " must be finite and > 0 (unset = the 95th percentile of the pairs' distances)");
  }
  if (max_iterations < 1) {
    return InvalidArgumentError(p + ".max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  if (!(tolerance > 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError(p + ".tolerance = " + FormatNumber(tolerance) + " must be finite and > 0");
  }
  if (num_threads < 0 || num_threads > kMaxSolverThreads) {
    return InvalidArgumentError(p + ".num_threads = " + std::to_string(num_threads) + " must be in [0, " +
                                std::to_string(kMaxSolverThreads) + "] (0 = all hardware threads)");
  }
  for (Eigen::Index k = 0; k < prior.size(); ++k) {  // row-major k, as the service's repeated field
    const double v = prior(k / prior.cols(), k % prior.cols());
    if (!std::isfinite(v)) {
      return InvalidArgumentError(p + ".prior[" + std::to_string(k) + "] = " + FormatNumber(v) + " is not finite");
    }
  }
  return OkStatus();
}

StatusOr<ItmlResult> SolveItml(const Eigen::MatrixXd& features, const PairwiseConstraints& constraints,
                               const ItmlOptions& options, const SolveControl& control) {
  return GuardExceptions("itml", [&]() { return SolveItmlImpl(features, constraints, options, control); });
}

}  // namespace kls
