// The default exact QSDP solver: the interior-point method of qsdp_ipm.h on a
// sequence of small faces of the PSD cone, with the global certificate of
// qsdp_solver.h deciding when to stop.
//
// Why: the IPM's Newton system has min(n_s, K) unknowns (n_s = m(m+1)/2, K
// terms), so its cost grows like m⁶ (RegMVU at m = 100: n_s = 5,050 and
// K ≈ 4,900, ~2.5 s per Cholesky factorization here, ~40 s per solve). When
// min(n_s, K) <= full_system_size the full-space IPM is simply called once.
// The solutions of RegPCP / RegMVU have low rank r (RegMVU ν = 1: r = 1; RegPCP
// on digits: r ≈ 15–25), and for any orthonormal U (m × p) whose range contains
// range(Y*), the face {U S Uᵀ : S ⪰ 0} contains Y*. On that face the QSDP is
// again a QSDP of the same form (a_k ← Uᵀa_k, b_k ← Uᵀb_k, C ← UᵀCU; c tr(Y)
// is unchanged since UᵀU = I) with p(p+1)/2 unknowns, solved exactly by the IPM.
//
// Which face: at the optimum Z* = ∇f(Y*) ⪰ 0 and Y* Z* = 0, so range(Y*) lies
// in the null space of ∇f(Y*) (KKT conditions of (13)–(14)). Round k therefore
// takes U_k = orth[range(Y_{k−1}), the p eigenvectors of ∇f(Y_{k−1}) with the
// smallest eigenvalues] (Y_{−1} = 0, so round 0 uses the most negative
// directions of ∇f(0) = B). Keeping range(Y_{k−1}) makes f(Y_k) non-increasing;
// the eigenvectors of ∇f(Y_{k−1}) move the face towards null(∇f(Y*)) — the
// error in the face shrinks each round by roughly ‖∇f(Y_{k−1}) − ∇f(Y*)‖ over
// the (p+1)-th eigenvalue of ∇f(Y*), so a margin p > r makes it contract fast.
// If a round cuts the certified gap by less than 10× (min_gap_reduction), p
// grows (×growth); at p = m — or at the last allowed round — the round is the
// full IPM, so the method always terminates with the exact answer.
//
// Stopping rule: after each round, EvaluateCertificate (qsdp_solver.h) on the
// full problem at Y_k = U_k S_k U_kᵀ: the rigorous relative duality gap
// (f(Y_k) − g(λ'))/max(1,|f|) <= gap_tolerance, with λ' = 2W(𝒜Y_k − t) made
// dual feasible for the full problem. A face that misses part of range(Y*)
// shows up there as a negative eigenvalue of ∇f(Y_k), which the repair turns
// into a larger gap, so an unlucky face can delay but never fake convergence.
//
// Thread safety: SolveQsdpSubspace is re-entrant.
#pragma once

#include <Eigen/Core>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/qsdp/qsdp_ipm.h"
#include "core/qsdp/qsdp_problem.h"

