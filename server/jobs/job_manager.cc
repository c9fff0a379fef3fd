#include "server/jobs/job_manager.h"

#include <spdlog/spdlog.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <new>
#include <optional>
#include <set>
#include <random>
#include <thread>
#include <utility>

#include "server/jobs/proto_convert.h"
#include "server/log_context.h"
#include "server/jobs/solver_dispatch.h"

namespace kls::server {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string DefaultReplicaId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof(host), "kls");
  std::mt19937_64 rng(std::random_device{}());
  char buf[320];
  std::snprintf(buf, sizeof(buf), "%s-%d-%04x", host, static_cast<int>(getpid()),
                static_cast<unsigned>(rng() & 0xffff));
  return buf;
}

int64_t Ms(double seconds) { return static_cast<int64_t>(seconds * 1000.0); }

}  // namespace

int64_t LostAttemptBackoffMs(int lost_attempts, double initial_seconds, double max_seconds) {
  // lost_attempts is 0 after a lost attempt that had checkpointed: it made
  // progress, so it is no crash loop, and it starts again at once (a replica
  // killed mid-solve is taken over within lease + heartbeat, as before).
  if (lost_attempts <= 0) return 0;
  const int doublings = std::clamp(lost_attempts - 1, 0, 30);
  const double seconds = std::min(max_seconds, initial_seconds * static_cast<double>(int64_t{1} << doublings));
  return std::max<int64_t>(0, Ms(seconds));
}

namespace {

/// A watcher's version for a job known only through the store (queued, or
/// running on another replica): changes whenever what Watch shows changes.
uint64_t StoredVersion(const store::JobRecord& j) {
  const std::string key = std::string(store::JobStateName(j.state)) + "|" + std::to_string(j.attempts) + "|" +
                          j.progress_json + "|" + j.error;
  uint64_t h = std::hash<std::string>{}(key) | 1;
  return h == UINT64_MAX ? h - 2 : h;
}

}  // namespace

JobManager::JobManager(store::Store* store, JobManagerOptions options)
    : store_(store), options_(std::move(options)),
      replica_id_(options_.replica_id.empty() ? DefaultReplicaId() : options_.replica_id) {}

JobManager::~JobManager() { Shutdown(); }

// ---- Lifecycle ---------------------------------------------------------------

Status JobManager::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return FailedPreconditionError("the job manager is already started");
    if (stopping_) return FailedPreconditionError("the job manager was shut down");
  }
  if (options_.queue_capacity < 1) {
    return InvalidArgumentError("queue_capacity = " + std::to_string(options_.queue_capacity) + " must be >= 1");
  }
  if (options_.max_attempts < 1) {
    return InvalidArgumentError("max_attempts = " + std::to_string(options_.max_attempts) + " must be >= 1");
  }
  if (options_.max_lost_attempts < 1) {
    return InvalidArgumentError("max_lost_attempts = " + std::to_string(options_.max_lost_attempts) +
                                " must be >= 1");
  }
  if (!(options_.lost_backoff_seconds >= 0.0) || !(options_.max_lost_backoff_seconds >= 0.0)) {
    return InvalidArgumentError("lost_backoff_seconds and max_lost_backoff_seconds must be >= 0");
  }
  if (!(options_.lease_seconds > 0.0)) {
    return InvalidArgumentError("lease_seconds = " + std::to_string(options_.lease_seconds) + " must be > 0");
  }
  if (!(options_.poll_seconds > 0.0) || !(options_.checkpoint_interval_seconds > 0.0)) {
    return InvalidArgumentError("poll_seconds and checkpoint_interval_seconds must be > 0");
  }
  // Crash signals an earlier process recorded: those attempts are the job's
  // fault (before the re-queue below would call them lost).
  if (!options_.crash_marker_path.empty()) {
    StatusOr<std::vector<CrashMarker::Entry>> crashed = CrashMarker::Take(options_.crash_marker_path);
    if (!crashed.ok()) {
      spdlog::warn("reading the crash marker: {}", crashed.status().ToString());
    } else {
      RecordCrashSignals(*crashed);
    }
    StatusOr<std::unique_ptr<CrashMarker>> marker = CrashMarker::Open(options_.crash_marker_path);
    if (!marker.ok()) {
      spdlog::warn("no crash marker (a solver crash will count as a lost process): {}",
                   marker.status().ToString());
    } else {
      crash_marker_ = std::move(marker).value();
    }
  }
  // An exclusive store has no other owner: whatever is still running was
  // left by an earlier process of this data directory.
  if (options_.exclusive_store) {
    KLS_RETURN_IF_ERROR(RequeueExpired(/*all_running=*/true));
  } else {
    // A shared store: declare this process alive (its jobs are taken over
    // the moment it dies, Store::RegisterReplica), then take over at once
    // the jobs of replicas that are already gone — typically this
    // replica's previous process, killed a moment ago.
    KeepRegistered();
    if (Status s = RequeueExpired(false); !s.ok()) spdlog::warn("re-queueing jobs of dead replicas: {}", s.ToString());
  }
  std::lock_guard<std::mutex> lock(mu_);
  started_ = true;
  int n = options_.workers;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  if (n < 0) n = 0;
  worker_count_ = n;
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  spdlog::info("job manager: replica {}, {} workers, lease {:.1f} s", replica_id_, n, options_.lease_seconds);
  return OkStatus();
}

