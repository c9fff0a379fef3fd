// BCDNPKL: non-parametric kernel learning by boundary reduction and block
// coordinate descent (Hu, Wang & Chen, ICML 2011). It solves
//
//     min_{Z ⪰ 0}  tr(Δ Z) + C Σ_{(i,j)∈T} ℓ(T_ij Z_ij)                       eq. (1)
//
// with Δ = problem.laplacian, each unordered constraint {i, j} counted ONCE in
// the sum (this is what the C/2 of eq. (6) corresponds to), and ℓ in
// NpklProblem's convention:
//     kSquare        ℓ(z) = (1 − z)²            (paper's SL, same scaling)
//     kSquareHinge   ℓ(z) = max(0, 1 − z)²      (paper's SHL, same scaling)
//     kHinge         ℓ(z) = max(0, 1 − z)       (paper's HL is 2·max(0, 1 − z):
//                                                 paper (C) ≡ here (2C))
// kLinear is not supported (its eq. (1) is unbounded without a capacity
// constraint; use SimpleNPKL).
//
// Step 1 — boundary reduction (Prop. 1). L = the l points that appear in some
// constraint (sorted by index), U = the other u = n − l points. Since the loss
// reads only Z_LL, minimizing tr(ΔZ) over the rest of Z for a fixed Z_LL ⪰ 0
// is a Schur-complement problem whose value is tr(Δ̃ Z_LL) with
//     Δ̃ = Δ_LL − Δ_LU Δ_UU⁻¹ Δ_UL                                          (Prop. 1)
// attained at Z = Q Z_LL Qᵀ, Q = [I; −Δ_UU⁻¹ Δ_UL]. The reduction is EXACT (the
// optimal values of (1) and (4) coincide and Q Z^BD* Qᵀ solves (1)) under two
// conditions, which are checked: Δ ⪰ 0 (needed anyway for (1) to be bounded;
// NpklProblem's contract) and Δ_UU ≻ 0 (invertible). Δ_UU is factored once by
// a sparse LDLᵀ (Eigen::SimplicialLDLT, AMD ordering); a non-positive or
// relatively tiny pivot (< 1e-12 · the largest) is reported as an error. Δ̃
// (dense l × l) is formed from multi-right-hand-side solves with blocks of
// columns of Δ_UL; Q is never formed. The final embedding is
//     Φᵀ = Q Vᵀ:   rows L = Vᵀ,   rows U = −Δ_UU⁻¹ (Δ_UL Vᵀ)   (r solves).
//
// What δ means. The paper has one δ: the regularizer in
// Δ = (1+δ)I − D^{-1/2} S D^{-1/2} (§2), "introduced to prevent Δ from being
// singular". Algorithm 1 lists δ among its inputs but never uses it in its
// body — its inputs Q and Δ̃ are built from Δ, hence from δ — and §4.2 "set[s]
// the parameter δ = C/2 in Algorithm 1". We therefore read δ = C/2 as the
// Laplacian regularizer of the protocol, a graph-construction choice
// (GraphOptions::delta), not a parameter of this solver: SolveBcdNpkl takes Δ
// as given. δ > 0 makes Δ ≻ 0, hence Δ_UU ≻ 0 and λ_min(Δ̃) ≥ δ > 0, which is
// what Prop. 1 (invertible Δ_UU) and Theorem 1 (compact level sets, via
// λ_min(Δ̃) > 0) need. δ = 0 can still work when every connected component of
// the graph contains a constrained point (Δ_UU ≻ 0), but Δ̃ is then singular
// and Theorem 1's argument does not apply; a singular Δ_UU is an error.
//
// Step 2 — low-rank factorization Z^BD = VᵀV, V ∈ R^{r×l} (eq. (5)), minimized
// by Gauss–Seidel block coordinate descent over the columns v_i (Algorithm 1).
// With a = Δ̃_ii and b = Σ_{k≠i} Δ̃_ik v_k (current columns), the block
// subproblem eq. (6) is
//     min_v ½ a‖v‖² + vᵀb + (C/2) Σ_{j∈T(i)} ℓ(T_ij vᵀv_j),
// strictly convex since a > 0, and solved exactly. With Y = [T_is v_s]_{s∈T(i)}
// (r × |T(i)|, the signed neighbours) and P = YᵀY (the paper's P,
// P_st = T_is T_it v_sᵀv_t), q = Yᵀb + a·1:
//   square        (aI + C Y Yᵀ) v = C Y 1 − b                                 eq. (11)
//                 through the |T(i)|×|T(i)| Sherman–Morrison–Woodbury system
//                 (a/C I + P) when |T(i)| < r, by an r×r Cholesky otherwise;
//   square hinge  min_{α ≥ 0} ½ αᵀ(P + (a/C) I)α − αᵀq                      eq. (10)
//   hinge         min_{0 ≤ α ≤ C/2} ½ αᵀPα − αᵀq                             eq. (9)
//                 (box C/2 here = the paper's C with its doubled hinge),
//   and then the primal v = (Y α − b) / a                                     eq. (8).
// The small dual QPs are solved to a projected-gradient tolerance of
// 1e-12 · max(1, ‖q‖∞, ‖Hα‖∞): cyclic coordinate descent warm-started from
// the previous sweep's α of the same column (a single constraint is the
// paper's closed form α = clip(q/H), exact in one step), and, when nearly
// equal neighbours make H ill-conditioned and coordinate descent stalls
// (50 passes), a primal active-set method. Every block step minimizes eq. (5)
// exactly over v_i, so the objective is non-increasing. Theorem 1: the
// iterates converge to a stationary point of (5) — the cited result (Grippo &
// Sciandrone 2000, Prop. 5) needs a continuously differentiable objective, so
// for the hinge loss only block-wise optimality follows. By Burer–Monteiro
// (Prop. 2) a stationary V with rank(V) < r is globally optimal for the convex
// (4); r = RankBound(m) (Prop. 3) is the worst-case rank; by default the
// smooth losses start lower and escalate under the certificate below
// (BcdNpklOptions::rank_escalation). For the square and square-
// hinge losses the tests find the global optimum of (1) (relative objective
// gap to CSDP ~1e-8, i.e. CSDP's own accuracy, and the KKT conditions of (1)
// hold on all n points). For the hinge loss the paper reports (Fig. 1), and
// the tests observe, that BCD may stop at a worse point (relative gaps up to
// ~0.3 measured): no single column can improve there, but the point is not
// optimal for (1).
//
// Start V⁰: entries uniform in [0, 1) (the paper's MATLAB rand(r, l)), drawn
// from std::mt19937_64(seed) as the top 53 bits of each draw (no std::
// distribution, so V⁰ is identical across standard libraries).
//
// Cost. Setup: one sparse LDLᵀ of Δ_UU plus l triangular solve pairs, and
// O(l²) memory for Δ̃ (dense, as in the paper). Per outer sweep: O(r l²) for
// the b vectors and the objective, plus Σ_i (|T(i)|³ + r|T(i)|² + passes·|T(i)|²)
// for the subproblems. Final embedding: O(nnz(Δ_UL) r) + r solves.
//
// Thread safety: SolveBcdNpkl is a pure function of its arguments; concurrent
// calls are safe. The Gauss–Seidel order is sequential; options.num_threads
// splits the block GEMMs inside it (deterministic for a fixed thread count).
#pragma once

