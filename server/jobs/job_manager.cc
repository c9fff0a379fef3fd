#include "server/jobs/job_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "server/jobs/proto_convert.h"
#include "server/jobs/solver_dispatch.h"

namespace kls::server {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

JobManager::JobManager(store::Store* store, JobManagerOptions options)
    : store_(store), options_(std::move(options)) {}

JobManager::~JobManager() { Shutdown(); }

// ---- Lifecycle ---------------------------------------------------------------

Status JobManager::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return FailedPreconditionError("the job manager is already started");
  if (stopping_) return FailedPreconditionError("the job manager was shut down");
  if (options_.queue_capacity < 1) {
    return InvalidArgumentError("queue_capacity = " + std::to_string(options_.queue_capacity) + " must be >= 1");
  }
  if (options_.max_attempts < 1) {
    return InvalidArgumentError("max_attempts = " + std::to_string(options_.max_attempts) + " must be >= 1");
  }
  KLS_RETURN_IF_ERROR(RecoverLocked());
  started_ = true;
  int n = options_.workers;
  if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  spdlog::info("job manager: {} workers, {} jobs queued", n, queue_.size());
  return OkStatus();
}

Status JobManager::RecoverLocked() {
  // Running jobs first: re-queueing them keeps their place (creation order)
  // in the queued listing that follows.
  store::JobFilter running;
  running.state = store::JobState::kRunning;
  running.page_size = 1000;
  for (;;) {
    std::string next;
    KLS_ASSIGN_OR_RETURN(auto page, store_->ListJobs(running, &next));
    for (store::JobRecord& job : page) {
      // Killed between storing the kernel and persisting "succeeded": the
      // result is durable, so the job is finished, not run again (a second
      // run would store a second version of the same kernel).
      StatusOr<std::vector<store::KernelRecord>> kernels =
          store_->ListKernels(job.kernel_name.empty() ? job.id : job.kernel_name);
      if (!kernels.ok()) return kernels.status().WithContext("recovering job " + job.id);
      const store::KernelRecord* produced = nullptr;
      for (const store::KernelRecord& k : *kernels) {
        if (k.job_id == job.id) produced = &k;  // ascending versions: the last is the newest
      }
      if (produced != nullptr) {
        job.state = store::JobState::kSucceeded;
        job.error.clear();
        job.kernel_name = produced->name;
        job.kernel_version = produced->version;
        job.finished_unix_ms = NowUnixMs();
        spdlog::info("job {}: its kernel {} v{} was stored before the server stopped; succeeded", job.id,
                     produced->name, produced->version);
      } else if (job.attempts >= options_.max_attempts) {
        job.state = store::JobState::kFailed;
        job.error = "interrupted " + std::to_string(job.attempts) + " times by server restarts";
        job.finished_unix_ms = NowUnixMs();
        spdlog::warn("job {}: {}; failed", job.id, job.error);
      } else {
        job.state = store::JobState::kQueued;
        job.started_unix_ms = 0;
        spdlog::info("job {}: was running when the server stopped (attempt {} of {}); re-queued", job.id,
                     job.attempts, options_.max_attempts);
      }
      KLS_RETURN_IF_ERROR(store_->UpdateJob(job).WithContext("recovering job " + job.id));
    }
    if (next.empty()) break;
    running.page_token = next;
  }
  store::JobFilter queued;
  queued.state = store::JobState::kQueued;
  queued.page_size = 1000;
  for (;;) {
    std::string next;
    KLS_ASSIGN_OR_RETURN(auto page, store_->ListJobs(queued, &next));
    for (const store::JobRecord& job : page) {
      if (queued_index_.count(job.id) == 0) EnqueueLocked(job);  // Submit() before Start() already did
    }
    if (next.empty()) break;
    queued.page_token = next;
  }
  return OkStatus();
}

void JobManager::Shutdown() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, live] : live_) {
      if (live->running) live->cancel.Cancel();
    }
    workers.swap(workers_);
  }
  work_cv_.notify_all();
  change_cv_.notify_all();
  for (std::thread& t : workers) t.join();
}

// ---- Queue -------------------------------------------------------------------

void JobManager::EnqueueLocked(const store::JobRecord& job) {
  QueueEntry e{job.priority, next_sequence_++, job.id};
  queue_.insert(e);
  queued_index_[job.id] = e;
  auto& live = live_[job.id];
  if (!live) live = std::make_shared<LiveJob>();
  BumpLocked(live.get());
}

void JobManager::BumpLocked(LiveJob* live) {
  if (live != nullptr) live->version = next_version_++;
  change_cv_.notify_all();
}

int JobManager::QueuedCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

