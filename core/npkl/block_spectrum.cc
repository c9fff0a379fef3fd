#include "core/npkl/block_spectrum.h"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "core/common/parallel.h"

namespace kls {

Status BlockSpectrumOptions::Validate() const {
  if (!(tolerance > 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError("tolerance = " + std::to_string(tolerance) + " must be finite and > 0");
  }
  if (max_iterations < 1) {
    return InvalidArgumentError("max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  if (guard < 1) return InvalidArgumentError("guard = " + std::to_string(guard) + " must be >= 1");
  if (guard_min < 1) return InvalidArgumentError("guard_min = " + std::to_string(guard_min) + " must be >= 1");
  if (!(positive_threshold >= 0.0) || !std::isfinite(positive_threshold)) {
    return InvalidArgumentError("positive_threshold = " + std::to_string(positive_threshold) +
                                " must be finite and >= 0");
  }
  if (num_threads < 1) {
    return InvalidArgumentError("num_threads = " + std::to_string(num_threads) + " must be >= 1");
  }
  return OkStatus();
}

namespace {

// Yᵀ-layout product: rows of `xt` are vectors x, rows of the result are
// (A x)ᵀ = (Σ_k w_k S_k x − L x)ᵀ; xt·L = (L x)ᵀ since L is symmetric.
void ApplyTransposed(const DualMatrix& a, const BlockedLaplacian& laplacian, const Eigen::MatrixXd& xt,
                     int num_threads, Eigen::MatrixXd* yt) {
  laplacian.Apply(xt, num_threads, yt);
  *yt = -*yt;
  const std::vector<int>& rows = a.term_rows();
  const std::vector<int>& cols = a.term_cols();
  const Eigen::VectorXd& w = a.weights();
  for (int k = 0; k < a.num_terms(); ++k) {
    const int i = rows[k], j = cols[k];
    if (i == j) {
      yt->col(i) += w[k] * xt.col(i);
    } else {  // S_ij = (E_ij + E_ji)/2
      yt->col(i) += (0.5 * w[k]) * xt.col(j);
      yt->col(j) += (0.5 * w[k]) * xt.col(i);
    }
  }
}

// Rows of `y` made orthonormal and orthogonal to the orthonormal rows of `x`:
// two passes of (block Gram–Schmidt against x, then SVQB), dropping the
// directions whose scaled Gram eigenvalue is below 1e-10 (linearly dependent
// on the rest). May return fewer rows than it was given.
Eigen::MatrixXd Orthonormalize(Eigen::MatrixXd y, const Eigen::MatrixXd& x) {
  for (int pass = 0; pass < 2 && y.rows() > 0; ++pass) {
    if (x.rows() > 0) y -= (y * x.transpose()) * x;
    const Eigen::MatrixXd gram = y * y.transpose();
    Eigen::VectorXd dinv(gram.rows());
    for (Eigen::Index c = 0; c < gram.rows(); ++c) dinv[c] = gram(c, c) > 0.0 ? 1.0 / std::sqrt(gram(c, c)) : 0.0;
    const Eigen::MatrixXd scaled = dinv.asDiagonal() * gram * dinv.asDiagonal();
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(scaled);
    const Eigen::VectorXd& mu = eig.eigenvalues();  // ascending
    Eigen::Index first = 0;
    while (first < mu.size() && !(mu[first] > 1e-10)) ++first;
    const Eigen::Index keep = mu.size() - first;
    Eigen::MatrixXd t = (eig.eigenvectors().rightCols(keep) *
                         mu.tail(keep).cwiseSqrt().cwiseInverse().asDiagonal())
                            .transpose() *
                        dinv.asDiagonal();
    y = t * y;
  }
  return y;
}

Eigen::MatrixXd RandomRows(int rows, int n, std::mt19937_64* rng) {
  std::normal_distribution<double> g;
  Eigen::MatrixXd r(rows, n);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < n; ++j) r(i, j) = g(*rng);
  return r;
}

// Rayleigh–Ritz on the orthonormal rows of s (with as = rows of A s): the top
// `p` Ritz pairs, descending, into x, ax, theta; `c` the s.rows() × p
// coefficients (x = cᵀ s).
void RayleighRitz(const Eigen::MatrixXd& s, const Eigen::MatrixXd& as, int p, Eigen::MatrixXd* x,
                  Eigen::MatrixXd* ax, Eigen::VectorXd* theta, Eigen::MatrixXd* c) {
  Eigen::MatrixXd h = s * as.transpose();
  h = 0.5 * (h + h.transpose()).eval();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(h);
  *c = eig.eigenvectors().rightCols(p).rowwise().reverse();
  *theta = eig.eigenvalues().tail(p).reverse();
  *x = c->transpose() * s;
  *ax = c->transpose() * as;
}

}  // namespace

StatusOr<BlockSpectrumResult> BlockPositiveSpectrum(const DualMatrix& a, const BlockedLaplacian& laplacian,
                                                    const Eigen::MatrixXd& start,
                                                    const BlockSpectrumOptions& options) {
  KLS_RETURN_IF_ERROR(options.Validate().WithContext("BlockSpectrumOptions"));
  const int n = static_cast<int>(a.rows());
  if (start.rows() != n || start.cols() < 1) {
    return InvalidArgumentError("start: is " + std::to_string(start.rows()) + " × " +
                                std::to_string(start.cols()) + " but the matrix has " + std::to_string(n) +
                                " rows (and at least one column is needed)");
  }
  std::mt19937_64 rng(options.seed);
  const int threads = options.num_threads;
  int p = std::max<int>(static_cast<int>(start.cols()), options.guard_min + 1);
  auto too_large = [&] {
    return InternalError("block eigensolver: block of " + std::to_string(p) + " columns exceeds n / 2 = " +
                         std::to_string(n / 2));
  };
  if (2 * p > n) return too_large();

  // Orthonormal start X (p × n); random rows replace lost or missing ones.
  Eigen::MatrixXd x = Orthonormalize(start.transpose(), Eigen::MatrixXd());
  while (x.rows() < p) {
    Eigen::MatrixXd extra = Orthonormalize(RandomRows(p - static_cast<int>(x.rows()), n, &rng), x);
    Eigen::MatrixXd grown(x.rows() + extra.rows(), n);
    grown << x, extra;
    x.swap(grown);
  }
  Eigen::MatrixXd ax;
  ApplyTransposed(a, laplacian, x, threads, &ax);
  long long products = p;
  Eigen::MatrixXd c, next_x, next_ax;
  Eigen::VectorXd theta;
  RayleighRitz(x, ax, p, &next_x, &next_ax, &theta, &c);
  x.swap(next_x);
  ax.swap(next_ax);

  BlockSpectrumResult result;
  Eigen::MatrixXd dir;  // P: the last update direction (rows), empty at first
  for (int it = 1; it <= options.max_iterations; ++it) {
    result.iterations = it;
    if (!theta.allFinite() || !ax.allFinite()) return InternalError("block eigensolver: non-finite values");
    const Eigen::MatrixXd r = ax - theta.asDiagonal() * x;
    const Eigen::VectorXd res = r.rowwise().norm();
    const double bound = options.tolerance * std::max(1.0, theta[0]);
    int npos = 0;
    while (npos < p && theta[npos] > options.positive_threshold) ++npos;
    if (p - npos < options.guard_min) {
      // Too few non-positive Ritz values to bound A₊: grow the block.
      p += options.guard;
      if (2 * p > n) return too_large();
      Eigen::MatrixXd g = Orthonormalize(RandomRows(options.guard, n, &rng), x);
      Eigen::MatrixXd ag;
      ApplyTransposed(a, laplacian, g, threads, &ag);
      products += g.rows();
      Eigen::MatrixXd s(x.rows() + g.rows(), n), as(x.rows() + g.rows(), n);
      s << x, g;
      as << ax, ag;
      p = static_cast<int>(s.rows());
      RayleighRitz(s, as, p, &x, &ax, &theta, &c);
      dir.resize(0, n);
      continue;
    }
    bool converged = true;
    for (int j = 0; j < npos; ++j) converged = converged && res[j] <= bound;
    if (converged) {
      result.converged = true;
      break;
    }
    // Search directions: residuals of the unconverged wanted pairs and of the
    // first guard_min guards (so the guards follow the top of the
    // non-positive spectrum, where new positive eigenvalues come from).
    std::vector<int> active;
    for (int j = 0; j < std::min(p, npos + options.guard_min); ++j)
      if (res[j] > bound) active.push_back(j);
    // P only for the active pairs (soft locking): converged pairs add no
    // directions, so the Rayleigh–Ritz basis is p + 2·|active|, not 3p.
    const Eigen::Index na = static_cast<Eigen::Index>(active.size());
    const bool with_dir = dir.rows() == p;
    Eigen::MatrixXd y(with_dir ? 2 * na : na, n);
    for (Eigen::Index t = 0; t < na; ++t) {
      y.row(t) = r.row(active[t]);
      if (with_dir) y.row(na + t) = dir.row(active[t]);
    }
    Eigen::MatrixXd q = Orthonormalize(std::move(y), x);
    if (q.rows() == 0) break;  // no new direction: stagnated
    Eigen::MatrixXd aq;
    ApplyTransposed(a, laplacian, q, threads, &aq);
    products += q.rows();
    Eigen::MatrixXd s(p + q.rows(), n), as(p + q.rows(), n);
    s << x, q;
    as << ax, aq;
    RayleighRitz(s, as, p, &x, &ax, &theta, &c);
    dir = c.bottomRows(q.rows()).transpose() * q;  // LOBPCG's P: the part of the update outside old X
  }

  int npos = 0;
  while (npos < p && theta[npos] > options.positive_threshold) ++npos;
  result.ritz_values = theta;
  result.block = x.transpose();
  result.spectrum.eigenvalues = theta.head(npos);
  result.spectrum.eigenvectors = x.topRows(npos).transpose();
  result.spectrum.used_dense = false;
  result.spectrum.matrix_vector_products = products;
  if (!result.spectrum.eigenvalues.allFinite() || !result.spectrum.eigenvectors.allFinite()) {
    return InternalError("block eigensolver: non-finite Ritz pairs");
  }
  return result;
}

}  // namespace kls