void JobManager::Shutdown() {
  std::vector<std::shared_ptr<LiveJob>> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && workers_.empty() && !heartbeat_.joinable()) return;
    stopping_ = true;
    for (auto& [id, live] : live_) {
      live->checkpoint_requested->store(true);
      running.push_back(live);
    }
  }
  work_cv_.notify_all();
  change_cv_.notify_all();
  // A final checkpoint of each running solve before it is handed over, so the
  // replica that takes it continues from here (bounded wait: a solver without
  // checkpoints, or with a long outer iteration, is stopped anyway).
  const auto wait_until = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(Ms(options_.drain_checkpoint_wait_seconds));
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (const auto& live : running) {
      const int before = live->checkpoints_written;
      change_cv_.wait_until(lock, wait_until, [&] {
        return live->checkpoints_written > before || live->lost || live->cancel.IsCancelled();
      });
      live->cancel.Cancel();
    }
  }
  std::vector<std::thread> workers;
  std::thread heartbeat;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
    heartbeat.swap(heartbeat_);
  }
  heartbeat_cv_.notify_all();
  for (std::thread& t : workers) t.join();
  if (heartbeat.joinable()) heartbeat.join();
}

// ---- Events and counters ------------------------------------------------------

void JobManager::OnStoreEvent(const store::StoreEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  ++events_;
  if (event.kind == store::StoreEvent::Kind::kJobQueued) {
    ++work_signals_;
    work_cv_.notify_all();
  }
  if (event.kind == store::StoreEvent::Kind::kJobChanged) {
    auto it = live_.find(event.name);
    if (it != live_.end()) {
      // A job this replica runs was changed elsewhere (e.g. cancelled through
      // another replica): renew now, which finds out whether it is still ours.
      heartbeat_now_ = true;
      heartbeat_cv_.notify_all();
    }
  }
  change_cv_.notify_all();
}

void JobManager::BumpLocked(LiveJob* live) {
  if (live != nullptr) live->version = next_version_++;
  change_cv_.notify_all();
}

int JobManager::QueuedCount() {
  StatusOr<int64_t> n = store_->CountJobs(store::JobState::kQueued);
  return n.ok() ? static_cast<int>(*n) : 0;
}

store::JobFence JobManager::FenceOf(const store::JobRecord& job) const {
  store::JobFence f;
  f.state = store::JobState::kRunning;
  f.attempt = job.attempts;
  f.owner = replica_id_;
  return f;
}

// ---- Submit, Get, Cancel, Watch ------------------------------------------------

StatusOr<store::JobRecord> JobManager::Submit(store::JobRecord job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(StatusCode::kUnavailable, "the server is shutting down; not accepting jobs");
  }
  KLS_ASSIGN_OR_RETURN(JobSpec spec, ParseJobSpec(job.method, job.options_json));
  KLS_ASSIGN_OR_RETURN(store::DatasetRecord dataset, store_->GetDatasetRecord(job.dataset_id));
  KLS_RETURN_IF_ERROR(ValidateJobSpecForDataset(spec, dataset, store_));
  if (!(job.deadline_seconds >= 0.0)) {
    return InvalidArgumentError("deadline_seconds = " + std::to_string(job.deadline_seconds) + " must be >= 0");
  }

  job.state = store::JobState::kQueued;
  job.attempts = 0;
  job.counted_failures = 0;
  job.last_attempt_end.clear();
  job.lost_attempts = 0;
  job.not_before_unix_ms = 0;
  job.owner.clear();
  job.lease_expires_unix_ms = 0;
  job.error.clear();
  job.kernel_version = 0;
  job.progress_json.clear();
  job.started_unix_ms = job.finished_unix_ms = 0;

  KLS_ASSIGN_OR_RETURN(int64_t queued, store_->CountJobs(store::JobState::kQueued));
  if (queued >= options_.queue_capacity) {
    return ResourceExhaustedError("the job queue is full (" + std::to_string(queued) + " jobs queued, capacity " +
                                  std::to_string(options_.queue_capacity) + "); retry later");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(StatusCode::kUnavailable, "the server is shutting down; not accepting jobs");
  }
  KLS_ASSIGN_OR_RETURN(store::JobRecord created, store_->CreateJob(std::move(job)));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++work_signals_;
  }
  work_cv_.notify_one();
  const ScopedJobLogContext log_job(created.id);
  spdlog::info("job {}: queued ({} on {}, priority {})", created.id, created.method, created.dataset_id,
               created.priority);
  return created;
}