StatusOr<store::JobRecord> JobManager::Submit(store::JobRecord job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(StatusCode::kUnavailable, "the server is shutting down; not accepting jobs");
  }
  KLS_ASSIGN_OR_RETURN(JobSpec spec, ParseJobSpec(job.method, job.options_json));
  KLS_ASSIGN_OR_RETURN(store::DatasetRecord dataset, store_->GetDatasetRecord(job.dataset_id));
  KLS_RETURN_IF_ERROR(ValidateJobSpecForDataset(spec, dataset));
  if (const auto* o = std::get_if<NpkRankingJobOptions>(&spec.options)) {
    StatusOr<store::DatasetRecord> text = store_->GetDatasetRecord(o->text_dataset_id);
    if (!text.ok()) {
      return Status(text.status().code(), "npk_ranking.text_dataset_id: " + text.status().message());
    }
    if (text->num_points != dataset.num_points) {
      return InvalidArgumentError("npk_ranking.text_dataset_id = \"" + o->text_dataset_id + "\" has " +
                                  std::to_string(text->num_points) + " rows but the data set has " +
                                  std::to_string(dataset.num_points) + " items");
    }
  }
  if (!(job.deadline_seconds >= 0.0)) {
    return InvalidArgumentError("deadline_seconds = " + std::to_string(job.deadline_seconds) + " must be >= 0");
  }

  job.state = store::JobState::kQueued;
  job.attempts = 0;
  job.error.clear();
  job.kernel_version = 0;
  job.progress_json.clear();
  job.started_unix_ms = job.finished_unix_ms = 0;

  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Status(StatusCode::kUnavailable, "the server is shutting down; not accepting jobs");
  if (static_cast<int>(queue_.size()) >= options_.queue_capacity) {
    return ResourceExhaustedError("the job queue is full (" + std::to_string(queue_.size()) +
                                  " jobs queued, capacity " + std::to_string(options_.queue_capacity) +
                                  "); retry later");
  }
  KLS_ASSIGN_OR_RETURN(store::JobRecord created, store_->CreateJob(std::move(job)));
  if (created.kernel_name.empty()) {  // default output name: the job id (always unique)
    created.kernel_name = created.id;
    KLS_RETURN_IF_ERROR(store_->UpdateJob(created));
  }
  EnqueueLocked(created);
  work_cv_.notify_one();
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

StatusOr<store::JobRecord> JobManager::Cancel(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);  // orders against a worker claiming the job
  KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
  if (store::IsTerminal(job.state)) {
    return FailedPreconditionError("job \"" + id + "\" already " + store::JobStateName(job.state) +
                                   "; only queued or running jobs can be cancelled");
  }
  auto live_it = live_.find(id);
  if (job.state == store::JobState::kRunning && live_it != live_.end()) {
    // The worker persists "cancelled" when the solver returns (next outer iteration).
    live_it->second->user_cancelled = true;
    live_it->second->cancel.Cancel();
    spdlog::info("job {}: cancellation requested", id);
    return job;
  }
  // Queued (or a record this process is not running): cancel at once.
  if (auto q = queued_index_.find(id); q != queued_index_.end()) {
    queue_.erase(q->second);
    queued_index_.erase(q);
  }
  job.state = store::JobState::kCancelled;
  job.finished_unix_ms = NowUnixMs();
  KLS_RETURN_IF_ERROR(store_->UpdateJob(job));
  if (live_it != live_.end()) {
    BumpLocked(live_it->second.get());
    live_.erase(live_it);
  }
  spdlog::info("job {}: cancelled while queued", id);
  return job;
}

StatusOr<store::JobRecord> JobManager::WaitForChange(const std::string& id, uint64_t* version,
                                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = live_.find(id);
    if (it == live_.end()) {
      lock.unlock();
      KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
      if (store::IsTerminal(job.state) || *version == 0) {
        *version = kFinalVersion;
        return job;
      }
      // Known to the store but not tracked here (not started, or shut down):
      // nothing will change it in this process; wait out the timeout.
      lock.lock();
      if (change_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        lock.unlock();
        return store_->GetJob(id);
      }
      continue;
    }
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
    if (change_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (live->version != *version) continue;  // changed right at the deadline
      lock.unlock();
      KLS_ASSIGN_OR_RETURN(store::JobRecord job, store_->GetJob(id));
      if (store::IsTerminal(job.state)) *version = kFinalVersion;
      return job;
    }
  }
}

// ---- Workers -----------------------------------------------------------------

void JobManager::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const QueueEntry entry = *queue_.begin();
    queue_.erase(queue_.begin());
    queued_index_.erase(entry.id);
    std::shared_ptr<LiveJob>& slot = live_[entry.id];
    if (!slot) slot = std::make_shared<LiveJob>();
    std::shared_ptr<LiveJob> live = slot;

    // Claim: persisted as running, attempt counted, before the solver starts.
    StatusOr<store::JobRecord> loaded = store_->GetJob(entry.id);
    if (!loaded.ok() || loaded->state != store::JobState::kQueued) {
      if (!loaded.ok()) spdlog::error("job {}: cannot load the queued job: {}", entry.id, loaded.status().ToString());
      live_.erase(entry.id);
      BumpLocked(nullptr);
      continue;
    }
    store::JobRecord job = std::move(loaded).value();
    job.state = store::JobState::kRunning;
    job.attempts += 1;
    job.started_unix_ms = NowUnixMs();
    job.finished_unix_ms = 0;
    job.error.clear();
    job.progress_json.clear();
    if (Status s = store_->UpdateJob(job); !s.ok()) {
      // Left queued in the store; the next start re-queues it.
      spdlog::error("job {}: cannot mark running: {}", job.id, s.ToString());
      live_.erase(entry.id);
      BumpLocked(nullptr);
      continue;
    }
    live->running = true;
    BumpLocked(live.get());
    lock.unlock();
    spdlog::info("job {}: running (attempt {})", job.id, job.attempts);
    if (options_.on_job_started) options_.on_job_started(job.id);
    RunJob(std::move(job), std::move(live));
    lock.lock();
  }
}

