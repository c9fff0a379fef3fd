// SimpleNPKL: simple non-parametric kernel learning (Zhuang, Tsang & Hoi;
// thesis ch. 3, §3.2–3.3).
//
// Problem (thesis (3.15), (3.20) and §3.2.4–3.2.5), over K ⪰ 0 (n × n):
//
//     min_K  tr(L K) + Loss(K) [+ (G/p) tr K^p]      s.t.  [tr K^p <= B]
//
// with the capacity either as the constraint tr K^p <= B (Capacity::
// kConstraint, Prop. 3.25) or as the penalty (G/p) tr K^p (Capacity::kPenalty,
// Prop. 3.26), z_ij = T_ij K_ij, and the losses in the thesis's scaling:
//
//     linear        Loss = −C Σ z_ij                              (3.6)
//     square hinge  Loss = (C/2) Σ max(0, 1 − z_ij)²              (3.15)
//     square        Loss = (C/2) Σ (1 − z_ij)²                    (§3.2.4)
//     hinge         Loss =  C    Σ max(0, 1 − z_ij)               (§3.2.5)
//
// (note the 1/2 of the two quadratic losses: C here is the thesis's C, which
// is half the C of NpklProblem's ℓ(z) = max(0, 1 − z)² convention).
//
// Method. Every step reduces to the closed form of Prop. 3.25 / 3.26 for
//     max_K tr(A K) − [(G/p) tr K^p]   s.t. K ⪰ 0 [, tr K^p <= B]:
//     K = (B / tr A₊^q)^{1/p} A₊^{1/(p−1)}   (3.8),  q = p/(p−1),
//     K = (A₊ / G)^{1/(p−1)}                  (3.14),
// where A₊ is the positive part of A, found by sparse Lanczos
// (positive_spectrum.h; thesis §3.3.2).
//   * Linear loss: one closed form with A = C Σ T_ij S_ij − L.
//   * Other losses: the saddle-point problem (3.18)
//         max_α J(α),  J(α) = min_K tr((L − Σ α_ij T_ij S_ij) K) [+ penalty]
//                                 + Σ α_ij − (1/2C) Σ α_ij²   (no α² term for hinge)
//     solved by projected gradient ascent (Algorithm/Protocol 1):
//         A = Σ α_ij T_ij S_ij − L,  K(α) by (3.8)/(3.14),
//         ∇J_ij = 1 − T_ij K_ij − α_ij / C   (3.19)   (hinge: 1 − T_ij K_ij),
//         α ← Π(α + ∇J / η),
//     with Π the projection onto α >= 0 (square hinge), [0, C] (hinge,
//     §3.2.5), or the identity (square loss: its constraints are equalities,
//     so α is free in sign). S_ij = (E_ij + E_ji)/2 is the symmetric form of
//     the thesis's T_ij matrix (tr(S_ij K) = K_ij).
//
// Step size. Prop. 3.28 (with Lemma 3.4) guarantees monotone ascent
// J(α_{t+1}) >= J(α_t) + (η/2)‖α_{t+1} − α_t‖² and J* − J(α_t) <= η‖α_0 − α*‖²/(2t)
// for any η >= Lip(∇J); the step *length* is 1/η (the thesis's Protocol 1
// writes α + η∇J, but the proof's update is α + ∇J/η). Lemma 3.4 bounds
// Lip(∇J) <= m/G + 1/C for the penalty form with p = 2. That bound uses
// ‖T‖_F = √m twice; the exact constant of the same argument is
// ‖𝒟‖²/G + 1/C, where 𝒟: α ↦ Σ α_ij T_ij S_ij has ‖𝒟‖² = 1/2 when every
// pair is off-diagonal and 1 when some pair is (i, i). Both are offered
// (LipschitzBound); the sharp one is the default and is still covered by
// Prop. 3.28 because the proof needs only η >= Lip(∇J). For the constraint
// form the thesis's equivalence G = (tr A₊^q / B)^{1/q} (below (3.14)) is
// used at the current iterate; since that G changes with α, and Lemma 3.4
// does not cover p != 2, each step is checked against the ascent inequality
//     J(α⁺) >= J(α) + ⟨∇J(α), α⁺ − α⟩ − (η/2)‖α⁺ − α‖²
// and η is doubled until it holds (in the penalty form with p = 2 it can fail
// only through rounding). A passing check costs nothing: J(α⁺) comes from the
// eigendecomposition the next iteration needs anyway; each doubling costs one
// more. The hinge loss has no 1/C term (its J has no α² term).
// adaptive_step additionally halves η after every step that needed no
// doubling (a Lipschitz-estimate search; still monotone). A fixed `step` > 0
// uses that step length with no check.
//
// Acceleration (accelerated, the default; not in the thesis). The same
// projected step is taken from an extrapolated point, FISTA-style (Beck &
// Teboulle, "A fast iterative shrinkage-thresholding algorithm", 2009):
//     x_k = Π(y_k + ∇J(y_k)/η),  t_{k+1} = (1 + √(1 + 4 t_k²))/2,
//     y_{k+1} = Π(x_k + ((t_k − 1)/t_{k+1}) (x_k − x_{k−1})),
// with η the guaranteed value above at y_k. y is projected so that every
// evaluated point is dual feasible and its J a valid lower bound for the gap.
// Two restarts (O'Donoghue & Candès, "Adaptive restart for accelerated
// gradient schemes", 2015) keep it robust: t ← 1 when the momentum points
// against the step ((x_k − y_k)·(x_k − x_{k−1}) < 0), and an extrapolated point
// whose J is below the current one is rejected and the iteration retaken as
// the plain step with its ascent check, so the evaluated J(y_k) never
// decrease. The certificate is unchanged (it holds at any feasible point).
// Measured on adult-like data (kls-bench scale): n = 2,000, 133 → 40
// iterations; n = 6,414, 198 → 64 (docs/BENCHMARKS.md).
//
// Newton steps (newton, the default where they apply; not in the thesis).
// On the dense path (n <= dense_threshold, full K) with p = 2 and the square
// or square-hinge loss, −J is strongly convex (its α² term) and the positive
// part M ↦ M₊ is strongly semismooth, so each iteration instead solves the
// generalized Newton system of −J: with M(α) = U Λ Uᵀ fully decomposed, the
// Hessian applied to v is v/C + T ∘ dK[Σ v_ij T_ij S_ij], dK from the
// Daleckii–Krein divided differences of max(λ, 0) (and the normalization of
// (3.8) in the constraint form), solved by conjugate gradients on the free
// set of α (Bertsekas's projected Newton method, 1982), followed by an Armijo
// search along the projection arc; any failure falls back to the gradient
// step above. The iterates stay dual feasible, so the certificate below is
// unchanged. Measured (kls-bench repro --B n, 20 trials): 8.5 → 2.0
// iterations on iris, 8.9 → 2.0 on wine, same optimum; the quadratic final
// phase is what lets a warm start that begins close finish in one step.
//
// Inactive capacity. When B is large enough that tr K^p <= B is not active
// at the optimum, the dual optimum has A(α*)₊ = 0 and the closed form gives
// K(α) = 0, far from K* (which lies in A(α*)'s null space). At every iterate
// with A₊ = 0 (constraint form, square / square-hinge loss) the solver also
// evaluates the rank-one face K = s v vᵀ, v the top eigenvector of A(α), s
// minimizing P by a 1-D search, and keeps it as the iterate's primal when it
// is lower; it is feasible, so the certificate below holds with it.
//
// Stopping rule (certified). At every iterate α_t the solver evaluates the
// primal objective P(K(α_t)) (K(α_t) is feasible) and the dual value J(α_t)
// (computed from the same eigenvalues). Weak duality gives
// P(K(α_t)) − P* <= P(K(α_t)) − J(α_t), so the returned kernel is within the
// reported gap of optimal. Relative gap = (P − J) / max(1, |P − P(0)|), with
// P(0) the objective at K = 0 (the loss of z = 0 on every constraint: 0 for
// the linear loss, (C/2)·m for the quadratic losses, C·m for the hinge); the
// solver stops when it is <= tolerance. Rounding can make it slightly
// negative. Why P − P(0) and not P (issue 23): P(0) does not depend on K, and
// with the thesis's small-set capacity B = 1 every constraint stays violated
// (|K_ij| ≪ 1), so P ≈ (C/2)·m + O(1); a gap relative to |P| then let the
// solver stop after 1–2 iterations with K 0.5–2 % (Frobenius) from the
// optimum (measured against CSDP, tests/core/simple_npkl_test.cc). Relative
// to the part of P that K moves, the same tolerance leaves K within ~0.4 %.
// On the sparse path the early iterations may compute A₊ with a looser
// Lanczos tolerance (early_lanczos_tolerance) and, after the first Lanczos
// solve, every iterate with the warm-started block eigensolver of
// block_spectrum.h (block_warm_start, block_tolerance); the solver
// re-evaluates the iterate with Lanczos at lanczos_tolerance before any
// convergence test that can succeed and before returning, so every certified
// gap uses the tight A₊. The block solver's J is inexact (~2e-7 relative at
// n = 6,414), so a step whose ascent check fails on block values is re-checked
// once with Lanczos values before η is doubled.
//
// Initialization: α_0 = C·1 (hinge: the upper bound C), the maximizer of the
// α-only terms Σ α − α²/(2C); then A(α_0) = C Σ T_ij S_ij − L and K(α_0) is
// exactly the linear-loss kernel (3.6). The thesis leaves α_0 open. On the
// sparse path a cold start instead takes α_0 = s·C·1 with the largest s in
// (0, 1] at which A(α_0) has at most start_rank positive eigenvalues (a
// bisection of Lanczos probes for λ_{start_rank+1}): the rank of A(C·1) can
// be several times the optimum's (168 against 43 at n = 6,414), every early
// iterate then carries that many eigenpairs, and the first Lanczos solve alone
// took 10 s of a 42 s solve there. The ascent raises the rank to the
// optimum's from below at a fraction of the cost (42 → 18 s). The dense path
// (n <= dense_threshold), where the eigensolver's cost does not depend on the
// rank, and warm starts keep their α_0.
//
// Active constraint selection (§3.3.3): the margin of each constrained point i
// under K(α_0), |(1/l_i) Σ_j T_ij K_ij|, ranks the points; the constraints
// touching the ⌈fraction · #constrained points⌉ most uncertain ones are kept
// and SimpleNPKL runs on them alone. Objective, gap and history then refer to
// that reduced problem.
//
// Low-rank mode (§3.3.4): K = V E Vᵀ with V fixed (n × r, the r leading
// eigenvectors of A(α_0), i.e. of the linear-loss kernel completed by the
// next eigenvectors) and E ⪰ 0 (r × r); each iteration decomposes the r × r
// matrix Vᵀ A V instead of A. The certified gap is for the problem restricted
// to that subspace.
//
// Cost per iteration: one positive-spectrum computation of A, O(nnz(L) + m)
// per Lanczos product (dense O(n³) for n <= dense_threshold), plus O(m r) for
// the gradient and O(nnz(L) r) for tr(L K); low-rank: O(m r² + r³ + n r²).
//
// Thread safety: SolveSimpleNpkl is re-entrant; concurrent calls are safe.
#pragma once

