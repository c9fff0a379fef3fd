// Store: durable metadata (data sets, jobs, kernels, versions, aliases) plus
// artifact files for the matrices. One interface so that a networked backend
// (PostgreSQL for several replicas) can follow the embedded SQLite one.
//
// Thread safety: every method is safe to call concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/data/constraints.h"
#include "core/data/dataset.h"
#include "core/model/learned_kernel.h"
#include "core/social/community.h"

namespace kls::store {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };
const char* JobStateName(JobState s);  ///< "queued", "running", ...
StatusOr<JobState> ParseJobState(const std::string& s);
inline bool IsTerminal(JobState s) { return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled; }

struct DatasetRecord {
  std::string id;
  std::string name;
  int64_t num_points = 0;
  int64_t dim = 0;
  int64_t num_classes = 0;     ///< 0 when unlabeled
  int64_t num_constraints = 0;
  int64_t created_unix_ms = 0;
  /// The item attribute columns (ItemAttributes::Summary); empty = none.
  std::string attributes_summary;
  /// Bumped by every PutDatasetAttributes; 0 = never set.
  int64_t attributes_version = 0;
};

/// A data set's item attributes: core's ItemAttributes::Serialize bytes,
/// checksummed by the store.
struct StoredAttributes {
  int64_t version = 0;
  std::string summary;
  std::string bytes;
};

struct JobRecord {
  std::string id;
  std::string dataset_id;
  std::string method;          ///< the solver family's name (server/jobs/solver_family.h)
  std::string options_json;    ///< the solver options as submitted (server serializes)
  JobState state = JobState::kQueued;
  int priority = 0;            ///< higher runs first
  int attempts = 0;            ///< times the job was started (claimed); the fencing token of the running attempt
  double deadline_seconds = 0; ///< per-job time limit; 0 = none
  std::string error;           ///< reason for kFailed
  std::string kernel_name;     ///< output kernel name
  int64_t kernel_version = 0;  ///< set on success
  std::string progress_json;   ///< last persisted progress (throttled)
  int64_t created_unix_ms = 0, started_unix_ms = 0, finished_unix_ms = 0;
  /// Replica holding the lease of a running job (empty otherwise).
  std::string owner;
  /// When that lease runs out (unix ms); a running job past it may be re-queued by any replica.
  int64_t lease_expires_unix_ms = 0;
  /// Attempts that counted against max_attempts: ended by the job's own fault
  /// (the solver's out-of-memory guard, a solver error, a crash signal in its
  /// solver thread). Attempts ended by a
  /// drain, a cancel or a lost process (kill, node loss) do not count.
  int counted_failures = 0;
  /// Why the last attempt ended (attempt_end::k*); empty before the first
  /// attempt ends.
  std::string last_attempt_end;
  /// Consecutive attempts ended by a lost process without checkpoint
  /// progress of their own; reset by an attempt that checkpoints or ends any
  /// other way. Sets the back-off, and fails the job at max_lost_attempts.
  int lost_attempts = 0;
  /// A queued job is not claimed before this time (unix ms, the writer's
  /// clock); 0 = at once. The back-off after a lost process.
  int64_t not_before_unix_ms = 0;
};

/// JobRecord::last_attempt_end values (also Job.last_attempt_end).
namespace attempt_end {
inline constexpr const char kCompleted[] = "completed";       ///< the solver returned a result (any termination)
inline constexpr const char kSolverError[] = "solver_error";  ///< the solver or its input failed (counted)
inline constexpr const char kOomGuard[] = "oom_guard";        ///< out of memory inside the process (counted)
inline constexpr const char kStoreError[] = "store_error";    ///< the result could not be stored
inline constexpr const char kCancelled[] = "cancelled";       ///< Cancel()
inline constexpr const char kDrained[] = "drained";           ///< released by a drain (SIGTERM)
inline constexpr const char kProcessLost[] = "process_lost";  ///< its process died or stopped renewing the lease
inline constexpr const char kCrashSignal[] = "crash_signal";  ///< the process caught a crash signal during it (counted)
}  // namespace attempt_end

