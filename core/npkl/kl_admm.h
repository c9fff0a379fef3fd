// KL-ADMM: non-parametric kernel learning from pairwise constraints by the
// alternating direction method of multipliers (Hu & Kwok, IJCAI 2015).
// It solves the pairwise-constraint-propagation (PCP) problem
//
//     min_{K ⪰ 0}  tr(K L) + (γ/2) Σ_{(i,j)∈T} (K_ij − T_ij)²              eq. (1)
//
// with L = problem.laplacian and the targets of eq. (2): T_ij = 1 for a
// must-link, 0 for a cannot-link, and T_ii = 1 for a self pair (i, i).
//
// How the sum over T counts pairs (the paper's Table 1 convention). T is a set
// of *ordered* entries: every unordered constraint {i, j} with i ≠ j stands for
// the two entries (i, j) and (j, i), and a self pair (i, i) for one entry. So
// with K symmetric an i ≠ j pair contributes γ (K_ij − T_ij)² and a self pair
// (γ/2)(K_ii − 1)². The protocol's 0.6n must + 0.6n cannot + n self pairs then
// give 2·1.2n + n = 3.4n entries — Table 1's "#constraints" (510 on iris) —
// and T_i = {j : (i, j) ∈ T} in eq. (11)–(13) is simply "every point that
// shares a constraint with i", plus i itself when (i, i) is constrained.
//
// Method. K is factored as VᵀU with V, U ∈ R^{r×n} and the constraint V = U
// (eq. (5)); the augmented Lagrangian (6) is minimized alternately over V and
// U, then the multiplier Λ is updated (eq. (7)–(8)):
//   V-step  v_i = A_i⁻¹ c_i,  A_i = ρI + γ Σ_{j∈T_i} u_j u_jᵀ,            eq. (11), (13)
//           c_i = γ Σ_{j∈T_i} T_ij u_j − (U L)_i + ρ u_i − Λ_i
//   U-step  u_i = B_i⁻¹ d_i,  B_i = ρI + γ Σ_{j∈T_i} v_j v_jᵀ,            eq. (12), (13)
//           d_i = γ Σ_{j∈T_i} T_ij v_j − (V L)_i + ρ v_i + Λ_i
//           (the paper prints v_i inside the sum of d_i; the derivative of
//           (6) gives v_j, which is what is implemented)
//   Λ ← Λ + ρ (V − U)
//   residuals  Δ_primal = ‖V − U‖_F,  Δ_dual = ρ ‖V_new − V_old‖_F      eq. (14)
//   ρ ← 2ρ if Δ_primal > 10 Δ_dual;  max(ρ/2, ρ_min) if Δ_dual > 10 Δ_primal   eq. (15)
// Given U the objective of (7) separates over the columns v_i (and given V,
// that of (8) over the u_i), so each half-step is an exact block minimization
// whose n column solves are independent; they run in parallel. Each r×r
// system is solved through the |T_i|×|T_i| system of the Sherman–Morrison–
// Woodbury identity (eq. (25)) when |T_i| < r, by an r×r Cholesky otherwise.
// The Laplacian enters through one sparse product U·L (resp. V·L) per
// half-step. Problem (5) is non-convex, but (Burer–Monteiro) its stationary
// points with V = U are optimal for the convex problem (1) whenever the rank r
// is at least the rank of an optimal K, which r(r+1)/2 ≥ |T| guarantees to be
// possible; the tests check the result against CSDP and against the KKT
// conditions of (1).
//
// Polish (default, KlAdmmOptions::polish; this repository's addition). The
// eq. (15) schedule gets to ~1e-1 relative residuals in a few dozen
// iterations and then creeps (n = 1,000 adult-like: ~550 iterations to 1e-4 of
// CSDP's optimum). So ADMM hands V over to L-BFGS on f(V) = eq. (1) at K = VᵀV,
// with the r×r diagonal Hessian blocks as initial inverse Hessian (inverted by
// SMW as the half-steps are) and an exact line search on the quartic
// f(V + αP); ~50 iterations reach 1e-4 there (docs/BENCHMARKS.md). The end
// point is certified globally optimal for (1) by λ_min(L + γR) ≥ −tol
// (Spectra) and the complementarity ⟨S, K⟩ ≈ 0. Polish::kNone is Algorithm 1
// exactly as published.
//
// Cost per iteration: O(nnz(L)·r + Σ_i (|T_i|³ + r|T_i|)) time (eq. (26)),
// O(n r) memory for V, U, Λ and one r×n work matrix. Never forms an n×n matrix.
//
// Thread safety: SolveKlAdmm is a pure function of its arguments; concurrent
// calls are safe. The result depends on (problem, options) only — not on
// num_threads, because every column is computed by the same serial code and
// all reductions are taken serially in index order.
#pragma once

