// JobManager: one replica's share of the job queue, and its worker pool.
//
// The queue lives in the Store (embedded SQLite for one machine, PostgreSQL
// for several replicas): every replica's workers claim from it atomically
// (Store::ClaimJob: highest priority, then oldest), so a job runs on one
// replica at a time. A claim is a lease: state running, attempts + 1 (the
// attempt number is the fencing token), owner = this replica, expiry =
// now + lease_seconds. While the solver runs, a heartbeat thread renews the
// leases of every job this replica owns (Store::RenewLeases); a job missing
// from the renewal (cancelled elsewhere, or re-queued after this replica was
// paused past its lease) is lost: its solver is stopped and nothing more is
// written for it. Every write a worker makes (progress, checkpoint, result)
// is fenced by its attempt (Store::UpdateJobFenced, PutCheckpoint,
// CommitJobKernel), so a replica that lost its lease cannot commit late; the
// kernel and the job's success are one transaction, so a job produces exactly
// one kernel version.
//
// Dead replicas: the same heartbeat thread re-queues running jobs whose lease
// ran out (Store::ListExpiredLeases, fenced on "the lease expired"); with an
// exclusive store, Start() re-queues what an earlier process left running.
//
// Attempt ends (JobRecord::last_attempt_end, Job.last_attempt_end): every
// attempt records why it ended. Only the job's own faults count against
// max_attempts: "oom_guard" (std::bad_alloc or a RESOURCE_EXHAUSTED from the
// solver: re-queued until max_attempts) and "solver_error" (any other error:
// failed at once). "completed", "cancelled", "drained" (SIGTERM) and
// "store_error" never count. "process_lost" — the attempt's process died or
// stopped renewing its lease — never counts either: after the fact a kill -9
// from outside, a node loss, the kernel's OOM killer and a solver that aborts
// the process look the same (nothing runs in a SIGKILLed process), so the
// server does not guess. Such a job is re-queued with not_before = now +
// back-off (lost_backoff_seconds doubled for each lost attempt in a row
// without checkpoint progress: 1 s, 2 s, 4 s … at most
// max_lost_backoff_seconds = 60 s; none when the lost attempt had written a
// checkpoint: it made progress, no crash loop), and the queue does not start
// it earlier.
// The safety net for a job that really kills its process every time is
// JobRecord::lost_attempts, the lost attempts in a row that wrote no
// checkpoint of their own (reset by one that did, or by any other end): at
// max_lost_attempts (default 20, ≈ 15 minutes of back-off) the job fails,
// and its error says why it is probably the job. The one crash the server
// can attribute is a crash signal raised in the thread running a job's solve
// (crash_marker.h): that attempt ends "crash_signal" and counts.
//
// Resumable solves: a worker passes the job's last checkpoint (if any) to the
// solver (SolveControl::resume_from) and stores new ones every
// checkpoint_interval_seconds of solve time (SolveControl::checkpoint), so a
// job moved to another replica or re-run after a crash continues where it was.
//
// Wake-ups: a submit anywhere reaches idle workers through the store's events
// (LISTEN/NOTIFY for PostgreSQL); workers also poll every poll_seconds as a
// fallback.
//
// Deadline semantics: deadline_seconds counts from the moment a worker starts
// the attempt. When the deadline passes the solver returns its best iterate
// with termination "time_limit"; the job then SUCCEEDS with that kernel. A
// deadline is a budget, not an error. Likewise "numerical_issue" stores the
// last finite iterate; only errors (bad data, store failures) make a job
// FAILED, with the message in `error`. A job cancelled by Cancel() (on any
// replica) ends CANCELLED with no kernel.
//
// Wiring: shut the grpc::Server down before JobManager::Shutdown() /
// destruction, so no handler is still inside the manager.
//
// Thread safety: all public methods are safe to call concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <atomic>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "server/jobs/convergence_history.h"
#include "server/jobs/crash_marker.h"
#include "server/store/store.h"