void JobManager::RunJob(store::JobRecord job, std::shared_ptr<LiveJob> live) {
  const Stopwatch watch;
  SolveControl control;
  control.cancel = live->cancel;
  control.SetTimeLimit(job.deadline_seconds);

  // Progress: every event to memory (watchers), at most one store write per
  // interval. Runs on this thread; the store write is the only slow part.
  auto last_persist = std::chrono::steady_clock::now();
  const auto persist_every = std::chrono::duration<double>(options_.progress_persist_interval_seconds);
  store::JobRecord progress_record = job;
  control.progress = [&](const ProgressEvent& e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live->progress = e;
      live->has_progress = true;
      BumpLocked(live.get());
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_persist >= persist_every) {
      last_persist = now;
      progress_record.progress_json = ProgressJson(e, "");
      if (Status s = store_->UpdateJob(progress_record); !s.ok()) {
        spdlog::warn("job {}: persisting progress: {}", job.id, s.ToString());
      }
    }
  };

  auto fail = [&](const Status& s) {
    job.state = store::JobState::kFailed;
    job.error = s.message();
    spdlog::warn("job {}: failed: {}", job.id, s.ToString());
  };

  StatusOr<JobSpec> spec = ParseJobSpec(job.method, job.options_json);
  StatusOr<store::StoredDataset> data = spec.ok() ? store_->LoadDataset(job.dataset_id) : spec.status();
  StatusOr<JobOutput> result = data.ok() ? RunSolverJob(*spec, *data, store_, control) : data.status();

  ProgressEvent last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = live->progress;
  }
  if (!result.ok()) {
    fail(result.status());
  } else {
    const SolveStats& stats = result->stats;
    last.iteration = stats.iterations;
    last.objective = stats.final_objective;
    if (stats.termination == Termination::kCancelled) {
      bool requeue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requeue = stopping_ && !live->user_cancelled;
      }
      if (requeue) {
        // Shutdown, not the user: back to queued; this attempt does not count.
        job.state = store::JobState::kQueued;
        job.attempts = std::max(0, job.attempts - 1);
        job.started_unix_ms = 0;
        job.progress_json.clear();
        spdlog::info("job {}: interrupted by shutdown; back to queued", job.id);
      } else {
        job.state = store::JobState::kCancelled;
        job.progress_json = ProgressJson(last, TerminationName(stats.termination));
        spdlog::info("job {}: cancelled after {} iterations", job.id, stats.iterations);
      }
    } else {
      store::KernelRecord kernel;
      kernel.name = job.kernel_name.empty() ? job.id : job.kernel_name;
      kernel.job_id = job.id;
      kernel.dataset_id = job.dataset_id;
      kernel.method = job.method;
      kernel.num_points = result->kernel.num_points();
      kernel.rank = result->kernel.rank();
      kernel.summary_json = KernelSummaryJson(job.method, stats, result->primal_residual, result->dual_residual,
                                              watch.Seconds());
      StatusOr<store::KernelRecord> stored = store_->PutKernel(kernel, result->kernel, result->attachments);
      if (!stored.ok()) {
        fail(stored.status().WithContext("storing kernel \"" + kernel.name + "\""));
      } else {
        job.state = store::JobState::kSucceeded;
        job.kernel_name = stored->name;
        job.kernel_version = stored->version;
        job.progress_json = ProgressJson(last, TerminationName(stats.termination));
        spdlog::info("job {}: succeeded ({}, {} iterations, {:.3f} s) → kernel {} v{}", job.id,
                     TerminationName(stats.termination), stats.iterations, watch.Seconds(), stored->name,
                     stored->version);
      }
    }
  }
  if (job.state != store::JobState::kQueued) job.finished_unix_ms = NowUnixMs();
  FinishJob(job);
}

void JobManager::FinishJob(const store::JobRecord& job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = store_->UpdateJob(job); !s.ok()) {
    // The record stays "running"; the next start re-queues or fails it.
    spdlog::error("job {}: persisting the final state {}: {}", job.id, store::JobStateName(job.state), s.ToString());
  }
  auto it = live_.find(job.id);
  if (it != live_.end()) {
    BumpLocked(it->second.get());
    live_.erase(it);
  }
}

}  // namespace kls::server