#include <string_view>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/npkl/factor_certificate.h"
#include "core/npkl/npkl_problem.h"

namespace kls {

struct BcdNpklOptions {
  /// ℓ in eq. (1): kSquare (closed form eq. (11), the fastest; paper's SL),
  /// kSquareHinge (eq. (10)) or kHinge (eq. (9)). kLinear is rejected.
  NpklLoss loss = NpklLoss::kSquare;
  /// C > 0, weight of the loss in eq. (1); the paper tunes it in
  /// {0.1, 0.2, 0.4, …, 10} on small sets, C = 1 on large ones.
  double c = 1.0;
  /// r, rows of V (Z^BD = VᵀV). 0 = automatic: RankBound(m), the largest r
  /// with r(r+1)/2 ≤ m (Prop. 3). Either way capped at l (the number of
  /// constrained points), since rank(Z^BD) ≤ l. Otherwise >= 1.
  int rank = 0;
  /// IterMax of Algorithm 1: outer sweeps (each updates all l columns), >= 1.
  int max_iterations = 1000;
  /// ε of Algorithm 1, made RELATIVE: converged when
  /// ‖V^{t+1} − V^t‖_F <= tolerance · ‖V^{t+1}‖_F (the paper's absolute test
  /// depends on the scale of V, which grows with C). >= 0; 0 runs to
  /// max_iterations. At 1e-5 the objective has typically settled to ~1e-9
  /// relative (measured: iris ≈ 50–100 sweeps, n = 1000 / m = 1200 ≈ 150).
  double tolerance = 1e-5;
  /// ω of block over-relaxation for the square loss: each column moves to
  /// v_i + ω (v_i* − v_i), v_i* the exact block minimizer of eq. (11). ω = 1
  /// is Algorithm 1 as published; any ω in (0, 2) decreases the objective
  /// every block (the block problem is an exact quadratic), and ω > 1 needs
  /// far fewer sweeps on large graphs (docs/BENCHMARKS.md). Ignored (ω = 1)
  /// for the hinge and square hinge losses.
  double over_relaxation = 1.0;
  /// Seed of the std::mt19937_64 drawing V⁰ ~ U[0, 1)^{r×l}.
  uint64_t seed = 1;