namespace kls::server {

struct JobOutput;  // solver_family.h

/// Observer of job lifecycle events, for metrics (server/metrics.h). Called
/// on worker and handler threads: implementations must be thread-safe and
/// quick, and must not call back into the manager.
class JobMetricsSink {
 public:
  virtual ~JobMetricsSink() = default;
  /// A worker of this replica starts an attempt of a claimed job.
  /// `queue_wait_seconds`: submit → claim on the first attempt, < 0 on later
  /// ones (the time since the re-queue is not recorded); `resumed`: the
  /// attempt continues from a checkpoint of an earlier one.
  virtual void AttemptStarted(const std::string& method, double queue_wait_seconds, bool resumed) = 0;
  /// A solver returned after `seconds` of solving (any outcome).
  virtual void SolveEnded(const std::string& method, double seconds) = 0;
  /// This replica wrote the job's terminal state (succeeded, failed or
  /// cancelled); each finished job is reported once, by the replica that
  /// finished it.
  virtual void JobFinished(const std::string& method, store::JobState state) = 0;
};

struct JobManagerOptions {
  int workers = 0;                 ///< 0 = one per core; < 0 = no workers (an api-only replica)
  int queue_capacity = 1000;       ///< queued jobs beyond this → RESOURCE_EXHAUSTED
  double progress_persist_interval_seconds = 1.0;  ///< throttle for progress writes to the store
  /// Counted failed attempts (see the file comment) after which a job fails.
  int max_attempts = 5;
  /// Lost-process attempts in a row without checkpoint progress after which
  /// a job fails (see the file comment); never counted in max_attempts.
  int max_lost_attempts = 20;
  /// Back-off before a job whose process was lost is started again: this,
  /// doubled per lost attempt in a row without progress, at most
  /// max_lost_backoff_seconds.
  double lost_backoff_seconds = 1.0;
  double max_lost_backoff_seconds = 60.0;
  /// Crash marker file (crash_marker.h): a crash signal in a solver thread
  /// records its job attempt there, and Start() reads what an earlier process
  /// recorded (the attempt ends crash_signal and counts). Empty = off.
  std::string crash_marker_path;
  /// This replica's name in job owners; empty = "<hostname>-<pid>-<random>".
  std::string replica_id;
  /// Lease of a claimed job, seconds: a replica that stops renewing loses its
  /// jobs this long after its last heartbeat.
  double lease_seconds = 10.0;
  /// Heartbeat (lease renewal and expired-lease scan) period; 0 = lease / 4.
  double heartbeat_seconds = 0.0;
  /// Fallback poll for queued jobs when no event arrives, seconds.
  double poll_seconds = 2.0;
  /// Solve time between checkpoints of resumable solvers, seconds.
  double checkpoint_interval_seconds = 30.0;
  /// How long a drain waits for a running solver's final checkpoint, seconds.
  double drain_checkpoint_wait_seconds = 3.0;
  /// True when no other process can own this store's jobs (the embedded
  /// store's locked directory): Start() then re-queues jobs left running by
  /// an earlier process at once instead of waiting for their leases to run out.
  bool exclusive_store = false;
  /// Called on the worker thread right after a job is marked running (before
  /// the solver starts); for tests and metrics. Must not call back into the
  /// manager's blocking methods for long. Empty = none.
  std::function<void(const std::string& job_id)> on_job_started;
  /// Lifecycle events for metrics; null = none. Must outlive the manager.
  JobMetricsSink* metrics = nullptr;
};

/// A job's convergence history as JobManager::History reports it.
struct JobConvergence {
  std::vector<ProgressEvent> points;  ///< oldest first
  bool complete = false;              ///< the job is finished: the history is final
};

class JobManager {
 public:
  /// `store` must outlive the manager.
  JobManager(store::Store* store, JobManagerOptions options);
  ~JobManager();  ///< calls Shutdown()

  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  /// Recovery (see the file comment), then starts the workers. Call once.
  Status Start();

  /// Drain: stops claiming and accepting jobs, asks each running solver for
  /// a checkpoint (waiting up to drain_checkpoint_wait_seconds), stops it and
  /// releases its job back to the queue (not a counted failure) so that
  /// another replica takes it over; joins the workers. Idempotent.
  void Shutdown();

  /// Validates method and options_json (INVALID_ARGUMENT), checks the data set
  /// exists (NOT_FOUND), persists the job as queued and enqueues it.
  /// RESOURCE_EXHAUSTED when queue_capacity jobs are already queued;
  /// UNAVAILABLE after Shutdown().
  StatusOr<store::JobRecord> Submit(store::JobRecord job);

  /// The current record; progress_json carries the latest in-memory progress
  /// even between throttled persists. NOT_FOUND for unknown ids.
  StatusOr<store::JobRecord> Get(const std::string& id);

  /// Queued → cancelled at once; running → the solver is told to stop and the
  /// worker marks the job cancelled (the returned snapshot may still say
  /// running). FAILED_PRECONDITION for a job already in a terminal state.
  StatusOr<store::JobRecord> Cancel(const std::string& id);

  /// The job's convergence history (Jobs.History): running on this replica,
  /// the in-memory ConvergenceHistory of its attempt (complete = false);
  /// finished (on any replica), the history stored in its summary when it
  /// succeeded, else its last progress (complete = true); queued or running
  /// elsewhere, its last persisted progress (complete = false). At most
  /// ConvergenceHistory::kDefaultMaxPoints points. NOT_FOUND for unknown ids.
  StatusOr<JobConvergence> History(const std::string& id);

  /// Blocks until the job changes (state or progress) after `*version`, or
  /// `timeout` passes; returns the current snapshot and stores its version in
  /// `*version`. Pass *version = 0 to get the current snapshot at once.
  /// A terminal job returns immediately.
  StatusOr<store::JobRecord> WaitForChange(const std::string& id, uint64_t* version,
                                           std::chrono::milliseconds timeout);

  /// Number of jobs waiting in the queue (not running), across replicas.
  int QueuedCount();

  /// Worker threads in the pool (after Start()).
  int worker_count() const { return worker_count_; }
  const std::string& replica_id() const { return replica_id_; }

  /// Called by the server for every store event (wakes workers, watchers,
  /// and the heartbeat for a job this replica runs).
  void OnStoreEvent(const store::StoreEvent& event);