#include <string_view>

#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "core/npkl/npkl_problem.h"

namespace kls {

struct SimpleNpklOptions {
  enum class Capacity {
    kConstraint,  ///< tr K^p <= B  (3.7), (3.8)
    kPenalty,     ///< + (G/p) tr K^p in the objective  (3.13), (3.14)
  };
  enum class LipschitzBound {
    kThesis,  ///< Lemma 3.4 as printed: m/G + 1/C
    kSharp,   ///< ‖𝒟‖²/G + 1/C with ‖𝒟‖² ∈ {1/2, 1} (see file comment)
  };

  /// Loss on z_ij = T_ij K_ij; the thesis's experiments use square hinge (SHL) and linear (LL).
  NpklLoss loss = NpklLoss::kSquareHinge;
  /// C > 0: weight of the loss (thesis scaling, see file comment).
  double c = 1.0;
  /// B > 0: capacity bound tr K^p <= B (Capacity::kConstraint). Thesis: B = 1 small sets, B = N adult.
  double b = 1.0;
  /// G > 0: capacity penalty weight (Capacity::kPenalty).
  double g = 1.0;
  /// p > 1: the Schatten-p capacity tr K^p; p = 2 gives ‖K‖_F² (thesis default).
  double p = 2.0;
  /// Capacity as constraint (B) or penalty (G).
  Capacity capacity = Capacity::kConstraint;
  /// Step length s in α ← Π(α + s ∇J); 0 = the guaranteed 1/η of Prop. 3.28 (>= 0).
  double step = 0.0;
  /// Which Lipschitz bound gives the guaranteed η (used when step == 0 or adaptive_step).
  LipschitzBound lipschitz_bound = LipschitzBound::kSharp;
  /// Start from the guaranteed η, then halve η after each step that needed no backtracking.
  bool adaptive_step = false;
  /// Accelerated projected gradient (FISTA-type momentum with gradient and
  /// function restarts; see the file comment) at the guaranteed step 1/η.
  /// Used only when step == 0 and adaptive_step is false; false = the
  /// thesis's Protocol 1 step α ← Π(α + ∇J/η) at every iteration.
  bool accelerated = true;
  /// Projected Newton steps on the dual (not in the thesis; see
  /// simple_npkl.cc "Newton steps"): on the dense path (n <= dense_threshold,
  /// full K) with p = 2 and the square or square hinge loss, each iteration
  /// solves the generalized Newton system of −J by conjugate gradients and
  /// takes the projected step with an Armijo line search, falling back to the
  /// gradient step when it fails. Elsewhere ignored.
  bool newton = true;
  /// Low-rank start (sparse path, cold start, losses with a dual): α⁰ = s·C·1
  /// with s the largest value in (0, 1] (bisection, 1/64) at which A(α⁰) has
  /// at most start_rank positive eigenvalues, instead of C·1, whose A can have
  /// a positive rank several times the optimum's, each an eigenpair every
  /// early iteration must compute (see the file comment). 0 = always C·1.
  int start_rank = 8;
  /// Outer (projected-gradient) iterations (>= 1); ignored by the linear loss.
  int max_iterations = 1000;
  /// Stop when the relative duality gap (P − J)/max(1, |P − P(0)|) <= tolerance (>= 0).
  double tolerance = 1e-4;
  /// Run §3.3.3 active constraint selection first and solve on the kept constraints.
  bool active_set = false;
  /// Fraction of the constrained points kept by active selection, in (0, 1].
  double active_point_fraction = 0.5;
  /// 0 = full K; r > 0 = low-rank mode K = V E Vᵀ with r basis vectors (§3.3.4), r <= n.
  int low_rank = 0;
  /// Dense eigensolver at or below this many points (>= 0); see positive_spectrum.h.
  int dense_threshold = 300;
  /// Spectra Lanczos relative tolerance (> 0); every certified gap (the
  /// stopping test and the returned certificate.gap) is computed at this one.
  double lanczos_tolerance = 1e-10;
  /// Looser Lanczos tolerance for the early iterations (>= 0; 0 or anything
  /// <= lanczos_tolerance = always lanczos_tolerance). The solver switches to
  /// lanczos_tolerance for good, re-evaluating the current iterate, once the
  /// (early) relative gap is <= tighten_factor · tolerance, before any
  /// convergence claim, and before returning (issue 3).
  double early_lanczos_tolerance = 1e-6;
  /// See early_lanczos_tolerance (>= 1). 1 (the default) tightens exactly
  /// when the early gap first claims convergence: the claim is then checked
  /// at lanczos_tolerance, and the solve goes on at that tolerance if it fails.
  /// Measured at n = 2,000 (adult-like, SHL): the iterations between gap
  /// 10·tolerance and tolerance were 38 of 60, all at the tight tolerance
  /// with the old default 10 (docs/BENCHMARKS.md).
  double tighten_factor = 1.0;
  /// Sparse path: after the first Lanczos solve, compute A₊ at each new α by
  /// the block eigensolver of block_spectrum.h warm-started from the previous
  /// Ritz block (issue 3), falling back to Lanczos when it does not converge.
  /// Convergence is still only claimed, and the returned gap only computed,
  /// from a Lanczos evaluation at lanczos_tolerance. false = Lanczos always.
  bool block_warm_start = true;
  /// Residual tolerance of those block solves, relative to max(1, λ_max(A))
  /// (> 0). Loose on purpose: the early iterates are never certified.
  double block_tolerance = 1e-3;
  /// The block solver is used only while n >= block_points_per_column · p
  /// (p = rank + guards; >= 1): its Rayleigh–Ritz step costs O(n p² + p³)
  /// per iteration, and at high rank Lanczos is cheaper. Measured: digits
  /// (n = 1,797, B = n, rank ≈ 400) 31 s per solve with Lanczos, 43 s with
  /// the block solver; adult-like n = 6,414 (rank 45) 89 s → 41 s.
  int block_points_per_column = 16;
  /// Threads of the block eigensolver's products (>= 0; 0 = all cores; 1 by
  /// default, like the other solvers: the server's worker pool owns
  /// concurrency). Results do not depend on it (each column is computed by
  /// the same serial code).
  int num_threads = 1;
  /// Doublings of η allowed per step before giving up with kNumericalIssue (>= 1).
  int max_backtracks = 40;
  /// Warm start (npkl_problem.h InitialFactor): α⁰ from the earlier kernel
  /// K = F Fᵀ by the optimality condition ∇J = 0 of (3.19), projected:
  /// α_ij = Π(C (1 − T_ij K_ij)) (hinge: C where T_ij K_ij < 1, else 0)
  /// instead of C·1. Ignored by the linear loss. Null = α⁰ = C·1. Part of
  /// the checkpoint fingerprint.
  InitialFactor initial_factor;

