// CheckpointTimer's schedule (core/common/solve_control.h): the first
// checkpoint after min_checkpoint_interval_seconds of solve time, then gaps of
// 10 % of the solve time so far, at least 20 × a checkpoint's typical cost
// (the median of the last three), at most checkpoint_interval_seconds, and at
// most Young's interval √(2 · cost · M) for a job interrupted every M seconds.
#include "core/common/solve_control.h"

#include <gtest/gtest.h>

#include <thread>

namespace kls {
namespace {

SolveControl WithSink(double min_gap, double max_gap, int* saves) {
  SolveControl c;
  c.checkpoint = [saves](const Checkpoint&) { ++*saves; };
  c.min_checkpoint_interval_seconds = min_gap;
  c.checkpoint_interval_seconds = max_gap;
  return c;
}

TEST(CheckpointTimer, AKillLosesAtMostOneSecondOrTenPercent) {
  int saves = 0;
  const SolveControl c = WithSink(1.0, 30.0, &saves);
  CheckpointTimer t(c);
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 1.0);
  // Simulated run: checkpoints as the schedule asks, cheap (1 ms each).
  double solved = 1.0;
  double worst = 0.0;
  for (int k = 0; k < 200 && solved < 3600; ++k) {
    const double gap = CheckpointTimer::NextGap(solved, 0.001, 1.0, 30.0);
    // A kill just before the next checkpoint loses `gap` of `solved + gap`.
    worst = std::max(worst, gap / std::max(1.0, solved + gap) * (gap > 1.0 ? 1.0 : 0.0));
    solved += gap;
  }
  EXPECT_LE(worst, 0.1 / 1.1 + 1e-12);  // at most 10 % of the work done before it
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(5.0, 0.001, 1.0, 30.0), 1.0);     // early: every second
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(100.0, 0.001, 1.0, 30.0), 10.0);  // 10 %
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(1000.0, 0.001, 1.0, 30.0), 30.0); // capped
}

// The default schedule (what every job gets): the first checkpoint after
// 0.1 s, so that attempts of a second or two under a kill loop keep most of
// their work; a kill then loses at most max(0.1 s, 10 %) while checkpoints
// are cheap.
TEST(CheckpointTimer, TheDefaultFirstCheckpointComesAfterATenthOfASecond) {
  int saves = 0;
  SolveControl c;
  c.checkpoint = [&saves](const Checkpoint&) { ++saves; };
  CheckpointTimer t(c);
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 0.1);
  double solved = 0.1;
  for (int k = 0; k < 1000 && solved < 3600; ++k) {
    const double gap = CheckpointTimer::NextGap(solved, 0.002, c.min_checkpoint_interval_seconds,
                                                c.checkpoint_interval_seconds);
    // A kill just before the next checkpoint loses `gap`.
    EXPECT_LE(gap, std::max(0.1, std::min(0.1 * solved, c.checkpoint_interval_seconds)) + 1e-12)
        << "at " << solved << " s";
    solved += gap;
  }
  // 2 ms checkpoints: spaced at least 40 ms apart (at most 5 % of the time saving).
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(0.2, 0.002, 0.1, 30.0), 0.1);
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(0.2, 0.01, 0.1, 30.0), 0.2);
}

TEST(CheckpointTimer, ExpensiveCheckpointsAreSpacedTwentyTimesTheirCost) {
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(10.0, 0.5, 1.0, 30.0), 10.0);  // the save costs at most ~5 %
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(10.0, 5.0, 1.0, 30.0), 30.0);  // capped by the interval
}