#include <string_view>

#include <cstdint>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/npkl/factor_certificate.h"
#include "core/npkl/npkl_problem.h"

namespace kls {

struct KlAdmmOptions {
  /// γ > 0, the weight of the squared constraint loss in eq. (1).
  double gamma = 1.0;
  /// r, rows of V and U. 0 = automatic: RankBound(|T|), the largest r with
  /// r(r+1)/2 ≤ |T|, |T| counted in ordered entries as above (Table 1: 31 on
  /// iris), capped at n. Otherwise 1 ≤ rank ≤ n (n checked by SolveKlAdmm).
  int rank = 0;
  /// ρ⁰ > 0, the initial ADMM penalty (paper: 100).
  double rho_initial = 100.0;
  /// ρ_min > 0, the floor of the adaptive decrease in eq. (15) (paper: 10).
  double rho_min = 10.0;
  /// Adapt ρ by eq. (15) after every iteration; false keeps ρ = rho_initial.
  bool adaptive_rho = true;
  /// Iterations in all (ADMM iterations — one V-step, one U-step, one
  /// multiplier update each — plus polish iterations, over every escalation
  /// stage), ≥ 1. The paper's IterMax is 500 (100 on adult) for Algorithm 1
  /// alone; the default leaves room for the escalation's stages at large n
  /// (n = 100,000 adult-like with 400,000 pairs: 665 in three stages).
  int max_iterations = 5000;
  /// Converged when both relative residuals are ≤ tolerance (≥ 0; 0 runs to
  /// max_iterations):
  ///   primal_rel = ‖V − U‖_F / max(‖V‖_F, ‖U‖_F)                    (≈ relative V = U gap)
  ///   dual_rel   = ρ ‖V_new − V_old‖_F / (ρ_min · max(‖V‖_F, ‖U‖_F))
  /// i.e. the eq. (14) residuals divided by the size of the factors, the dual
  /// one further by the fixed ρ_min rather than the current ρ, so that a large
  /// ρ (which makes steps short) cannot fake convergence. By eq. (21) ρΔV is,
  /// up to the O(γ‖u‖²) part of A_i, the gradient of (6) at the old iterate.
  double tolerance = 1e-4;
  /// Seed of the std::mt19937_64 that draws the random V⁰ = U⁰: entries
  /// uniform in [−√(3/r), √(3/r)], so that E[K⁰_ii] = 1.
  uint64_t seed = 1;
  /// Threads for the column solves; 0 = all hardware threads. The result does
  /// not depend on it.
  int num_threads = 1;

