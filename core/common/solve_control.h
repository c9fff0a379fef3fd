// The shared solver contract every core solver follows (docs/ARCHITECTURE.md "Layers").
//
// Every solver has the shape
//     StatusOr<XResult> SolveX(const XProblem&, const XOptions&, const SolveControl&);
// Errors (bad input or settings) come back as a non-OK Status; outcomes
// (converged, iteration cap, time limit, cancelled, numerical issue) come back
// in XResult::stats.termination. Cancellation, the deadline and the progress
// sink belong to one call (unlike a process-global interrupt handler), and the
// solver checks them at least once per outer iteration.
#pragma once

#include <algorithm>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/common/certificate.h"
#include "core/common/status.h"

namespace kls {

/// Why a solver stopped. Not an error: a time-limited run returns its best
/// iterate with termination == kTimeLimit.
enum class Termination {
  kConverged,       ///< stopping criterion met
  kIterationLimit,  ///< max iterations reached before the criterion
  kTimeLimit,       ///< SolveControl deadline passed
  kCancelled,       ///< SolveControl cancellation token was set
  kNumericalIssue,  ///< NaN/Inf or a failed factorization; the iterate is the last finite one
};

/// "converged", "iteration_limit", "time_limit", "cancelled", "numerical_issue".
const char* TerminationName(Termination t);

/// One progress report, emitted at most once per outer iteration.
struct ProgressEvent {
  int iteration = 0;            ///< outer iteration just completed (1-based)
  double objective = 0.0;       ///< current objective value of the solver's formulation
  double primal_residual = 0.0; ///< solver-specific; 0 where not applicable
  double dual_residual = 0.0;   ///< solver-specific; 0 where not applicable
  double elapsed_seconds = 0.0; ///< wall time since the solver started
  int max_iterations = 0;       ///< for ETA estimates; 0 when unknown
  /// The iterate's relative duality gap where the solver has one each
  /// iteration (the Certificate's `gap` of that iterate); NaN otherwise.
  double gap = std::numeric_limits<double>::quiet_NaN();
  /// The step (line-search length, ‖Δ‖ of the iterate, …); NaN where none.
  double step = std::numeric_limits<double>::quiet_NaN();
};

/// One outer iteration as the solver reports it: what its ProgressEvent
/// carries, kept in SolveReport::rows.
struct IterationRow {
  int iteration = 0;        ///< 1-based, counted from the original start (resumes continue it)
  double objective = 0.0;   ///< the solver's objective at the iterate
  /// Solver-specific, exactly what ProgressEvent::primal_residual /
  /// dual_residual carry (KL-ADMM ‖V − U‖ and ρ‖V − V_old‖ or ‖∇f‖; BCDNPKL
  /// ‖V − V_old‖ and 0; SimpleNPKL the relative gap and the step's ∞-norm).
  double primal_residual = 0.0;
  double dual_residual = 0.0;
  /// Relative duality gap of the iterate where the solver has one each
  /// iteration; NaN otherwise.
  double gap = std::numeric_limits<double>::quiet_NaN();
  /// The step: line-search length, ‖Δ‖ of the iterate, …; NaN where none.
  double step = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0.0;     ///< wall time since the solver started (ProgressEvent::elapsed_seconds)