/// Conditions of a fenced job write; every condition that is set must hold or
/// the write is refused with ABORTED and nothing changes. This is how a
/// replica that lost its lease (killed, paused, partitioned) is kept from
/// committing late: it still names its old attempt, which no longer matches.
struct JobFence {
  JobState state = JobState::kRunning;  ///< the stored job is in this state ...
  int attempt = 0;                      ///< ... with attempts == attempt
  std::string owner;                    ///< non-empty: the stored owner equals it
  bool lease_expired = false;           ///< the stored lease has run out by the store's clock, or its owner is
                                        ///< provably gone (ListExpiredLeases): the re-queue of a dead owner's job
};

/// A solver's resumable state for a job (core's Checkpoint, stored opaquely).
struct CheckpointRecord {
  std::string job_id;
  int attempt = 0;          ///< the attempt that wrote it
  int64_t iteration = 0;    ///< solver outer iteration it resumes after
  std::string solver;       ///< checkpoint format tag, "<family>/<version>"
  std::string bytes;        ///< the state (checksummed by the store)
  int64_t created_unix_ms = 0;
};

/// What changed, as told to a store listener (same process for the embedded
/// store; every replica for a shared one).
struct StoreEvent {
  enum class Kind {
    kJobQueued,      ///< a job became claimable (submitted or re-queued)
    kJobChanged,     ///< a job's state changed (name = job id)
    kKernelChanged,  ///< a kernel version was added or deleted, or an alias moved (name = kernel name)
    kDatasetChanged, ///< a data set's attributes were replaced, or the data set deleted (name = data set id)
  };
  Kind kind = Kind::kJobQueued;
  std::string name;
};

struct KernelRecord {
  std::string name;
  int64_t version = 0;
  std::string job_id;
  std::string dataset_id;
  std::string method;
  int64_t num_points = 0;
  int64_t rank = 0;
  std::string summary_json;  ///< termination, iterations, objective, timings
  int64_t created_unix_ms = 0;
};

struct StoredDataset {
  Dataset data;
  PairwiseConstraints constraints;
  /// Social data sets (DatasetHeader.social): the photos' owners, tags,
  /// dates, places, comments, contacts, groups and favourites; photo_visual
  /// is data.features. Empty for ordinary data sets.
  std::optional<Community> social;
};

/// A named blob stored with a kernel: a model that queries beyond similarity
/// need (a classifier, a social graph). Encoded by core (e.g.
/// SerializeClassifier); the store only keeps the bytes, checksummed with the
/// embedding in the same artifact.
struct Attachment {
  std::string name;   ///< at most 40 bytes, e.g. "classifier", "social_graph"
  std::string bytes;
};

/// A kernel with its attachments, as LoadModel returns it.
struct StoredModel {
  LearnedKernel kernel;
  std::vector<Attachment> attachments;
  const Attachment* Find(const std::string& name) const {
    for (const auto& a : attachments)
      if (a.name == name) return &a;
    return nullptr;
  }
};

struct JobFilter {
  std::optional<JobState> state;
  std::string dataset_id;  ///< empty = any
  int page_size = 100;
  std::string page_token;  ///< opaque; empty = first page
};

class Store {
 public:
  virtual ~Store() = default;

  // Data sets: features, labels, keys and constraints go to one artifact.
  virtual StatusOr<DatasetRecord> PutDataset(const std::string& name, const StoredDataset& d) = 0;
  virtual StatusOr<DatasetRecord> GetDatasetRecord(const std::string& id) = 0;
  virtual StatusOr<StoredDataset> LoadDataset(const std::string& id) = 0;
  virtual StatusOr<std::vector<DatasetRecord>> ListDatasets() = 0;
  virtual Status DeleteDataset(const std::string& id) = 0;
  /// Replaces the data set's item attributes (`bytes` empty = removes them)
  /// and returns the new attributes_version. NOT_FOUND for an unknown data
  /// set. Emits kDatasetChanged.
  virtual StatusOr<int64_t> PutDatasetAttributes(const std::string& dataset_id, const std::string& summary,
                                                 const std::string& bytes) = 0;
  /// The data set's attributes; nullopt when it has none. NOT_FOUND for an
  /// unknown data set, DATA_LOSS when the bytes fail their checksum.
  virtual StatusOr<std::optional<StoredAttributes>> GetDatasetAttributes(const std::string& dataset_id) = 0;

