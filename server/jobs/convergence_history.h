// A job's convergence history (kls.v1.Jobs.History): the progress reports of
// its solver, bounded, and their JSON form in the kernel's summary_json.
//
// Bounded: at most max_points reports are kept. When that many are held,
// every other one is dropped and the stride doubles — from then on only every
// 2nd (later 4th, 8th, …) report is kept — so the points stay spread evenly
// over the whole run, however long; the latest report is always the last
// point. Memory O(max_points), O(1) amortized per report.
//
// Persisted: when a job succeeds, its history goes into the kernel's
// summary_json (and so the job's) as one member
//   "convergence":{"iteration":[…],"objective":[…],"primal_residual":[…],
//                  "dual_residual":[…],"elapsed_seconds":[…],"gap":[…],"step":[…]}
// (parallel arrays, oldest first; "gap" and "step" only when some point has
// one, null where a point has none), so any replica can answer History for a
// finished job. The API's KernelInfo.summary_json and Job.summary_json leave
// that member out (WithoutConvergence): Jobs.History serves it, and lists of
// kernels and jobs stay small.
//
// Thread safety: ConvergenceHistory is a plain value (the job manager guards
// it with its mutex); the functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/common/solve_control.h"

namespace kls::server {

class ConvergenceHistory {
 public:
  static constexpr int kDefaultMaxPoints = 2000;

  /// `max_points` >= 2 (smaller values are raised to 2).
  explicit ConvergenceHistory(int max_points = kDefaultMaxPoints);

  /// Records one progress report (in the order the solver made them).
  void Add(const ProgressEvent& event);
  /// The kept reports, oldest first, ending with the latest; at most max_points.
  std::vector<ProgressEvent> Points() const;
  /// Every stride()-th report is kept (1, then 2, 4, …).
  int64_t stride() const { return stride_; }
  int64_t reports() const { return reports_; }  ///< Add calls so far

 private:
  int max_points_;
  int64_t reports_ = 0;
  int64_t stride_ = 1;
  std::vector<ProgressEvent> kept_;  ///< reports whose number is a multiple of stride_
  ProgressEvent latest_;
  bool latest_kept_ = false;         ///< latest_ is kept_.back()
};

/// `summary_json` (a JSON object) with the member "convergence" holding
/// `points` appended; unchanged when `points` is empty or the summary is not
/// an object. Numbers as %.10g (iterations as integers), non-finite as 0;
/// in the optional "gap" and "step" arrays a non-finite value is null.
std::string WithConvergence(const std::string& summary_json, const std::vector<ProgressEvent>& points);

/// `summary_json` without its "convergence" member (unchanged when it has none).
std::string WithoutConvergence(const std::string& summary_json);

/// The "convergence" member of `summary_json` as points (max_iterations 0);
/// nullopt when it has none or the member is malformed (the arrays must be
/// of equal length).
std::optional<std::vector<ProgressEvent>> ConvergenceFromSummary(const std::string& summary_json);

}  // namespace kls::server