StatusOr<store::JobRecord> JobManager::Get(const std::string& id) {
  KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
  if (!store::IsTerminal(job.state)) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end() && it->second->has_progress) job.progress_json = ProgressJson(it->second->progress, "");
  }
  return job;
}

StatusOr<JobConvergence> JobManager::History(const std::string& id) {
  // The in-memory history first: a job that finishes between the two reads
  // is then answered from its stored summary, never from neither.
  std::optional<std::vector<ProgressEvent>> here;
  int here_attempt = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = live_.find(id); it != live_.end()) {
      here = it->second->history.Points();
      here_attempt = it->second->attempt;
    }
  }
  KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
  JobConvergence out;
  out.complete = store::IsTerminal(job.state);
  if (!out.complete && here && job.state == store::JobState::kRunning && job.attempts == here_attempt) {
    out.points = std::move(*here);
  } else {
    out.points = StoredHistory(job);
  }
  return out;
}

StatusOr<store::JobRecord> JobManager::Cancel(const std::string& id) {
  // A claim or a state change between the read and the fenced write makes the
  // write fail (ABORTED): read again and retry, a few times, so the caller
  // only sees ABORTED when the job keeps changing under it.
  constexpr int kTries = 8;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
    std::shared_ptr<LiveJob> local;  // set when the job runs on this replica
    if (store::IsTerminal(job.state)) {
      return FailedPreconditionError("job \"" + id + "\" already " + store::JobStateName(job.state) +
                                     "; only queued or running jobs can be cancelled");
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto it = live_.find(id);
      if (it != live_.end() && it->second->finishing) {
        // The solver has returned and its outcome is being written: too late
        // to cancel; wait (bounded) for that write, then report the outcome.
        const std::shared_ptr<LiveJob> live = it->second;
        change_cv_.wait_for(lock, std::chrono::seconds(10), [&] {
          auto now = live_.find(id);
          return now == live_.end() || now->second != live;
        });
        continue;
      }
      if (it != live_.end() && it->second->attempt == job.attempts && job.state == store::JobState::kRunning) {
        // Running here: "cancelled" is written below before the OK, and the
        // solver is stopped after it. (Acknowledging first and letting the
        // worker write "cancelled" when the solver returns loses the cancel
        // to a crash in between: the restart re-queues the job.) Until the
        // write is done the heartbeat leaves the job alone.
        local = it->second;
        local->cancelling = true;
        if (local->has_progress) job.progress_json = ProgressJson(local->progress, "cancelled");
      }
    }
    // Cancelled in the store, fenced on the state read, so a concurrent claim
    // or commit wins cleanly (then the loop reads again). A job running here
    // is then stopped; one running on another replica finds out at its next
    // lease renewal (at once through the store's events) and stops.
    store::JobFence fence;
    fence.state = job.state;
    fence.attempt = job.attempts;
    const store::JobState was = job.state;
    if (was == store::JobState::kRunning) job.last_attempt_end = store::attempt_end::kCancelled;
    job.state = store::JobState::kCancelled;
    job.finished_unix_ms = NowUnixMs();
    const Status s = store_->UpdateJobFenced(job, fence);
    if (!s.ok() && local != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      local->cancelling = false;
    }
    if (s.code() == StatusCode::kAborted) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * (attempt + 1)));
      continue;
    }
    KLS_RETURN_IF_ERROR(s);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (local != nullptr) {
        local->user_cancelled = true;  // the worker writes nothing more
        local->cancel.Cancel();
      }
      BumpLocked(local.get());
    }
    if (options_.metrics != nullptr) options_.metrics->JobFinished(job.method, store::JobState::kCancelled);
    spdlog::info("job {}: cancelled while {}", id, store::JobStateName(was));
    return job;
  }
  return Status(StatusCode::kAborted,
                "job \"" + id + "\" kept changing state while being cancelled (" + std::to_string(kTries) +
                    " tries); retry");
}

StatusOr<store::JobRecord> JobManager::WaitForChange(const std::string& id, uint64_t* version,
                                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Remote jobs are re-read at least this often even without an event (a
  // shared store's events can be lost while its connection is down).
  const auto poll = std::chrono::milliseconds(250);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = live_.find(id);
    if (it != live_.end()) {
      std::shared_ptr<LiveJob> live = it->second;
      if (live->version != *version) {
        const uint64_t seen = live->version;
        const bool has_progress = live->has_progress;
        const ProgressEvent progress = live->progress;
        lock.unlock();
        KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
        if (store::IsTerminal(job.state)) {
          *version = kFinalVersion;
        } else {
          *version = seen;
          if (has_progress) job.progress_json = ProgressJson(progress, "");
        }
        return job;
      }
      if (change_cv_.wait_until(lock, deadline) == std::cv_status::timeout && live->version == *version) {
        lock.unlock();
        KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
        if (store::IsTerminal(job.state)) *version = kFinalVersion;
        return job;
      }
      continue;
    }
    // Known only through the store: queued, running elsewhere, or finished.
    const uint64_t events = events_;
    lock.unlock();
    KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
    const uint64_t stored = store::IsTerminal(job.state) ? kFinalVersion : StoredVersion(job);
    if (stored != *version || store::IsTerminal(job.state)) {
      *version = stored;
      return job;
    }
    lock.lock();
    if (std::chrono::steady_clock::now() >= deadline) return job;
    const auto wake = std::min(deadline, std::chrono::steady_clock::now() + poll);
    change_cv_.wait_until(lock, wake, [&] { return events_ != events || live_.count(id) > 0; });
  }
}

