// Store: durable metadata (data sets, jobs, kernels, versions, aliases) plus
// artifact files for the matrices. One interface so that a networked backend
// (PostgreSQL for several replicas) can follow the embedded SQLite one.
//
// Thread safety: every method is safe to call concurrently.
#pragma once

#include <cstdint>
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
};

struct JobRecord {
  std::string id;
  std::string dataset_id;
  std::string method;          ///< e.g. "kl_admm"
  std::string options_json;    ///< the solver options as submitted (server serializes)
  JobState state = JobState::kQueued;
  int priority = 0;            ///< higher runs first
  int attempts = 0;            ///< times the job was started
  double deadline_seconds = 0; ///< per-job time limit; 0 = none
  std::string error;           ///< reason for kFailed
  std::string kernel_name;     ///< output kernel name
  int64_t kernel_version = 0;  ///< set on success
  std::string progress_json;   ///< last persisted progress (throttled)
  int64_t created_unix_ms = 0, started_unix_ms = 0, finished_unix_ms = 0;
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

  // Jobs.
  virtual StatusOr<JobRecord> CreateJob(JobRecord job) = 0;  ///< assigns id and created time
  virtual StatusOr<JobRecord> GetJob(const std::string& id) = 0;
  virtual Status UpdateJob(const JobRecord& job) = 0;
  /// Jobs matching the filter, oldest first; *next_token empty on the last page.
  virtual StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& f, std::string* next_token) = 0;

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

}  // namespace kls::store
