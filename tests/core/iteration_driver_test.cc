// The iteration driver of the iterative solvers (core/common/iteration_driver.h):
// the iteration cap, the control checks before every iteration, the stop
// reason, progress rows, the checkpoint schedule and the resume look-up.
// The solvers on it (KL-ADMM, BCDNPKL, SimpleNPKL) are covered by their own
// tests and by checkpoint_resume_test.cc.
#include "core/common/iteration_driver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace kls {
namespace {

constexpr char kTag[] = "toy/1";

IterationRow Row(int it, double objective) {
  IterationRow row;
  row.iteration = it;
  row.objective = objective;
  row.primal_residual = 1.0 / it;
  row.dual_residual = 2.0 / it;
  row.step = 0.5;
  return row;
}

TEST(IterationDriver, RunsEveryIterationUpToTheCapAndReportsTheIterationLimit) {
  SolveControl control;
  std::vector<ProgressEvent> events;
  control.progress = [&](const ProgressEvent& e) { events.push_back(e); };
  Stopwatch clock;
  SolveReport report;
  IterationDriver driver(control, kTag, 5, clock, &report);
  driver.Start();
  std::vector<int> seen;
  const Termination t = driver.Run(3, [&](int it) {
    seen.push_back(it);
    driver.Report(Row(it, 10.0 - it));
    return StepOutcome::kContinue;
  });
  EXPECT_EQ(t, Termination::kIterationLimit);
  EXPECT_EQ(driver.termination(), Termination::kIterationLimit);
  EXPECT_EQ(seen, (std::vector<int>{3, 4, 5}));
  ASSERT_EQ(events.size(), 3u);
  for (size_t k = 0; k < events.size(); ++k) {
    const int it = 3 + static_cast<int>(k);
    EXPECT_EQ(events[k].iteration, it);
    EXPECT_EQ(events[k].objective, 10.0 - it);
    EXPECT_EQ(events[k].primal_residual, 1.0 / it);
    EXPECT_EQ(events[k].dual_residual, 2.0 / it);
    EXPECT_EQ(events[k].max_iterations, 5);
    EXPECT_GE(events[k].elapsed_seconds, 0.0);
  }
  // Each report is one row of the SolveReport, with its event's values.
  const std::vector<IterationRow>& rows = report.rows;
  ASSERT_EQ(rows.size(), 3u);
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(rows[k].iteration, events[k].iteration);
    EXPECT_EQ(rows[k].objective, events[k].objective);
    EXPECT_EQ(rows[k].primal_residual, events[k].primal_residual);
    EXPECT_EQ(rows[k].dual_residual, events[k].dual_residual);
    EXPECT_EQ(rows[k].step, events[k].step);
    EXPECT_EQ(rows[k].seconds, events[k].elapsed_seconds);
  }
  EXPECT_EQ(rows.back().step, 0.5);
  EXPECT_TRUE(std::isnan(rows.back().gap));
}

TEST(IterationDriver, AFirstIterationPastTheCapRunsNothing) {
  SolveControl control;
  Stopwatch clock;
  SolveReport report;
  IterationDriver driver(control, kTag, 4, clock, &report);
  driver.Start();
  int calls = 0;
  EXPECT_EQ(driver.Run(5, [&](int) {
    ++calls;
    return StepOutcome::kContinue;
  }),
            Termination::kIterationLimit);
  EXPECT_EQ(calls, 0);
}

TEST(IterationDriver, AStepEndsTheRunWithItsReasonOrLeavesItForAPhaseChange) {
  SolveControl control;
  Stopwatch clock;
  SolveReport report;
  IterationDriver driver(control, kTag, 100, clock, &report);
  driver.Start();
  EXPECT_EQ(driver.Run(1, [&](int it) { return it == 7 ? driver.Stop(Termination::kConverged) : StepOutcome::kContinue; }),
            Termination::kConverged);
  // A second Run (the next phase) starts again from kIterationLimit; a plain
  // kStop (KL-ADMM's hand-over to the polish) keeps it.
  int last = 0;
  EXPECT_EQ(driver.Run(8, [&](int it) {
    last = it;
    return it == 9 ? StepOutcome::kStop : StepOutcome::kContinue;
  }),
            Termination::kIterationLimit);
  EXPECT_EQ(last, 9);
  EXPECT_EQ(driver.Run(10, [&](int) { return driver.Stop(Termination::kNumericalIssue); }),
            Termination::kNumericalIssue);
}

TEST(IterationDriver, CancellationIsCheckedBeforeEveryIteration) {
  SolveControl control;
  control.progress = [&](const ProgressEvent& e) {
    if (e.iteration == 3) control.cancel.Cancel();
  };
  Stopwatch clock;
  SolveReport report;
  IterationDriver driver(control, kTag, 100, clock, &report);
  driver.Start();
  int calls = 0;
  EXPECT_EQ(driver.Run(1, [&](int it) {
    ++calls;
    driver.Report(Row(it, 0.0));
    return StepOutcome::kContinue;
  }),
            Termination::kCancelled);
  EXPECT_EQ(calls, 3);

  SolveControl polled;
  int polls = 0;
  polled.stop_requested = [&] { return ++polls > 2; };
  SolveReport polled_report;
  IterationDriver polled_driver(polled, kTag, 100, clock, &polled_report);
  polled_driver.Start();
  calls = 0;
  EXPECT_EQ(polled_driver.Run(1, [&](int) {
    ++calls;
    return StepOutcome::kContinue;
  }),
            Termination::kCancelled);
  EXPECT_EQ(calls, 2);
}