// ---- Heartbeat: leases and dead replicas -----------------------------------------

void JobManager::HeartbeatLoop() {
  const double period = options_.heartbeat_seconds > 0 ? options_.heartbeat_seconds : options_.lease_seconds / 4;
  const auto every = std::chrono::milliseconds(std::max<int64_t>(10, Ms(period)));
  std::unique_lock<std::mutex> lock(mu_);
  while (!(stopping_ && live_.empty())) {
    heartbeat_cv_.wait_for(lock, every, [this] { return heartbeat_now_ || (stopping_ && live_.empty()); });
    heartbeat_now_ = false;
    const bool stopping = stopping_;
    lock.unlock();
    if (!options_.exclusive_store) KeepRegistered();
    RenewLeases();
    if (!stopping) {
      if (Status s = RequeueExpired(false); !s.ok()) {
        spdlog::warn("re-queueing jobs of dead replicas: {}", s.ToString());
      }
    }
    lock.lock();
  }
}

void JobManager::KeepRegistered() {
  // Called from Start and then only from the heartbeat thread.
  const Status s = store_->RegisterReplica(replica_id_);
  if (s.ok() && !registered_) {
    spdlog::info("replica {} registered its liveness: its jobs are taken over as soon as its process is gone",
                 replica_id_);
  } else if (!s.ok() && (registered_ || !register_tried_)) {
    spdlog::warn("replica {} could not register its liveness (if it dies, its jobs wait for their leases): {}",
                 replica_id_, s.ToString());
  }
  registered_ = s.ok();
  register_tried_ = true;
}

void JobManager::RenewLeases() {
  // Only jobs already live before the store is asked can be missing from its
  // answer: a claim that commits while the renewal runs is not yet in it.
  std::set<std::string> asked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_.empty()) return;
    for (const auto& entry : live_) asked.insert(entry.first);
  }
  StatusOr<std::vector<std::string>> held = store_->RenewLeases(replica_id_, Ms(options_.lease_seconds));
  if (!held.ok()) {
    // The store is unreachable: keep solving; if it stays away past the
    // lease, another replica takes the job and this one finds out later.
    spdlog::warn("renewing leases: {}", held.status().ToString());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, live] : live_) {
    if (live->lost || live->finishing || live->cancelling || live->user_cancelled || asked.count(id) == 0 ||
        std::find(held->begin(), held->end(), id) != held->end()) {
      continue;
    }
    live->lost = true;
    live->cancel.Cancel();
    BumpLocked(live.get());
    spdlog::warn("job {}: this replica no longer holds its lease (attempt {}); stopping its solver", id,
                 live->attempt);
  }
}

void JobManager::RecordCrashSignals(const std::vector<CrashMarker::Entry>& entries) {
  for (const CrashMarker::Entry& e : entries) {
    StatusOr<store::JobRecord> got = store_->GetJob(e.job_id);
    if (!got.ok()) continue;  // deleted since
    store::JobRecord job = *std::move(got);
    store::JobFence fence;
    fence.attempt = e.attempt;
    if (job.attempts != e.attempt) continue;  // it has moved on
    if (job.state == store::JobState::kRunning) {
      fence.state = store::JobState::kRunning;
    } else if (job.state == store::JobState::kQueued &&
               job.last_attempt_end == store::attempt_end::kProcessLost) {
      // Another replica re-queued it as lost first: the marker corrects that.
      fence.state = store::JobState::kQueued;
      job.lost_attempts = std::max(0, job.lost_attempts - 1);
    } else {
      continue;
    }
    const char* name = ::strsignal(e.signal);
    const std::string what = "its solver crashed the server with signal " + std::to_string(e.signal) + " (" +
                             (name != nullptr ? name : "?") + ") in attempt " + std::to_string(e.attempt);
    job.last_attempt_end = store::attempt_end::kCrashSignal;
    job.counted_failures += 1;
    job.error = what;
    if (job.counted_failures >= options_.max_attempts) {
      job.state = store::JobState::kFailed;
      job.error += " (" + std::to_string(job.counted_failures) + " counted failures, max_attempts = " +
                   std::to_string(options_.max_attempts) + ")";
      job.finished_unix_ms = NowUnixMs();
      job.not_before_unix_ms = 0;
    } else {
      job.state = store::JobState::kQueued;
      job.started_unix_ms = 0;
      job.not_before_unix_ms = NowUnixMs() + LostAttemptBackoffMs(job.counted_failures, options_.lost_backoff_seconds,
                                                                 options_.max_lost_backoff_seconds);
    }
    const Status s = store_->UpdateJobFenced(job, fence);
    if (!s.ok()) {
      spdlog::warn("job {}: recording its crash signal: {}", job.id, s.ToString());
      continue;
    }
    if (job.state == store::JobState::kFailed) {
      if (options_.metrics != nullptr) options_.metrics->JobFinished(job.method, store::JobState::kFailed);
      spdlog::warn("job {}: {}; failed", job.id, job.error);
    } else {
      spdlog::warn("job {}: {}; re-queued (counted failure {} of {})", job.id, what, job.counted_failures,
                   options_.max_attempts);
    }
  }
}