  /// The row of a primal–dual ascent that certifies every iterate (SimpleNPKL,
  /// NPK ranking, the embedding minimax): primal_residual = gap = the relative
  /// duality gap, dual_residual = step = the step's ∞-norm.
  static IterationRow GapAndStep(int iteration, double objective, double gap, double step) {
    IterationRow row;
    row.iteration = iteration;
    row.objective = objective;
    row.primal_residual = gap;
    row.dual_residual = step;
    row.gap = gap;
    row.step = step;
    return row;
  }
};

/// A solver's resumable state: what it needs to continue where it stopped
/// (its iterate and the scalars of its schedule), not a restart. The solver
/// encodes and decodes `bytes` itself; `solver` names the format
/// ("kl_admm/1"), so a checkpoint is never fed to another solver or format.
/// Resuming (problem, options, checkpoint) continues the same run: the
/// iteration count goes on from `iteration`, and the end point equals an
/// uninterrupted run's within the solver's tolerance.
struct Checkpoint {
  std::string solver;  ///< format tag
  int iteration = 0;   ///< outer iterations completed when it was taken
  std::string bytes;   ///< the encoded state
};

/// A cancellation flag that one party sets and a running solver reads.
/// Thread-safe; cheap to copy (shared state).
class CancellationToken {
 public:
  CancellationToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  void Cancel() const { flag_->store(true, std::memory_order_relaxed); }
  bool IsCancelled() const { return flag_->load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

/// Carried by every Solve call. Default-constructed: never cancelled, no
/// deadline, no progress sink.
struct SolveControl {
  using Clock = std::chrono::steady_clock;

  CancellationToken cancel;                               ///< set from another thread to stop
  Clock::time_point deadline = Clock::time_point::max();  ///< stop with kTimeLimit after this
  /// Polled by ShouldStop (after `cancel`); true = stop with kCancelled. For
  /// a cancellation that can only be polled (a gRPC call's IsCancelled).
  /// Must be cheap, thread-safe and must not throw. Empty: none.
  std::function<bool()> stop_requested;
  /// Called on the solver's thread once per outer iteration; must be cheap
  /// and must not throw. Empty means no reporting.
  std::function<void(const ProgressEvent&)> progress;
  /// Resumable solves: when set, a solver that supports checkpoints calls it
  /// on its own thread with its state after an outer iteration once
  /// checkpoint_interval_seconds of solve time have passed since the last
  /// call (and not at all before that). Must not throw.
  std::function<void(const Checkpoint&)> checkpoint;
  /// The longest solve time between checkpoint calls, seconds (> 0). The
  /// actual gaps start short and grow (CheckpointTimer): a process killed
  /// early or often still leaves a recent checkpoint behind.
  double checkpoint_interval_seconds = 30.0;
  /// The shortest gap, seconds: the first checkpoint comes after
  /// min(this, checkpoint_interval_seconds) of solve time (or after the first
  /// outer iteration, if that takes longer). 0.1 s: under a kill loop an
  /// attempt often lives only a second or two, and a first checkpoint after
  /// 1 s made every shorter attempt redo all of its work (kls-bench crash on
  /// PostgreSQL, where a resumed attempt starts only when the lease expires:
  /// redone_fraction 0.30 with 1 s). Saving costs little next to that: the
  /// next gaps are at least 20 × a checkpoint's cost.
  double min_checkpoint_interval_seconds = 0.1;
  /// How long this job's attempts have lasted before an interruption, on
  /// average, seconds (0 = unknown: no attempt of it was interrupted). The
  /// server estimates it from the job's history (an upper bound: wall time
  /// since submission over the attempts cut short); CheckpointTimer then
  /// spaces checkpoints no wider than Young's optimal interval √(2 · cost · it).
  double mean_seconds_between_interruptions = 0.0;
  /// Set from another thread to ask for a checkpoint after the current outer
  /// iteration regardless of the interval (a replica draining before it
  /// hands the job over); the solver's CheckpointTimer clears it. Null: none.
  std::shared_ptr<std::atomic<bool>> checkpoint_requested;
  /// Resume from this state (produced by the same solver for the same
  /// problem and options). A checkpoint of another format or shape is
  /// ignored and the solve starts afresh (SolveReport::resumed_from_iteration
  /// stays 0). Null: start afresh.
  std::shared_ptr<const Checkpoint> resume_from;

  /// Sets the deadline `seconds` from now (<= 0 or inf means none).
  void SetTimeLimit(double seconds);

  /// The control of an inner solve of a composite computation (a fold, a
  /// candidate, a coarse level): this control's stop conditions — `cancel`,
  /// `stop_requested` and the earlier of `deadline` and `earlier` — and
  /// nothing else (no progress, checkpoints or resume of its own).
  SolveControl StopConditions(Clock::time_point earlier = Clock::time_point::max()) const;

  /// kCancelled / kTimeLimit when the solver must stop now; otherwise false.
  bool ShouldStop(Termination* why) const;
  /// OK, or the status of a stop: CANCELLED ("<what>: cancelled") or
  /// DEADLINE_EXCEEDED ("<what>: deadline exceeded") — for computations that
  /// return a Status rather than a partial result (query answers).
  Status CheckStop(const std::string& what) const;

  void Report(const ProgressEvent& e) const {
    if (progress) progress(e);
  }

  /// The resume state if it has format `solver`, else null.
  const Checkpoint* ResumeFrom(const char* solver) const {
    return resume_from && resume_from->solver == solver ? resume_from.get() : nullptr;
  }
};

/// Paces SolveControl::checkpoint calls. The first checkpoint comes after
/// min_checkpoint_interval_seconds of solve time (0.1 s), each next one after
///   NextGap = clamp(max(0.1 × the solve time so far, 20 × c),
///                   min_checkpoint_interval_seconds, checkpoint_interval_seconds)
/// of solve time since the last (saving is not solve time), c = a
/// checkpoint's cost: the median of the last three (the smaller of the first
/// two), so that one write slowed by a busy store does not space the next
/// ones 20 times wider. A process killed at any moment loses at most
/// max(0.1 s, 10 %) of the solve time it had done (or
/// checkpoint_interval_seconds, or 20 × c, whichever is larger), and saving
/// costs about 5 % of the solve time at most.
///
/// A job that is interrupted often (a crash loop) wants checkpoints closer
/// than the 5 % rule: when SolveControl::mean_seconds_between_interruptions
/// M is known, the gap is at most Young's interval √(2 · c · M), the one
/// that minimizes saving plus expected redone work per unit of solve time
/// (J. W. Young, "A first order approximation to the optimum checkpoint
/// interval", CACM 17(9), 1974). Writes of 30 ms between kills every 1.5 s:
/// 0.3 s instead of 0.6 s. A requested checkpoint (drain) is due at once.
/// Never due without a checkpoint sink.
class CheckpointTimer {
 public:
  explicit CheckpointTimer(const SolveControl& control)
      : control_(control), start_(std::chrono::steady_clock::now()), last_(start_),
        gap_(std::min(control.min_checkpoint_interval_seconds, control.checkpoint_interval_seconds)) {}
  bool Due() {
    if (!control_.checkpoint) return false;
    const auto now = std::chrono::steady_clock::now();
    if (control_.checkpoint_requested && control_.checkpoint_requested->exchange(false)) {
      last_ = now;
      return true;
    }
    if (std::chrono::duration<double>(now - last_).count() < gap_) return false;
    last_ = now;
    return true;
  }
  /// The solve time the next checkpoint waits for, seconds.
  double gap_seconds() const { return gap_; }

  /// Calls the sink with (solver, iteration, bytes) when Due(); `encode` is
  /// only evaluated then.
  template <typename Encode>
  void MaybeSave(const char* solver, int iteration, Encode encode) {
    if (!Due()) return;
    const auto start = std::chrono::steady_clock::now();
    Checkpoint c;
    c.solver = solver;
    c.iteration = iteration;
    c.bytes = encode();
    control_.checkpoint(c);
    Saved(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  /// After a checkpoint that took `cost_seconds` (encode + sink): the next
  /// gap, counted from when this checkpoint was due (as with a fixed interval).
  void Saved(double cost_seconds) {
    saving_ += cost_seconds;
    costs_[saves_++ % 3] = cost_seconds;
    const auto now = std::chrono::steady_clock::now();
    const double solved = std::chrono::duration<double>(now - start_).count() - saving_;
    gap_ = NextGap(solved, TypicalCost(costs_, saves_), control_.min_checkpoint_interval_seconds,
                   control_.checkpoint_interval_seconds, control_.mean_seconds_between_interruptions);
  }
  /// The schedule itself (see the class comment); `interruption_seconds` M
  /// <= 0: unknown.
  static double NextGap(double solved_seconds, double cost_seconds, double min_gap, double max_gap,
                        double interruption_seconds = 0.0) {
    const double floor = std::min(min_gap, max_gap);
    double gap = std::max(0.1 * solved_seconds, 20.0 * cost_seconds);
    if (interruption_seconds > 0.0) gap = std::min(gap, std::sqrt(2.0 * cost_seconds * interruption_seconds));
    return std::clamp(gap, floor, max_gap);
  }
  /// The cost the schedule uses: the median of the last three (`saves`
  /// counts every save; costs[i % 3] holds save i), the smaller of two.
  static double TypicalCost(const double (&costs)[3], int saves) {
    if (saves <= 1) return costs[0];
    if (saves == 2) return std::min(costs[0], costs[1]);
    return std::max(std::min(costs[0], costs[1]), std::min(std::max(costs[0], costs[1]), costs[2]));
  }

 private:
  const SolveControl& control_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  double gap_;          ///< solve time the next checkpoint waits for, seconds
  double saving_ = 0;   ///< seconds spent saving checkpoints so far
  double costs_[3] = {0, 0, 0};  ///< the last three saves' costs (save i at i % 3)
  int saves_ = 0;
};

/// The report of one solve, carried by every solver result as its member
/// `stats` (XResult::stats: the member kept its older name, used throughout).
struct SolveReport {
  Termination termination = Termination::kConverged;
  int iterations = 0;                     ///< outer iterations performed
  std::vector<double> objective_history;  ///< one entry per outer iteration
  double setup_seconds = 0.0;             ///< preprocessing (graphs, factorizations)
  double solve_seconds = 0.0;             ///< iterations proper
  double final_objective = 0.0;
  /// Iteration of the SolveControl::resume_from checkpoint this run continued
  /// from; 0 when it started afresh. `iterations` counts from the original start.
  int resumed_from_iteration = 0;
  /// One row per iteration this run reported (every outer iteration for an
  /// iterative solver), oldest first, each with exactly the values of that
  /// iteration's ProgressEvent; appended by ReportIteration (and by
  /// IterationDriver::Report, which calls it). Empty for a solve without
  /// iterations (a closed form). Checkpoints do not store rows: a resumed run
  /// holds the rows from its resume point on (iterations
  /// resumed_from_iteration + 1, …), while `iterations` and
  /// objective_history count from the original start.
  std::vector<IterationRow> rows;
  /// The optimality certificate of the returned solution (gap, lower bound,
  /// KKT residual, certified: Certificate::CheckAgainst, the one meaning),
  /// for every family; the default (gap NaN, not certified) where the solver
  /// has none.
  Certificate certificate;
};

/// Reports one completed iteration: sends `row` to control.progress as one
/// ProgressEvent {iteration, objective, primal_residual, dual_residual, gap,
/// step, elapsed_seconds = row.seconds, max_iterations} and appends it to
/// report->rows (report null: reported, not kept). The one path from an
/// iteration to its progress event and its row.
void ReportIteration(const SolveControl& control, const IterationRow& row, int max_iterations, SolveReport* report);

/// The iterations a run needed until its objective was within `relative` of
/// `target` (objective ≤ target + relative · max(1, |target|)): the iteration
/// of the first such entry of objective_history, counted back from the last
/// entry (= iteration stats.iterations), so that a history that starts with
/// the initial iterate (SimpleNPKL's) gives 0 when the start is already
/// within; stats.iterations if no entry is. Compares a warm start with a cold
/// one by "reaches the cold optimum within tolerance".
int IterationsToObjective(const SolveReport& stats, double target, double relative);

/// Wall-clock stopwatch for SolveReport timings.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void Reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kls