// One slow write (a busy store) does not space the next checkpoints twenty
// times wider: the schedule takes the median of the last three costs.
TEST(CheckpointTimer, OneSlowWriteDoesNotWidenTheGaps) {
  const double a[3] = {0.02, 0.0, 0.0};
  EXPECT_DOUBLE_EQ(CheckpointTimer::TypicalCost(a, 1), 0.02);
  const double b[3] = {0.02, 0.15, 0.0};
  EXPECT_DOUBLE_EQ(CheckpointTimer::TypicalCost(b, 2), 0.02);  // the smaller of two
  const double c[3] = {0.02, 0.15, 0.03};
  EXPECT_DOUBLE_EQ(CheckpointTimer::TypicalCost(c, 3), 0.03);
  const double d[3] = {0.2, 0.15, 0.18};  // slow every time: it is the cost
  EXPECT_DOUBLE_EQ(CheckpointTimer::TypicalCost(d, 7), 0.18);

  int saves = 0;
  const SolveControl s = WithSink(0.1, 30.0, &saves);
  CheckpointTimer t(s);
  t.Saved(0.02);
  t.Saved(0.15);  // 20 × 0.15 s would be 3 s
  EXPECT_NEAR(t.gap_seconds(), 0.4, 1e-12);  // 20 × 0.02 s (the solve time so far is ~0)
}

// Young's interval for a job in a crash loop: writes of 30 ms, an attempt
// cut short every 1.5 s on average → √(2 · 0.03 · 1.5) = 0.3 s instead of the
// 5 % rule's 0.6 s; for a job interrupted once an hour the 5 % and 10 %
// rules stand.
TEST(CheckpointTimer, AJobInterruptedOftenSavesAtYoungsInterval) {
  EXPECT_NEAR(CheckpointTimer::NextGap(1.0, 0.03, 0.1, 30.0, 1.5), 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(1.0, 0.03, 0.1, 30.0), 0.6);
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(100.0, 0.03, 0.1, 30.0, 3600.0), 10.0);
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(1.0, 0.0001, 0.1, 30.0, 1.5), 0.1);  // never below the floor
  // Expected waste per second of solve time, saving c/g plus redone g/(2M):
  // Young's gap is no worse than the 5 % rule's for every cost and M.
  for (double cost : {0.001, 0.01, 0.03, 0.1}) {
    for (double m : {0.5, 1.5, 10.0, 100.0}) {
      const auto waste = [&](double g) { return cost / g + g / (2.0 * m); };
      const double young = CheckpointTimer::NextGap(1.0, cost, 0.0, 1e9, m);
      const double five = CheckpointTimer::NextGap(1.0, cost, 0.0, 1e9);
      EXPECT_LE(waste(young), waste(five) + 1e-12) << cost << " " << m;
    }
  }
  int saves = 0;
  SolveControl s = WithSink(0.1, 30.0, &saves);
  s.mean_seconds_between_interruptions = 1.5;
  CheckpointTimer t(s);
  t.Saved(0.03);
  EXPECT_NEAR(t.gap_seconds(), 0.3, 1e-9);
}

TEST(CheckpointTimer, AnIntervalBelowTheMinimumIsKept) {
  int saves = 0;
  const SolveControl c = WithSink(1.0, 0.3, &saves);  // --checkpoint-seconds 0.3
  CheckpointTimer t(c);
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 0.3);
  t.Saved(0.0);
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 0.3);
  EXPECT_DOUBLE_EQ(CheckpointTimer::NextGap(1000.0, 0.0, 1.0, 0.3), 0.3);
}

TEST(CheckpointTimer, MaybeSaveWaitsForTheGapThenSaves) {
  int saves = 0;
  const SolveControl c = WithSink(0.05, 10.0, &saves);
  CheckpointTimer t(c);
  t.MaybeSave("s", 1, [] { return std::string("x"); });
  EXPECT_EQ(saves, 0);  // before the first gap
  std::this_thread::sleep_for(std::chrono::milliseconds(70));
  t.MaybeSave("s", 2, [] { return std::string("x"); });
  EXPECT_EQ(saves, 1);
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 0.05);  // 10 % of 0.07 s is below the minimum
  t.MaybeSave("s", 3, [] { return std::string("x"); });
  EXPECT_EQ(saves, 1);
}

TEST(CheckpointTimer, NeverDueWithoutASink) {
  SolveControl c;
  c.min_checkpoint_interval_seconds = 0.0;
  c.checkpoint_interval_seconds = 1e-9;
  CheckpointTimer t(c);
  EXPECT_FALSE(t.Due());
}

}  // namespace
}  // namespace kls
