// JobManager: the server's bounded, persistent job queue and its worker pool.
//
// Every state change (queued → running → succeeded | failed | cancelled) is
// written to the Store before it is visible to callers, so a crash loses no
// job: Start() re-queues what was queued, and what was running when the
// process died is re-queued (attempts < max_attempts) or failed with a reason.
//
// Scheduling: higher `priority` first, FIFO (submission order) within a
// priority. Workers run one job each; a job's deadline becomes the solver's
// SolveControl deadline, and Cancel() sets the job's CancellationToken, which
// the solver reads once per outer iteration.
//
// Deadline semantics: deadline_seconds counts from the moment a worker starts
// the job (loading the data set and building the graph included; queueing
// time excluded). When the deadline passes the solver returns its best
// iterate with termination "time_limit"; the job then SUCCEEDS, the kernel is
// stored, and the termination is recorded in progress_json / the kernel's
// summary_json. A deadline is a budget, not an error. Likewise a solver that
// stops with "numerical_issue" returns its last finite iterate, which is
// stored (succeeded, termination "numerical_issue"); only errors (bad data,
// no constraints, store failures) make a job FAILED, with the message in
// `error`. A job cancelled by Cancel() ends CANCELLED with no kernel.
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
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "server/store/store.h"

namespace kls::server {

struct JobManagerOptions {
  int workers = 0;                 ///< 0 = one per core
  int queue_capacity = 1000;       ///< queued jobs beyond this → RESOURCE_EXHAUSTED
  double progress_persist_interval_seconds = 1.0;  ///< throttle for progress writes to the store
  int max_attempts = 2;            ///< a job interrupted by a crash is re-queued once, then failed
  /// Called on the worker thread right after a job is marked running (before
  /// the solver starts); for tests and metrics. Must not call back into the
  /// manager's blocking methods for long. Empty = none.
  std::function<void(const std::string& job_id)> on_job_started;
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

  /// Stops accepting jobs, cancels running solvers (their jobs go back to
  /// queued without counting the attempt), joins the workers. Idempotent.
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

  /// Blocks until the job changes (state or progress) after `*version`, or
  /// `timeout` passes; returns the current snapshot and stores its version in
  /// `*version`. Pass *version = 0 to get the current snapshot at once.
  /// A terminal job returns immediately.
  StatusOr<store::JobRecord> WaitForChange(const std::string& id, uint64_t* version,
                                           std::chrono::milliseconds timeout);

  /// Number of jobs waiting in the queue (not running).
  int QueuedCount();

  /// Worker threads in the pool (after Start()).
  int worker_count() const { return static_cast<int>(workers_.size()); }

 private:
  /// Version reported for a job that is no longer tracked in memory (terminal).
  static constexpr uint64_t kFinalVersion = UINT64_MAX;

  struct QueueEntry {
    int priority = 0;
    uint64_t sequence = 0;  ///< FIFO within a priority
    std::string id;
  };
  struct QueueOrder {  ///< begin() = next to run
    bool operator()(const QueueEntry& a, const QueueEntry& b) const {
      if (a.priority != b.priority) return a.priority > b.priority;
      return a.sequence < b.sequence;
    }
  };
  /// In-memory state of a job that is queued or running. Guarded by mu_.
  struct LiveJob {
    uint64_t version = 0;        ///< bumped on every state or progress change
    CancellationToken cancel;    ///< shared with the job's SolveControl
    bool running = false;
    bool user_cancelled = false; ///< Cancel() (vs. Shutdown()) stopped it
    bool has_progress = false;
    ProgressEvent progress;      ///< latest, every iteration
  };

  void WorkerLoop();
  /// Runs a claimed job (state already running in the store) to its end and
  /// persists the outcome. Called without mu_.
  void RunJob(store::JobRecord job, std::shared_ptr<LiveJob> live);
  /// Persists the terminal (or re-queued) record and drops the job from
  /// memory. Called without mu_.
  void FinishJob(const store::JobRecord& job);
  void BumpLocked(LiveJob* live);  ///< requires mu_: new version, wake watchers
  void EnqueueLocked(const store::JobRecord& job);
  Status RecoverLocked();

  store::Store* store_;
  const JobManagerOptions options_;

  std::mutex mu_;
  std::condition_variable work_cv_;    ///< workers wait for queue entries
  std::condition_variable change_cv_;  ///< watchers wait for version changes
  std::set<QueueEntry, QueueOrder> queue_;
  std::unordered_map<std::string, QueueEntry> queued_index_;  ///< id → its queue entry
  std::unordered_map<std::string, std::shared_ptr<LiveJob>> live_;
  uint64_t next_version_ = 1;
  uint64_t next_sequence_ = 0;
  bool started_ = false;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

class JobsService;  // server/jobs_service.h

}  // namespace kls::server
