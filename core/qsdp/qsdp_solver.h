// The first-order alternative solver for the convex QSDP of qsdp_problem.h
// (SQLP paper (13)–(14)). The default, much faster exact solver is
// SolveQsdpSubspace (qsdp_subspace.h: the interior-point method of
// qsdp_ipm.h, on faces when m is large); this one is kept as an independent
// check and for problems too large for a dense Newton system. It also hosts
// the certificate (EvaluateCertificate) that all QSDP solvers stop on.
//
// It is an exact (certified) solver for the convex QSDP of qsdp_problem.h (SQLP paper (13)–(14)):
//
//     min_{Y ⪰ 0}  f(Y) = Σ_k w_k (a_kᵀ Y b_k − t_k)² − c·tr(Y).
//
// The paper hands its SQLP reformulation (21)–(25) to an interior-point code
// (SDPT3). Here the structure of the problem is used directly instead:
//
// 1. Accelerated projected gradient (FISTA, Beck & Teboulle 2009) with the
//    gradient-based adaptive restart of O'Donoghue & Candès (2015):
//        Y⁺ = Π₊(X − ∇f(X)/L),  Π₊ = eigen-projection of the m × m matrix onto
//    the PSD cone, L = 2‖𝒜*W𝒜‖ (power iteration, with a safety factor).
//    Each iteration costs two O(K m²) products (𝒜, 𝒜*) and one m × m
//    eigendecomposition; A (m² × m²) is never formed.
// 2. Face polish (an active-set Newton step). Near the optimum the rank r of
//    Y* shows in the projected iterate: Y = U S Uᵀ with U (m × r) the
//    eigenvectors of the non-negligible eigenvalues. On that face f is an
//    unconstrained quadratic in the r × r matrix S, φ(S) = f(U S Uᵀ), solved to
//    full precision by conjugate gradients with Hessian products
//    H[D] = 2 Uᵀ 𝒜*(W 𝒜(U D Uᵀ)) U at O(K r²) each (𝒜 restricted to the face is
//    precomputed as the K × r matrices L U and R U). The step is accepted
//    when S stays PSD (after backtracking) and f decreases; FISTA resumes from
//    it with its momentum reset. If the face was too small, the certificate
//    below shows it (∇f has a negative eigenvalue) and FISTA enlarges it.
// Both run on a congruence-preconditioned copy, Y = T Ỹ Tᵀ with
// T = (Σ_k w_k (a_k a_kᵀ + b_k b_kᵀ)/2)^{-1/2}, which maps the PSD cone onto
// itself and removes the λ_2 … λ_{m+1} scaling of RegMVU's edge differences
// (Σ_N (q_i − q_j)(q_i − q_j)ᵀ = QᵀLQ) that otherwise dominates the Hessian's
// condition number; the certificate is always evaluated on the original Y.
//
// Certificate (the stopping rule). With λ = 2W(𝒜(Y) − t) the Lagrange dual of
// the QSDP is
//     max_λ  g(λ) = −λᵀt − Σ_k λ_k²/(4w_k)   s.t.  S(λ) = 𝒜*(λ) − cI ⪰ 0,
// and S(λ(Y)) = ∇f(Y), so f(Y) − g(λ(Y)) = ⟨∇f(Y), Y⟩ (complementary
// slackness) whenever ∇f(Y) ⪰ 0. When ∇f(Y) has a small negative eigenvalue
// −ε, λ is made dual feasible before g is evaluated, in whichever of two ways
// gives the larger bound: (a) adding δ = ε/λ_min(Σ_{k: a_k = b_k} a_k a_kᵀ) to
// the multipliers of the PSD terms (the i = j terms of RegPCP, whose sum is
// QᵀQ = I), (b) scaling λ by 1 + ε/(c − ε) when c > ε (RegMVU). Either way
// g(λ') is a valid lower bound on f*, so
//     relative gap = (f(Y) − g(λ')) / max(1, |f(Y)|)
// bounds the sub-optimality of the returned Y rigorously (up to rounding);
// the solver stops when it is <= gap_tolerance. It also reports the KKT
// residual ‖Y − Π₊(Y − ∇f(Y))‖_F / (1 + ‖Y‖_F).
//
// Thread safety: SolveQsdp is re-entrant.
#pragma once

#include <Eigen/Core>

#include "core/common/certificate.h"
#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/qsdp/qsdp_problem.h"

