// Positive spectra A₊ = Σ_{λ > 0} λ u uᵀ of symmetric matrices, on two paths:
// the sparse (Lanczos) path for the SimpleNPKL dual matrix (DualMatrix,
// ComputePositiveSpectrum, TopEigenvectors) and the dense path for any dense
// symmetric matrix (DensePositiveSpectrum: the sparse path's fallback,
// SimpleNPKL's low-rank mode, the embedding duals).
//
// The SimpleNPKL dual matrix (thesis ch. 3, Prop. 3.25) and its positive part:
//
//     A = Σ_k w_k S_{i_k j_k} − L,     S_ij = (E_ij + E_ji)/2 (i ≠ j),  S_ii = E_ii,
//     A₊ = Σ_{λ > 0} λ u uᵀ.
//
// With w_k = α_k T_k this is the thesis's A = Σ α_ij T_ij − L written as a
// symmetric matrix: tr(S_ij K) = K_ij for symmetric K, so tr(A K) =
// Σ_k w_k K_{i_k j_k} − tr(L K) exactly as in the Lagrangian (3.17).
//
// A is never densified on the sparse path: DualMatrix multiplies by it in
// O(nnz(L) + m) (thesis §3.3.2), and ComputePositiveSpectrum runs Spectra's
// implicitly restarted Lanczos (SymEigsSolver, largest algebraic) on it, in
// the growing-rank loop of lanczos_spectrum.h (shared with the embedding
// duals): it starts with r = the rank bound r(r+1)/2 ≤ m (thesis Prop. 3.27)
// or a caller's hint and doubles r until the smallest computed eigenvalue is
// ≤ 0: only then are all positive eigenvalues known and A₊ exact (up to the
// Lanczos tolerance).
//
// Dense fallback: DensePositiveSpectrum (O(n³), n² memory) is used when n ≤ SpectrumOptions::dense_threshold (300 by default; at that size
// LAPACK-style dense solves take milliseconds and beat restarted Lanczos once r
// is more than a few), when the wanted r reaches n/2 (Lanczos then costs about
// as much as a dense solve and Spectra needs nev < ncv ≤ n), or when Lanczos
// does not converge even with a doubled subspace.
//
// Known limitation: a Krylov method started from one vector sees only one
// copy of an exactly repeated eigenvalue in exact arithmetic; restarts and
// rounding normally recover further copies, but a positive eigenvalue of high
// multiplicity can in principle be missed on the sparse path. The dense path
// has no such issue.
//
// Thread safety: DualMatrix::perform_op is const and re-entrant;
// ComputePositiveSpectrum is a pure function of its arguments.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <vector>

#include "core/common/status.h"

namespace kls {

/// The operator y = A x for A = Σ_k w_k S_{i_k j_k} − L (see file comment), in
/// the shape Spectra expects (Scalar, rows(), cols(), perform_op). It keeps a
/// reference to `laplacian`, which must outlive it.
class DualMatrix {
 public:
  using Scalar = double;

  /// `laplacian` is any sparse symmetric matrix with both triangles stored
  /// (the normalized graph Laplacian in SimpleNPKL); `row[k]`, `col[k]` the
  /// index pair of term k (0 ≤ row, col < n; row == col allowed). Weights
  /// start at zero, i.e. A = −L.
  DualMatrix(const Eigen::SparseMatrix<double>& laplacian, std::vector<int> row, std::vector<int> col);

  /// Sets w (size num_terms()).
  void set_weights(const Eigen::VectorXd& weights) { weights_ = weights; }
  const Eigen::VectorXd& weights() const { return weights_; }

  Eigen::Index rows() const { return laplacian_->rows(); }
  Eigen::Index cols() const { return laplacian_->cols(); }
  int num_terms() const { return static_cast<int>(row_.size()); }
  const std::vector<int>& term_rows() const { return row_; }
  const std::vector<int>& term_cols() const { return col_; }
  const Eigen::SparseMatrix<double>& laplacian() const { return *laplacian_; }

  /// y_out = A x_in (n values each). O(nnz(L) + m).
  void perform_op(const double* x_in, double* y_out) const;
  /// Y = A X for an n × c block. O(c (nnz(L) + m)).
  Eigen::MatrixXd Multiply(const Eigen::MatrixXd& x) const;
  /// Vᵀ A V for an n × r basis V (dense r × r). O(r (nnz(L) + m) + n r²).
  Eigen::MatrixXd Project(const Eigen::MatrixXd& v) const;
  /// Dense A; n² memory. For the dense fallback and tests.
  Eigen::MatrixXd ToDense() const;