  // ---- Rank escalation (smooth losses, rank = 0) ----
  // Instead of the worst-case r = RankBound(m), start at r = initial_rank,
  // run Algorithm 1 to `tolerance`, then check the global-optimality
  // certificate of the Burer–Monteiro factorization (BCDNPKL Prop. 2;
  // Burer & Monteiro 2003; Journée et al. 2010): with S = ∇f(Z) of the reduced
  // convex problem eq. (4) at Z = VᵀV,
  //     f(Z) − f* ≤ ⟨S, Z⟩ − λ_min(S)·tr(Z*),
  // so a stationary V (VS = 0) with λ_min(S) ≥ 0 is optimal. λ_min is found by
  // Lanczos (Spectra) on x ↦ S x restricted to the orthogonal complement of
  // V's row space (S's known null space at stationarity), never densely for
  // large l. If the bound exceeds certificate_tolerance·|f|, up to
  // escalation_step eigenvectors x of negative eigenvalues are appended as new
  // rows √t·xᵀ (t the exact minimizer of f(Z + t xxᵀ) for the square loss,
  // a conservative step for the square hinge) and the sweeps continue. If
  // there is no negative eigenvalue (or r is at its cap), the bound is
  // ⟨S, Z⟩ alone — the sweeps stopped short of stationarity — and they go on
  // at a tenfold tighter tolerance, as a new stage at the same rank (at most
  // 3 times; rank_history then repeats r).
  /// Escalate (true) or run at the fixed RankBound(m) (false). Only with
  /// rank = 0 and the square / square-hinge losses.
  bool rank_escalation = true;
  /// Starting r of the escalation, >= 1 (capped by RankBound(m) and l).
  int initial_rank = 4;
  /// Rows appended per failed certificate (= eigenpairs computed), >= 1.
  int escalation_step = 8;
  /// Certified when the relative gap bound
  /// (|⟨S, Z⟩| + max(0, −λ_min(S))·tr(Z)) / |f| <= this (tr(Z) stands in for
  /// the unknown tr(Z*)). >= 0.
  double certificate_tolerance = 1e-7;
  /// Threads for the sweep's block GEMMs (Z·B_blk and the update of Z) and the
  /// certificate's operator; <= 0 = all cores. Results are identical for a
  /// fixed thread count (the splitting is a pure function of it).
  int num_threads = 1;

  /// Warm start (npkl_problem.h InitialFactor): V⁰ = the factor's rows of
  /// the constrained points, transposed; with rank escalation the first
  /// stage's r is the factor's rank (capped at RankBound(m) and l), otherwise
  /// it is fitted to r (WarmStartRows). Null = the random V⁰. Part of the
  /// checkpoint fingerprint.
  InitialFactor initial_factor;