Status JobManager::RequeueExpired(bool all_running) {
  std::vector<store::JobRecord> jobs;
  if (all_running) {
    store::JobFilter running;
    running.state = store::JobState::kRunning;
    running.page_size = 1000;
    for (;;) {
      std::string next;
      KLS_ASSIGN_OR_RETURN(auto page, store_->ListJobs(running, &next));
      jobs.insert(jobs.end(), page.begin(), page.end());
      if (next.empty()) break;
      running.page_token = next;
    }
  } else {
    KLS_ASSIGN_OR_RETURN(jobs, store_->ListExpiredLeases());
  }
  for (store::JobRecord& job : jobs) {
    // The attempt's process is gone (or stopped renewing): a kill from
    // outside, a node loss, an OOM kill of the whole process, or a crash the
    // process could not record — after the fact they look the same. Not a
    // counted failure; re-queued after a back-off that grows with the lost
    // attempts in a row that made no checkpoint progress, and failed only
    // after max_lost_attempts of those (a job that kills its process every
    // time). An attempt that wrote a checkpoint resets the count.
    StatusOr<std::optional<store::CheckpointRecord>> cp = store_->GetCheckpoint(job.id);
    const bool progressed = cp.ok() && cp->has_value() && (*cp)->attempt == job.attempts;
    store::JobFence fence;
    fence.state = store::JobState::kRunning;
    fence.attempt = job.attempts;
    fence.lease_expired = !all_running;
    const std::string was_owner = job.owner;
    job.last_attempt_end = store::attempt_end::kProcessLost;
    job.lost_attempts = progressed ? 0 : job.lost_attempts + 1;
    int64_t backoff_ms = 0;
    if (job.lost_attempts >= options_.max_lost_attempts) {
      job.state = store::JobState::kFailed;
      job.error = "the process running it was lost " + std::to_string(job.lost_attempts) +
                  " times in a row before the job wrote a checkpoint (max_lost_attempts = " +
                  std::to_string(options_.max_lost_attempts) +
                  "); a kill -9, a node loss and an out-of-memory kill of the whole process look the same, so "
                  "when nothing else was killing the server the job itself is probably crashing it or exhausting "
                  "its memory";
      job.finished_unix_ms = NowUnixMs();
      job.not_before_unix_ms = 0;
    } else {
      job.state = store::JobState::kQueued;
      job.started_unix_ms = 0;
      backoff_ms = LostAttemptBackoffMs(job.lost_attempts, options_.lost_backoff_seconds,
                                        options_.max_lost_backoff_seconds);
      job.not_before_unix_ms = NowUnixMs() + backoff_ms;
    }
    Status s = store_->UpdateJobFenced(job, fence);
    if (s.code() == StatusCode::kAborted) continue;  // renewed, finished or taken by another replica meanwhile
    KLS_RETURN_IF_ERROR(s.WithContext("re-queueing job " + job.id));
    if (job.state == store::JobState::kFailed) {
      if (options_.metrics != nullptr) options_.metrics->JobFinished(job.method, store::JobState::kFailed);
      spdlog::warn("job {}: {}; failed", job.id, job.error);
    } else {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (next_not_before_ms_ == 0 || job.not_before_unix_ms < next_not_before_ms_) {
          next_not_before_ms_ = job.not_before_unix_ms;
        }
      }
      work_cv_.notify_all();
      spdlog::info("job {}: attempt {} lost (replica {}, {}); re-queued after {:.1f} s ({} lost in a row "
                   "without progress, max {})",
                   job.id, job.attempts, was_owner, all_running ? "found running at start" : "its lease ran out or its process is gone",
                   backoff_ms / 1000.0, job.lost_attempts, options_.max_lost_attempts);
    }
  }
  return OkStatus();
}

// ---- Workers -----------------------------------------------------------------

