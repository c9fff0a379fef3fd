// The one symmetry check for the sparse symmetric matrices solvers take
// (graph Laplacians Δ, core/graph/laplacian.h): ‖A − Aᵀ‖_F ≤ 1e-10 · ‖A‖_F,
// relative, so a Laplacian's scale (edge weights, normalisation) does not
// change the verdict. The error names the field and both norms.
#pragma once

#include <Eigen/SparseCore>
#include <algorithm>
#include <string>

#include "core/common/status.h"

namespace kls {

/// Relative tolerance of CheckSymmetric: far above the rounding of a
/// Laplacian built in floating point, far below any asymmetry that matters.
inline constexpr double kSymmetryTolerance = 1e-10;

/// OK when `a` is symmetric within kSymmetryTolerance; INVALID_ARGUMENT
/// naming `field` otherwise. O(nnz).
inline Status CheckSymmetric(const Eigen::SparseMatrix<double>& a, const std::string& field) {
  const Eigen::SparseMatrix<double> at = a.transpose();
  const double diff = (a - at).norm();
  const double scale = a.norm();
  if (!(diff <= kSymmetryTolerance * std::max(scale, 1e-300))) {
    return InvalidArgumentError(field + ": must be symmetric, ‖A − Aᵀ‖_F = " + FormatNumber(diff) +
                                " with ‖A‖_F = " + FormatNumber(scale));
  }
  return OkStatus();
}

}  // namespace kls