  /// INVALID_ARGUMENT naming the field and its value ("options.c = -1 must be
  /// finite and > 0") for any out-of-range field.
  /// Errors name each field as "<path>.<field>" (a caller passes the field
  /// path its user wrote, e.g. the service passes the family's name).
  Status Validate(std::string_view path = "options") const;
};

/// Learns K for `problem` (Laplacian L, constraints T). On success:
///   kernel            K = V Vᵀ, V = U diag(λ)^{1/2} from the closed form;
///                     a single zero column when K = 0 (A has no positive part);
///   stats             termination, iterations, objective_history (primal P per
///                     iteration; element 0 is the initial iterate), timings,
///                     final_objective = P(K);
///   certificate       gap = the relative gap (P − J)/max(1, |P − P(0)|) at the
///                     returned K, lower_bound = J, certified when gap <= tolerance
///                     (P(0) = objective at K = 0; see the file comment);
///   dual_residual     absolute gap P − J;
///   primal_residual   ‖α − Π(α + ∇J(α))‖∞, the stationarity residual of the
///                     dual (0 for the linear loss).
/// Termination: kConverged (gap <= tolerance), kIterationLimit, kTimeLimit /
/// kCancelled (SolveControl, checked once per iteration; the current iterate
/// is returned), kNumericalIssue (non-finite values or a failed step search;
/// the last finite iterate is returned).
/// Progress: one event per iteration with objective = P, primal_residual =
/// relative gap, dual_residual = ‖α_t − α_{t−1}‖∞.
/// Checkpoints (format "simple_npkl/1"; not for the linear loss, which has no
/// iterations). With control.checkpoint set, the state is handed to it
/// (CheckpointTimer) after an iteration that does not end the run once
/// control.checkpoint_interval_seconds of solve time have passed since the
/// start or the last checkpoint: α, the step state (η, backtracking, whether
/// Lanczos is at the tight tolerance), the current iterate in full (its n × r
/// factor of K(α) included, so nothing is re-decomposed on resume), the
/// evaluator's warm starts (Lanczos start vector and rank hint, the block
/// solver's n × p Ritz block) and the objective history. With
/// control.ResumeFrom("simple_npkl/1") set and matching, the run continues
/// from it: stats.iterations, objective_history and the ProgressEvent
/// numbering go on from checkpoint.iteration, stats.resumed_from_iteration =
/// checkpoint.iteration, and the result is bit-identical to the uninterrupted
/// run's. A checkpoint matches when it was taken for the same L, T and the
/// options that shape the iterates (all but tolerance, max_iterations and
/// num_threads — a fingerprint). Any other checkpoint — another format,
/// problem or shape, damaged or truncated bytes — is ignored and the solve
/// starts afresh (resumed_from_iteration = 0).
/// Errors: INVALID_ARGUMENT for an invalid problem (NpklProblem::Validate, a
/// non-symmetric Laplacian) or options (also low_rank > n); RESOURCE_EXHAUSTED
/// on allocation failure; INTERNAL for eigensolver failures and any other
/// exception.
StatusOr<NpklResult> SolveSimpleNpkl(const NpklProblem& problem, const SimpleNpklOptions& options,
                                     const SolveControl& control = SolveControl());

/// §3.3.3 active constraint selection: indices (ascending) of the constraints
/// touching the `num_points` constrained points with the smallest margin
/// |(1/l_i) Σ_j T_ij K_ij| under `kernel` (ties: smaller point index).
/// O(m r + n log n). Errors: INVALID_ARGUMENT when num_points < 1 or the
/// kernel does not cover the constraints.
StatusOr<std::vector<int>> SelectActiveConstraints(const PairwiseConstraints& constraints,
                                                   const LearnedKernel& kernel, int num_points);

}  // namespace kls
