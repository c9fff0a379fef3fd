// The convex QSDP of graph-Laplacian regularized kernel learning (SQLP paper
// eq. (11)–(14)), kept in its rank-one-term structure:
//
//     min_{Y ⪰ 0}  f(Y) = Σ_k w_k (⟨G_k, Y⟩ − t_k)² − c·tr(Y),
//     G_k = sym(a_k b_kᵀ) = (a_k b_kᵀ + b_k a_kᵀ)/2,   so ⟨G_k, Y⟩ = a_kᵀ Y b_k.
//
// In the paper's vectorized form (14), y = vec(Y) ∈ R^{m²}:
//     f = yᵀ A y + bᵀ y + Σ_k w_k t_k²,
//     A = Σ_k w_k vec(G_k) vec(G_k)ᵀ   (PSD, rank ≤ K),
//     b = −2 Σ_k w_k t_k vec(G_k) − c·vec(I).
// A is never formed: 𝒜(Y)_k = a_kᵀ Y b_k for all k is one K×m by m×m product
// and a row-wise dot (O(K m²)), and A y = vec(𝒜*(W 𝒜(Y))) with the adjoint
// 𝒜*(λ) = Σ_k λ_k G_k = sym(Lᵀ diag(λ) R), again O(K m²) — versus O(m⁴) for a
// dense A. (The dense A is built only for the CSDP baseline, schur_sdp.h.)
//
// Instances (reg_problems.h):
//   RegPCP (12): a_k = q_i, b_k = q_j, t_k ∈ {1 (must-link or i = j), 0 (cannot-link)},
//                w_k = 1, c = 0.
//   RegMVU (11): a_k = b_k = q_i − q_j for neighbours (i, j), t_k = d_ij², w_k = ν,
//                c = 1 — minimizing −(tr(Y) − ν Σ(…)²), i.e. f = −(objective of (11)).
//
// Thread safety: const methods are re-entrant.
#pragma once

#include <Eigen/Core>

#include "core/common/status.h"

namespace kls {

struct QsdpProblem {
  Eigen::MatrixXd left;    ///< K × m, row k = a_kᵀ
  Eigen::MatrixXd right;   ///< K × m, row k = b_kᵀ
  Eigen::VectorXd target;  ///< K targets t_k
  Eigen::VectorXd weight;  ///< K weights w_k > 0
  double trace_weight = 0.0;  ///< c >= 0, the coefficient of −tr(Y)
  /// Optional extra linear term: f −= ⟨C, Y⟩ for this symmetric m × m C
  /// (empty = none). The solver's congruence preconditioning produces one.
  Eigen::MatrixXd linear;

  int dim() const { return static_cast<int>(left.cols()); }
  int num_terms() const { return static_cast<int>(left.rows()); }

  /// Shapes agree, everything finite, w > 0, c >= 0; errors name the field.
  Status Validate() const;

  /// 𝒜(Y)_k = a_kᵀ Y b_k (K values). O(K m²).
  Eigen::VectorXd Apply(const Eigen::MatrixXd& y) const;
  /// 𝒜*(λ) = Σ_k λ_k G_k (symmetric m × m). O(K m²).
  Eigen::MatrixXd Adjoint(const Eigen::VectorXd& lambda) const;
  /// f(Y) (including the constant Σ w t²).
  double Objective(const Eigen::MatrixXd& y) const;
  /// c·tr(Y) + ⟨C, Y⟩, the linear part that f subtracts.
  double LinearTerm(const Eigen::MatrixXd& y) const;
  /// f from a precomputed 𝒜(Y) and LinearTerm(Y).
  double ObjectiveFromApplied(const Eigen::VectorXd& applied, double linear_term) const;
  /// ∇f(Y) = 2 𝒜*(W(𝒜(Y) − t)) − c I − C.
  Eigen::MatrixXd Gradient(const Eigen::MatrixXd& y) const;
  /// Σ_k w_k t_k², the constant the paper's (14) leaves out.
  double Constant() const;

  /// The paper's dense m² × m² A and b of (14) (column-major vec). O(K m⁴):
  /// only for the CSDP baseline and tests at small m.
  Eigen::MatrixXd DenseQuadratic() const;
  Eigen::VectorXd DenseLinear() const;
};

}  // namespace kls