  // Jobs.
  /// Assigns id and created time; an empty kernel_name becomes the job id
  /// (in the same write, so a replica that claims the job at once sees it).
  virtual StatusOr<JobRecord> CreateJob(JobRecord job) = 0;
  virtual StatusOr<JobRecord> GetJob(const std::string& id) = 0;
  virtual Status UpdateJob(const JobRecord& job) = 0;
  /// Jobs matching the filter, oldest first; *next_token empty on the last page.
  virtual StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& f, std::string* next_token) = 0;

  /// Number of jobs in `state` (the queue capacity check).
  virtual StatusOr<int64_t> CountJobs(JobState state) = 0;

  // Shared job queue with leases (server/jobs/job_manager.h). Every replica
  // claims from the same queue; a claim is atomic, so a job runs on one
  // replica at a time.
  /// Claims the highest-priority, oldest queued job: state running, attempts
  /// + 1, owner = replica_id, lease until now + lease_ms, started now,
  /// error and progress cleared. nullopt when nothing is queued.
  virtual StatusOr<std::optional<JobRecord>> ClaimJob(const std::string& replica_id, int64_t lease_ms) = 0;
  /// Extends to now + lease_ms the lease of every running job `replica_id`
  /// owns and returns the ids of those jobs (a job missing from the answer
  /// was lost: its solver must stop and must not write).
  virtual StatusOr<std::vector<std::string>> RenewLeases(const std::string& replica_id, int64_t lease_ms) = 0;
  /// Writes `job` only when `fence` holds (ABORTED otherwise; NOT_FOUND for
  /// an unknown id). A write to a terminal or queued state clears the lease
  /// and, for a terminal state, deletes the job's checkpoint.
  virtual Status UpdateJobFenced(const JobRecord& job, const JobFence& fence) = 0;
  /// Stores the kernel (as PutKernel) and writes `job` (state succeeded,
  /// kernel name and version filled in from the stored record) in one
  /// transaction, only when `fence` holds: a job produces exactly one kernel
  /// version. ABORTED when fenced out, with nothing stored.
  virtual StatusOr<KernelRecord> CommitJobKernel(JobRecord job, const JobFence& fence, KernelRecord record,
                                                 const LearnedKernel& kernel,
                                                 const std::vector<Attachment>& attachments = {}) = 0;
  /// Running jobs whose lease has run out, or (a shared store) whose owner
  /// registered with RegisterReplica and is provably gone. Lease times are
  /// taken from the store's clock (the database server's for a shared store),
  /// so replicas' clocks need not agree.
  virtual StatusOr<std::vector<JobRecord>> ListExpiredLeases() = 0;
  /// Declares that `replica_id` (the owner name this process claims jobs
  /// under) lives as long as this store instance: a shared store can then
  /// tell other replicas at once when the process is gone, so its jobs are
  /// taken over without waiting for their leases. Kept up by RenewLeases
  /// (re-registered after a lost connection). A no-op for a store that has
  /// only one process.
  virtual Status RegisterReplica(const std::string& replica_id) {
    (void)replica_id;
    return OkStatus();
  }

  // Checkpoints: one per job, replaced by each write.
  /// Replaces the job's checkpoint, only when `fence` holds (ABORTED otherwise).
  virtual Status PutCheckpoint(const CheckpointRecord& checkpoint, const JobFence& fence) = 0;
  /// The job's checkpoint; nullopt when none; DATA_LOSS when it fails its checksum.
  virtual StatusOr<std::optional<CheckpointRecord>> GetCheckpoint(const std::string& job_id) = 0;

  /// `listener` is called (on a store thread or the writer's thread; it must
  /// be quick and must not call back into the store synchronously) for every
  /// StoreEvent, including this process's own writes. One listener; set it
  /// before serving. Shared stores also deliver other replicas' events, and
  /// after (re)establishing their event connection deliver
  /// {kKernelChanged, ""} and {kJobQueued, ""} ("anything may have changed":
  /// events sent while disconnected are lost). Returns only after every
  /// delivery to the previous listener has returned (listener_slot.h): after
  /// SetListener(nullptr) what the old listener captured may be destroyed.
  /// Not from inside a listener.
  virtual void SetListener(std::function<void(const StoreEvent&)> listener) = 0;

  /// OK when the store is reachable and its schema current (readiness);
  /// UNAVAILABLE otherwise.
  virtual Status Ping() = 0;

  // Kernels: versions per name, aliases ("prod" → v7).
  /// Writes the embedding artifact (with `attachments`, if any), then the
  /// record, as version max+1.
  virtual StatusOr<KernelRecord> PutKernel(KernelRecord record, const LearnedKernel& kernel,
                                           const std::vector<Attachment>& attachments = {}) = 0;
  /// version 0 = latest; `alias` non-empty resolves an alias instead.
  virtual StatusOr<KernelRecord> GetKernelRecord(const std::string& name, int64_t version,
                                                 const std::string& alias = "") = 0;
  virtual StatusOr<LearnedKernel> LoadKernel(const std::string& name, int64_t version) = 0;
  /// The kernel and its attachments from one verified read of the artifact.
  virtual StatusOr<StoredModel> LoadModel(const std::string& name, int64_t version) = 0;
  virtual StatusOr<std::vector<KernelRecord>> ListKernels(const std::string& name = "") = 0;
  virtual Status DeleteKernel(const std::string& name, int64_t version) = 0;  ///< 0 = all versions
  virtual Status SetAlias(const std::string& name, const std::string& alias, int64_t version) = 0;

  // Migration (kls-server --migrate-from DIR --store URI): records are
  // written as they are — ids, versions, states and times kept — so every
  // kernel answers identically afterwards. A shared store implements the
  // Import* methods; the embedded store is only a source (UNIMPLEMENTED).
  struct AliasRecord {
    std::string name, alias;
    int64_t version = 0;
  };
  virtual StatusOr<std::vector<AliasRecord>> ListAliases() = 0;
  /// ALREADY_EXISTS when a record with that id (name and version) exists.
  virtual Status ImportDataset(const DatasetRecord& record, const StoredDataset& data) = 0;
  virtual Status ImportKernel(const KernelRecord& record, const StoredModel& model) = 0;
  virtual Status ImportJob(const JobRecord& job) = 0;

  /// Checks every artifact's checksum and every record's artifact. Returns the
  /// list of problems (empty = healthy).
  virtual StatusOr<std::vector<std::string>> CheckIntegrity() = 0;
};

