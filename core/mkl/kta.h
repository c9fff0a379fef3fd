// Two-stage multiple kernel learning by centered kernel-target alignment
// (Cortes, Mohri & Rostamizadeh; thesis §7.3, Theorem 7.35).
//
// Stage 1: with centered base kernels K_tᶜ = H K_t H (H = I − 11ᵀ/n) and the
// target Y = yyᵀ,
//     θ* = argmin_{θ >= 0} θᵀMθ − 2θᵀa,  M_kl = ⟨K_kᶜ, K_lᶜ⟩_F,  a_k = ⟨K_kᶜ, yyᵀ⟩_F
// (the constraint θ >= 0 is kept: this is a QP, not a linear solve), then
// θ = θ*/‖θ*‖. Stage 2: an SVM on K = Σ θ_t K_t (kernel_classifier.h).
//
// Memory: the centered training kernels are packed (upper triangle, with √2
// on off-diagonal entries so that inner products are Frobenius products) into
// one (n(n+1)/2) × m matrix; M is its Gram matrix. O(m n²) memory and
// O(m² n²) time. Only kernels with θ_t > 0 are kept in the model.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/status.h"
#include "core/mkl/kernel_bank.h"

namespace kls {

/// Exact solution of min ½θᵀMθ − aᵀθ s.t. θ >= 0 for symmetric PSD M, by
/// the Lawson–Hanson active-set method (each step solves the free block
/// exactly; finite termination). `ridge` is added to the diagonal of the free
/// blocks (relative to the largest diagonal entry) to keep near-singular
/// blocks solvable. Errors: shape mismatch, non-finite input.
StatusOr<Eigen::VectorXd> SolveNonnegativeQp(const Eigen::MatrixXd& m, const Eigen::VectorXd& a,
                                             double ridge = 1e-12, int max_iterations = 10000);

struct KtaResult {
  std::vector<BaseKernelSpec> kernels;  ///< the specs with θ_t > 0 (in bank order)
  Eigen::VectorXd weights;              ///< their θ_t, ‖θ‖ = 1 over the whole bank
  double alignment = 0.0;               ///< centered alignment ρ(Σθ_t K_tᶜ, yyᵀ) on the training points
  int bank_size = 0;                    ///< m
};

/// Stage 1 on the training points x (already standardized) with labels
/// y ∈ {±1}; `bank` specs must already carry their scales (unit trace).
StatusOr<KtaResult> LearnKtaWeights(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                    const std::vector<BaseKernelSpec>& bank);

}  // namespace kls
