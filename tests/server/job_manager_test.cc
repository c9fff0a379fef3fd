// JobManager (no gRPC): queue order and capacity, running a job end to end
// into the store, cancellation latency, deadlines, shutdown and restart
// recovery; plus the proto ↔ core conversions of proto_convert.
#include "server/jobs/job_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "server/jobs/families/npkl_options.h"
#include "server/jobs/proto_convert.h"
#include "iris_subset.h"
#include "temp_dir.h"
#include "test_store.h"

namespace kls::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

JobManagerOptions Opts(int workers, int queue_capacity = 1000, int max_attempts = 2) {
  JobManagerOptions o;
  o.workers = workers;
  o.queue_capacity = queue_capacity;
  o.max_attempts = max_attempts;
  o.exclusive_store = true;  // one process owns the embedded store
  return o;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = kls::testing::OpenTestStore(dir_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
    auto small = store_->PutDataset("iris60", testing::IrisWithPairs(60));
    ASSERT_TRUE(small.ok()) << small.status();
    small_id_ = small->id;
    auto large = store_->PutDataset("iris150", testing::IrisWithPairs(150));
    ASSERT_TRUE(large.ok()) << large.status();
    large_id_ = large->id;
    store::StoredDataset pairs = testing::IrisWithPairs(60);  // BCDNPKL protocol: no self pairs
    auto c = GenerateBcdProtocol(pairs.data.labels, 0.3, /*seed=*/3);
    ASSERT_TRUE(c.ok()) << c.status();
    pairs.constraints = *c;
    auto bcd = store_->PutDataset("iris60-bcd", pairs);
    ASSERT_TRUE(bcd.ok()) << bcd.status();
    bcd_id_ = bcd->id;
  }

  /// A kl_admm job record as the Jobs service would build it.
  store::JobRecord KlAdmmJob(const std::string& dataset, int max_iterations, double tolerance = 1e-4,
                             int priority = 0, double deadline_seconds = 0.0) {
    kls::v1::SubmitJobRequest r;
    r.set_dataset_id(dataset);
    r.set_kernel_name("k");
    r.set_priority(priority);
    r.set_deadline_seconds(deadline_seconds);
    r.mutable_kl_admm()->set_max_iterations(max_iterations);
    r.mutable_kl_admm()->set_tolerance(tolerance);
    auto rec = JobRecordFromSubmit(r);
    EXPECT_TRUE(rec.ok()) << rec.status();
    return *rec;
  }

  /// A job that runs until cancelled (≈ hours of iterations on 150 points).
  store::JobRecord EndlessJob() { return KlAdmmJob(large_id_, 100'000'000, /*tolerance=*/0.0); }

  /// Waits (≤ timeout) until the job reaches a terminal state; returns the record.
  store::JobRecord WaitTerminal(JobManager& m, const std::string& id,
                                std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto end = Clock::now() + timeout;
    uint64_t v = 0;
    for (;;) {
      auto r = m.WaitForChange(id, &v, std::chrono::milliseconds(100));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok() || store::IsTerminal(r->state) || Clock::now() > end) return r.ok() ? *r : store::JobRecord{};
    }
  }

  /// Submits EndlessJob() to the started manager `m` and waits until it runs
  /// with progress; returns its id.
  std::string RunEndlessJob(JobManager& m) {
    auto job = m.Submit(EndlessJob());
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return "";
    WaitRunningWithProgress(m, job->id);
    return job->id;
  }

  /// Waits until the job is running and has reported at least one iteration.
  void WaitRunningWithProgress(JobManager& m, const std::string& id) {
    const auto end = Clock::now() + std::chrono::seconds(20);
    uint64_t v = 0;
    while (Clock::now() < end) {
      auto r = m.WaitForChange(id, &v, std::chrono::milliseconds(100));
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->state == store::JobState::kRunning && !r->progress_json.empty()) return;
    }
    FAIL() << "job " << id << " never reported progress";
  }

  kls::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::string small_id_, large_id_, bcd_id_;
};

TEST_F(JobManagerTest, KlAdmmJobSucceedsAndStoresALoadableKernel) {
  JobManager m(store_.get(), Opts(1));
  ASSERT_TRUE(m.Start().ok());
  auto job = m.Submit(KlAdmmJob(small_id_, 200));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, store::JobState::kQueued);
  EXPECT_FALSE(job->id.empty());

  const store::JobRecord done = WaitTerminal(m, job->id);
  ASSERT_EQ(done.state, store::JobState::kSucceeded) << done.error;
  EXPECT_EQ(done.attempts, 1);
  EXPECT_EQ(done.kernel_name, "k");
  EXPECT_EQ(done.kernel_version, 1);
  EXPECT_GT(done.finished_unix_ms, 0);
  const kls::v1::Job proto = ToProtoJob(done);
  EXPECT_THAT(proto.termination(), ::testing::AnyOf("converged", "iteration_limit"));
  EXPECT_GT(proto.progress().iteration(), 0);

  auto rec = store_->GetKernelRecord("k", done.kernel_version);
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(rec->job_id, done.id);
  EXPECT_EQ(rec->num_points, 60);
  EXPECT_THAT(rec->summary_json, HasSubstr("\"termination\""));
  EXPECT_THAT(rec->summary_json, HasSubstr("\"iterations\""));
  auto kernel = store_->LoadKernel("k", done.kernel_version);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->num_points(), 60);
  EXPECT_GT(kernel->value(0, 0), 0.0);  // self must-link pushes K_ii towards 1
}