void JobManager::WorkerLoop() {
  const auto poll = std::chrono::milliseconds(std::max<int64_t>(10, Ms(options_.poll_seconds)));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const uint64_t signals = work_signals_;
    lock.unlock();
    StatusOr<std::optional<store::JobRecord>> claimed = store_->ClaimJob(replica_id_, Ms(options_.lease_seconds));
    lock.lock();
    if (!claimed.ok()) {
      spdlog::warn("claiming a job: {}", claimed.status().ToString());
      work_cv_.wait_for(lock, poll, [this] { return stopping_; });
      continue;
    }
    if (!claimed->has_value()) {
      // A job in its back-off becomes claimable at its not_before: wake then
      // (for back-offs this replica set; others' are found by the poll).
      auto wait = poll;
      if (next_not_before_ms_ != 0) {
        const int64_t until = next_not_before_ms_ - NowUnixMs();
        if (until <= 0) {
          next_not_before_ms_ = 0;
          continue;
        }
        wait = std::min(wait, std::chrono::milliseconds(until + 5));
      }
      work_cv_.wait_for(lock, wait, [&] { return stopping_ || work_signals_ != signals; });
      continue;
    }
    store::JobRecord job = std::move(**claimed);
    if (stopping_) {
      // Claimed during the drain: hand it straight back (not a failure).
      lock.unlock();
      store::JobRecord back = job;
      back.state = store::JobState::kQueued;
      back.started_unix_ms = 0;
      (void)store_->UpdateJobFenced(back, FenceOf(job));
      lock.lock();
      break;
    }
    auto live = std::make_shared<LiveJob>();
    live->attempt = job.attempts;
    live_[job.id] = live;
    BumpLocked(live.get());
    lock.unlock();
    {
      const ScopedJobLogContext log_job(job.id);
      spdlog::info("job {}: running (attempt {}, replica {})", job.id, job.attempts, replica_id_);
      if (options_.on_job_started) options_.on_job_started(job.id);
      RunJob(std::move(job), live);
    }
    lock.lock();
  }
}

void JobManager::RunJob(store::JobRecord job, std::shared_ptr<LiveJob> live) {
  const Stopwatch watch;
  const store::JobFence fence = FenceOf(job);
  SolveControl control;
  control.cancel = live->cancel;
  control.SetTimeLimit(job.deadline_seconds);
  control.checkpoint_interval_seconds = options_.checkpoint_interval_seconds;
  control.checkpoint_requested = live->checkpoint_requested;
  // Attempts before this one were cut short (the job is not terminal): the
  // wall time from submission to this claim over their number bounds how
  // long an attempt of this job lives. A job in a crash loop then saves
  // closer together (Young's interval, CheckpointTimer); a first attempt
  // keeps the 5 % rule.
  if (job.attempts > 1 && job.started_unix_ms > job.created_unix_ms) {
    control.mean_seconds_between_interruptions =
        (job.started_unix_ms - job.created_unix_ms) / 1000.0 / (job.attempts - 1);
  }

  auto mark_lost = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!live->lost && !live->cancelling && !live->user_cancelled) {
      spdlog::warn("job {}: fenced out ({}); stopping", job.id, s.message());
    }
    live->lost = true;
    live->cancel.Cancel();
    BumpLocked(live.get());
  };

  const int resumed_from = ResumeFromCheckpoint(job, &control);
  if (options_.metrics != nullptr) {
    const double wait = job.attempts == 1 ? std::max<int64_t>(0, job.started_unix_ms - job.created_unix_ms) / 1000.0
                                          : -1.0;
    options_.metrics->AttemptStarted(job.method, wait, control.resume_from != nullptr);
  }
  control.checkpoint = [&](const Checkpoint& c) {
    store::CheckpointRecord rec;
    rec.job_id = job.id;
    rec.attempt = job.attempts;
    rec.iteration = c.iteration;
    rec.solver = c.solver;
    rec.bytes = c.bytes;
    const Stopwatch write_watch;
    const Status s = store_->PutCheckpoint(rec, fence);
    if (s.code() == StatusCode::kAborted || s.code() == StatusCode::kNotFound) {
      mark_lost(s);
      return;
    }
    if (!s.ok()) {
      spdlog::warn("job {}: writing a checkpoint: {}", job.id, s.ToString());
      return;
    }
    // One line per checkpoint (the schedule spaces them: tens per hour at
    // most); kls-bench crash reads them for its redone_fraction, the e2e
    // kill tests the write's milliseconds (the schedule's 20 x cost rule).
    spdlog::info("job {}: checkpoint at iteration {} (attempt {}, {:.1f} ms, {} KB)", job.id, c.iteration,
                 job.attempts, 1000.0 * write_watch.Seconds(), (c.bytes.size() + 1023) / 1024);
    std::lock_guard<std::mutex> lock(mu_);
    ++live->checkpoints_written;
    change_cv_.notify_all();
  };

  // Progress: every event to memory (watchers), at most one fenced store
  // write per interval. Runs on this thread.
  auto last_persist = std::chrono::steady_clock::now();
  const auto persist_every = std::chrono::duration<double>(options_.progress_persist_interval_seconds);
  store::JobRecord progress_record = job;
  control.progress = [&](const ProgressEvent& e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live->progress = e;
      live->has_progress = true;
      live->history.Add(e);
      BumpLocked(live.get());
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_persist >= persist_every) {
      last_persist = now;
      progress_record.progress_json = ProgressJson(e, "");
      const Status s = store_->UpdateJobFenced(progress_record, fence);
      if (s.code() == StatusCode::kAborted || s.code() == StatusCode::kNotFound) {
        mark_lost(s);
      } else if (!s.ok()) {
        spdlog::warn("job {}: persisting progress: {}", job.id, s.ToString());
      }
    }
  };

  StatusOr<JobOutput> result = SolveAttempt(&job, control);

  ProgressEvent last;
  std::vector<ProgressEvent> history;
  bool lost, user_cancelled, stopping;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = live->progress;
    history = live->history.Points();
    live->finishing = true;  // from here the fenced write, not the heartbeat, tells a lost lease
    lost = live->lost;
    user_cancelled = live->user_cancelled;
    stopping = stopping_;
  }
  if (user_cancelled) {
    // Cancel() has written "cancelled" (and counted it) before stopping the solver.
    spdlog::info("job {}: cancelled; the solver stopped after {} iterations", job.id,
                 result.ok() ? result->stats.iterations : last.iteration);
  } else if (lost) {
    spdlog::info("job {}: attempt {} ended without writing (lease lost)", job.id, job.attempts);
  } else if (!result.ok()) {
    FinishFailedAttempt(&job, result.status(), last, stopping, fence);
  } else {
    FinishSolvedAttempt(&job, *result, last, history, stopping, watch, resumed_from, fence);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(job.id);
  if (it != live_.end() && it->second == live) live_.erase(it);
  BumpLocked(live.get());
  heartbeat_cv_.notify_all();
}