  /// What follows the ADMM iterations (this repository's addition; not in the
  /// paper). kNone: Algorithm 1 as published, to `tolerance` or
  /// max_iterations. kLbfgs: ADMM runs only until both relative residuals are
  /// ≤ polish_switch_tolerance, then V = U is polished by L-BFGS on the
  /// factored objective f(V) = tr(V L Vᵀ) + (γ/2) Σ_T (v_iᵀv_j − T_ij)² —
  /// problem (5) restricted to V = U, i.e. eq. (1) at K = VᵀV — with an exact
  /// line search (f is a quartic in the step length). ADMM's eq. (15) ρ
  /// schedule reaches ~1e-2 accuracy quickly but creeps towards 1e-4; the
  /// polish converges superlinearly near the optimum. Its stopping test is
  ///   ‖∇f(V)‖_F · ‖V‖_F / max(|f|, 1) ≤ tolerance
  /// — with the rank escalation ≤ 2·tolerance, since the certificate decides
  /// there: by Cauchy–Schwarz its ⟨S, K⟩ term (= ½⟨∇f(V), V⟩) is then at most
  /// tolerance·max(|f|, 1), and a certificate failed by that term alone
  /// tightens the test tenfold (n = 200,000 adult-like: 163 → 134
  /// iterations, certified; docs/BENCHMARKS.md)
  /// (tolerance = 0: no test, and a stalled line search is a null step, so the
  /// run goes to max_iterations); iterations of both phases count towards
  /// max_iterations and objective_history, and a polish ProgressEvent has
  /// primal_residual = 0 (V = U) and dual_residual = ‖∇f(V)‖_F.
  /// and at the end the global-optimality certificate of the convex problem
  /// (1) is computed: S = L + γ R (R_ij = v_iᵀv_j − T_ij on T, the gradient of
  /// eq. (1) in K) must be PSD; result.stats.certificate.gap receives the resulting
  /// bound on f − f*, see certify.
  enum class Polish { kNone, kLbfgs };
  Polish polish = Polish::kLbfgs;
  /// ADMM → L-BFGS switch point (relative residuals as for tolerance), > 0.
  double polish_switch_tolerance = 0.1;
  /// L-BFGS memory (pairs kept), ≥ 1.
  int lbfgs_memory = 5;
  /// L-BFGS initial inverse Hessian: true = the inverse of the r×r diagonal
  /// blocks of ∇²f(V) (block Jacobi, recomputed every iteration), false = the
  /// usual scalar sᵀy / yᵀy.
  bool lbfgs_precondition = true;
  /// With kLbfgs: compute λ_min(S) by Spectra (Lanczos on the sparse S) after
  /// the polish. Since f is convex in K and S = ∇f(K), for any optimal K*
  ///   f(K) − f(K*) ≤ ⟨S, K⟩ − λ_min(S)·tr(K*)   (if λ_min(S) < 0),
  /// reported as result.stats.certificate.gap relative to max(|f|, 1) with tr(K*)
  /// bounded by tr(K) (equal at the optimum). NaN when not computed.
  bool certify = true;

  /// Rank escalation (this repository's addition; with Polish::kLbfgs,
  /// certify and rank = 0). Instead of the worst-case r = RankBound(|T|) —
  /// 1,264 columns at 400,000 pairs, ~100× the rank the optimum needs on
  /// adult-like data — the solve starts at r = initial_rank (or the warm
  /// start's rank), runs ADMM and the polish to `tolerance`, and evaluates
  /// the certificate of core/npkl/factor_certificate.h on S = L + γR with the
  /// row space of V deflated. If the relative gap bound exceeds
  /// certificate_tolerance, up to escalation_step eigenvectors x of negative
  /// eigenvalues are appended as rows √t·xᵀ (t the exact minimizer of
  /// f(K + t xxᵀ), a quadratic in t, shared between the directions) and the
  /// polish continues at the larger rank (never beyond RankBound(|T|)); if
  /// there is no negative eigenvalue, the bound is ⟨S, K⟩ alone, i.e. the
  /// polish stopped short of stationarity, and its tolerance is tightened
  /// tenfold (at most 3 times). Every stage's iterations count towards
  /// max_iterations. With rank_escalation = false (or a fixed rank) the solve
  /// runs at r = rank or RankBound(|T|) as in the paper.
  bool rank_escalation = true;
  /// The first stage's r, >= 1 (capped at RankBound(|T|)).
  int initial_rank = 8;
  /// Rows appended per failed certificate (= eigenpairs computed), >= 1.
  int escalation_step = 8;
  /// Certified when the relative gap bound (|⟨S, K⟩| + max(0, −λ_min)·tr K) /
  /// max(|f|, 1) <= this, >= 0.
  double certificate_tolerance = 1e-4;

  /// Multilevel start (this repository's addition; with the rank escalation
  /// and no warm start): from this many points up, a coarse problem is solved
  /// first — the graph with its points merged into aggregates of up to 8
  /// (Laplacian PᵀLP), one pair in n/n_c kept on the aggregates (the fine
  /// problem's density of pairs per point), by the polish at a fixed rank 32
  /// to a loose 1e-2 without a certificate — recursively while it is this
  /// large; its solution's directions above 10 % of the largest singular
  /// value, plus the next 4, the count rounded up to a multiple of 8 (a
  /// column of 8k doubles fills whole cache lines: at 200,000 points rank 31
  /// cost 18–25 % more an iteration than rank 32), copied to every point of its
  /// aggregate, start the polish as a warm start does (no ADMM phase). The
  /// random start's polish spends most of its iterations carrying the pairs
  /// across the graph, which the coarse graph does cheaply (n = 50,000
  /// adult-like: 161 fine iterations and 1 certificate instead of 484 and 3;
  /// docs/BENCHMARKS.md). The end point is the fine problem's, certified as
  /// always. 0 = off. FactorDiagnostics::coarse_levels reports each level.
  /// The coarse solves count as setup
  /// (stats.setup_seconds), not as iterations; a resumed run redoes them (they
  /// are deterministic, so the checkpoint still matches).
  int multilevel_min_points = 20000;