/// Opens (creating if needed) the embedded store under `data_dir`:
/// `data_dir/kls.db` (SQLite, WAL) and `data_dir/artifacts/`.
///
/// Crash recovery: a process killed inside a write leaves at most a temporary
/// artifact file (`*.tmp.<pid>`, killed before the rename) or a complete
/// artifact no record names (killed between the rename and the metadata
/// commit, or inside a delete after the commit). Neither is visible to any
/// read. Opening removes both, so they neither accumulate nor fail later
/// integrity checks. This is only safe while no other process writes to the
/// directory: callers must own it (server::DataDir holds an exclusive lock).
StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& data_dir);

/// Where and how to open the shared PostgreSQL store (kls-server --store).
struct PostgresStoreOptions {
  /// Any libpq connection URI or key=value string, e.g.
  /// "postgresql://kls@db:5432/kls?connect_timeout=5".
  std::string uri;
  /// Local, checksum-verified cache of the artifacts this replica reads
  /// (data sets and kernels), so that a cached kernel never waits on the
  /// database. Empty: a private temporary directory, removed at close.
  std::string cache_dir;
  /// Disk budget of cache_dir in bytes (least recently used files removed
  /// beyond it); 0 = unbounded.
  int64_t cache_disk_bytes = 0;
  /// Connections in the pool used by RPC handlers and workers (>= 1).
  int pool_size = 4;
  /// The database ends a session of this store that sits idle inside a
  /// transaction for longer than this (PostgreSQL's
  /// idle_in_transaction_session_timeout), releasing its row locks; 0 = the
  /// database's own setting. kls-server sets the lease: a replica paused or
  /// hung between a checkpoint's INSERT and its COMMIT held the job's row
  /// (FOR SHARE) and so kept every other replica from taking the job over —
  /// a job whose lease ran out in 2 s was re-queued after 120 s. Such a
  /// replica has lost its lease, so its transaction could not commit anyway.
  double idle_in_transaction_seconds = 0.0;
  /// When set, Open records here the schema version it found (0 = a new
  /// database) and the version it left (kls-server --migrate-only).
  struct SchemaVersions {
    int64_t found = 0, now = 0;
  };
  SchemaVersions* schema_versions = nullptr;
};

