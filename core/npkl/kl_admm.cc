#include "core/npkl/kl_admm.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>
#include <exception>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/common/parallel.h"

namespace kls {
namespace {

// T_i of eq. (11)–(13) for every i, in compressed rows: the points j with
// (i, j) ∈ T and their targets T_ij (1 must-link / self, 0 cannot-link).
// An unordered constraint {i, j}, i ≠ j, lands in both rows i and j — these
// are the ordered entries (i, j) and (j, i) of the header's convention — and a
// self pair (i, i) once in row i. Rows keep the constraints' input order, so
// every sum over T_i below has a fixed order.
struct ConstraintRows {
  std::vector<int> offset;     // n + 1
  std::vector<int> neighbor;   // |T| ordered entries
  std::vector<double> target;  // T_ij per entry
  int max_row = 0;             // max_i |T_i|

  int num_entries() const { return static_cast<int>(neighbor.size()); }
};

ConstraintRows BuildRows(const PairwiseConstraints& constraints, int n) {
  ConstraintRows rows;
  std::vector<int> count(n, 0);
  for (const Pair& p : constraints.pairs) {
    ++count[p.i];
    if (p.j != p.i) ++count[p.j];
  }
  rows.offset.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    rows.offset[i + 1] = rows.offset[i] + count[i];
    rows.max_row = std::max(rows.max_row, count[i]);
  }
  rows.neighbor.resize(rows.offset[n]);
  rows.target.resize(rows.offset[n]);
  std::vector<int> fill(rows.offset.begin(), rows.offset.end() - 1);
  for (const Pair& p : constraints.pairs) {
    const double t = p.kind == PairKind::kMustLink ? 1.0 : 0.0;  // eq. (2)
    rows.neighbor[fill[p.i]] = p.j;
    rows.target[fill[p.i]++] = t;
    if (p.j != p.i) {
      rows.neighbor[fill[p.j]] = p.i;
      rows.target[fill[p.j]++] = t;
    }
  }
  return rows;
}

// out = Y·L, the Laplacian term of every c_i (resp. d_i) at once:
// (Y L)_i = Σ_s L_si y_s = Σ_s L_is y_s (L symmetric). Written out as one
// axpy of a contiguous column y_s per non-zero of L's column i so that it can
// be split across threads by output column with each column computed by the
// same serial code whatever the split (Eigen's dense×sparse product is no
// faster single-threaded: both are bound by reading r doubles per non-zero).
void LaplacianProduct(const Eigen::MatrixXd& y, const Eigen::SparseMatrix<double>& l, int num_threads,
                      Eigen::MatrixXd* out) {
  ParallelFor(static_cast<int>(l.outerSize()), num_threads, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      auto col = out->col(i);
      col.setZero();
      for (Eigen::SparseMatrix<double>::InnerIterator it(l, i); it; ++it) {
        col.noalias() += it.value() * y.col(it.row());
      }
    }
  });
}

// One half-step of Algorithm 1 (line 6), eq. (13): for every column i,
//     x_i = (ρI + γ Σ_{j∈T_i} y_j y_jᵀ)⁻¹ (γ Σ_{j∈T_i} T_ij y_j − (Y L)_i + ρ y_i + s Λ_i)
// with Y the factor held fixed. V-step: Y = U, s = −1 (eq. (11), c_i);
// U-step: Y = V, s = +1 (eq. (12), d_i). `yl` = Y·L, computed once per
// half-step by the caller. Columns are independent, so they are split across
// threads; each column's arithmetic is the same whatever the split.
void HalfStep(const Eigen::MatrixXd& y, const Eigen::MatrixXd& yl, const Eigen::MatrixXd& lambda,
              double sign, double rho, double gamma, const ConstraintRows& rows, int num_threads,
              Eigen::MatrixXd* x) {
  const int r = static_cast<int>(y.rows());
  const int n = static_cast<int>(y.cols());
  ParallelFor(n, num_threads, [&](int begin, int end) {
    Eigen::MatrixXd p(r, rows.max_row);  // P_i = [y_j]_{j∈T_i} (eq. (25))
    Eigen::MatrixXd small;               // ρ/γ I + P_iᵀP_i  or  ρI + γ P_iP_iᵀ
    Eigen::VectorXd b(r), w;
    Eigen::LLT<Eigen::MatrixXd> llt;
    for (int i = begin; i < end; ++i) {
      const int first = rows.offset[i];
      const int t = rows.offset[i + 1] - first;
      b = rho * y.col(i) + sign * lambda.col(i) - yl.col(i);
      for (int k = 0; k < t; ++k) {
        const int j = rows.neighbor[first + k];
        p.col(k) = y.col(j);
        if (rows.target[first + k] != 0.0) b.noalias() += (gamma * rows.target[first + k]) * y.col(j);
      }
      auto pt = p.leftCols(t);
      if (t == 0) {
        x->col(i) = b / rho;
      } else if (t < r) {
        // eq. (25): A⁻¹b = (1/ρ)(b − P (ρ/γ I + PᵀP)⁻¹ Pᵀ b), a t×t system.
        // lazyProduct: t is tiny, so t² dot products beat Eigen's GEMM path.
        small.noalias() = pt.transpose().lazyProduct(pt);
        small.diagonal().array() += rho / gamma;
        llt.compute(small);
        w.noalias() = pt.transpose() * b;
        llt.solveInPlace(w);
        b.noalias() -= pt * w;
        x->col(i) = b / rho;
      } else {
        // |T_i| ≥ r: the r×r system A_i of eq. (11)/(12) directly.
        small.noalias() = gamma * (pt * pt.transpose());
        small.diagonal().array() += rho;
        llt.compute(small);
        llt.solveInPlace(b);
        x->col(i) = b;
      }
    }
  });
}

