// A primal–dual interior-point method for the convex QSDP of qsdp_problem.h
// (SQLP paper (13)–(14)):
//
//     min_{Y ⪰ 0}  f(Y) = ½⟨Y, 𝓗Y⟩ + ⟨B, Y⟩ + Σ_k w_k t_k²,
//     𝓗 = 2𝒜*W𝒜,   B = −2𝒜*(W t) − c I − C,
//
// i.e. the paper's yᵀAy + bᵀy with y = svec(Y) (the orthonormal half-vectorization,
// off-diagonals × √2, so ⟨X, Y⟩ = svec(X)ᵀsvec(Y); n_s = m(m+1)/2 unknowns).
// The paper hands its SQLP reformulation (21)–(25) to SDPT3; here the QSDP's own
// KKT system is solved directly — no second-order cone, no r extra variables:
//
//     𝓗Y + B − Z = 0,   Y ⪰ 0,   Z ⪰ 0,   YZ = μI → 0.
//
// Each iteration takes a Mehrotra predictor–corrector step in the
// Nesterov–Todd (NT) direction (Todd, Toh & Tütüncü 1998). With the NT scaling
// matrix 𝒲 = G Gᵀ (G⁻¹ Y G⁻ᵀ = Gᵀ Z G = Λ diagonal), eliminating ΔZ = 𝓗ΔY + r_d
// leaves one symmetric positive definite n_s × n_s system
//
//     (𝒲⁻¹ ⊛ 𝒲⁻¹ + H) svec(ΔY) = svec(G⁻ᵀ R̂ G⁻¹) − r_d,
//
// H = Σ_k 2 w_k svec(G_k) svec(G_k)ᵀ the paper's 2A in svec coordinates (formed
// once from the K rank-one terms with one symmetric rank-K update, O(K n_s²)),
// solved by a dense Cholesky factorization per iteration (O(n_s³/3) ≈ m⁶/24),
// used for both the predictor and the corrector. When the number of terms K is
// below n_s (RegPCP: K = n + #constraints ≈ 2,900 < 5,050 at m = 100) the same
// system is solved by the Woodbury identity with H = FᵀF (F: K × n_s, rows
// √(2w_k) svec(G_k)):  (𝒲⁻¹⊛𝒲⁻¹ + FᵀF)⁻¹ = 𝒫 − 𝒫Fᵀ(I + F𝒫Fᵀ)⁻¹F𝒫 with
// 𝒫 = 𝒲⊛𝒲, where (F𝒫Fᵀ)_kl = √(w_k w_l)[(a_kᵀ𝒲a_l)(b_kᵀ𝒲b_l) + (a_kᵀ𝒲b_l)(b_kᵀ𝒲a_l)]
// comes from three K × m × K products and F, Fᵀ are applied matrix-free as 𝒜, 𝒜*. R̂ is −Λ for the predictor
// and (2σμ I − 2Λ² − (ŶₐẐₐ + ẐₐŶₐ)) ⊘ (λ_i + λ_j) for the corrector, with
// σ = (μ_aff/μ)³.
//
// The IPM runs on the congruence-preconditioned problem of qsdp_solver.h
// (Y = T Ỹ Tᵀ, Σ w (a aᵀ + b bᵀ)/2 ↦ I), which makes Y₀ = ξI a well-scaled
// start. Stopping rule: the certificate of qsdp_solver.h (EvaluateCertificate)
// on the original problem — the relative duality gap (f(Y) − g(λ'))/max(1,|f|)
// of a dual-feasible λ' built from Y — is <= gap_tolerance; it is evaluated at
// every iterate, so the returned bound is rigorous and does not rely on the
// IPM's own residuals.
//
// Cost per iteration O(n_s³/3 + n_s² + K m²); memory O(n_s² + K n_s). For
// m = 20 (n_s = 210) an iteration takes about a millisecond; m = 50
// (n_s = 1275) about 0.1 s; m = 100 (n_s = 5050) ~2.5 s — for large m use the
// subspace method of qsdp_subspace.h, which calls this solver on small faces.
//
// Thread safety: SolveQsdpInteriorPoint is re-entrant.
#pragma once

#include <Eigen/Core>

#include "core/common/certificate.h"
#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/qsdp/qsdp_problem.h"