TEST_F(JobManagerTest, HigherPriorityRunsFirstFifoWithinAPriority) {
  std::mutex mu;
  std::vector<std::string> started;
  JobManagerOptions o;
  o.workers = 1;
  o.on_job_started = [&](const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    started.push_back(id);
  };
  JobManager m(store_.get(), o);
  // Submitted before Start(): all four are queued when the single worker begins.
  std::vector<std::string> ids;
  for (int priority : {0, 5, 1, 5}) {
    auto j = m.Submit(KlAdmmJob(small_id_, 5, 1e-4, priority));
    ASSERT_TRUE(j.ok()) << j.status();
    ids.push_back(j->id);
  }
  ASSERT_TRUE(m.Start().ok());
  for (const auto& id : ids) EXPECT_EQ(WaitTerminal(m, id).state, store::JobState::kSucceeded);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_THAT(started, ElementsAre(ids[1], ids[3], ids[2], ids[0]));
}

TEST_F(JobManagerTest, FullQueueIsResourceExhausted) {
  JobManager m(store_.get(), Opts(1, 2));  // not started: nothing drains
  ASSERT_TRUE(m.Submit(KlAdmmJob(small_id_, 5)).ok());
  ASSERT_TRUE(m.Submit(KlAdmmJob(small_id_, 5)).ok());
  auto third = m.Submit(KlAdmmJob(small_id_, 5));
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("queue is full"));
  EXPECT_EQ(m.QueuedCount(), 2);
}

TEST_F(JobManagerTest, SubmitValidatesAgainstTheDataSet) {
  JobManager m(store_.get(), Opts(1));
  auto unknown = m.Submit(KlAdmmJob("ds-nope", 5));
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);

  store::StoredDataset bare = testing::IrisWithPairs(20);
  bare.constraints.pairs.clear();
  auto ds = store_->PutDataset("bare", bare);
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto none = m.Submit(KlAdmmJob(ds->id, 5));
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no pairwise constraints"));

  store::JobRecord big_rank = KlAdmmJob(small_id_, 5);
  big_rank.options_json = R"({"kl_admm":{"rank":500}})";
  auto rank = m.Submit(big_rank);
  EXPECT_EQ(rank.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(rank.status().message(), HasSubstr("kl_admm.rank = 500"));

  store::JobRecord bad_method = KlAdmmJob(small_id_, 5);
  bad_method.method = "svm";
  EXPECT_THAT(m.Submit(bad_method).status().message(), HasSubstr("method = \"svm\""));
}

