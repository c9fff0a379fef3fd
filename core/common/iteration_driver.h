// The one iteration driver of the iterative solvers (issue 39): the loop's
// control checks (SolveControl cancellation and deadline), the iteration cap,
// the stop reason, progress reports, the checkpoint schedule (CheckpointTimer)
// and the resume look-up, so that a solver's Solve reads as its algorithm.
//
// A solver supplies its step as a callable `StepOutcome(int iteration)`:
//
//     IterationDriver driver(control, kCheckpointTag, options.max_iterations, setup_clock, &result.stats);
//     driver.Resume([&](const Checkpoint& c) { return DecodeCheckpoint(c, ..., &state); });
//     ...setup...
//     driver.Start();                       // solve time (and the checkpoint schedule) start here
//     driver.Run(first_iteration, [&](int it) {
//       ...one iteration...
//       if (!finite) return driver.Stop(Termination::kNumericalIssue);
//       driver.Report(row);                 // one IterationRow → one ProgressEvent + stats.rows
//       if (converged) return driver.Stop(Termination::kConverged);
//       driver.MaybeCheckpoint(it, [&] { return Encode(...); });
//       return StepOutcome::kContinue;
//     });
//     stats.termination = driver.termination();
//
// Run(first, step) checks the control before every iteration
// first, first + 1, …, max_iterations (kCancelled / kTimeLimit), and ends with
// kIterationLimit when the cap is reached; a solver with several phases
// (KL-ADMM's ADMM and polish, the escalation's stages) calls Run once per
// phase on the same driver, so one checkpoint schedule spans the whole solve.
// The encoding and decoding of checkpoints stay the solver's own codec code;
// the driver only decides when they run.
#pragma once

#include <limits>
#include <optional>

#include "core/common/solve_control.h"

namespace kls {

/// What a step tells the driver: go on, or end this Run (the termination is
/// what Stop set, or unchanged for a phase change).
enum class StepOutcome { kContinue, kStop };

class IterationDriver {
 public:
  /// `checkpoint_tag` names the solver's checkpoint format; `since_start`
  /// times ProgressEvent::elapsed_seconds (the solver's start, setup included);
  /// `report` (the result's stats, which must outlive the driver's use) gets
  /// one row per Report.
  IterationDriver(const SolveControl& control, const char* checkpoint_tag, int max_iterations,
                  const Stopwatch& since_start, SolveReport* report)
      : control_(control),
        tag_(checkpoint_tag),
        max_iterations_(max_iterations),
        since_start_(since_start),
        report_(report) {}

  const SolveControl& control() const { return control_; }
  int max_iterations() const { return max_iterations_; }

  /// The checkpoint to resume from if it has this solver's format, else null.
  const Checkpoint* resume_checkpoint() const { return control_.ResumeFrom(tag_); }
  /// Whether checkpoints are written or read (a fingerprint is needed).
  bool uses_checkpoints() const { return static_cast<bool>(control_.checkpoint) || resume_checkpoint() != nullptr; }

  /// Calls `decode(checkpoint)` (→ Status) on the resume state of this
  /// format; true when it decoded (then resumed_from_iteration() is its
  /// iteration). False, and nothing recorded, without one or when it is not
  /// this run's: the solve starts afresh.
  template <typename Decode>
  bool Resume(Decode decode) {
    const Checkpoint* c = resume_checkpoint();
    if (c == nullptr || !decode(*c).ok()) return false;
    resumed_from_ = c->iteration;
    return true;
  }
  int resumed_from_iteration() const { return resumed_from_; }

  /// The iterations begin: the checkpoint schedule starts counting solve time.
  void Start() { timer_.emplace(control_); }

  /// step(it) for it = first, first + 1, … ≤ max_iterations, each after the
  /// control check. The termination starts as kIterationLimit; a control stop
  /// sets kCancelled / kTimeLimit, a step sets its own through Stop.
  template <typename Step>
  Termination Run(int first, Step step) {
    termination_ = Termination::kIterationLimit;
    for (int it = first; it <= max_iterations_; ++it) {
      Termination why;
      if (control_.ShouldStop(&why)) {
        termination_ = why;
        break;
      }
      if (step(it) == StepOutcome::kStop) break;
    }
    return termination_;
  }

  /// Ends the current Run with `why`.
  StepOutcome Stop(Termination why) {
    termination_ = why;
    return StepOutcome::kStop;
  }
  Termination termination() const { return termination_; }
  void set_termination(Termination why) { termination_ = why; }

  /// Sets the row's `seconds` and reports it (ReportIteration): one
  /// ProgressEvent, the row as Watch streams it, and one row of the report.
  void Report(IterationRow row) {
    row.seconds = since_start_.Seconds();
    ReportIteration(control_, row, max_iterations_, report_);
  }

  /// Calls the sink with encode() when the schedule (CheckpointTimer) says a
  /// checkpoint is due; `encode` (→ std::string) runs only then. Start() first.
  template <typename Encode>
  void MaybeCheckpoint(int iteration, Encode encode) {
    timer_->MaybeSave(tag_, iteration, encode);
  }

 private:
  const SolveControl& control_;
  const char* tag_;
  int max_iterations_;
  const Stopwatch& since_start_;
  std::optional<CheckpointTimer> timer_;
  Termination termination_ = Termination::kIterationLimit;
  int resumed_from_ = 0;
  SolveReport* report_;
};

}  // namespace kls