// Eq. (1) at K = VᵀV: tr(V L Vᵀ) + (γ/2) Σ_{(i,j)∈T} (v_iᵀv_j − T_ij)², given
// vl = V·L. The loss runs over the ordered entries, so an i ≠ j pair is
// counted twice and a self pair once, as documented in the header.
double Objective(const Eigen::MatrixXd& v, const Eigen::MatrixXd& vl, double gamma,
                 const ConstraintRows& rows) {
  const double smooth = vl.cwiseProduct(v).sum();
  double loss = 0.0;
  const int n = static_cast<int>(v.cols());
  for (int i = 0; i < n; ++i) {
    for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e) {
      const double d = v.col(i).dot(v.col(rows.neighbor[e])) - rows.target[e];
      loss += d * d;
    }
  }
  return smooth + 0.5 * gamma * loss;
}

// Uniform in [−a, a] from the top 53 bits of the engine, with no
// std::distribution so V⁰ is the same across standard libraries.
Eigen::MatrixXd RandomStart(int r, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double a = std::sqrt(3.0 / r);
  Eigen::MatrixXd v(r, n);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < r; ++k) {
      const double unit = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
      v(k, i) = a * (2.0 * unit - 1.0);
    }
  }
  return v;
}

Status CheckSymmetric(const Eigen::SparseMatrix<double>& l) {
  const Eigen::SparseMatrix<double> lt = l.transpose();
  const double diff = (l - lt).norm();
  const double scale = l.norm();
  if (!(diff <= 1e-10 * std::max(scale, 1e-300))) {
    return InvalidArgumentError("laplacian: must be symmetric, ‖L − Lᵀ‖_F = " + FormatNumber(diff) +
                                " with ‖L‖_F = " + FormatNumber(scale));
  }
  return OkStatus();
}