 private:
  const Eigen::SparseMatrix<double>* laplacian_;
  std::vector<int> row_;
  std::vector<int> col_;
  Eigen::VectorXd weights_;
};

struct SpectrumOptions {
  /// First number of Lanczos eigenpairs; <= 0 means the rank bound of thesis
  /// Prop. 3.27 for the number of terms m (largest r with r(r+1)/2 ≤ m).
  int initial_rank = 0;
  /// n at or below which the dense eigensolver is used directly (>= 0).
  int dense_threshold = 300;
  /// Spectra's relative Ritz-value tolerance (> 0).
  double lanczos_tolerance = 1e-10;
  /// Spectra's restart limit per Lanczos run (>= 1).
  int lanczos_max_restarts = 1000;
  /// Eigenvalues <= this are treated as non-positive (>= 0; the default 0
  /// keeps every strictly positive eigenvalue).
  double positive_threshold = 0.0;

  /// INVALID_ARGUMENT naming the field and value for an out-of-range field.
  Status Validate() const;
};

/// A₊ = U diag(λ) Uᵀ with λ > positive_threshold, descending.
struct PositiveSpectrum {
  Eigen::VectorXd eigenvalues;   ///< r positive eigenvalues of A, descending (r may be 0)
  Eigen::MatrixXd eigenvectors;  ///< n × r, orthonormal columns
  bool used_dense = false;       ///< the dense eigensolver produced the result
  int lanczos_runs = 0;          ///< Lanczos solves performed (growing r), 0 on the dense path
  int final_rank_requested = 0;  ///< nev of the last Lanczos run (0 on the dense path)
  long long matrix_vector_products = 0;  ///< Spectra's operator applications

  int rank() const { return static_cast<int>(eigenvalues.size()); }
  /// Dense A₊ (n × n); for tests and small n.
  Eigen::MatrixXd Dense() const;
};

/// Top eigenpairs of A until the spectrum turns non-positive; see the file
/// comment for the growth rule and the dense fallback. `warm_start` (optional,
/// n values, non-zero) seeds Lanczos, e.g. with the previous iteration's
/// dominant eigenvectors summed. Cost per Lanczos run O(ncv·(nnz(L) + m) ·
/// restarts + n·ncv²); dense path O(n³).
/// Errors: INVALID_ARGUMENT for bad options or a warm start of the wrong size;
/// INTERNAL when neither Lanczos nor the dense solver succeeds or the result
/// is not finite.
StatusOr<PositiveSpectrum> ComputePositiveSpectrum(const DualMatrix& a, const SpectrumOptions& options,
                                                   const Eigen::VectorXd* warm_start = nullptr);

/// The r eigenvectors of A with the largest eigenvalues, whatever their sign
/// (n × r, orthonormal, descending eigenvalues); the fixed basis of the
/// low-rank mode (thesis §3.3.4). Lanczos with nev = r, or the dense solver
/// when n <= dense_threshold or 2r >= n. Errors: INVALID_ARGUMENT unless
/// 1 <= r <= n; INTERNAL when no eigensolver succeeds.
StatusOr<Eigen::MatrixXd> TopEigenvectors(const DualMatrix& a, int r, const SpectrumOptions& options);

/// Positive part of a dense symmetric matrix (the dense path above, the
/// low-rank mode of SimpleNPKL on Vᵀ A V, the embedding duals). For n >= 32:
/// Householder tridiagonalization (Eigen), a Sturm count of the eigenvalues
/// above the threshold, and — when they are at most min(n/4, n²/600) — LAPACK's MRRR
/// (dstemr) for just those eigenpairs, else implicit QR on the tridiagonal;
/// only the positive eigenvectors are back-transformed: ≈ (4/3)n³ + O(n² r)
/// flops on the MRRR path. Below n = 32, or if LAPACK reports a failure, the
/// full QR eigensolver (≈ 9n³ with vectors).
StatusOr<PositiveSpectrum> DensePositiveSpectrum(const Eigen::MatrixXd& a, double positive_threshold = 0.0);

/// The `nev` smallest eigenpairs of a dense symmetric matrix (ascending
/// eigenvalues; n × nev orthonormal eigenvectors), 1 <= nev <= n: Householder
/// tridiagonalization (Eigen) and LAPACK's MRRR (dstemr) for the index range
/// 1..nev, only those vectors back-transformed — ≈ (4/3)n³ + O(n²·nev) flops
/// against ≈ 9n³ for the full solver with vectors. Falls back to the full
/// solver below n = 32 or if LAPACK fails. For the factor certificates'
/// dense path (core/npkl/factor_certificate.cc).
/// INVALID_ARGUMENT for a non-square matrix or nev out of range; INTERNAL when
/// no eigensolver succeeds.
Status DenseSmallestEigenpairs(const Eigen::MatrixXd& a, int nev, Eigen::VectorXd* eigenvalues,
                               Eigen::MatrixXd* eigenvectors);

}  // namespace kls