TEST_F(JobManagerTest, CancellingARunningJobStopsTheSolverPromptly) {
  JobManager m(store_.get(), Opts(1));
  ASSERT_TRUE(m.Start().ok());
  const std::string id = RunEndlessJob(m);
  ASSERT_FALSE(HasFailure());

  const auto t0 = Clock::now();
  auto cancelled = m.Cancel(id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  const store::JobRecord done = WaitTerminal(m, id, std::chrono::seconds(5));
  const double latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  RecordProperty("cancel_latency_ms", std::to_string(latency_ms));
  std::printf("cancel latency: %.1f ms\n", latency_ms);
  EXPECT_EQ(done.state, store::JobState::kCancelled);
  EXPECT_EQ(ToProtoJob(done).termination(), "cancelled");
  EXPECT_LT(latency_ms, 500.0);
  EXPECT_FALSE(store_->GetKernelRecord("k", 0).ok());  // nothing stored

  auto again = m.Cancel(id);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
}

// A cancel acknowledged while the job runs is durable when Cancel returns:
// the store already says CANCELLED, so a crash right after the OK (before the
// solver's next iteration) cannot bring the job back. The crash soak
// (kls-bench crash) found the old behaviour: the cancellation lived only in
// memory until the solver stopped, and a job cancelled while RUNNING was
// re-queued by the restart after a SIGKILL and then SUCCEEDED.
TEST_F(JobManagerTest, ACancelOfARunningJobIsStoredBeforeItIsAcknowledged) {
  JobManager m(store_.get(), Opts(1));
  ASSERT_TRUE(m.Start().ok());
  const std::string id = RunEndlessJob(m);
  ASSERT_FALSE(HasFailure());

  auto cancelled = m.Cancel(id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, store::JobState::kCancelled);
  // What a restarted server would read, at once:
  auto stored = store_->GetJob(id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, store::JobState::kCancelled);
  EXPECT_EQ(ToProtoJob(*stored).termination(), "cancelled");
  EXPECT_GT(ToProtoJob(*stored).progress().iteration(), 0);

  // The solver stops, nothing is stored, the state stays, the worker is free.
  EXPECT_EQ(WaitTerminal(m, id, std::chrono::seconds(5)).state, store::JobState::kCancelled);
  auto next = m.Submit(KlAdmmJob(small_id_, 5));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(WaitTerminal(m, next->id).state, store::JobState::kSucceeded);
  EXPECT_EQ(store_->GetJob(id)->state, store::JobState::kCancelled);
  auto kernels = store_->ListKernels("");
  ASSERT_TRUE(kernels.ok());
  for (const auto& k : *kernels) EXPECT_NE(k.job_id, id);
  EXPECT_EQ(m.Cancel(id).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(JobManagerTest, CancellingAQueuedJobIsImmediate) {
  JobManager m(store_.get(), Opts(1));  // not started
  auto job = m.Submit(KlAdmmJob(small_id_, 5));
  ASSERT_TRUE(job.ok());
  auto c = m.Cancel(job->id);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state, store::JobState::kCancelled);
  EXPECT_EQ(m.QueuedCount(), 0);
  EXPECT_EQ(store_->GetJob(job->id)->state, store::JobState::kCancelled);
  EXPECT_EQ(m.Cancel("job-unknown").status().code(), StatusCode::kNotFound);
}

TEST_F(JobManagerTest, DeadlineEndsTheJobWithTheBestIterateAndTimeLimit) {
  JobManager m(store_.get(), Opts(1));
  ASSERT_TRUE(m.Start().ok());
  store::JobRecord rec = EndlessJob();
  rec.deadline_seconds = 0.3;
  auto job = m.Submit(rec);
  ASSERT_TRUE(job.ok()) << job.status();
  const store::JobRecord done = WaitTerminal(m, job->id);
  // Documented choice: a deadline is a budget, not an error.
  ASSERT_EQ(done.state, store::JobState::kSucceeded) << done.error;
  EXPECT_EQ(ToProtoJob(done).termination(), "time_limit");
  EXPECT_LT(done.finished_unix_ms - done.started_unix_ms, 5000);
  auto kernel = store_->GetKernelRecord("k", done.kernel_version);
  ASSERT_TRUE(kernel.ok());
  EXPECT_THAT(kernel->summary_json, HasSubstr("time_limit"));
}

TEST_F(JobManagerTest, ShutdownReleasesRunningJobsWithoutACountedFailure) {
  std::string id;
  {
    JobManager m(store_.get(), Opts(1));
    ASSERT_TRUE(m.Start().ok());
    auto job = m.Submit(EndlessJob());
    ASSERT_TRUE(job.ok());
    id = job->id;
    WaitRunningWithProgress(m, id);
    m.Shutdown();
    EXPECT_EQ(m.Submit(KlAdmmJob(small_id_, 5)).status().code(), StatusCode::kUnavailable);
  }
  auto rec = store_->GetJob(id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->state, store::JobState::kQueued);
  EXPECT_EQ(rec->attempts, 1);  // the fencing token only grows
  EXPECT_EQ(rec->counted_failures, 0);
  EXPECT_EQ(rec->last_attempt_end, store::attempt_end::kDrained);
  EXPECT_TRUE(rec->owner.empty());

  // The next manager picks it up again.
  JobManager m2(store_.get(), Opts(1));
  ASSERT_TRUE(m2.Start().ok());
  WaitRunningWithProgress(m2, id);
  ASSERT_TRUE(m2.Cancel(id).ok());
  EXPECT_EQ(WaitTerminal(m2, id).state, store::JobState::kCancelled);
}

// Two managers on one store stand for two replicas. The first loses its
// lease (the job is re-queued as if its lease had run out while it was
// paused): it must stop its solver and write nothing, and the second runs the
// job to the one kernel version it produces.
TEST_F(JobManagerTest, AReplicaThatLostItsLeaseIsFencedOut) {
  JobManagerOptions o1 = Opts(1);
  o1.exclusive_store = false;
  o1.replica_id = "replica-1";
  o1.lease_seconds = 30;
  o1.heartbeat_seconds = 0.05;
  auto m1 = std::make_unique<JobManager>(store_.get(), o1);
  ASSERT_TRUE(m1->Start().ok());
  auto job = m1->Submit(KlAdmmJob(large_id_, 400, /*tolerance=*/0.0));
  ASSERT_TRUE(job.ok()) << job.status();
  WaitRunningWithProgress(*m1, job->id);
  auto running = store_->GetJob(job->id);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->owner, "replica-1");
  EXPECT_EQ(running->attempts, 1);

  // "Its lease ran out": another replica re-queues it (fenced on attempt 1).
  store::JobRecord requeued = *running;
  requeued.state = store::JobState::kQueued;
  store::JobFence fence;
  fence.attempt = 1;
  ASSERT_TRUE(store_->UpdateJobFenced(requeued, fence).ok());
  // A write in the name of attempt 1 is refused from now on.
  EXPECT_EQ(store_->UpdateJobFenced(*running, fence).code(), StatusCode::kAborted);

  JobManagerOptions o2 = o1;
  o2.replica_id = "replica-2";
  JobManager m2(store_.get(), o2);
  ASSERT_TRUE(m2.Start().ok());
  const store::JobRecord done = WaitTerminal(m2, job->id, std::chrono::seconds(60));
  EXPECT_EQ(done.state, store::JobState::kSucceeded) << done.error;
  EXPECT_EQ(done.attempts, 2);
  m1.reset();  // its solver was stopped by the lost renewal; nothing more is written
  auto after = store_->GetJob(job->id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, store::JobState::kSucceeded);
  EXPECT_EQ(after->attempts, 2);
  auto versions = store_->ListKernels("k");
  ASSERT_TRUE(versions.ok());
  ASSERT_EQ(versions->size(), 1u);
  EXPECT_EQ((*versions)[0].job_id, job->id);
}

// A cancel through one replica stops the job another replica runs.
TEST_F(JobManagerTest, CancelThroughAnotherReplicaStopsTheOwner) {
  JobManagerOptions o1 = Opts(1);
  o1.exclusive_store = false;
  o1.replica_id = "owner";
  o1.heartbeat_seconds = 0.05;
  JobManager owner(store_.get(), o1);
  ASSERT_TRUE(owner.Start().ok());
  JobManagerOptions o2 = o1;
  o2.replica_id = "api";
  o2.workers = -1;  // an api-only replica
  JobManager api(store_.get(), o2);
  ASSERT_TRUE(api.Start().ok());
  EXPECT_EQ(api.worker_count(), 0);
  auto job = api.Submit(EndlessJob());
  ASSERT_TRUE(job.ok());
  WaitRunningWithProgress(owner, job->id);
  const auto t0 = Clock::now();
  auto cancelled = api.Cancel(job->id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, store::JobState::kCancelled);
  // The owner stops its solver (no more progress writes succeed) within a second.
  uint64_t v = 0;
  store::JobRecord last;
  while (Clock::now() - t0 < std::chrono::seconds(5)) {
    auto r = owner.WaitForChange(job->id, &v, std::chrono::milliseconds(100));
    ASSERT_TRUE(r.ok());
    last = *r;
    if (owner.Get(job->id).ok() && store::IsTerminal(last.state)) break;
  }
  EXPECT_EQ(last.state, store::JobState::kCancelled);
  owner.Shutdown();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(store_->GetJob(job->id)->state, store::JobState::kCancelled);
}

TEST_F(JobManagerTest, RestartRequeuesAnInterruptedJobOnce) {
  store::JobRecord rec = KlAdmmJob(small_id_, 50);
  rec.state = store::JobState::kRunning;  // as if the process died mid-run
  rec.attempts = 1;
  auto created = store_->CreateJob(rec);
  ASSERT_TRUE(created.ok()) << created.status();

  JobManager m(store_.get(), Opts(1, 1000, 2));
  const auto t0 = Clock::now();
  ASSERT_TRUE(m.Start().ok());
  const store::JobRecord done = WaitTerminal(m, created->id);
  EXPECT_EQ(done.state, store::JobState::kSucceeded) << done.error;
  EXPECT_EQ(done.attempts, 2);
  EXPECT_EQ(done.counted_failures, 0);
  EXPECT_EQ(done.lost_attempts, 0);
  EXPECT_EQ(done.last_attempt_end, store::attempt_end::kCompleted);
  EXPECT_EQ(ToProtoJob(done).last_attempt_end(), "completed");
  // The lost attempt's back-off (1 s) came first.
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(900));
}

