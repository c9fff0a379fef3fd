// The problem every non-parametric kernel learning (NPKL) solver takes
// (Hoi et al. 2007; BCDNPKL eq. (1)):
//
//     min_{K ⪰ 0}  tr(Δ K) + C Σ_{(i,j)∈T} ℓ(T_ij K_ij)
//
// with Δ a graph Laplacian (core/graph/laplacian.h) and T the must-link (+1)
// / cannot-link (−1) pairs. KL-ADMM's PCP form replaces the loss by
// (γ/2) Σ (K_ij − t_ij)² with t_ij = 1 (must) / 0 (cannot) (KL-ADMM eq. (1)).
#pragma once

#include <Eigen/Dense>
#include <Eigen/SparseCore>
#include <limits>
#include <memory>
#include <vector>

#include "core/common/certificate.h"
#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/constraints.h"
#include "core/model/learned_kernel.h"

namespace kls {

enum class NpklLoss {
  kLinear,       ///< ℓ(z) = −z                 (SimpleNPKL closed form)
  kHinge,        ///< ℓ(z) = max(0, 1 − z)
  kSquareHinge,  ///< ℓ(z) = max(0, 1 − z)²
  kSquare,       ///< ℓ(z) = (1 − z)²
};

/// "linear", "hinge", "square_hinge", "square".
const char* NpklLossName(NpklLoss loss);

struct NpklProblem {
  Eigen::SparseMatrix<double> laplacian;  ///< n × n symmetric PSD Δ
  PairwiseConstraints constraints;        ///< pairs over [0, n)

  int num_points() const { return static_cast<int>(laplacian.rows()); }
  /// Square Laplacian with finite entries, n >= 2, at least one constraint,
  /// constraints valid for n points. O(nnz + m log m).
  Status Validate() const;
};

/// What every NPKL solver returns.
struct NpklResult {
  LearnedKernel kernel;  ///< K = V Vᵀ, V n × r
  /// stats.certificate, the optimality certificate: `gap` is the certified
  /// relative duality gap where the method has one (NaN otherwise),
  /// `certified` that it is within the solver's tolerance.
  SolveReport stats;
  double primal_residual = 0.0;  ///< solver-specific (e.g. ‖V − U‖ for KL-ADMM)
  double dual_residual = 0.0;    ///< solver-specific
};

/// A warm start (issue 25, item 4): the n × r' factor F of an earlier kernel
/// K = F Fᵀ of the same points, e.g. LearnedKernel::embedding() of a kernel
/// learned before some pairs were added. Every NPKL family's options carry one
/// (`initial_factor`, null = the family's cold start).
using InitialFactor = std::shared_ptr<const Eigen::MatrixXd>;

/// INVALID_ARGUMENT "options.initial_factor has 150 rows for 178 points" (or
/// non-finite entries, or no columns); OK for null.
Status ValidateInitialFactor(const InitialFactor& factor, int num_points);

/// The warm start as the r × |points| matrix the factored solvers iterate on
/// (column k = point points[k]'s row of F): F's rows transposed when r' = r;
/// the r leading principal directions Uᵣᵀ Fᵀ (thin SVD, the best rank-r
/// approximation of K) when r' > r; F's rows followed by r − r' rows of
/// `pad` (same shape as the result, scaled by 1e-3 so the added directions
/// start small but not at the stationary 0) when r' < r. O(|points| r'²).
Eigen::MatrixXd WarmStartRows(const Eigen::MatrixXd& factor, const std::vector<int>& points, int r,
                              const Eigen::MatrixXd& pad);

}  // namespace kls