/// Schema version of the PostgreSQL store this build writes.
inline constexpr int kPostgresSchemaVersion = 5;

/// Opens the PostgreSQL store: connects, creates or migrates the schema (a
/// schema version row; a schema one version newer than this build — the next
/// release's, migrated by expand/contract rules — is served as it is; a newer
/// one is refused with FAILED_PRECONDITION), and starts the LISTEN connection
/// that delivers other replicas' StoreEvents. UNAVAILABLE when the server
/// cannot be reached.
StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const PostgresStoreOptions& options);

/// What CopyStore copied.
struct MigrationReport {
  int64_t datasets = 0, kernels = 0, aliases = 0, jobs = 0;
  int64_t skipped_existing = 0;  ///< records the destination already had (a re-run)
};

/// Copies every data set, kernel version (with attachments), alias and job
/// of `from` into `to` (server/store/migrate.cc). Re-running after an
/// interruption skips what was already copied. Queued and running jobs are
/// copied as queued (they run again on the new store; running ones resume
/// nothing, as checkpoints are not copied).
StatusOr<MigrationReport> CopyStore(Store& from, Store& to);

/// Result of CheckDataDirectory.
struct IntegrityReport {
  /// Damage: SQLite integrity_check failures, records whose artifact is
  /// missing, truncated, fails its CRC-32 or has the wrong shape or
  /// non-finite values. Any entry means the directory is not healthy.
  std::vector<std::string> problems;
  /// Crash leftovers (temporary and unreferenced artifact files): harmless,
  /// never served, removed by the next OpenSqliteStore.
  std::vector<std::string> leftovers;
  int64_t datasets = 0, kernels = 0, jobs = 0;  ///< records checked
  int64_t artifact_bytes = 0;                   ///< bytes checksummed
};

/// Offline check of a data directory (`kls-server --check`): SQLite
/// `PRAGMA integrity_check`, then every data-set and kernel artifact (header,
/// CRC-32 over every byte, section shapes against the record, finiteness of
/// kernel embeddings), then files no record names. Modifies nothing (no
/// schema creation, no cleanup); NOT_FOUND when `data_dir/kls.db` does not
/// exist. Run it while no server owns the directory.
StatusOr<IntegrityReport> CheckDataDirectory(const std::string& data_dir);

/// The data set `ref` names: an id, or else the newest data set of that name
/// (the rule every RPC and client that takes a data set follows).
/// INVALID_ARGUMENT when empty, NOT_FOUND naming `field` and `ref` when none.
StatusOr<DatasetRecord> ResolveDataset(Store* store, const std::string& ref, const char* field);

}  // namespace kls::store