namespace kls {

class Fingerprint;

struct QsdpOptions {
  /// Stop when the certified relative duality gap is <= this (> 0).
  double gap_tolerance = 1e-8;
  /// FISTA iteration cap (>= 1).
  int max_iterations = 20000;
  /// Evaluate the certificate every this many iterations (>= 1).
  int check_every = 10;
  /// Try a face polish once the relative KKT residual is below this (>= 0; 0 disables polishing).
  double polish_threshold = 1e-2;
  /// Eigenvalues of Y above this fraction of the largest span the polish face (> 0, < 1).
  double face_threshold = 1e-7;
  /// Conjugate-gradient iterations per polish (>= 1).
  int max_cg_iterations = 500;
  /// Congruence preconditioning Y = T Ỹ Tᵀ, T = (Σ w (a aᵀ + b bᵀ)/2)^{-1/2} (see the .cc).
  bool precondition = true;
  /// Multiplier on the power-iteration estimate of the Lipschitz constant (>= 1).
  double lipschitz_safety = 1.05;
  /// INVALID_ARGUMENT naming the field and value.
  Status Validate() const;
};

struct QsdpResult {
  Eigen::MatrixXd y;               ///< the m × m PSD solution
  double objective = 0.0;          ///< f(Y), including the constant Σ w t²
  double lipschitz = 0.0;          ///< the step constant L used
  int rank = 0;                    ///< eigenvalues of Y above face_threshold · max
  int polishes = 0;                ///< accepted face-polish steps
  int cg_iterations = 0;           ///< total CG iterations in polishes
  /// termination, iterations, timings, objective history;
  /// certificate: gap = (objective − lower_bound) / max(1, |objective|), lower_bound =
  /// g(λ'), a certified lower bound on f*, kkt_residual = ‖Y − Π₊(Y − ∇f(Y))‖_F
  /// / (1 + ‖Y‖_F); certified when gap <= gap_tolerance.
  SolveReport stats;
};

/// Solves the QSDP; see the file comment. Errors: INVALID_ARGUMENT for an
/// invalid problem or options; RESOURCE_EXHAUSTED / INTERNAL from exceptions.
/// A non-finite iterate ends the run with termination kNumericalIssue.
///
/// Checkpoints (format "qsdp_fista/1"). With control.checkpoint set, the state
/// is handed to it (CheckpointTimer) after an iteration that does not end the
/// run once control.checkpoint_interval_seconds of solve time have passed
/// since the start or the last checkpoint: Ỹ, the extrapolated point X and t
/// of the accelerated step (2m² + 1 doubles), the iteration of the last face
/// polish, the polish counters, the last certificate and the objective
/// history (one entry per certificate). With control.ResumeFrom("qsdp_fista/1")
/// set and matching, the run continues from it: stats.iterations,
/// objective_history and the ProgressEvent numbering go on from
/// checkpoint.iteration, stats.resumed_from_iteration = checkpoint.iteration,
/// and the result is bit-identical to the uninterrupted run's. A checkpoint
/// matches when it was taken for the same problem and the options that shape
/// the iterates (all but gap_tolerance and max_iterations — a fingerprint);
/// any other checkpoint — another format, problem or shape, damaged or
/// truncated bytes — is ignored and the solve starts afresh
/// (resumed_from_iteration = 0).
StatusOr<QsdpResult> SolveQsdp(const QsdpProblem& problem, const QsdpOptions& options = {},
                               const SolveControl& control = SolveControl());

/// A certified iterate's row (ReportIteration), the same for the three QSDP
/// solvers: objective, primal_residual = the KKT residual, dual_residual and
/// gap = the certified relative gap.
IterationRow CertificateRow(int iteration, const QsdpResult& cert, double elapsed_seconds);

/// The certificate of the file comment at a PSD Y: sets objective,
/// certificate (gap, lower_bound, kkt_residual; not `certified`) and rank of `out`.
void EvaluateCertificate(const QsdpProblem& problem, const Eigen::MatrixXd& y, double face_threshold,
                         QsdpResult* out);

/// Congruence preconditioning: writes the problem in Ỹ with Y = T Ỹ Tᵀ,
/// T = M^{-1/2}, M = Σ_k w_k (a_k a_kᵀ + b_k b_kᵀ)/2 (a_k ← Tᵀa_k, b_k ← Tᵀb_k,
/// the linear part becomes Tᵀ(cI + C)T), so that Σ w (ã ãᵀ + b̃ b̃ᵀ)/2 = I. The
/// PSD cone maps onto itself. Returns false (and *out = problem, T = I) when M
/// is numerically singular.
bool WhitenQsdp(const QsdpProblem& problem, QsdpProblem* out, Eigen::MatrixXd* t);

/// Feeds every field of the problem (terms, targets, weights, c, C) to a
/// checkpoint fingerprint (core/common/checkpoint_codec.h).
void AddQsdpProblemToFingerprint(const QsdpProblem& problem, Fingerprint* fp);

/// Π₊: the nearest PSD matrix in Frobenius norm (eigenvalues clipped at 0).
Eigen::MatrixXd ProjectPsd(const Eigen::MatrixXd& x);

}  // namespace kls
