#include "core/common/solve_control.h"

#include <algorithm>
#include <cmath>

namespace kls {

int IterationsToObjective(const SolveReport& stats, double target, double relative) {
  const double bound = target + relative * std::max(1.0, std::abs(target));
  const int size = static_cast<int>(stats.objective_history.size());
  for (int k = 0; k < size; ++k) {
    // Entry k belongs to iteration stats.iterations − (size − 1 − k): the last
    // entry to the last iteration, an initial iterate's entry (if any) to 0.
    if (stats.objective_history[k] <= bound) return std::max(0, stats.iterations - (size - 1 - k));
  }
  return stats.iterations;
}

void ReportIteration(const SolveControl& control, const IterationRow& row, int max_iterations, SolveReport* report) {
  ProgressEvent event;
  event.iteration = row.iteration;
  event.objective = row.objective;
  event.primal_residual = row.primal_residual;
  event.dual_residual = row.dual_residual;
  event.gap = row.gap;
  event.step = row.step;
  event.elapsed_seconds = row.seconds;
  event.max_iterations = max_iterations;
  if (report != nullptr) report->rows.push_back(row);
  control.Report(event);
}

const char* TerminationName(Termination t) {
  switch (t) {
    case Termination::kConverged: return "converged";
    case Termination::kIterationLimit: return "iteration_limit";
    case Termination::kTimeLimit: return "time_limit";
    case Termination::kCancelled: return "cancelled";
    case Termination::kNumericalIssue: return "numerical_issue";
  }
  return "unknown";
}

void SolveControl::SetTimeLimit(double seconds) {
  if (!(seconds > 0.0) || std::isinf(seconds)) {
    deadline = Clock::time_point::max();
    return;
  }
  deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(seconds));
}

SolveControl SolveControl::StopConditions(Clock::time_point earlier) const {
  SolveControl inner;
  inner.cancel = cancel;
  inner.stop_requested = stop_requested;
  inner.deadline = std::min(deadline, earlier);
  return inner;
}

bool SolveControl::ShouldStop(Termination* why) const {
  if (cancel.IsCancelled() || (stop_requested && stop_requested())) {
    if (why) *why = Termination::kCancelled;
    return true;
  }
  if (deadline != Clock::time_point::max() && Clock::now() >= deadline) {
    if (why) *why = Termination::kTimeLimit;
    return true;
  }
  return false;
}

Status SolveControl::CheckStop(const std::string& what) const {
  Termination why;
  if (!ShouldStop(&why)) return OkStatus();
  return why == Termination::kCancelled ? CancelledError(what + ": cancelled")
                                        : DeadlineExceededError(what + ": deadline exceeded");
}

}  // namespace kls
