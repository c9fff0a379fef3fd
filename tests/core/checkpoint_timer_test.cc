// CheckpointTimer's schedule (core/common/solve_control.h): the first
// checkpoint after min_checkpoint_interval_seconds of solve time, then gaps
// doubling up to checkpoint_interval_seconds, never shorter than 20 × the
// last checkpoint's cost.
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

TEST(CheckpointTimer, GapsStartShortAndDoubleUpToTheInterval) {
  int saves = 0;
  const SolveControl c = WithSink(1.0, 30.0, &saves);
  CheckpointTimer t(c);
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 1.0);
  const double expected[] = {2.0, 4.0, 8.0, 16.0, 30.0, 30.0};
  for (double e : expected) {
    t.Saved(0.001);
    EXPECT_DOUBLE_EQ(t.gap_seconds(), e);
  }
}

TEST(CheckpointTimer, ExpensiveCheckpointsAreSpacedTwentyTimesTheirCost) {
  int saves = 0;
  const SolveControl c = WithSink(1.0, 30.0, &saves);
  CheckpointTimer t(c);
  t.Saved(0.5);  // 10 s of solve before the next: the save costs at most ~5 %
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 10.0);
  t.Saved(5.0);  // capped by the interval
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 30.0);
}

TEST(CheckpointTimer, AnIntervalBelowTheMinimumIsKept) {
  int saves = 0;
  const SolveControl c = WithSink(1.0, 0.3, &saves);  // --checkpoint-seconds 0.3
  CheckpointTimer t(c);
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 0.3);
  t.Saved(0.0);
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 0.3);
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
  EXPECT_DOUBLE_EQ(t.gap_seconds(), 0.1);  // doubled
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