  /// Warm start (npkl_problem.h InitialFactor): V⁰ = U⁰ = the factor's rows
  /// fitted to rank r (WarmStartRows; padding rows from the seeded random
  /// start), Λ⁰ = 0. With Polish::kLbfgs the ADMM phase is skipped and the
  /// polish starts at V⁰ (ADMM's job is to get a random start to
  /// polish_switch_tolerance; a previous optimum is already there). Null =
  /// the seeded random start. Part of the checkpoint fingerprint.
  InitialFactor initial_factor;

  /// INVALID_ARGUMENT naming the field and value ("options.gamma = -1 must be
  /// positive and finite") for any out-of-range field.
  /// Errors name each field as "<path>.<field>" (a caller passes the field
  /// path its user wrote, e.g. the service passes the family's name).
  Status Validate(std::string_view path = "options") const;
};

/// Runs KL-ADMM (Algorithm 1) on `problem` from a seeded random start.
///
/// Returns K = VᵀV as a LearnedKernel with the n × r embedding Vᵀ (Algorithm 1,
/// line 2). result.stats: termination (kConverged by `tolerance`,
/// kIterationLimit, kTimeLimit / kCancelled from `control` — checked once at
/// the top of every outer iteration, so the iterate returned is that of the
/// last completed iteration, or V⁰ if none —, kNumericalIssue on a non-finite
/// iterate, which is then the last finite one), iterations completed, and
/// objective_history: eq. (1) at K = VᵀV after each iteration.
/// result.primal_residual / dual_residual: the absolute eq. (14) values of the
/// last iteration (the same numbers each ProgressEvent carries; in the polish
/// phase 0 and ‖∇f(V)‖_F).
/// result.stats.certificate.gap: with Polish::kLbfgs and certify, the bound of the
/// certify option at the returned V (the escalation's last certificate, or
/// one computed after solve_seconds stops); NaN otherwise. `diagnostics`
/// (optional) receives the escalation's stages and the last certificate.
///
/// Checkpoints (format "kl_admm/1"). With control.checkpoint set, the state
/// is handed to it (CheckpointTimer) after a completed iteration once
/// control.checkpoint_interval_seconds of solve time have passed since the
/// start or the last checkpoint — after the ρ update in the ADMM phase (V, U,
/// Λ, ρ; 3rn doubles), after each polish iteration and at the hand-over
/// (V, V·L and the L-BFGS pairs at the current stage's rank r;
/// (2 + 2·lbfgs_memory) rn doubles at most; and the escalation's bookkeeping),
/// always with the objective history so far; not after the iteration that
/// ends the run. With control.ResumeFrom("kl_admm/1") set and matching, the
/// run continues from it: stats.iterations, objective_history and the
/// ProgressEvent numbering go on from checkpoint.iteration,
/// stats.resumed_from_iteration = checkpoint.iteration, and the result is
/// bit-identical to the uninterrupted run's (doubles are stored exactly; the
/// L-BFGS memory is kept). A checkpoint matches when it was taken for the same
/// L, T, first-stage rank r and the options that shape the iterates (γ, ρ⁰,
/// ρ_min, adaptive_rho, seed, polish, polish_switch_tolerance, lbfgs_memory,
/// lbfgs_precondition, the escalation's options — a fingerprint); tolerance, max_iterations, certify and
/// num_threads may differ. Any other checkpoint — another format, problem or
/// shape, damaged or truncated bytes — is ignored and the solve starts afresh
/// (resumed_from_iteration = 0). Cancellation and the deadline act as usual
/// on a resumed run.
///
/// Errors (INVALID_ARGUMENT): problem.Validate() fails, the Laplacian is not
/// symmetric, options.Validate() fails, options.rank > n. RESOURCE_EXHAUSTED
/// on allocation failure, INTERNAL for any other exception.
StatusOr<NpklResult> SolveKlAdmm(const NpklProblem& problem, const KlAdmmOptions& options,
                                 const SolveControl& control = SolveControl(),
                                 FactorDiagnostics* diagnostics = nullptr);

}  // namespace kls