TEST(IterationDriver, APastDeadlineStopsBeforeTheFirstIteration) {
  SolveControl control;
  control.deadline = SolveControl::Clock::now() - std::chrono::seconds(1);
  Stopwatch clock;
  SolveReport report;
  IterationDriver driver(control, kTag, 100, clock, &report);
  driver.Start();
  int calls = 0;
  EXPECT_EQ(driver.Run(1, [&](int) {
    ++calls;
    return StepOutcome::kContinue;
  }),
            Termination::kTimeLimit);
  EXPECT_EQ(calls, 0);
}

TEST(IterationDriver, CheckpointsFollowTheScheduleAndEncodeOnlyWhenDue) {
  Stopwatch clock;
  {
    SolveControl none;  // no sink: never due, never encoded
    SolveReport report;
    IterationDriver driver(none, kTag, 10, clock, &report);
    EXPECT_FALSE(driver.uses_checkpoints());
    driver.Start();
    int encodes = 0;
    driver.Run(1, [&](int it) {
      driver.MaybeCheckpoint(it, [&] {
        ++encodes;
        return std::string("x");
      });
      return StepOutcome::kContinue;
    });
    EXPECT_EQ(encodes, 0);
  }
  {
    std::vector<Checkpoint> saved;
    SolveControl every;  // an interval below any iteration: every call is due
    every.checkpoint_interval_seconds = 1e-9;
    every.checkpoint = [&](const Checkpoint& c) { saved.push_back(c); };
    SolveReport report;
    IterationDriver driver(every, kTag, 4, clock, &report);
    EXPECT_TRUE(driver.uses_checkpoints());
    driver.Start();
    driver.Run(1, [&](int it) {
      driver.MaybeCheckpoint(it, [&] { return "state " + std::to_string(it); });
      return StepOutcome::kContinue;
    });
    ASSERT_EQ(saved.size(), 4u);
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(saved[k].solver, kTag);
      EXPECT_EQ(saved[k].iteration, k + 1);
      EXPECT_EQ(saved[k].bytes, "state " + std::to_string(k + 1));
    }
  }
  {
    std::vector<Checkpoint> saved;
    SolveControl drain;  // a long interval, but a requested checkpoint is due at once
    drain.checkpoint_interval_seconds = 3600.0;
    drain.min_checkpoint_interval_seconds = 3600.0;
    drain.checkpoint = [&](const Checkpoint& c) { saved.push_back(c); };
    drain.checkpoint_requested = std::make_shared<std::atomic<bool>>(false);
    SolveReport report;
    IterationDriver driver(drain, kTag, 6, clock, &report);
    driver.Start();
    driver.Run(1, [&](int it) {
      if (it == 4) drain.checkpoint_requested->store(true);
      driver.MaybeCheckpoint(it, [&] { return std::string("s"); });
      return StepOutcome::kContinue;
    });
    ASSERT_EQ(saved.size(), 1u);
    EXPECT_EQ(saved[0].iteration, 4);
    EXPECT_FALSE(drain.checkpoint_requested->load());
  }
}

TEST(IterationDriver, ResumeDecodesOnlyItsOwnFormatAndRecordsTheIteration) {
  Stopwatch clock;
  auto checkpoint = [](const char* tag, int iteration) {
    Checkpoint c;
    c.solver = tag;
    c.iteration = iteration;
    c.bytes = "bytes";
    return std::make_shared<const Checkpoint>(c);
  };
  {
    SolveControl control;
    control.resume_from = checkpoint(kTag, 12);
    SolveReport report;
    IterationDriver driver(control, kTag, 100, clock, &report);
    EXPECT_TRUE(driver.uses_checkpoints());  // a resume needs the fingerprint
    std::string decoded;
    EXPECT_TRUE(driver.Resume([&](const Checkpoint& c) {
      decoded = c.bytes;
      return OkStatus();
    }));
    EXPECT_EQ(decoded, "bytes");
    EXPECT_EQ(driver.resumed_from_iteration(), 12);
  }
  {
    SolveControl control;  // not this run's checkpoint: the solve starts afresh
    control.resume_from = checkpoint(kTag, 12);
    SolveReport report;
    IterationDriver driver(control, kTag, 100, clock, &report);
    EXPECT_FALSE(driver.Resume([](const Checkpoint&) { return DataLossError("truncated"); }));
    EXPECT_EQ(driver.resumed_from_iteration(), 0);
  }
  {
    SolveControl control;  // another format is never decoded
    control.resume_from = checkpoint("other/1", 12);
    SolveReport report;
    IterationDriver driver(control, kTag, 100, clock, &report);
    EXPECT_FALSE(driver.uses_checkpoints());
    int calls = 0;
    EXPECT_FALSE(driver.Resume([&](const Checkpoint&) {
      ++calls;
      return OkStatus();
    }));
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(driver.resumed_from_iteration(), 0);
  }
}

TEST(IterationDriver, EveryReportIsKeptAsARowOfTheReport) {
  SolveControl control;
  Stopwatch clock;
  SolveReport report;
  const int n = 5000;
  IterationDriver driver(control, kTag, n, clock, &report);
  driver.Start();
  driver.Run(1, [&](int it) {
    driver.Report(Row(it, 0.0));
    return StepOutcome::kContinue;
  });
  ASSERT_EQ(report.rows.size(), static_cast<size_t>(n));
  EXPECT_EQ(report.rows.front().iteration, 1);
  EXPECT_EQ(report.rows.back().iteration, n);
}

}  // namespace
}  // namespace kls
