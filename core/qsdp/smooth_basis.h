// The smooth basis Q of graph-Laplacian regularized kernel learning (SQLP paper
// §2.3): K = Q Y Qᵀ with Q (n × m) the eigenvectors of a
// graph Laplacian with the smallest eigenvalues.
//
//   RegMVU (Weinberger et al. 2007):  Q = (v_2, …, v_{m+1}) of L = D − W
//                                     (skip = 1 drops the constant vector v_1,
//                                     which also centers K: K·1 = 0, eq. (2)).
//   RegPCP (Li et al. 2009):          Q = (u_1, …, u_m) of the normalized
//                                     Laplacian I − D^{-1/2} W D^{-1/2} (skip = 0).
//
// Method: Spectra's shift-and-invert Lanczos (SymEigsShiftSolver with a sparse
// LU of L − σI, σ = −shift slightly below 0). A Laplacian is PSD and singular,
// so L − σI is positive definite, and the eigenvalues of (L − σI)^{-1},
// 1/(λ − σ), are largest exactly for the smoothest eigenvectors — restarted
// Lanczos on L itself converges very slowly there because the small
// eigenvalues of a manifold graph are tightly clustered. Cost: one sparse LU
// plus O(ncv) triangular solves per restart. For n <= dense_threshold a dense
// symmetric eigensolver is used instead (O(n³)).
//
// Thread safety: pure functions.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include "core/common/status.h"

namespace kls {

struct SmoothBasisOptions {
  /// σ = −shift · max_i L_ii (> 0): the shift-invert point just left of 0.
  double relative_shift = 1e-6;
  /// Spectra's relative Ritz-value tolerance (> 0).
  double tolerance = 1e-12;
  /// Spectra's restart limit (>= 1).
  int max_restarts = 1000;
  /// n at or below which the dense eigensolver is used (>= 0).
  int dense_threshold = 300;
  /// INVALID_ARGUMENT naming the field and value.
  Status Validate() const;
};

struct SmoothBasis {
  Eigen::MatrixXd vectors;      ///< n × m, orthonormal columns, ascending eigenvalue
  Eigen::VectorXd eigenvalues;  ///< the m eigenvalues, ascending
  Eigen::VectorXd skipped_eigenvalues;  ///< the `skip` smallest eigenvalues that were dropped
  bool used_dense = false;      ///< dense eigensolver path
  long long solves = 0;         ///< shift-invert solves (Spectra operator applications)
  /// max_j ‖L q_j − λ_j q_j‖ over the returned columns (a-posteriori check).
  double max_residual = 0.0;
};

/// Eigenvectors m + skip smallest eigenvalues of the symmetric PSD sparse
/// matrix `laplacian` (both triangles stored), dropping the `skip` smallest.
/// Errors: INVALID_ARGUMENT unless 1 <= m, 0 <= skip, m + skip <= n, or for
/// bad options; INTERNAL when no eigensolver succeeds.
StatusOr<SmoothBasis> SmoothestEigenvectors(const Eigen::SparseMatrix<double>& laplacian, int m, int skip,
                                            const SmoothBasisOptions& options = {});

/// L = D − W for a symmetric adjacency W (zero diagonal). O(nnz).
Eigen::SparseMatrix<double> CombinatorialLaplacian(const Eigen::SparseMatrix<double>& adjacency);

}  // namespace kls