StatusOr<NpklResult> Solve(const NpklProblem& problem, const KlAdmmOptions& options,
                           const SolveControl& control) {
  Stopwatch setup_clock;
  KLS_RETURN_IF_ERROR(problem.Validate());
  KLS_RETURN_IF_ERROR(options.Validate());
  KLS_RETURN_IF_ERROR(CheckSymmetric(problem.laplacian));
  const int n = problem.num_points();
  if (options.rank > n) {
    return InvalidArgumentError("options.rank = " + std::to_string(options.rank) +
                                " exceeds the number of points " + std::to_string(n));
  }
  const ConstraintRows rows = BuildRows(problem.constraints, n);
  const int r = options.rank > 0 ? options.rank : std::min(n, RankBound(rows.num_entries()));
  const double gamma = options.gamma;
  const Eigen::SparseMatrix<double>& l = problem.laplacian;
  const int threads = ResolveThreadCount(options.num_threads);

  Eigen::MatrixXd v = RandomStart(r, n, options.seed);
  Eigen::MatrixXd u = v;
  Eigen::MatrixXd lambda = Eigen::MatrixXd::Zero(r, n);
  Eigen::MatrixXd v_old(r, n), work(r, n);
  double rho = options.rho_initial;

  NpklResult result;
  SolveStats& stats = result.stats;
  stats.setup_seconds = setup_clock.Seconds();
  Stopwatch clock;
  stats.termination = Termination::kIterationLimit;
  for (int iter = 1; iter <= options.max_iterations; ++iter) {
    Termination why;
    if (control.ShouldStop(&why)) {
      stats.termination = why;
      break;
    }
    v_old = v;
    // V-step, eq. (7): the Laplacian term (U L)_i of every c_i in one product.
    LaplacianProduct(u, l, threads, &work);
    HalfStep(u, work, lambda, -1.0, rho, gamma, rows, threads, &v);
    // U-step, eq. (8), with the new V.
    LaplacianProduct(v, l, threads, &work);
    HalfStep(v, work, lambda, +1.0, rho, gamma, rows, threads, &u);
    // work = V^{k+1} L, reused by the objective below.
    const double objective = Objective(v, work, gamma, rows);
    if (!std::isfinite(objective) || !u.allFinite() || !v.allFinite()) {
      v = v_old;  // the last finite iterate; objective_history ends with its value
      stats.termination = Termination::kNumericalIssue;
      break;
    }
    lambda.noalias() += rho * (v - u);  // Algorithm 1, line 8
    // eq. (14)
    const double primal = (v - u).norm();
    const double dual = rho * (v - v_old).norm();
    const double size = std::max({v.norm(), u.norm(), 1e-300});
    const double primal_rel = primal / size;
    const double dual_rel = dual / (options.rho_min * size);

    stats.iterations = iter;
    stats.objective_history.push_back(objective);
    result.primal_residual = primal;
    result.dual_residual = dual;
    ProgressEvent event;
    event.iteration = iter;
    event.objective = objective;
    event.primal_residual = primal;
    event.dual_residual = dual;
    event.elapsed_seconds = setup_clock.Seconds();
    event.max_iterations = options.max_iterations;
    control.Report(event);

    if (primal_rel <= options.tolerance && dual_rel <= options.tolerance) {
      stats.termination = Termination::kConverged;
      break;
    }
    if (options.adaptive_rho) {  // eq. (15)
      if (primal > 10.0 * dual) {
        rho *= 2.0;
      } else if (dual > 10.0 * primal) {
        rho = std::max(rho / 2.0, options.rho_min);
      }
    }
  }
  stats.solve_seconds = clock.Seconds();
  if (stats.objective_history.empty()) {
    LaplacianProduct(v, l, threads, &work);
    stats.final_objective = Objective(v, work, gamma, rows);
  } else {
    stats.final_objective = stats.objective_history.back();
  }

  LearnedKernel::Embedding embedding = v.transpose();  // n × r, row i = v_i
  KLS_ASSIGN_OR_RETURN(result.kernel, LearnedKernel::FromEmbedding(std::move(embedding)));
  return result;
}

}  // namespace

Status KlAdmmOptions::Validate() const {
  if (!(gamma > 0.0) || !std::isfinite(gamma)) {
    return InvalidArgumentError("options.gamma = " + FormatNumber(gamma) + " must be positive and finite");
  }
  if (rank < 0) {
    return InvalidArgumentError("options.rank = " + std::to_string(rank) +
                                " must be >= 1 (or 0 for automatic)");
  }
  if (!(rho_initial > 0.0) || !std::isfinite(rho_initial)) {
    return InvalidArgumentError("options.rho_initial = " + FormatNumber(rho_initial) +
                                " must be positive and finite");
  }
  if (!(rho_min > 0.0) || !std::isfinite(rho_min)) {
    return InvalidArgumentError("options.rho_min = " + FormatNumber(rho_min) + " must be positive and finite");
  }
  if (max_iterations < 1) {
    return InvalidArgumentError("options.max_iterations = " + std::to_string(max_iterations) +
                                " must be >= 1");
  }
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError("options.tolerance = " + FormatNumber(tolerance) +
                                " must be non-negative and finite");
  }
  if (num_threads < 0) {
    return InvalidArgumentError("options.num_threads = " + std::to_string(num_threads) +
                                " must be >= 0 (0 = all hardware threads)");
  }
  return OkStatus();
}

StatusOr<NpklResult> SolveKlAdmm(const NpklProblem& problem, const KlAdmmOptions& options,
                                 const SolveControl& control) {
  return GuardExceptions("KL-ADMM", [&] { return Solve(problem, options, control); });
}

}  // namespace kls
