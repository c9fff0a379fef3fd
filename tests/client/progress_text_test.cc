// How `kls get`, `kls list` and `kls watch` show a job's progress
// (client/cli/common.h): "12/1000" for a solver with an iteration budget, the
// bare count for a family without one (mkl kta and svm, social_strength kta,
// embedding kpca and mve report max_iterations 0) — never "1/0" — and "-"
// before any progress; the watch line has no ETA without a budget.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "client/cli/common.h"

namespace kls::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

kls::v1::Job JobWith(int iteration, int max_iterations, kls::v1::JobState state) {
  kls::v1::Job job;
  job.set_id("job-1");
  job.set_method("mkl");
  job.set_state(state);
  job.mutable_progress()->set_iteration(iteration);
  job.mutable_progress()->set_max_iterations(max_iterations);
  job.mutable_progress()->set_objective(0.46);
  job.mutable_progress()->set_elapsed_seconds(2.5);
  return job;
}

TEST(ProgressTextTest, CountWithoutABudgetNeverShowsSlashZero) {
  EXPECT_EQ(ProgressText(JobWith(27, 100, kls::v1::RUNNING).progress()), "27/100");
  EXPECT_EQ(ProgressText(JobWith(1, 0, kls::v1::SUCCEEDED).progress()), "1");
  EXPECT_EQ(ProgressText(JobWith(15, 0, kls::v1::SUCCEEDED).progress()), "15");
  EXPECT_EQ(ProgressText(JobWith(0, 0, kls::v1::QUEUED).progress()), "-");
  EXPECT_EQ(ProgressText(JobWith(0, 500, kls::v1::RUNNING).progress()), "0/500");
}

TEST(ProgressTextTest, GetAndWatchLinesOfAFamilyWithoutABudget) {
  const kls::v1::Job done = JobWith(1, 0, kls::v1::SUCCEEDED);
  EXPECT_THAT(JobText(done), HasSubstr("progress        1  objective "));
  EXPECT_THAT(JobText(done), Not(HasSubstr("1/0")));

  ProgressBar bar(/*enabled=*/true);
  ::testing::internal::CaptureStderr();
  bar.Update(JobWith(1, 0, kls::v1::RUNNING));
  bar.Finish();
  const std::string line = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(line, HasSubstr("job-1 RUNNING [........................] 1  objective "));
  EXPECT_THAT(line, Not(HasSubstr("/0")));
  EXPECT_THAT(line, Not(HasSubstr("ETA")));
}

}  // namespace
}  // namespace kls::cli