namespace kls {

/// How the Newton system is solved.
enum class QsdpNewtonSystem {
  kAuto,     ///< kLowRank when K < n_s, else kDense
  kDense,    ///< the n_s × n_s matrix 𝒲⁻¹⊛𝒲⁻¹ + H, H formed once (O(K n_s²) + O(n_s³/3) per iteration)
  kLowRank,  ///< Woodbury: the K × K matrix I + F(𝒲⊛𝒲)Fᵀ (O(K² m + K³/3) per iteration, H never formed)
};

struct QsdpIpmOptions {
  /// Stop when the certified relative duality gap is <= this (> 0).
  double gap_tolerance = 1e-8;
  /// Predictor–corrector iteration cap (>= 1).
  int max_iterations = 100;
  /// Fraction of the step to the boundary of the cone that is taken (in (0, 1)).
  double step_fraction = 0.98;
  /// Newton-system solver (see QsdpNewtonSystem).
  QsdpNewtonSystem newton_system = QsdpNewtonSystem::kAuto;
  /// Congruence preconditioning Y = T Ỹ Tᵀ (qsdp_solver.h).
  bool precondition = true;
  /// Eigenvalues of Y above this fraction of the largest count towards `rank` (in (0, 1)).
  double rank_threshold = 1e-7;
  /// INVALID_ARGUMENT "<path>.<field> = <value> <rule>".
  Status Validate(std::string_view path = "options") const;
};

struct QsdpIpmResult {
  Eigen::MatrixXd y;          ///< the m × m PSD solution
  double objective = 0.0;     ///< f(Y), including the constant Σ w t²
  double mu = 0.0;            ///< final ⟨Y, Z⟩/m of the (preconditioned) IPM iterate
  int rank = 0;               ///< eigenvalues of Y above rank_threshold · max
  double factor_seconds = 0.0;  ///< time in forming and factorizing the Newton matrix
  bool low_rank_newton = false; ///< the Woodbury (K × K) Newton system was used
  /// termination, iterations, timings, objective history;
  /// certificate: gap = (objective − lower_bound) / max(1, |objective|), lower_bound a
  /// certified lower bound on f*, kkt_residual = ‖Y − Π₊(Y − ∇f(Y))‖_F / (1 + ‖Y‖_F);
  /// certified when gap <= gap_tolerance.
  SolveReport stats;
};

/// Solves the QSDP by the interior-point method of the file comment.
/// Errors: INVALID_ARGUMENT for an invalid problem or options;
/// RESOURCE_EXHAUSTED / INTERNAL from exceptions. A breakdown (non-finite
/// iterate, Newton matrix not factorizable even after regularization, or a
/// diverging iterate of an unbounded problem) ends the run with termination
/// kNumericalIssue and the best certified iterate.
///
/// Checkpoints (format "qsdp_ipm/1"). With control.checkpoint set, the state
/// is handed to it (CheckpointTimer) after a step that does not end the run
/// once control.checkpoint_interval_seconds of solve time have passed since
/// the start or the last checkpoint: svec(Y), svec(Z) of the preconditioned
/// iterate (m(m+1) doubles), the best certified iterate (Y, certificate, μ)
/// and the objective history. With control.ResumeFrom("qsdp_ipm/1") set and
/// matching, the run continues from it: stats.iterations, objective_history
/// and the ProgressEvent numbering go on from checkpoint.iteration,
/// stats.resumed_from_iteration = checkpoint.iteration, and the result is
/// bit-identical to the uninterrupted run's. A checkpoint matches when it was
/// taken for the same problem and the options that shape the iterates (all
/// but gap_tolerance and max_iterations — a fingerprint); any other checkpoint
/// is ignored and the solve starts afresh (resumed_from_iteration = 0).
StatusOr<QsdpIpmResult> SolveQsdpInteriorPoint(const QsdpProblem& problem, const QsdpIpmOptions& options = {},
                                               const SolveControl& control = SolveControl());

/// svec: the n_s = m(m+1)/2 entries X_ij, i <= j, column by column, with the
/// off-diagonal ones scaled by √2 (so ⟨X, Y⟩ = svec(X)ᵀ svec(Y)).
Eigen::VectorXd Svec(const Eigen::MatrixXd& x);
/// The inverse of Svec for an m × m matrix.
Eigen::MatrixXd Smat(const Eigen::VectorXd& v, int m);

}  // namespace kls