  /// INVALID_ARGUMENT naming the field and value ("options.c = -1 must be
  /// positive and finite") for any out-of-range field.
  /// Errors name each field as "<path>.<field>" (a caller passes the field
  /// path its user wrote, e.g. the service passes the family's name).
  Status Validate(std::string_view path = "options") const;
};

/// What the rank escalation and the optimality certificate found
/// (core/npkl/factor_certificate.h).
using BcdNpklDiagnostics = FactorDiagnostics;

/// Runs BCDNPKL (Algorithm 1) on `problem`.
///
/// Returns K = Z = Φ Φᵀ on all n points as a LearnedKernel with the n × r
/// embedding Φ (rows of constrained points = Vᵀ; the others by the harmonic
/// extension Φ_U = −Δ_UU⁻¹ Δ_UL Φ_L of Prop. 1).
/// result.stats: termination (kConverged by `tolerance`, kIterationLimit,
/// kTimeLimit / kCancelled from `control` — checked once at the top of every
/// sweep, so the embedding is that of the last completed sweep, or of V⁰ if
/// none —, kNumericalIssue on a non-finite iterate, which is then the last
/// finite one); iterations = sweeps completed; objective_history = eq. (1)
/// (equal to eq. (4)/(5) by Prop. 1) after each sweep, non-increasing up to
/// rounding; setup_seconds = the boundary reduction; solve_seconds = sweeps
/// plus the final extension. One ProgressEvent per sweep with the objective
/// and primal_residual = ‖V^{t+1} − V^t‖_F.
/// result.primal_residual: the last ‖V^{t+1} − V^t‖_F.
/// result.dual_residual: for the smooth losses (square, square hinge), the
/// stationarity residual ‖V G̃‖_F / (‖V‖_F · max(1, ‖Δ̃‖_F)) of eq. (5) at
/// the returned V, G̃ = Δ̃ + C Σ ℓ'(T_ij v_iᵀv_j) T_ij (E_ij + E_ji)/2 (½ the
/// gradient of eq. (5) is V G̃); NaN for the hinge loss.
/// result.stats.certificate.gap: for the smooth losses, the certificate's relative gap
/// bound (see BcdNpklDiagnostics) when one was computed; NaN otherwise.
///
/// Checkpoints (format "bcd_npkl/1"). With control.checkpoint set, the state
/// is handed to it (CheckpointTimer) after a sweep that does not end its stage
/// once control.checkpoint_interval_seconds of solve time have passed since
/// the start or the last checkpoint: V (r × l at the current rank of the
/// escalation), the dual QPs' warm starts (one double per constraint end),
/// the factored Δ̃'s carried V Bᵀ (r × u), the sweeps of the current stage, the
/// escalation's bookkeeping and the objective history. With
/// control.ResumeFrom("bcd_npkl/1") set and matching, the run continues from
/// it: stats.iterations, objective_history and the ProgressEvent numbering go
/// on from checkpoint.iteration, stats.resumed_from_iteration =
/// checkpoint.iteration, diagnostics cover the whole run, and the result is
/// bit-identical to the uninterrupted run's (at the same num_threads). A
/// checkpoint matches when it was taken for the same Δ, T and the options that
/// shape the iterates (loss, c, rank, over_relaxation, seed, rank_escalation,
/// initial_rank, escalation_step, certificate_tolerance — a fingerprint);
/// tolerance, max_iterations and num_threads may differ. Any other checkpoint
/// — another format, problem or shape, damaged or truncated bytes — is
/// ignored and the solve starts afresh (resumed_from_iteration = 0).
///
/// Errors (INVALID_ARGUMENT): problem.Validate() fails; the Laplacian is not
/// symmetric; a self pair (i, i) (eq. (6) assumes j ≠ i); options invalid or
/// loss = kLinear; Δ_UU not positive definite (message suggests δ > 0); some
/// Δ̃_ii <= 0. RESOURCE_EXHAUSTED on allocation failure, INTERNAL for any
/// other exception.
StatusOr<NpklResult> SolveBcdNpkl(const NpklProblem& problem, const BcdNpklOptions& options,
                                  const SolveControl& control = SolveControl(),
                                  BcdNpklDiagnostics* diagnostics = nullptr);

}  // namespace kls
