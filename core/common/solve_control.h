// The shared solver contract (../shared/STYLE.md habit 4, DESIGN.md "Layers").
//
// Every solver has the shape
//     StatusOr<XResult> SolveX(const XProblem&, const XOptions&, const SolveControl&);
// Errors (bad input or settings) come back as a non-OK Status; outcomes
// (converged, iteration cap, time limit, cancelled, numerical issue) come back
// in XResult::stats.termination. Cancellation, the deadline and the progress
// sink belong to one call (unlike a process-global interrupt handler), and the
// solver checks them at least once per outer iteration.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
  /// Called on the solver's thread once per outer iteration; must be cheap
  /// and must not throw. Empty means no reporting.
  std::function<void(const ProgressEvent&)> progress;

  /// Sets the deadline `seconds` from now (<= 0 or inf means none).
  void SetTimeLimit(double seconds);

  /// kCancelled / kTimeLimit when the solver must stop now; otherwise false.
  bool ShouldStop(Termination* why) const;

  void Report(const ProgressEvent& e) const {
    if (progress) progress(e);
  }
};

/// Per-call statistics every solver result carries.
struct SolveStats {
  Termination termination = Termination::kConverged;
  int iterations = 0;                     ///< outer iterations performed
  std::vector<double> objective_history;  ///< one entry per outer iteration
  double setup_seconds = 0.0;             ///< preprocessing (graphs, factorizations)
  double solve_seconds = 0.0;             ///< iterations proper
  double final_objective = 0.0;
};

/// Wall-clock stopwatch for SolveStats timings.
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