// Attempts that end with their process lost (here: each restart finds the
// job running) never count against max_attempts: the job is re-queued with a
// back-off doubling from 1 s up to 60 s, far past max_attempts = 2, and fails
// only at max_lost_attempts, saying why it may be the job.
TEST_F(JobManagerTest, ALostProcessNeverCountsAndBacksOffUpToAMinute) {
  store::JobRecord rec = KlAdmmJob(small_id_, 50);
  rec.state = store::JobState::kRunning;
  rec.attempts = 1;
  auto created = store_->CreateJob(rec);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->id;
  JobManagerOptions o = Opts(-1, 1000, /*max_attempts=*/2);  // no workers: the job stays where Start() puts it
  o.max_lost_attempts = 12;
  std::vector<int64_t> backoffs;
  for (int lost = 1; lost <= 12; ++lost) {
    {
      JobManager m(store_.get(), o);
      const int64_t before = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch()).count();
      ASSERT_TRUE(m.Start().ok());
      auto r = m.Get(id);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->last_attempt_end, store::attempt_end::kProcessLost);
      EXPECT_EQ(r->lost_attempts, lost);
      EXPECT_EQ(r->counted_failures, 0);
      const kls::v1::Job info = ToProtoJob(*r);
      EXPECT_EQ(info.last_attempt_end(), "process_lost");
      EXPECT_EQ(info.lost_attempts(), lost);
      if (lost < 12) {
        ASSERT_EQ(r->state, store::JobState::kQueued) << "lost attempt " << lost << ": " << r->error;
        EXPECT_EQ(info.not_before_unix_ms(), r->not_before_unix_ms);
        const int64_t expected = std::min<int64_t>(60'000, int64_t{1000} << (lost - 1));
        const int64_t backoff = r->not_before_unix_ms - before;
        EXPECT_GE(backoff, expected - 50) << "lost attempt " << lost;
        EXPECT_LE(backoff, expected + 2000) << "lost attempt " << lost;
        backoffs.push_back((backoff + 500) / 1000);
      } else {
        EXPECT_EQ(r->state, store::JobState::kFailed);
        EXPECT_THAT(r->error, HasSubstr("lost 12 times in a row before the job wrote a checkpoint"));
        EXPECT_THAT(r->error, HasSubstr("max_lost_attempts = 12"));
        EXPECT_THAT(r->error, HasSubstr("the job itself is probably crashing it"));
      }
    }
    // The next attempt starts and its process dies too.
    auto r = store_->GetJob(id);
    ASSERT_TRUE(r.ok());
    if (store::IsTerminal(r->state)) break;
    r->state = store::JobState::kRunning;
    r->attempts += 1;
    r->not_before_unix_ms = 0;
    ASSERT_TRUE(store_->UpdateJob(*r).ok());
  }
  EXPECT_THAT(backoffs, ElementsAre(1, 2, 4, 8, 16, 32, 60, 60, 60, 60, 60));
  EXPECT_EQ(LostAttemptBackoffMs(0, 1.0, 60.0), 0);  // a lost attempt that had checkpointed
  EXPECT_EQ(LostAttemptBackoffMs(1000, 1.0, 60.0), 60'000);
}

