#include "core/npkl/positive_spectrum.h"

#include <Eigen/Eigenvalues>
#include <Spectra/SymEigsSolver.h>

#include <lapacke.h>

#include "core/npkl/lanczos_spectrum.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/data/constraints.h"

namespace kls {

DualMatrix::DualMatrix(const Eigen::SparseMatrix<double>& laplacian, std::vector<int> row,
                       std::vector<int> col)
    : laplacian_(&laplacian),
      row_(std::move(row)),
      col_(std::move(col)),
      weights_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(row_.size()))) {}

void DualMatrix::perform_op(const double* x_in, double* y_out) const {
  const Eigen::Index n = rows();
  Eigen::Map<const Eigen::VectorXd> x(x_in, n);
  Eigen::Map<Eigen::VectorXd> y(y_out, n);
  y.noalias() = -(*laplacian_) * x;
  const int m = num_terms();
  for (int k = 0; k < m; ++k) {
    const int i = row_[k], j = col_[k];
    const double w = weights_[k];
    if (i == j) {
      y[i] += w * x[i];
    } else {
      // S_ij = (E_ij + E_ji)/2.
      y[i] += 0.5 * w * x[j];
      y[j] += 0.5 * w * x[i];
    }
  }
}

Eigen::MatrixXd DualMatrix::Multiply(const Eigen::MatrixXd& x) const {
  Eigen::MatrixXd y(x.rows(), x.cols());
  for (Eigen::Index c = 0; c < x.cols(); ++c) perform_op(x.col(c).data(), y.col(c).data());
  return y;
}

Eigen::MatrixXd DualMatrix::Project(const Eigen::MatrixXd& v) const {
  Eigen::MatrixXd av = Multiply(v);
  Eigen::MatrixXd p = v.transpose() * av;
  return 0.5 * (p + p.transpose());  // symmetric to rounding
}

Eigen::MatrixXd DualMatrix::ToDense() const {
  Eigen::MatrixXd a = -Eigen::MatrixXd(*laplacian_);
  for (int k = 0; k < num_terms(); ++k) {
    const int i = row_[k], j = col_[k];
    if (i == j) {
      a(i, i) += weights_[k];
    } else {
      a(i, j) += 0.5 * weights_[k];
      a(j, i) += 0.5 * weights_[k];
    }
  }
  return a;
}

Status SpectrumOptions::Validate() const {
  if (dense_threshold < 0) {
    return InvalidArgumentError("dense_threshold = " + std::to_string(dense_threshold) + " must be >= 0");
  }
  if (!(lanczos_tolerance > 0.0) || !std::isfinite(lanczos_tolerance)) {
    return InvalidArgumentError("lanczos_tolerance = " + std::to_string(lanczos_tolerance) +
                                " must be finite and > 0");
  }
  if (lanczos_max_restarts < 1) {
    return InvalidArgumentError("lanczos_max_restarts = " + std::to_string(lanczos_max_restarts) +
                                " must be >= 1");
  }
  if (!(positive_threshold >= 0.0) || !std::isfinite(positive_threshold)) {
    return InvalidArgumentError("positive_threshold = " + std::to_string(positive_threshold) +
                                " must be finite and >= 0");
  }
  return OkStatus();
}

Eigen::MatrixXd PositiveSpectrum::Dense() const {
  return eigenvectors * eigenvalues.asDiagonal() * eigenvectors.transpose();
}

// Keeps the eigenpairs with λ > threshold from (ascending or descending)
// eigenvalues, returning them in descending order.
void KeepAbove(const Eigen::VectorXd& values, const Eigen::MatrixXd& vectors, double threshold,
               PositiveSpectrum* out) {
  std::vector<int> keep;
  for (int c = 0; c < values.size(); ++c)
    if (values[c] > threshold) keep.push_back(c);
  std::sort(keep.begin(), keep.end(), [&](int a, int b) { return values[a] > values[b]; });
  out->eigenvalues.resize(static_cast<Eigen::Index>(keep.size()));
  out->eigenvectors.resize(vectors.rows(), static_cast<Eigen::Index>(keep.size()));
  for (size_t t = 0; t < keep.size(); ++t) {
    out->eigenvalues[static_cast<Eigen::Index>(t)] = values[keep[t]];
    out->eigenvectors.col(static_cast<Eigen::Index>(t)) = vectors.col(keep[t]);
  }
}

namespace {

bool AllFinite(const PositiveSpectrum& s) {
  return s.eigenvalues.allFinite() && s.eigenvectors.allFinite();
}

}  // namespace