 private:
  /// Version reported for a job that is no longer tracked in memory (terminal).
  static constexpr uint64_t kFinalVersion = UINT64_MAX;

  /// In-memory state of a job this replica runs. Guarded by mu_.
  struct LiveJob {
    uint64_t version = 0;        ///< bumped on every state or progress change
    CancellationToken cancel;    ///< shared with the job's SolveControl
    std::shared_ptr<std::atomic<bool>> checkpoint_requested = std::make_shared<std::atomic<bool>>(false);
    int attempt = 0;             ///< the fencing token of this run
    bool cancelling = false;     ///< Cancel() is writing "cancelled" to the store
    bool user_cancelled = false; ///< Cancel() wrote "cancelled" and stopped it: the worker writes nothing
    bool lost = false;           ///< the lease was lost: write nothing more
    bool finishing = false;      ///< the solver returned; the outcome's fenced write decides
    int checkpoints_written = 0;
    bool has_progress = false;
    ProgressEvent progress;      ///< latest, every iteration
    ConvergenceHistory history;  ///< this attempt's reports, bounded
  };

  void WorkerLoop();
  void HeartbeatLoop();
  /// Registers (or confirms) this replica's liveness with a shared store:
  /// Store::RegisterReplica, each heartbeat.
  void KeepRegistered();
  /// Renews this replica's leases; marks and stops jobs it no longer owns.
  void RenewLeases();
  /// Records the attempts an earlier process's crash marker names as
  /// crash_signal (counted), before RequeueExpired sees them.
  void RecordCrashSignals(const std::vector<CrashMarker::Entry>& entries);
  /// Re-queues (or fails) running jobs whose lease ran out. `all_running`:
  /// every running job, expired or not (exclusive store at start).
  Status RequeueExpired(bool all_running);
  /// Runs a claimed job to its end and persists the outcome (fenced).
  void RunJob(store::JobRecord job, std::shared_ptr<LiveJob> live);
  // RunJob's phases.
  /// Sets control->resume_from to the job's last checkpoint, if it has a
  /// readable one; returns its iteration (0: none).
  int ResumeFromCheckpoint(const store::JobRecord& job, SolveControl* control);
  /// Parses the job, loads its data set and runs the solver. On an error,
  /// sets job->last_attempt_end (the attempt is a counted failure).
  StatusOr<JobOutput> SolveAttempt(store::JobRecord* job, const SolveControl& control);
  /// The fenced write of an attempt's outcome (counted in the metrics when terminal).
  void PersistOutcome(const store::JobRecord& record, const store::JobFence& fence);
  /// The outcome of an attempt whose solve returned an error (not a user
  /// cancellation nor a lost lease): released by the drain, re-queued or failed.
  void FinishFailedAttempt(store::JobRecord* job, const Status& error, const ProgressEvent& last, bool stopping,
                           const store::JobFence& fence);
  /// The outcome of an attempt whose solve returned (not a user
  /// cancellation nor a lost lease): released by the drain, cancelled, or
  /// its kernel committed. `watch` times the whole attempt.
  void FinishSolvedAttempt(store::JobRecord* job, const JobOutput& result, ProgressEvent last,
                           const std::vector<ProgressEvent>& history, bool stopping, const Stopwatch& watch,
                           int resumed_from, const store::JobFence& fence);
  void BumpLocked(LiveJob* live);  ///< requires mu_: new version, wake watchers
  store::JobFence FenceOf(const store::JobRecord& job) const;

  store::Store* store_;
  const JobManagerOptions options_;
  std::string replica_id_;
  int worker_count_ = 0;

  std::mutex mu_;
  std::condition_variable work_cv_;       ///< workers wait for queued jobs
  std::condition_variable change_cv_;     ///< watchers wait for version changes
  std::condition_variable heartbeat_cv_;  ///< the heartbeat waits for its period or a wake-up
  std::unordered_map<std::string, std::shared_ptr<LiveJob>> live_;
  uint64_t next_version_ = 1;
  uint64_t work_signals_ = 0;     ///< bumped by every "job queued" event
  uint64_t events_ = 0;           ///< bumped by every store event (remote watchers)
  bool heartbeat_now_ = false;
  int64_t next_not_before_ms_ = 0;  ///< earliest back-off this replica set that has not passed; 0 = none
  bool started_ = false;
  bool stopping_ = false;
  std::unique_ptr<CrashMarker> crash_marker_;  ///< set by Start() when crash_marker_path is
  std::vector<std::thread> workers_;
  std::thread heartbeat_;
  bool registered_ = false;      ///< KeepRegistered's last call succeeded (Start, then the heartbeat thread only)
  bool register_tried_ = false;  ///< KeepRegistered ran once
};

/// The back-off (ms) before a job whose process was lost is started again,
/// given its lost attempts in a row without progress: 0 when it is 0 (the
/// lost attempt had checkpointed), else initial × 2^(lost − 1), at most max.
int64_t LostAttemptBackoffMs(int lost_attempts, double initial_seconds, double max_seconds);

class JobsService;  // server/jobs_service.h

}  // namespace kls::server