// The same through an expired lease (another replica died): process_lost,
// re-queued with its back-off, not a counted failure.
TEST_F(JobManagerTest, AnExpiredLeaseIsAProcessLostAttemptWithABackOff) {
  store::JobRecord rec = KlAdmmJob(small_id_, 50);
  rec.state = store::JobState::kRunning;  // inserted running: its lease has already run out
  rec.attempts = 4;
  rec.counted_failures = 1;
  rec.owner = "dead-replica";
  auto created = store_->CreateJob(rec);
  ASSERT_TRUE(created.ok()) << created.status();
  JobManagerOptions o = Opts(-1, 1000, 2);
  o.exclusive_store = false;
  o.replica_id = "survivor";
  o.heartbeat_seconds = 0.05;
  JobManager m(store_.get(), o);
  ASSERT_TRUE(m.Start().ok());
  const auto end = Clock::now() + std::chrono::seconds(10);
  store::JobRecord r;
  while (Clock::now() < end) {
    auto got = m.Get(created->id);
    ASSERT_TRUE(got.ok());
    r = *got;
    if (r.state != store::JobState::kRunning) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(r.state, store::JobState::kQueued);
  EXPECT_EQ(r.last_attempt_end, store::attempt_end::kProcessLost);
  EXPECT_EQ(r.counted_failures, 1);  // unchanged: max_attempts = 2 is not reached
  EXPECT_EQ(r.lost_attempts, 1);
  EXPECT_GT(r.not_before_unix_ms, 0);
  EXPECT_TRUE(r.owner.empty());
}

// A crash signal in the thread running a solve is written to the crash
// marker (then the process dies of it as it would have).
TEST(CrashMarkerTest, ACrashSignalInAScopeIsRecordedAndTheProcessStillDies) {
  kls::testing::TempDir dir;
  const std::string path = (dir.path() / "crash-marker").string();
  GTEST_FLAG_SET(death_test_style, "fast");  // a fork: the child writes where the parent reads
  EXPECT_EXIT(
      {
        auto marker = CrashMarker::Open(path);
        if (!marker.ok()) std::_Exit(3);
        { const CrashMarker::Scope other(marker->get(), "job-finished", 1); }  // ended: not recorded
        const CrashMarker::Scope scope(marker->get(), "job-crashing", 4);
        std::raise(SIGSEGV);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
  auto entries = CrashMarker::Take(path);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].job_id, "job-crashing");
  EXPECT_EQ((*entries)[0].attempt, 4);
  EXPECT_EQ((*entries)[0].signal, SIGSEGV);
  auto again = CrashMarker::Take(path);  // taken: empty now
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

// At start, the attempts an earlier process's crash marker names end
// crash_signal and count (up to max_attempts, then the job fails); a job
// that was running beside it in the same process is only process_lost.
TEST_F(JobManagerTest, ACrashSignalOfItsSolverCountsAgainstMaxAttempts) {
  store::JobRecord rec = KlAdmmJob(small_id_, 50);
  rec.state = store::JobState::kRunning;
  rec.attempts = 1;
  auto crashing = store_->CreateJob(rec);
  ASSERT_TRUE(crashing.ok()) << crashing.status();
  auto innocent = store_->CreateJob(rec);
  ASSERT_TRUE(innocent.ok()) << innocent.status();
  JobManagerOptions o = Opts(-1, 1000, /*max_attempts=*/2);
  o.crash_marker_path = (dir_.path() / "crash-marker").string();
  const auto write_marker = [&](int attempt) {
    std::FILE* f = std::fopen(o.crash_marker_path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "%s %d %d\n", crashing->id.c_str(), attempt, SIGSEGV);
    std::fclose(f);
  };
  write_marker(1);
  {
    JobManager m(store_.get(), o);
    ASSERT_TRUE(m.Start().ok());
    auto r = m.Get(crashing->id);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->state, store::JobState::kQueued);
    EXPECT_EQ(r->last_attempt_end, store::attempt_end::kCrashSignal);
    EXPECT_EQ(ToProtoJob(*r).last_attempt_end(), "crash_signal");
    EXPECT_EQ(r->counted_failures, 1);
    EXPECT_EQ(r->lost_attempts, 0);
    EXPECT_GT(r->not_before_unix_ms, 0);
    auto other = m.Get(innocent->id);
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(other->state, store::JobState::kQueued);
    EXPECT_EQ(other->last_attempt_end, store::attempt_end::kProcessLost);
    EXPECT_EQ(other->counted_failures, 0);
  }
  auto r = store_->GetJob(crashing->id);
  ASSERT_TRUE(r.ok());
  r->state = store::JobState::kRunning;  // the second attempt crashes too
  r->attempts = 2;
  ASSERT_TRUE(store_->UpdateJob(*r).ok());
  write_marker(2);
  JobManager m(store_.get(), o);
  ASSERT_TRUE(m.Start().ok());
  auto done = m.Get(crashing->id);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, store::JobState::kFailed);
  EXPECT_EQ(done->counted_failures, 2);
  EXPECT_THAT(done->error, HasSubstr("its solver crashed the server with signal 11"));
  EXPECT_THAT(done->error, HasSubstr("max_attempts = 2"));
}