namespace {

// Number of eigenvalues of the symmetric tridiagonal T (diagonal d,
// sub-diagonal e) that are > sigma, by Sylvester's law of inertia on the
// LDLᵀ factorization of T − σI (the Sturm count). O(n).
int CountAbove(const Eigen::VectorXd& d, const Eigen::VectorXd& e, double sigma) {
  const double tiny = std::numeric_limits<double>::min() / std::numeric_limits<double>::epsilon();
  int below = 0;
  double q = 1.0;
  for (Eigen::Index i = 0; i < d.size(); ++i) {
    q = d[i] - sigma - (i > 0 ? e[i - 1] * e[i - 1] / q : 0.0);
    if (std::abs(q) < tiny) q = -tiny;  // a zero pivot counts as ≤ σ
    if (q < 0.0) ++below;
  }
  return static_cast<int>(d.size()) - below;
}

// LAPACK's MRRR (dstemr) on the tridiagonal T of `tri`: the eigenpairs with
// eigenvalues in (vl, vu] (range 'V') or with indices il..iu, 1-based
// (range 'I'), at most `columns` of them; eigenvalues ascending, eigenvectors
// back-transformed by Q (those of the matrix `tri` reduced). False when LAPACK
// reports a failure or more than `columns` eigenpairs.
bool MrrrEigenpairs(const Eigen::Tridiagonalization<Eigen::MatrixXd>& tri, char range, double vl, double vu, int il,
                    int iu, Eigen::Index columns, Eigen::VectorXd* values, Eigen::MatrixXd* vectors) {
  const Eigen::Index n = tri.diagonal().size();
  Eigen::VectorXd d = tri.diagonal();  // dstemr overwrites d and e
  Eigen::VectorXd e = Eigen::VectorXd::Zero(n);
  e.head(n - 1) = tri.subDiagonal();
  Eigen::VectorXd w(n);
  Eigen::MatrixXd z(n, columns);
  std::vector<lapack_int> support(2 * static_cast<size_t>(n));
  lapack_int found = 0;
  lapack_logical try_relative_accuracy = 1;
  const lapack_int info = LAPACKE_dstemr(LAPACK_COL_MAJOR, 'V', range, static_cast<lapack_int>(n), d.data(), e.data(),
                                         vl, vu, il, iu, &found, w.data(), z.data(), static_cast<lapack_int>(n),
                                         static_cast<lapack_int>(columns), support.data(), &try_relative_accuracy);
  if (info != 0 || found > columns) return false;
  *values = w.head(found);
  *vectors = z.leftCols(found);
  vectors->applyOnTheLeft(tri.matrixQ());
  return true;
}

// The eigenpairs of A above `threshold` from A = Q T Qᵀ (Eigen's Householder
// tridiagonalization) and LAPACK's MRRR on the (threshold, ∞) part of T
// (dstemr, Dhillon–Parlett: O(n) per eigenvector), back-transformed by Q.
// ≈ (4/3) n³ + O(n² r) flops against ≈ 9 n³ for the full QR eigensolver with
// vectors. Past the crossover below the bisection in dstemr costs more than
// implicit QR on T, which then computes all eigenpairs of T (Eigen) and
// back-transforms the positive ones. nullopt when LAPACK or QR reports a failure (the caller
// falls back to the full solver).
std::optional<PositiveSpectrum> TridiagonalPositiveSpectrum(const Eigen::MatrixXd& a, double threshold) {
  const Eigen::Index n = a.rows();
  Eigen::Tridiagonalization<Eigen::MatrixXd> tri(a);
  Eigen::VectorXd d = tri.diagonal();
  Eigen::VectorXd e = Eigen::VectorXd::Zero(n);
  e.head(n - 1) = tri.subDiagonal();
  const int count = CountAbove(d, e, threshold);
  PositiveSpectrum out;
  out.used_dense = true;
  out.eigenvectors.resize(n, 0);
  if (count == 0) return out;
  // MRRR's bisection and back-transform grow like n·r and n²·r against QR's
  // n³: `kls-bench spectrum` puts the crossover near r = n²/600 (6 at n = 50,
  // 18 at n = 100, past 60 at n = 300), capped at n/4.
  if (600 * static_cast<long long>(count) > static_cast<long long>(n) * n || 4 * count > n) {
    // Many positive eigenpairs: implicit QR on T (all of them), then only the
    // positive ones are back-transformed.
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> qr;
    qr.computeFromTridiagonal(tri.diagonal(), tri.subDiagonal(), Eigen::ComputeEigenvectors);
    if (qr.info() != Eigen::Success) return std::nullopt;
    KeepAbove(qr.eigenvalues(), qr.eigenvectors(), threshold, &out);
    out.eigenvectors.applyOnTheLeft(tri.matrixQ());
    return out;
  }
  // Gershgorin bound on λ_max(T): the interval (threshold, upper] holds them all.
  double upper = -std::numeric_limits<double>::infinity();
  for (Eigen::Index i = 0; i < n; ++i) {
    upper = std::max(upper, d[i] + std::abs(e[i]) + (i > 0 ? std::abs(e[i - 1]) : 0.0));
  }
  upper += 1e-6 * std::max(1.0, std::abs(upper));
  Eigen::VectorXd w;
  Eigen::MatrixXd z;
  if (!MrrrEigenpairs(tri, 'V', threshold, upper, 0, 0, std::min<Eigen::Index>(n, count + 8), &w, &z)) {
    return std::nullopt;
  }
  // dstemr returns ascending eigenvalues; A₊'s convention is descending.
  out.eigenvalues = w.reverse();
  out.eigenvectors = z.rowwise().reverse();
  return out;
}

}  // namespace