namespace kls {

struct QsdpSubspaceOptions {
  /// Stop when the certified relative duality gap of the full problem is <= this (> 0).
  double gap_tolerance = 1e-8;
  /// The full-space IPM is used directly when its Newton system has at most this
  /// many unknowns, min(n_s, K) (>= 1): m <= 76 always; RegPCP at m = 100 (K ≈ 2,900).
  int full_system_size = 3000;
  /// Face dimension p of the first round (>= 1; capped at m).
  int initial_dimension = 40;
  /// Eigenvectors of ∇f added per round beyond range(Y): max(this, rank(Y)) (>= 1).
  int margin = 20;
  /// Face dimension multiplier after a round that cut the certified gap by less
  /// than `min_gap_reduction` (>= 1); faces that make good progress keep their size.
  double growth = 1.5;
  /// A round "makes progress" when gap_k <= min_gap_reduction · gap_{k−1} (in (0, 1]).
  double min_gap_reduction = 0.1;
  /// Round cap (>= 1); the last round is the full problem when the cap is reached.
  int max_rounds = 12;
  /// Eigenvalues of S above this fraction of the largest span range(Y) (in (0, 1)).
  double range_threshold = 1e-6;
  /// Options of the inner IPM (its gap_tolerance is set to a tenth of the one above).
  QsdpIpmOptions ipm;
  /// INVALID_ARGUMENT "<path>.<field> = <value> <rule>"; the inner IPM's
  /// options are checked under the same path ("qsdp.max_iterations = 0 must be >= 1").
  Status Validate(std::string_view path = "options") const;
};

struct QsdpSubspaceRound {
  int dimension = 0;          ///< p, the face dimension
  int ipm_iterations = 0;     ///< IPM iterations on the face
  double gap = 0.0;           ///< certified relative gap of the full problem after the round
  double seconds = 0.0;
};

struct QsdpSubspaceResult {
  Eigen::MatrixXd y;          ///< the m × m PSD solution
  double objective = 0.0;     ///< f(Y), including the constant Σ w t²
  int rank = 0;               ///< eigenvalues of Y above ipm.rank_threshold · max
  int ipm_iterations = 0;     ///< total over rounds
  std::vector<QsdpSubspaceRound> rounds;
  /// termination, iterations (= rounds), timings, objective history;
  /// certificate: gap = (objective − lower_bound) / max(1, |objective|), lower_bound a
  /// certified lower bound on f*, kkt_residual = ‖Y − Π₊(Y − ∇f(Y))‖_F / (1 + ‖Y‖_F);
  /// certified when gap <= gap_tolerance.
  SolveReport stats;
};

/// Solves the QSDP; see the file comment. Errors: INVALID_ARGUMENT for an
/// invalid problem or options; RESOURCE_EXHAUSTED / INTERNAL from exceptions.
/// Cancellation and the deadline are checked between rounds and inside the IPM.
///
/// Checkpoints (format "qsdp_subspace/1"). With control.checkpoint set, the
/// state is handed to it (CheckpointTimer) after a face round that does not
/// end the run once control.checkpoint_interval_seconds of solve time have
/// passed since the start or the last checkpoint: Y_k, range(Y_k), the
/// directions carried to the next face, the next face dimension, the best
/// certified iterate, the round records and the objective history (one entry
/// per round). With control.ResumeFrom("qsdp_subspace/1") set and matching,
/// the run continues with the next round: stats.iterations (rounds),
/// objective_history and the ProgressEvent numbering go on from
/// checkpoint.iteration, stats.resumed_from_iteration = checkpoint.iteration,
/// and the result is bit-identical to the uninterrupted run's. The face IPMs
/// themselves are not checkpointed (a round is the unit of progress). When
/// the full-space IPM is called directly (min(n_s, K) <= full_system_size),
/// `control` goes to SolveQsdpInteriorPoint unchanged, so checkpoints are
/// "qsdp_ipm/1" ones, numbered in IPM iterations like the progress events,
/// and stats.resumed_from_iteration is the IPM's. A checkpoint matches when it
/// was taken for the same problem and the options that shape the iterates (a
/// fingerprint; all but max_rounds); any
/// other checkpoint is ignored and the solve starts afresh.
StatusOr<QsdpSubspaceResult> SolveQsdpSubspace(const QsdpProblem& problem, const QsdpSubspaceOptions& options = {},
                                               const SolveControl& control = SolveControl());

/// The QSDP restricted to the face {U S Uᵀ}: a_k ← Uᵀa_k, b_k ← Uᵀb_k,
/// C ← UᵀCU (U orthonormal columns, m × p). f(U S Uᵀ) = restricted f(S).
QsdpProblem RestrictToFace(const QsdpProblem& problem, const Eigen::MatrixXd& u);

}  // namespace kls