// A lost attempt that wrote a checkpoint of its own made progress: the count
// of lost attempts without progress starts again, and there is no back-off.
TEST_F(JobManagerTest, ALostAttemptThatCheckpointedResetsTheLostCount) {
  store::JobRecord rec = KlAdmmJob(small_id_, 50);
  rec.state = store::JobState::kRunning;
  rec.attempts = 3;
  rec.lost_attempts = 5;
  auto created = store_->CreateJob(rec);
  ASSERT_TRUE(created.ok()) << created.status();
  store::CheckpointRecord cp;
  cp.job_id = created->id;
  cp.attempt = 3;
  cp.iteration = 7;
  cp.solver = "kl_admm/test";
  cp.bytes = "state";
  store::JobFence fence;
  fence.attempt = 3;
  ASSERT_TRUE(store_->PutCheckpoint(cp, fence).ok());
  const int64_t before = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  JobManager m(store_.get(), Opts(-1));
  ASSERT_TRUE(m.Start().ok());
  auto r = m.Get(created->id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, store::JobState::kQueued);
  EXPECT_EQ(r->last_attempt_end, store::attempt_end::kProcessLost);
  EXPECT_EQ(r->lost_attempts, 0);
  EXPECT_EQ(r->counted_failures, 0);
  EXPECT_GE(r->not_before_unix_ms - before, -1);
  EXPECT_LE(r->not_before_unix_ms - before, 1000);
}