int JobManager::ResumeFromCheckpoint(const store::JobRecord& job, SolveControl* control) {
  // The job's last checkpoint, written by any earlier attempt.
  StatusOr<std::optional<store::CheckpointRecord>> cp = store_->GetCheckpoint(job.id);
  if (!cp.ok()) {
    spdlog::warn("job {}: its checkpoint cannot be read ({}); starting afresh", job.id, cp.status().ToString());
    return 0;
  }
  if (!cp->has_value()) return 0;
  auto c = std::make_shared<Checkpoint>();
  c->solver = (*cp)->solver;
  c->iteration = static_cast<int>((*cp)->iteration);
  c->bytes = std::move((*cp)->bytes);
  const int resumed_from = c->iteration;
  control->resume_from = std::move(c);
  // The e2e kill tests read this line (how old the resumed checkpoint is).
  spdlog::info("job {}: resuming from the checkpoint at iteration {} of attempt {} (attempt {})", job.id, resumed_from,
               (*cp)->attempt, job.attempts);
  return resumed_from;
}

StatusOr<JobOutput> JobManager::SolveAttempt(store::JobRecord* job, const SolveControl& control) {
  StatusOr<JobSpec> spec = ParseJobSpec(job->method, job->options_json);
  StatusOr<store::StoredDataset> data = spec.ok() ? store_->LoadDataset(job->dataset_id) : spec.status();
  StatusOr<JobOutput> result = data.status();
  if (data.ok()) {
    const Stopwatch solve_watch;
    try {
      const CrashMarker::Scope crash_scope(crash_marker_.get(), job->id, job->attempts);
      result = RunSolverJob(*spec, *data, store_, control);
    } catch (const std::bad_alloc&) {
      result = ResourceExhaustedError("the solver ran out of memory");
    }
    if (options_.metrics != nullptr) options_.metrics->SolveEnded(job->method, solve_watch.Seconds());
  }
  // The job's own fault: out of memory inside this process (its allocation
  // failed, or a solver's memory guard refused) is retried up to
  // max_attempts; any other error fails the job at once. Both count.
  if (!result.ok()) {
    job->last_attempt_end = result.status().code() == StatusCode::kResourceExhausted
                                ? store::attempt_end::kOomGuard
                                : store::attempt_end::kSolverError;
  }
  return result;
}

void JobManager::PersistOutcome(const store::JobRecord& record, const store::JobFence& fence) {
  const Status s = store_->UpdateJobFenced(record, fence);
  if (!s.ok()) {
    spdlog::warn("job {}: persisting {}: {}", record.id, store::JobStateName(record.state), s.ToString());
  } else if (store::IsTerminal(record.state) && options_.metrics != nullptr) {
    options_.metrics->JobFinished(record.method, record.state);
  }
}