StatusOr<PositiveSpectrum> DensePositiveSpectrum(const Eigen::MatrixXd& a, double positive_threshold) {
  if (a.rows() != a.cols()) return InvalidArgumentError("DensePositiveSpectrum: matrix is not square");
  PositiveSpectrum out;
  out.used_dense = true;
  if (a.rows() == 0) return out;
  // Below ~32 rows the full solver's lower overhead wins.
  if (a.rows() >= 32 && a.allFinite()) {
    std::optional<PositiveSpectrum> part = TridiagonalPositiveSpectrum(a, positive_threshold);
    if (part.has_value() && AllFinite(*part)) return std::move(*part);
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(a);
  if (eig.info() != Eigen::Success) return InternalError("dense symmetric eigensolver did not converge");
  KeepAbove(eig.eigenvalues(), eig.eigenvectors(), positive_threshold, &out);
  if (!AllFinite(out)) return InternalError("dense symmetric eigensolver returned non-finite values");
  return out;
}

Status DenseSmallestEigenpairs(const Eigen::MatrixXd& a, int nev, Eigen::VectorXd* eigenvalues,
                               Eigen::MatrixXd* eigenvectors) {
  const Eigen::Index n = a.rows();
  if (a.cols() != n) return InvalidArgumentError("DenseSmallestEigenpairs: matrix is not square");
  if (nev < 1 || nev > n) {
    return InvalidArgumentError("DenseSmallestEigenpairs: nev = " + std::to_string(nev) + " must be in [1, " +
                                std::to_string(n) + "]");
  }
  if (n >= 32 && a.allFinite()) {
    Eigen::Tridiagonalization<Eigen::MatrixXd> tri(a);
    Eigen::VectorXd w;
    Eigen::MatrixXd z;
    if (MrrrEigenpairs(tri, 'I', 0.0, 0.0, 1, nev, nev, &w, &z) && w.size() == nev && w.allFinite() &&
        z.allFinite()) {
      *eigenvalues = std::move(w);
      *eigenvectors = std::move(z);
      return OkStatus();
    }
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(a);
  if (eig.info() != Eigen::Success || !eig.eigenvalues().allFinite()) {
    return InternalError("dense symmetric eigensolver did not converge");
  }
  *eigenvalues = eig.eigenvalues().head(nev);
  *eigenvectors = eig.eigenvectors().leftCols(nev);
  return OkStatus();
}

StatusOr<PositiveSpectrum> ComputePositiveSpectrum(const DualMatrix& a, const SpectrumOptions& options,
                                                   const Eigen::VectorXd* warm_start) {
  const int initial_rank = options.initial_rank > 0 ? options.initial_rank : RankBound(a.num_terms());
  return LanczosPositiveSpectrum(a, options, initial_rank, /*relative_floor=*/0.0, warm_start);
}

StatusOr<Eigen::MatrixXd> TopEigenvectors(const DualMatrix& a, int r, const SpectrumOptions& options) {
  KLS_RETURN_IF_ERROR(options.Validate().WithContext("SpectrumOptions"));
  const int n = static_cast<int>(a.rows());
  if (r < 1 || r > n) {
    return InvalidArgumentError("TopEigenvectors: r = " + std::to_string(r) + " must be in [1, " +
                                std::to_string(n) + "]");
  }
  if (n > options.dense_threshold && 2 * r < n) {
    SpectraView<DualMatrix> view(a);
    Eigen::MatrixXd vectors;
    const bool found = LanczosWithRetry(n, r, /*margin=*/20, [&](int ncv) {
      Spectra::SymEigsSolver<SpectraView<DualMatrix>> eigs(view, r, ncv);
      eigs.init();
      if (!ComputeEigenpairs(eigs, r, Spectra::SortRule::LargestAlge, options.lanczos_max_restarts,
                             options.lanczos_tolerance, Spectra::SortRule::LargestAlge)) {
        return false;
      }
      vectors = eigs.eigenvectors();
      return true;
    });
    if (found) return vectors;
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(a.ToDense());
  if (eig.info() != Eigen::Success) return InternalError("dense symmetric eigensolver did not converge");
  // Ascending order: the last r columns, reversed to descending.
  return Eigen::MatrixXd(eig.eigenvectors().rightCols(r).rowwise().reverse());
}

}  // namespace kls