// The queue (either store) does not hand out a job before its not_before.
TEST_F(JobManagerTest, TheQueueDoesNotStartAJobBeforeItsBackOffEnds) {
  store::JobRecord rec = KlAdmmJob(small_id_, 50);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  rec.not_before_unix_ms = now + 1500;
  auto created = store_->CreateJob(rec);
  ASSERT_TRUE(created.ok()) << created.status();
  auto early = store_->ClaimJob("r1", 10'000);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_FALSE(early->has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(1700));
  auto late = store_->ClaimJob("r1", 10'000);
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_TRUE(late->has_value());
  EXPECT_EQ((*late)->id, created->id);
  EXPECT_EQ((*late)->not_before_unix_ms, 0);
  EXPECT_EQ(store_->GetJob(created->id)->not_before_unix_ms, 0);
}

// A solver error (here: options that do not parse) is the job's own fault:
// it counts, fails the job at once and shows as the attempt's end.
TEST_F(JobManagerTest, ASolverErrorCountsAndIsTheAttemptsEnd) {
  store::JobRecord rec = KlAdmmJob(small_id_, 50);
  rec.options_json = "{not json";
  auto created = store_->CreateJob(rec);
  ASSERT_TRUE(created.ok()) << created.status();
  JobManager m(store_.get(), Opts(1, 1000, 3));
  ASSERT_TRUE(m.Start().ok());
  const store::JobRecord done = WaitTerminal(m, created->id);
  EXPECT_EQ(done.state, store::JobState::kFailed);
  EXPECT_EQ(done.attempts, 1);
  EXPECT_EQ(done.counted_failures, 1);
  EXPECT_EQ(done.last_attempt_end, store::attempt_end::kSolverError);
  EXPECT_EQ(ToProtoJob(done).last_attempt_end(), "solver_error");
}

TEST_F(JobManagerTest, RestartResumesQueuedJobs) {
  std::string id;
  {
    JobManager m(store_.get(), Opts(1));  // never started: the job stays queued
    auto job = m.Submit(KlAdmmJob(small_id_, 20));
    ASSERT_TRUE(job.ok());
    id = job->id;
  }
  JobManager m(store_.get(), Opts(1));
  ASSERT_TRUE(m.Start().ok());
  EXPECT_EQ(WaitTerminal(m, id).state, store::JobState::kSucceeded);
}

TEST_F(JobManagerTest, BcdAndSimpleNpklJobsRun) {
  JobManager m(store_.get(), Opts(2));
  ASSERT_TRUE(m.Start().ok());
  kls::v1::SubmitJobRequest bcd;
  bcd.set_dataset_id(bcd_id_);
  bcd.set_kernel_name("bcd");
  bcd.mutable_bcd_npkl()->set_max_iterations(30);
  kls::v1::SubmitJobRequest simple;
  simple.set_dataset_id(bcd_id_);
  simple.set_kernel_name("simple");
  simple.mutable_simple_npkl()->set_max_iterations(30);
  for (const auto* r : {&bcd, &simple}) {
    auto rec = JobRecordFromSubmit(*r);
    ASSERT_TRUE(rec.ok()) << rec.status();
    auto job = m.Submit(*rec);
    ASSERT_TRUE(job.ok()) << job.status();
    const store::JobRecord done = WaitTerminal(m, job->id);
    EXPECT_EQ(done.state, store::JobState::kSucceeded) << done.method << ": " << done.error;
  }
}

// ---- proto_convert ------------------------------------------------------------

TEST(ProtoConvertTest, OptionsRoundTrip) {
  KlAdmmOptions k;
  k.gamma = 3;
  k.rank = 4;
  k.adaptive_rho = false;
  k.seed = 99;
  const KlAdmmOptions k2 = ToCore(ToProto(k));
  EXPECT_EQ(k2.gamma, 3);
  EXPECT_EQ(k2.rank, 4);
  EXPECT_FALSE(k2.adaptive_rho);
  EXPECT_EQ(k2.seed, 99u);
  EXPECT_EQ(k2.rho_initial, k.rho_initial);

  BcdNpklOptions b;
  b.loss = NpklLoss::kHinge;
  b.c = 0.4;
  const BcdNpklOptions b2 = ToCore(ToProto(b));
  EXPECT_EQ(b2.loss, NpklLoss::kHinge);
  EXPECT_EQ(b2.c, 0.4);

  SimpleNpklOptions s;
  s.loss = NpklLoss::kLinear;
  s.low_rank = 7;
  s.active_set = true;
  const SimpleNpklOptions s2 = ToCore(ToProto(s));
  EXPECT_EQ(s2.loss, NpklLoss::kLinear);
  EXPECT_EQ(s2.low_rank, 7);
  EXPECT_TRUE(s2.active_set);
}

TEST(ProtoConvertTest, UnsetFieldsTakeCoreDefaults) {
  const KlAdmmOptions d = ToCore(kls::v1::KlAdmmOptions());
  EXPECT_EQ(d.gamma, KlAdmmOptions().gamma);
  EXPECT_EQ(d.max_iterations, KlAdmmOptions().max_iterations);
  EXPECT_EQ(ToCore(kls::v1::BcdNpklOptions()).loss, BcdNpklOptions().loss);
  EXPECT_EQ(ToCore(kls::v1::SimpleNpklOptions()).loss, SimpleNpklOptions().loss);

  const GraphOptions g = ToCoreGraph(kls::v1::GraphSpec(), kMethodKlAdmm, 0);
  EXPECT_EQ(g.k, 5);
  EXPECT_EQ(g.weight, EdgeWeight::kGaussian);
  EXPECT_EQ(ToCoreGraph(kls::v1::GraphSpec(), kMethodSimpleNpkl, 0).weight, EdgeWeight::kBinary);
  EXPECT_EQ(ToCoreGraph(kls::v1::GraphSpec(), kMethodBcdNpkl, 2.0).delta, 1.0);
}

TEST(ProtoConvertTest, SubmitValidationNamesTheField) {
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id("ds");
  EXPECT_EQ(JobRecordFromSubmit(r).status().message(), "solver: one of kl_admm, bcd_npkl, simple_npkl, qsdp, embedding, onk, mkl, npk_ranking, social_strength is required");

  r.mutable_kl_admm()->set_gamma(-1);
  auto bad = JobRecordFromSubmit(r);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("kl_admm.gamma = -1 must be positive"));

  r.mutable_kl_admm()->clear_gamma();
  r.mutable_graph()->set_k(0);
  EXPECT_THAT(JobRecordFromSubmit(r).status().message(), HasSubstr("graph.k = 0"));

  r.clear_graph();
  r.mutable_bcd_npkl()->set_loss(kls::v1::LINEAR);
  EXPECT_THAT(JobRecordFromSubmit(r).status().message(), HasSubstr("bcd_npkl.loss = linear"));

  r.mutable_simple_npkl()->set_c(0);
  EXPECT_THAT(JobRecordFromSubmit(r).status().message(), HasSubstr("simple_npkl.c = 0"));

  r.mutable_simple_npkl()->clear_c();
  r.mutable_simple_npkl()->set_num_threads(100000);  // a remote job must not make the server spawn 10⁵ threads
  EXPECT_THAT(JobRecordFromSubmit(r).status().message(),
              HasSubstr("simple_npkl.num_threads = 100000 must be in [0, 256]"));
  r.mutable_simple_npkl()->clear_num_threads();
  r.set_deadline_seconds(-2);
  EXPECT_THAT(JobRecordFromSubmit(r).status().message(), HasSubstr("deadline_seconds = -2"));
}

TEST(ProtoConvertTest, StoredOptionsParseBack) {
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id("ds");
  r.mutable_graph()->set_k(7);
  r.mutable_kl_admm()->set_gamma(2.5);
  r.mutable_kl_admm()->set_seed(12345678901234ull);
  auto rec = JobRecordFromSubmit(r);
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(rec->method, "kl_admm");
  EXPECT_THAT(rec->options_json, HasSubstr("\"kl_admm\""));
  auto spec = ParseJobSpec(rec->method, rec->options_json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->graph.k, 7);
  const auto& o = spec->Options<KlAdmmOptions>();
  EXPECT_EQ(o.gamma, 2.5);
  EXPECT_EQ(o.seed, 12345678901234ull);
  EXPECT_EQ(o.max_iterations, KlAdmmOptions().max_iterations);

  EXPECT_THAT(ParseJobSpec("bcd_npkl", rec->options_json).status().message(), HasSubstr("method = \"bcd_npkl\""));
  EXPECT_EQ(ParseJobSpec("kl_admm", "{not json").status().code(), StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, KernelSummaryIsJson) {
  SolveReport stats;
  stats.termination = Termination::kTimeLimit;
  stats.iterations = 42;
  stats.final_objective = 0.125;
  const std::string json =
      KernelSummaryJson(kMethodKlAdmm, stats, 1e-3, std::numeric_limits<double>::quiet_NaN(), 2.5);
  // Parsed with protobuf's JSON parser into a message with matching fields
  // would need a schema; Struct is avoided (its Map crashes under TSan with
  // the uninstrumented Debian libprotobuf), so check the text directly.
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_THAT(json, HasSubstr("\"termination\":\"time_limit\""));
  EXPECT_THAT(json, HasSubstr("\"iterations\":42"));
  EXPECT_THAT(json, HasSubstr("\"objective\":0.125"));
  EXPECT_THAT(json, HasSubstr("\"seconds\":2.5"));
  EXPECT_THAT(json, HasSubstr("\"dual_residual\":0"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("nan")));
}

TEST(ProtoConvertTest, JobRecordToProto) {
  store::JobRecord r;
  r.id = "job-1";
  r.state = store::JobState::kSucceeded;
  r.kernel_version = 3;
  ProgressEvent e;
  e.iteration = 12;
  e.objective = 1.5;
  e.dual_residual = std::numeric_limits<double>::quiet_NaN();
  r.progress_json = ProgressJson(e, "converged");
  const kls::v1::Job j = ToProtoJob(r);
  EXPECT_EQ(j.id(), "job-1");
  EXPECT_EQ(j.state(), kls::v1::SUCCEEDED);
  EXPECT_EQ(j.kernel_version(), 3);
  EXPECT_EQ(j.progress().iteration(), 12);
  EXPECT_EQ(j.progress().objective(), 1.5);
  EXPECT_EQ(j.termination(), "converged");

  kls::v1::ListJobsRequest l;
  EXPECT_EQ(ToJobFilter(l)->page_size, 100);
  l.set_page_size(5000);
  EXPECT_THAT(ToJobFilter(l).status().message(), HasSubstr("page_size = 5000"));
  l.set_page_size(2);
  l.set_state(kls::v1::RUNNING);
  EXPECT_EQ(*ToJobFilter(l)->state, store::JobState::kRunning);
}

}  // namespace
}  // namespace kls::server