void JobManager::FinishFailedAttempt(store::JobRecord* job, const Status& error, const ProgressEvent& last,
                                     bool stopping, const store::JobFence& fence) {
  if (error.code() == StatusCode::kCancelled && stopping) {
    // The drain stopped it and a step after the solver (e.g. a guard that
    // checks the cancel) reported that as an error: released all the same.
    job->state = store::JobState::kQueued;
    job->started_unix_ms = 0;
    job->last_attempt_end = store::attempt_end::kDrained;
    job->progress_json = ProgressJson(last, "");
    spdlog::info("job {}: released by the drain ({}); back to queued", job->id, error.message());
    PersistOutcome(*job, fence);
    return;
  }
  job->lost_attempts = 0;
  if (job->last_attempt_end == store::attempt_end::kOomGuard && job->counted_failures + 1 < options_.max_attempts) {
    job->counted_failures += 1;
    job->state = store::JobState::kQueued;
    job->started_unix_ms = 0;
    job->error = error.message();
    spdlog::warn("job {}: {}; re-queued (counted failure {} of {})", job->id, job->error, job->counted_failures,
                 options_.max_attempts);
  } else {
    job->counted_failures += 1;  // every solve error is a counted failure (SolveAttempt)
    job->state = store::JobState::kFailed;
    job->error = error.message();
    job->finished_unix_ms = NowUnixMs();
    spdlog::warn("job {}: failed: {}", job->id, error.ToString());
  }
  PersistOutcome(*job, fence);
}

void JobManager::FinishSolvedAttempt(store::JobRecord* job, const JobOutput& result, ProgressEvent last,
                                     const std::vector<ProgressEvent>& history, bool stopping,
                                     const Stopwatch& watch, int resumed_from, const store::JobFence& fence) {
  const SolveReport& stats = result.stats;
  last.iteration = stats.iterations;
  last.objective = stats.final_objective;
  if (stats.termination == Termination::kCancelled && stopping) {
    // Drain, not the user (RunJob handled user cancellations): back to the
    // queue for another replica; the checkpoint just written lets it
    // continue. Not a counted failure.
    job->state = store::JobState::kQueued;
    job->started_unix_ms = 0;
    job->last_attempt_end = store::attempt_end::kDrained;
    job->progress_json = ProgressJson(last, "");
    spdlog::info("job {}: released by the drain after iteration {}; back to queued", job->id, stats.iterations);
    PersistOutcome(*job, fence);
    return;
  }
  if (stats.termination == Termination::kCancelled) {
    job->state = store::JobState::kCancelled;
    job->last_attempt_end = store::attempt_end::kCancelled;
    job->progress_json = ProgressJson(last, TerminationName(stats.termination));
    job->finished_unix_ms = NowUnixMs();
    spdlog::info("job {}: cancelled after {} iterations", job->id, stats.iterations);
    PersistOutcome(*job, fence);
    return;
  }
  store::KernelRecord kernel;
  kernel.name = job->kernel_name.empty() ? job->id : job->kernel_name;
  kernel.job_id = job->id;
  kernel.dataset_id = job->dataset_id;
  kernel.method = job->method;
  kernel.num_points = result.kernel.num_points();
  kernel.rank = result.kernel.rank();
  // The convergence history goes last (WithoutConvergence cuts it out of the API's summaries).
  kernel.summary_json = WithConvergence(
      KernelSummaryJson(job->method, stats, result.primal_residual, result.dual_residual, watch.Seconds(),
                        result.summary_notes),
      history);
  job->progress_json = ProgressJson(last, TerminationName(stats.termination), kernel.summary_json);
  job->finished_unix_ms = NowUnixMs();
  job->error.clear();
  job->last_attempt_end = store::attempt_end::kCompleted;
  job->lost_attempts = 0;
  StatusOr<store::KernelRecord> stored =
      store_->CommitJobKernel(*job, fence, kernel, result.kernel, result.attachments);
  if (stored.status().code() == StatusCode::kAborted) {
    spdlog::warn("job {}: result of attempt {} not committed: {}", job->id, job->attempts, stored.status().message());
  } else if (!stored.ok()) {
    job->state = store::JobState::kFailed;
    job->last_attempt_end = store::attempt_end::kStoreError;
    job->error = stored.status().WithContext("storing kernel \"" + kernel.name + "\"").message();
    spdlog::warn("job {}: failed: {}", job->id, job->error);
    PersistOutcome(*job, fence);
  } else {
    if (options_.metrics != nullptr) options_.metrics->JobFinished(job->method, store::JobState::kSucceeded);
    spdlog::info("job {}: succeeded ({}, {} iterations{}, {:.3f} s) → kernel {} v{}", job->id,
                 TerminationName(stats.termination), stats.iterations,
                 resumed_from > 0 ? ", resumed from " + std::to_string(resumed_from) : std::string(),
                 watch.Seconds(), stored->name, stored->version);
  }
}

}  // namespace kls::server
