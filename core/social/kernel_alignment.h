// Kernel target alignment combination of the user kernels (thesis §7.3,
// Theorem 7.35, after Cortes, Mohri & Rostamizadeh 2010).
//
// Centered alignment ρ(K, Y) = ⟨K_c, Y_c⟩_F / (‖K_c‖_F ‖Y_c‖_F), K_c = H K H.
// Theorem 7.35: max_{θ >= 0, ‖θ‖ = 1} ρ(Σ_t θ_t K_t, Y) is attained at
// θ* = v / ‖v‖ with v = argmin_{v >= 0} vᵀ M v − 2 vᵀ a,
// M_kl = ⟨K_k,c, K_l,c⟩_F, a_k = ⟨K_k,c, Y⟩_F (Y need not be centred: H is
// idempotent). The QP has at most 16 variables here and is solved exactly by
// enumerating supports: for each support S the stationary point of the
// equality-constrained problem is computed and the KKT conditions
// (v_S >= 0, (Mv − a)_j >= 0 off S) are checked; the KKT point with the
// smallest objective is returned.
//
// The Frobenius products use ⟨HAH, B⟩ = ⟨A, B⟩ − (2/n)(A1)·(B1) + (1ᵀA1)(1ᵀB1)/n²
// for symmetric A, B, so no centred copy of an n × n matrix is made; all
// products can be restricted to a subset of rows/columns (the training users).
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/status.h"

namespace kls {

struct UserKtaResult {
  Eigen::VectorXd weights;    ///< θ*, ‖θ*‖₂ = 1 (all zero if no kernel aligns positively)
  Eigen::VectorXd raw;        ///< v, the QP solution
  Eigen::MatrixXd m;          ///< M
  Eigen::VectorXd a;          ///< a
  double alignment = 0.0;     ///< ρ(Σ θ_t K_t, Y) at θ*
  double kkt_residual = 0.0;  ///< max violation of the QP's KKT conditions at v
};

/// ⟨H A H, B⟩_F over the index set `subset` (empty = all rows/columns); A and B symmetric.
double CenteredProduct(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const std::vector<int>& subset);

/// ρ(K, Y) over `subset` (empty = all). 0 when a centred matrix is zero.
double CenteredAlignment(const Eigen::MatrixXd& k, const Eigen::MatrixXd& y, const std::vector<int>& subset = {});

/// Theorem 7.35 on `kernels` (each n × n symmetric) and the target `y` (n × n),
/// restricted to `subset` (empty = all). Errors: INVALID_ARGUMENT for no
/// kernels, more than 16, shape mismatches, indices out of range.
StatusOr<UserKtaResult> SolveKta(const std::vector<const Eigen::MatrixXd*>& kernels, const Eigen::MatrixXd& y,
                             const std::vector<int>& subset = {});


}  // namespace kls
