// Embedded Store: SQLite (WAL, synchronous=FULL) for metadata, artifact files
// for matrices. Write order for durability: artifact first (atomic rename),
// then the metadata row in a transaction; a crash between the two leaves an
// unreferenced artifact, which CheckIntegrity reports and GC may remove, but
// never a record pointing at a missing or torn file.
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>

#include "server/store/artifact.h"
#include "server/store/listener_slot.h"
#include "server/store/record_artifacts.h"
#include "server/store/store.h"
#include <zlib.h>


namespace kls::store {

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued: return "queued";
    case JobState::kRunning: return "running";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
  }
  return "unknown";
}

StatusOr<JobState> ParseJobState(const std::string& s) {
  for (JobState j : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled}) {
    if (s == JobStateName(j)) return j;
  }
  return InvalidArgumentError("state = \"" + s + "\" is not one of queued, running, succeeded, failed, cancelled");
}

namespace {

using TxLock = std::lock_guard<std::recursive_mutex>;

namespace fs = std::filesystem;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The status of a failed SQLite call: RESOURCE_EXHAUSTED naming the data
// directory when its file system is full (SQLITE_FULL, or an I/O error whose
// errno is ENOSPC / EDQUOT), else INTERNAL.
Status SqliteError(sqlite3* db, const std::string& what) {
  const int code = sqlite3_extended_errcode(db) & 0xff;
  const int err = sqlite3_system_errno(db);
  if (code == SQLITE_FULL || (code == SQLITE_IOERR && (err == ENOSPC || err == EDQUOT))) {
    const char* file = sqlite3_db_filename(db, "main");
    return DiskFull(file ? fs::path(file).parent_path().string() : std::string("the data directory"),
                    what + ": " + sqlite3_errmsg(db));
  }
  return InternalError(what + ": " + sqlite3_errmsg(db));
}

// Statement wrapper: prepare, bind by position, step, finalize on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  int Step() { return sqlite3_step(stmt_); }
  sqlite3_stmt* raw() { return stmt_; }
  std::string Text(int c) const {
    const unsigned char* t = sqlite3_column_text(stmt_, c);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt_, c)) : "";
  }
  int64_t Int(int c) const { return sqlite3_column_int64(stmt_, c); }
  std::string Blob(int c) const {
    const void* b = sqlite3_column_blob(stmt_, c);
    return b ? std::string(static_cast<const char*>(b), sqlite3_column_bytes(stmt_, c)) : "";
  }
  double Real(int c) const { return sqlite3_column_double(stmt_, c); }
  Status Error(const std::string& what) const { return SqliteError(db_, what); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS datasets (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, num_points INTEGER, dim INTEGER,
  num_classes INTEGER, num_constraints INTEGER, artifact TEXT NOT NULL, created_ms INTEGER);
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, dataset_id TEXT, method TEXT,
  options_json TEXT, state TEXT, priority INTEGER, attempts INTEGER, deadline_seconds REAL,
  error TEXT, kernel_name TEXT, kernel_version INTEGER, progress_json TEXT,
  created_ms INTEGER, started_ms INTEGER, finished_ms INTEGER);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS kernels (
  name TEXT NOT NULL, version INTEGER NOT NULL, job_id TEXT, dataset_id TEXT, method TEXT,
  num_points INTEGER, rank INTEGER, summary_json TEXT, artifact TEXT NOT NULL, created_ms INTEGER,
  PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS aliases (
  name TEXT NOT NULL, alias TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (name, alias));
CREATE TABLE IF NOT EXISTS checkpoints (
  job_id TEXT PRIMARY KEY, attempt INTEGER, iteration INTEGER, solver TEXT, bytes BLOB, crc32 INTEGER,
  created_ms INTEGER);
CREATE TABLE IF NOT EXISTS kernel_names (name TEXT PRIMARY KEY, last_version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS dataset_attributes (
  dataset_id TEXT PRIMARY KEY, version INTEGER NOT NULL, summary TEXT NOT NULL, bytes BLOB, crc32 INTEGER);
)sql";

/// Columns added after the first schema (lease, owner, counted failures;
/// then why the last attempt ended, lost attempts and the re-queue back-off);
/// added to an older kls.db at open. Each has a default, so an older binary's
/// inserts (which name only the columns it knows) still work.
constexpr const char* kJobLeaseColumns[][2] = {
    {"owner", "TEXT DEFAULT ''"},          {"lease_expires_ms", "INTEGER DEFAULT 0"},
    {"counted_failures", "INTEGER DEFAULT 0"}, {"last_attempt_end", "TEXT DEFAULT ''"},
    {"lost_attempts", "INTEGER DEFAULT 0"},    {"not_before_ms", "INTEGER DEFAULT 0"}};

class SqliteStore final : public Store {
 public:
  ~SqliteStore() override {
    if (db_) sqlite3_close(db_);
  }

  /// kServe: create what is missing, apply the schema, remove crash
  /// leftovers (OpenSqliteStore). kCheck: open an existing store and change
  /// nothing (CheckDataDirectory).
  enum class Mode { kServe, kCheck };

  Status Open(const std::string& data_dir, Mode mode = Mode::kServe) {
    dir_ = data_dir;
    artifacts_ = (fs::path(data_dir) / "artifacts").string();
    const std::string db_path = (fs::path(data_dir) / "kls.db").string();
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX;
    if (mode == Mode::kServe) {
      std::error_code ec;
      fs::create_directories(artifacts_, ec);
      if (ec) return InternalError("creating \"" + artifacts_ + "\": " + ec.message());
      flags |= SQLITE_OPEN_CREATE;
    } else if (!fs::exists(db_path)) {
      return NotFoundError("\"" + db_path + "\" does not exist; \"" + data_dir + "\" is not a kls data directory");
    }
    if (sqlite3_open_v2(db_path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      return InternalError("opening \"" + db_path + "\": " + (db_ ? sqlite3_errmsg(db_) : "out of memory"));
    }
    sqlite3_busy_timeout(db_, 5000);
    if (mode == Mode::kCheck) return OkStatus();
    KLS_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"));
    KLS_RETURN_IF_ERROR(Exec("PRAGMA integrity_check;"));
    KLS_RETURN_IF_ERROR(Exec(kSchema));
    KLS_RETURN_IF_ERROR(AddMissingJobColumns());
    // Crash leftovers (see OpenSqliteStore): only now, before any write of
    // this process, can a file no record names not be a write in progress.
    for (const std::string& f : Leftovers()) {
      std::error_code ec;
      fs::remove(ArtifactPath(f), ec);
    }
    return OkStatus();
  }

  /// Files in artifacts/ that no record names: temporary files of an
  /// interrupted WriteArtifact and artifacts whose record was never committed
  /// (or was deleted before the file).
  std::vector<std::string> Leftovers() {
    std::set<std::string> referenced;
    for (const char* sql : {"SELECT artifact FROM datasets", "SELECT artifact FROM kernels"}) {
      Stmt s(db_, sql);
      while (s.Step() == SQLITE_ROW) referenced.insert(s.Text(0));
    }
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(artifacts_, ec)) {
      const std::string f = entry.path().filename().string();
      if (!referenced.count(f)) out.push_back(f);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  /// The offline check (CheckDataDirectory); reads only.
  StatusOr<IntegrityReport> Check() {
    IntegrityReport report;
    {
      Stmt ic(db_, "PRAGMA integrity_check");
      if (!ic.ok()) return ic.Error("PRAGMA integrity_check");
      int rc;
      while ((rc = ic.Step()) == SQLITE_ROW) {
        if (ic.Text(0) != "ok") report.problems.push_back("sqlite integrity_check: " + ic.Text(0));
      }
      if (rc != SQLITE_DONE) report.problems.push_back("sqlite integrity_check did not complete: " +
                                                       std::string(sqlite3_errmsg(db_)));
    }
    {
      Stmt s(db_, "SELECT id, num_points, dim, artifact FROM datasets ORDER BY id");
      if (!s.ok()) return s.Error("reading data sets");
      while (s.Step() == SQLITE_ROW) {
        ++report.datasets;
        const std::string what = "data set " + s.Text(0);
        auto a = MappedArtifact::Open(ArtifactPath(s.Text(3)));
        if (!a.ok()) {
          report.problems.push_back(what + ": " + a.status().ToString());
          continue;
        }
        report.artifact_bytes += static_cast<int64_t>((*a)->file_bytes());
        const auto* f = (*a)->Find("features");
        if (!f || f->dtype != DType::kFloat64 || f->rows != static_cast<uint64_t>(s.Int(1)) ||
            f->cols != static_cast<uint64_t>(s.Int(2))) {
          report.problems.push_back(what + ": features section missing or not " + std::to_string(s.Int(1)) + " x " +
                                    std::to_string(s.Int(2)) + " float64");
        }
      }
    }
    {
      Stmt s(db_, "SELECT name, version, num_points, rank, artifact FROM kernels ORDER BY name, version");
      if (!s.ok()) return s.Error("reading kernels");
      while (s.Step() == SQLITE_ROW) {
        ++report.kernels;
        const std::string what = "kernel " + s.Text(0) + " v" + std::to_string(s.Int(1));
        auto a = MappedArtifact::Open(ArtifactPath(s.Text(4)));
        if (!a.ok()) {
          report.problems.push_back(what + ": " + a.status().ToString());
          continue;
        }
        report.artifact_bytes += static_cast<int64_t>((*a)->file_bytes());
        const auto* e = (*a)->Find("embedding");
        if (!e || e->dtype != DType::kFloat64 || e->rows != static_cast<uint64_t>(s.Int(2)) ||
            e->cols != static_cast<uint64_t>(s.Int(3)) || e->rows * e->cols == 0) {
          report.problems.push_back(what + ": embedding section missing or not " + std::to_string(s.Int(2)) + " x " +
                                    std::to_string(s.Int(3)) + " float64");
          continue;
        }
        const uint64_t count = e->rows * e->cols;
        for (uint64_t t = 0; t < count; ++t) {
          double v;
          std::memcpy(&v, e->data + 8 * t, 8);
          if (!std::isfinite(v)) {
            report.problems.push_back(what + ": embedding value " + std::to_string(t) + " = " + FormatNumber(v) +
                                      " is not finite");
            break;
          }
        }
      }
    }
    {
      Stmt s(db_, "SELECT name, alias, version FROM aliases WHERE NOT EXISTS (SELECT 1 FROM kernels k WHERE "
                  "k.name = aliases.name AND k.version = aliases.version)");
      if (!s.ok()) return s.Error("reading aliases");
      while (s.Step() == SQLITE_ROW) {
        report.problems.push_back("alias " + s.Text(0) + "@" + s.Text(1) + " names missing version " +
                                  std::to_string(s.Int(2)));
      }
    }
    {
      Stmt s(db_, "SELECT COUNT(*) FROM jobs");
      if (!s.ok()) return s.Error("reading jobs");
      if (s.Step() == SQLITE_ROW) report.jobs = s.Int(0);
    }
    report.leftovers = Leftovers();
    return report;
  }

  // ---- data sets ---------------------------------------------------------
  StatusOr<DatasetRecord> PutDataset(const std::string& name, const StoredDataset& d) override {
    DatasetRecord r;
    r.id = NewId("ds");
    r.name = name;
    r.num_points = d.data.num_points();
    r.dim = d.data.dim();
    r.num_classes = d.data.num_classes();
    r.num_constraints = d.constraints.size();
    r.created_unix_ms = NowMs();
    const std::string artifact = r.id + ".art";
    KLS_RETURN_IF_ERROR(WriteDatasetArtifact(ArtifactPath(artifact), d));
    TxLock lock(tx_mu_);
    Stmt s(db_, "INSERT INTO datasets VALUES (?,?,?,?,?,?,?,?)");
    s.Bind(1, r.id).Bind(2, r.name).Bind(3, r.num_points).Bind(4, r.dim).Bind(5, r.num_classes)
        .Bind(6, r.num_constraints).Bind(7, artifact).Bind(8, r.created_unix_ms);
    if (s.Step() != SQLITE_DONE) return s.Error("inserting data set");
    return r;
  }

  StatusOr<DatasetRecord> GetDatasetRecord(const std::string& id) override {
    std::string artifact;
    return ReadDataset(id, &artifact);
  }

  StatusOr<StoredDataset> LoadDataset(const std::string& id) override {
    std::string artifact;
    KLS_ASSIGN_OR_RETURN(DatasetRecord r, ReadDataset(id, &artifact));
    KLS_ASSIGN_OR_RETURN(auto a, MappedArtifact::Open(ArtifactPath(artifact)));
    return DecodeDatasetArtifact(*a, r);
  }

  StatusOr<std::vector<DatasetRecord>> ListDatasets() override {
    TxLock lock(tx_mu_);
    Stmt s(db_, "SELECT id FROM datasets ORDER BY created_ms, id");
    std::vector<DatasetRecord> out;
    std::vector<std::string> ids;
    while (s.Step() == SQLITE_ROW) ids.push_back(s.Text(0));
    for (const auto& id : ids) {
      KLS_ASSIGN_OR_RETURN(DatasetRecord r, GetDatasetRecord(id));
      out.push_back(std::move(r));
    }
    return out;
  }

  Status DeleteDataset(const std::string& id) override {
    TxLock lock(tx_mu_);
    std::string artifact;
    KLS_RETURN_IF_ERROR(ReadDataset(id, &artifact).status());
    KLS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Stmt s(db_, "DELETE FROM datasets WHERE id = ?");
    s.Bind(1, id);
    Stmt a(db_, "DELETE FROM dataset_attributes WHERE dataset_id = ?");
    a.Bind(1, id);
    if (s.Step() != SQLITE_DONE || a.Step() != SQLITE_DONE) {
      const Status error = s.Error("deleting data set");
      (void)Exec("ROLLBACK");
      return error;
    }
    KLS_RETURN_IF_ERROR(Exec("COMMIT"));
    std::error_code ec;
    fs::remove(ArtifactPath(artifact), ec);
    Notify(StoreEvent::Kind::kDatasetChanged, id);
    return OkStatus();
  }

  StatusOr<int64_t> PutDatasetAttributes(const std::string& dataset_id, const std::string& summary,
                                         const std::string& bytes) override {
    TxLock lock(tx_mu_);
    std::string artifact;
    KLS_RETURN_IF_ERROR(ReadDataset(dataset_id, &artifact).status());
    int64_t version = 1;
    {
      Stmt v(db_, "SELECT version FROM dataset_attributes WHERE dataset_id = ?");
      v.Bind(1, dataset_id);
      if (v.Step() == SQLITE_ROW) version = v.Int(0) + 1;
    }
    Stmt s(db_, "INSERT OR REPLACE INTO dataset_attributes VALUES (?,?,?,?,?)");
    s.Bind(1, dataset_id).Bind(2, version).Bind(3, bytes.empty() ? std::string() : summary);
    sqlite3_bind_blob(s.raw(), 4, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
    s.Bind(5, static_cast<int64_t>(Crc(bytes)));
    if (s.Step() != SQLITE_DONE) return s.Error("writing the attributes of data set " + dataset_id);
    Notify(StoreEvent::Kind::kDatasetChanged, dataset_id);
    return version;
  }

  StatusOr<std::optional<StoredAttributes>> GetDatasetAttributes(const std::string& dataset_id) override {
    TxLock lock(tx_mu_);
    std::string artifact;
    KLS_RETURN_IF_ERROR(ReadDataset(dataset_id, &artifact).status());
    Stmt s(db_, "SELECT version, summary, bytes, crc32 FROM dataset_attributes WHERE dataset_id = ?");
    s.Bind(1, dataset_id);
    if (s.Step() != SQLITE_ROW) return std::optional<StoredAttributes>();
    StoredAttributes a;
    a.version = s.Int(0);
    a.summary = s.Text(1);
    a.bytes = s.Blob(2);
    if (static_cast<int64_t>(Crc(a.bytes)) != s.Int(3)) {
      return DataLossError("the attributes of data set " + dataset_id + " fail their CRC-32");
    }
    if (a.bytes.empty()) return std::optional<StoredAttributes>();
    return std::optional<StoredAttributes>(std::move(a));
  }

  // ---- jobs ----------------------------------------------------------------
  StatusOr<JobRecord> CreateJob(JobRecord job) override {
    job.id = NewId("job");
    job.created_unix_ms = NowMs();
    if (job.kernel_name.empty()) job.kernel_name = job.id;
    TxLock lock(tx_mu_);
    Stmt s(db_,
           "INSERT INTO jobs (id, dataset_id, method, options_json, state, priority, attempts, "
           "deadline_seconds, error, kernel_name, kernel_version, progress_json, created_ms, started_ms, "
           "finished_ms, owner, lease_expires_ms, counted_failures, last_attempt_end, lost_attempts, not_before_ms) "
           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    BindJob(s, job);
    if (s.Step() != SQLITE_DONE) return s.Error("inserting job");
    if (job.state == JobState::kQueued) Notify(StoreEvent::Kind::kJobQueued, job.id);
    return job;
  }

  StatusOr<JobRecord> GetJob(const std::string& id) override {
    TxLock lock(tx_mu_);
    Stmt s(db_, (std::string(kJobColumnsNoFrom) + " FROM jobs WHERE id = ?").c_str());
    s.Bind(1, id);
    if (s.Step() != SQLITE_ROW) return NotFoundError("job \"" + id + "\" does not exist");
    return ReadJob(s);
  }

  Status UpdateJob(const JobRecord& job) override {
    TxLock lock(tx_mu_);
    JobRecord j = job;
    ClearLeaseUnlessRunning(&j);
    Stmt s(db_, (std::string(kUpdateJobSql) + " WHERE id=?").c_str());
    BindJob(s, j);
    s.Bind(kUpdateJobIdParam, j.id);
    if (s.Step() != SQLITE_DONE) return s.Error("updating job");
    if (sqlite3_changes(db_) == 0) return NotFoundError("job \"" + job.id + "\" does not exist");
    KLS_RETURN_IF_ERROR(AfterJobWrite(j));
    return OkStatus();
  }

  StatusOr<int64_t> CountJobs(JobState state) override {
    TxLock lock(tx_mu_);
    Stmt s(db_, "SELECT COUNT(*) FROM jobs WHERE state = ?");
    s.Bind(1, std::string(JobStateName(state)));
    if (s.Step() != SQLITE_ROW) return s.Error("counting jobs");
    return s.Int(0);
  }

  // ---- shared queue (one process here: the data directory is locked) -------
  StatusOr<std::optional<JobRecord>> ClaimJob(const std::string& replica_id, int64_t lease_ms) override {
    TxLock lock(tx_mu_);
    std::string id;
    {
      // A job in its back-off after a lost process waits for not_before_ms.
      Stmt q(db_,
             "SELECT id FROM jobs WHERE state = 'queued' AND COALESCE(not_before_ms, 0) <= ? "
             "ORDER BY priority DESC, seq LIMIT 1");
      q.Bind(1, NowMs());
      const int rc = q.Step();
      if (rc == SQLITE_DONE) return std::optional<JobRecord>();
      if (rc != SQLITE_ROW) return q.Error("claiming a job");
      id = q.Text(0);
    }
    KLS_ASSIGN_OR_RETURN(JobRecord job, GetJob(id));
    const int64_t now = NowMs();
    job.state = JobState::kRunning;
    job.attempts += 1;
    job.owner = replica_id;
    job.lease_expires_unix_ms = now + lease_ms;
    job.not_before_unix_ms = 0;
    job.started_unix_ms = now;
    job.finished_unix_ms = 0;
    job.error.clear();
    job.progress_json.clear();
    Stmt s(db_, (std::string(kUpdateJobSql) + " WHERE id=? AND state='queued'").c_str());
    BindJob(s, job);
    s.Bind(kUpdateJobIdParam, job.id);
    if (s.Step() != SQLITE_DONE) return s.Error("claiming job " + id);
    Notify(StoreEvent::Kind::kJobChanged, job.id);
    return std::optional<JobRecord>(std::move(job));
  }

  StatusOr<std::vector<std::string>> RenewLeases(const std::string& replica_id, int64_t lease_ms) override {
    TxLock lock(tx_mu_);
    {
      Stmt u(db_, "UPDATE jobs SET lease_expires_ms = ? WHERE state = 'running' AND owner = ?");
      u.Bind(1, NowMs() + lease_ms).Bind(2, replica_id);
      if (u.Step() != SQLITE_DONE) return u.Error("renewing leases");
    }
    Stmt q(db_, "SELECT id FROM jobs WHERE state = 'running' AND owner = ? ORDER BY seq");
    q.Bind(1, replica_id);
    std::vector<std::string> out;
    while (q.Step() == SQLITE_ROW) out.push_back(q.Text(0));
    return out;
  }

  Status UpdateJobFenced(const JobRecord& job, const JobFence& fence) override {
    TxLock lock(tx_mu_);
    KLS_RETURN_IF_ERROR(CheckFenceLocked(job.id, fence));
    JobRecord j = job;
    ClearLeaseUnlessRunning(&j);
    Stmt s(db_, (std::string(kUpdateJobSql) + " WHERE id=?").c_str());
    BindJob(s, j);
    s.Bind(kUpdateJobIdParam, j.id);
    if (s.Step() != SQLITE_DONE) return s.Error("updating job");
    return AfterJobWrite(j);
  }

  StatusOr<KernelRecord> CommitJobKernel(JobRecord job, const JobFence& fence, KernelRecord record,
                                         const LearnedKernel& kernel,
                                         const std::vector<Attachment>& attachments) override {
    {
      TxLock lock(tx_mu_);
      KLS_RETURN_IF_ERROR(CheckFenceLocked(job.id, fence));
    }
    std::lock_guard<std::mutex> klock(kernel_mu_);
    KLS_ASSIGN_OR_RETURN(PreparedKernel prepared, PrepareKernel(std::move(record), kernel, attachments));
    TxLock lock(tx_mu_);
    auto discard = [&](Status s) {
      std::error_code ec;
      fs::remove(ArtifactPath(prepared.artifact), ec);
      return s;
    };
    if (Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return discard(s);
    Status s = CheckFenceLocked(job.id, fence);
    if (s.ok()) s = InsertKernelRow(prepared);
    if (s.ok()) {
      job.state = JobState::kSucceeded;
      job.kernel_name = prepared.record.name;
      job.kernel_version = prepared.record.version;
      ClearLeaseUnlessRunning(&job);
      Stmt u(db_, (std::string(kUpdateJobSql) + " WHERE id=?").c_str());
      BindJob(u, job);
      u.Bind(kUpdateJobIdParam, job.id);
      if (u.Step() != SQLITE_DONE) s = u.Error("updating job");
    }
    if (s.ok()) s = DeleteCheckpointLocked(job.id);
    if (s.ok()) s = Exec("COMMIT");
    if (!s.ok()) {
      (void)Exec("ROLLBACK");
      return discard(s);
    }
    Notify(StoreEvent::Kind::kKernelChanged, prepared.record.name);
    Notify(StoreEvent::Kind::kJobChanged, job.id);
    return prepared.record;
  }

  StatusOr<std::vector<JobRecord>> ListExpiredLeases() override {
    TxLock lock(tx_mu_);
    Stmt s(db_, (std::string(kJobColumnsNoFrom) +
                 " FROM jobs WHERE state = 'running' AND lease_expires_ms < ? ORDER BY seq").c_str());
    s.Bind(1, NowMs());
    std::vector<JobRecord> out;
    while (s.Step() == SQLITE_ROW) out.push_back(ReadJob(s));
    return out;
  }

  Status PutCheckpoint(const CheckpointRecord& c, const JobFence& fence) override {
    TxLock lock(tx_mu_);
    KLS_RETURN_IF_ERROR(CheckFenceLocked(c.job_id, fence));
    Stmt s(db_, "INSERT OR REPLACE INTO checkpoints VALUES (?,?,?,?,?,?,?)");
    s.Bind(1, c.job_id).Bind(2, c.attempt).Bind(3, c.iteration).Bind(4, c.solver);
    sqlite3_bind_blob(s.raw(), 5, c.bytes.data(), static_cast<int>(c.bytes.size()), SQLITE_TRANSIENT);
    s.Bind(6, static_cast<int64_t>(Crc(c.bytes))).Bind(7, NowMs());
    if (s.Step() != SQLITE_DONE) return s.Error("writing checkpoint of job " + c.job_id);
    return OkStatus();
  }

  StatusOr<std::optional<CheckpointRecord>> GetCheckpoint(const std::string& job_id) override {
    TxLock lock(tx_mu_);
    Stmt s(db_, "SELECT job_id, attempt, iteration, solver, bytes, crc32, created_ms FROM checkpoints WHERE job_id = ?");
    s.Bind(1, job_id);
    if (s.Step() != SQLITE_ROW) return std::optional<CheckpointRecord>();
    CheckpointRecord c;
    c.job_id = s.Text(0);
    c.attempt = static_cast<int>(s.Int(1));
    c.iteration = s.Int(2);
    c.solver = s.Text(3);
    c.bytes = s.Blob(4);
    c.created_unix_ms = s.Int(6);
    if (static_cast<int64_t>(Crc(c.bytes)) != s.Int(5)) {
      return DataLossError("checkpoint of job " + job_id + " fails its CRC-32");
    }
    return std::optional<CheckpointRecord>(std::move(c));
  }

  void SetListener(std::function<void(const StoreEvent&)> listener) override { listener_.Set(std::move(listener)); }

  Status Ping() override {
    TxLock lock(tx_mu_);
    Stmt s(db_, "SELECT 1");
    if (s.Step() != SQLITE_ROW) return Status(StatusCode::kUnavailable, "the embedded store does not answer");
    return OkStatus();
  }

  StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& f, std::string* next_token) override {
    if (f.page_size < 1 || f.page_size > 1000) {
      return InvalidArgumentError("page_size = " + std::to_string(f.page_size) + " must be in [1, 1000]");
    }
    int64_t after = 0;
    if (!f.page_token.empty()) {
      char* end = nullptr;
      after = std::strtoll(f.page_token.c_str(), &end, 10);
      if (*end != '\0' || after < 0) return InvalidArgumentError("page_token = \"" + f.page_token + "\" is not valid");
    }
    std::string sql = std::string(kJobColumnsNoFrom) + ", seq FROM jobs WHERE seq > ?";
    if (f.state) sql += " AND state = ?";
    if (!f.dataset_id.empty()) sql += " AND dataset_id = ?";
    sql += " ORDER BY seq LIMIT ?";
    TxLock lock(tx_mu_);
    Stmt s(db_, sql.c_str());
    int b = 1;
    s.Bind(b++, after);
    if (f.state) s.Bind(b++, std::string(JobStateName(*f.state)));
    if (!f.dataset_id.empty()) s.Bind(b++, f.dataset_id);
    s.Bind(b++, f.page_size + 1);
    std::vector<JobRecord> out;
    int64_t last_seq = 0;
    bool more = false;
    while (s.Step() == SQLITE_ROW) {
      if (static_cast<int>(out.size()) == f.page_size) {
        more = true;
        break;
      }
      out.push_back(ReadJob(s));
      last_seq = s.Int(kJobSeqColumn);
    }
    if (next_token) *next_token = more ? std::to_string(last_seq) : "";
    return out;
  }

  // ---- kernels -------------------------------------------------------------
  StatusOr<KernelRecord> PutKernel(KernelRecord r, const LearnedKernel& kernel,
                                   const std::vector<Attachment>& attachments) override {
    std::lock_guard<std::mutex> lock(kernel_mu_);  // version numbering is read-then-write
    KLS_ASSIGN_OR_RETURN(PreparedKernel prepared, PrepareKernel(std::move(r), kernel, attachments));
    TxLock tx(tx_mu_);
    if (Status s = InsertKernelRow(prepared); !s.ok()) {
      std::error_code ec;
      fs::remove(ArtifactPath(prepared.artifact), ec);
      return s;
    }
    Notify(StoreEvent::Kind::kKernelChanged, prepared.record.name);
    return prepared.record;
  }

  StatusOr<KernelRecord> GetKernelRecord(const std::string& name, int64_t version,
                                         const std::string& alias) override {
    std::string artifact;
    return ReadKernel(name, version, alias, &artifact);
  }

  StatusOr<LearnedKernel> LoadKernel(const std::string& name, int64_t version) override {
    KLS_ASSIGN_OR_RETURN(StoredModel m, LoadModel(name, version));
    return std::move(m.kernel);
  }

  StatusOr<StoredModel> LoadModel(const std::string& name, int64_t version) override {
    std::string artifact;
    KLS_ASSIGN_OR_RETURN(KernelRecord r, ReadKernel(name, version, "", &artifact));
    KLS_ASSIGN_OR_RETURN(auto a, MappedArtifact::Open(ArtifactPath(artifact)));
    return DecodeKernelArtifact(*a, r);
  }

  StatusOr<std::vector<KernelRecord>> ListKernels(const std::string& name) override {
    TxLock lock(tx_mu_);
    Stmt s(db_, name.empty() ? "SELECT name, version FROM kernels ORDER BY name, version"
                             : "SELECT name, version FROM kernels WHERE name = ? ORDER BY version");
    if (!name.empty()) s.Bind(1, name);
    std::vector<std::pair<std::string, int64_t>> keys;
    while (s.Step() == SQLITE_ROW) keys.emplace_back(s.Text(0), s.Int(1));
    std::vector<KernelRecord> out;
    for (auto& [n, v] : keys) {
      KLS_ASSIGN_OR_RETURN(KernelRecord r, GetKernelRecord(n, v, ""));
      out.push_back(std::move(r));
    }
    return out;
  }

  Status DeleteKernel(const std::string& name, int64_t version) override {
    TxLock lock(tx_mu_);
    std::vector<std::string> files;
    {
      Stmt q(db_, version == 0 ? "SELECT artifact FROM kernels WHERE name = ?"
                               : "SELECT artifact FROM kernels WHERE name = ? AND version = ?");
      q.Bind(1, name);
      if (version) q.Bind(2, version);
      while (q.Step() == SQLITE_ROW) files.push_back(q.Text(0));
    }
    if (files.empty()) {
      return NotFoundError("kernel \"" + name + "\"" + (version ? " version " + std::to_string(version) : "") +
                           " does not exist");
    }
    // The aliases and the records in one transaction: a crash leaves both or
    // neither. The files go after the commit; a crash before their removal
    // leaves leftovers that the next open removes.
    KLS_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status s = OkStatus();
    {
      Stmt a(db_, version == 0 ? "DELETE FROM aliases WHERE name = ?"
                               : "DELETE FROM aliases WHERE name = ? AND version = ?");
      a.Bind(1, name);
      if (version) a.Bind(2, version);
      if (a.Step() != SQLITE_DONE) s = a.Error("deleting aliases");
    }
    if (s.ok()) {
      Stmt d(db_, version == 0 ? "DELETE FROM kernels WHERE name = ?"
                               : "DELETE FROM kernels WHERE name = ? AND version = ?");
      d.Bind(1, name);
      if (version) d.Bind(2, version);
      if (d.Step() != SQLITE_DONE) s = d.Error("deleting kernel");
    }
    if (s.ok()) s = Exec("COMMIT");
    if (!s.ok()) {
      (void)Exec("ROLLBACK");
      return s;
    }
    for (const auto& f : files) {
      std::error_code ec;
      fs::remove(ArtifactPath(f), ec);
    }
    Notify(StoreEvent::Kind::kKernelChanged, name);
    return OkStatus();
  }

  Status SetAlias(const std::string& name, const std::string& alias, int64_t version) override {
    if (alias.empty()) return InvalidArgumentError("alias is empty");
    // The check and the insert under one lock: a concurrent DeleteKernel
    // cannot slip between them and leave the alias naming a deleted version.
    TxLock lock(tx_mu_);
    KLS_RETURN_IF_ERROR(GetKernelRecord(name, version, "").status());
    Stmt s(db_, "INSERT OR REPLACE INTO aliases VALUES (?,?,?)");
    s.Bind(1, name).Bind(2, alias).Bind(3, version);
    if (s.Step() != SQLITE_DONE) return s.Error("setting alias");
    Notify(StoreEvent::Kind::kKernelChanged, name);
    return OkStatus();
  }

  StatusOr<std::vector<AliasRecord>> ListAliases() override {
    TxLock lock(tx_mu_);
    Stmt s(db_, "SELECT name, alias, version FROM aliases ORDER BY name, alias");
    std::vector<AliasRecord> out;
    while (s.Step() == SQLITE_ROW) out.push_back({s.Text(0), s.Text(1), s.Int(2)});
    return out;
  }
  Status ImportDataset(const DatasetRecord&, const StoredDataset&) override { return NotAShared("ImportDataset"); }
  Status ImportKernel(const KernelRecord&, const StoredModel&) override { return NotAShared("ImportKernel"); }
  Status ImportJob(const JobRecord&) override { return NotAShared("ImportJob"); }

  StatusOr<std::vector<std::string>> CheckIntegrity() override {
    TxLock lock(tx_mu_);
    std::vector<std::string> problems;
    std::set<std::string> referenced;
    for (const char* sql : {"SELECT artifact FROM datasets", "SELECT artifact FROM kernels"}) {
      Stmt s(db_, sql);
      while (s.Step() == SQLITE_ROW) {
        const std::string f = s.Text(0);
        referenced.insert(f);
        Status st = VerifyArtifact(ArtifactPath(f));
        if (!st.ok()) problems.push_back(st.ToString());
      }
    }
    Stmt ic(db_, "PRAGMA integrity_check");
    if (ic.Step() == SQLITE_ROW && ic.Text(0) != "ok") problems.push_back("sqlite: " + ic.Text(0));
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(artifacts_, ec)) {
      const std::string f = entry.path().filename().string();
      if (!referenced.count(f)) problems.push_back("unreferenced artifact file " + f);
    }
    return problems;
  }

 private:
  static constexpr const char* kJobColumnsNoFrom =
      "SELECT id, dataset_id, method, options_json, state, priority, attempts, deadline_seconds, error, "
      "kernel_name, kernel_version, progress_json, created_ms, started_ms, finished_ms, owner, "
      "lease_expires_ms, counted_failures, COALESCE(last_attempt_end, ''), COALESCE(lost_attempts, 0), "
      "COALESCE(not_before_ms, 0)";
  static constexpr int kJobSeqColumn = 21;  ///< ListJobs appends seq after the job columns
  static constexpr const char* kUpdateJobSql =
      "UPDATE jobs SET id=?, dataset_id=?, method=?, options_json=?, state=?, priority=?, attempts=?, "
      "deadline_seconds=?, error=?, kernel_name=?, kernel_version=?, progress_json=?, created_ms=?, "
      "started_ms=?, finished_ms=?, owner=?, lease_expires_ms=?, counted_failures=?, last_attempt_end=?, "
      "lost_attempts=?, not_before_ms=?";
  static constexpr int kUpdateJobIdParam = 22;  ///< the "WHERE id=?" after kUpdateJobSql's 21 columns

  struct PreparedKernel {
    KernelRecord record;
    std::string artifact;
  };

  /// Numbers the version and writes the artifact file. Requires kernel_mu_.
  StatusOr<PreparedKernel> PrepareKernel(KernelRecord r, const LearnedKernel& kernel,
                                         const std::vector<Attachment>& attachments) {
    if (r.name.empty()) return InvalidArgumentError("kernel name is empty");
    {
      TxLock lock(tx_mu_);
      // A version number is never given twice, even after its kernel was
      // deleted: kernel_names remembers the last one issued per name.
      Stmt s(db_,
             "SELECT MAX(COALESCE((SELECT MAX(version) FROM kernels WHERE name = ?1), 0), "
             "COALESCE((SELECT last_version FROM kernel_names WHERE name = ?1), 0))");
      s.Bind(1, r.name);
      if (s.Step() != SQLITE_ROW) return s.Error("reading kernel versions");
      r.version = s.Int(0) + 1;
    }
    r.num_points = kernel.num_points();
    r.rank = kernel.rank();
    r.created_unix_ms = NowMs();
    PreparedKernel out;
    out.artifact = NewId("k") + ".art";
    KLS_RETURN_IF_ERROR(WriteKernelArtifact(ArtifactPath(out.artifact), kernel, attachments));
    out.record = std::move(r);
    return out;
  }

  Status InsertKernelRow(const PreparedKernel& p) {
    const KernelRecord& r = p.record;
    Stmt s(db_, "INSERT INTO kernels VALUES (?,?,?,?,?,?,?,?,?,?)");
    s.Bind(1, r.name).Bind(2, r.version).Bind(3, r.job_id).Bind(4, r.dataset_id).Bind(5, r.method)
        .Bind(6, r.num_points).Bind(7, r.rank).Bind(8, r.summary_json).Bind(9, p.artifact).Bind(10, r.created_unix_ms);
    if (s.Step() != SQLITE_DONE) return s.Error("inserting kernel");
    Stmt n(db_,
           "INSERT INTO kernel_names VALUES (?, ?) ON CONFLICT (name) DO UPDATE "
           "SET last_version = MAX(last_version, excluded.last_version)");
    n.Bind(1, r.name).Bind(2, r.version);
    if (n.Step() != SQLITE_DONE) return n.Error("recording the kernel version");
    return OkStatus();
  }

  Status AddMissingJobColumns() {
    std::set<std::string> have;
    {
      Stmt s(db_, "PRAGMA table_info(jobs)");
      while (s.Step() == SQLITE_ROW) have.insert(s.Text(1));
    }
    for (const auto& [name, type] : kJobLeaseColumns) {
      if (have.count(name)) continue;
      KLS_RETURN_IF_ERROR(Exec(("ALTER TABLE jobs ADD COLUMN " + std::string(name) + " " + type).c_str()));
    }
    return OkStatus();
  }

  /// ABORTED unless the stored job satisfies `fence`. Requires tx_mu_.
  Status CheckFenceLocked(const std::string& job_id, const JobFence& fence) {
    Stmt s(db_, "SELECT state, attempts, owner, lease_expires_ms FROM jobs WHERE id = ?");
    s.Bind(1, job_id);
    if (s.Step() != SQLITE_ROW) return NotFoundError("job \"" + job_id + "\" does not exist");
    const std::string state = s.Text(0);
    const int attempts = static_cast<int>(s.Int(1));
    if (state != JobStateName(fence.state) || attempts != fence.attempt) {
      return Status(StatusCode::kAborted, "job \"" + job_id + "\" is " + state + " at attempt " +
                                              std::to_string(attempts) + ", not " + JobStateName(fence.state) +
                                              " at attempt " + std::to_string(fence.attempt));
    }
    if (!fence.owner.empty() && s.Text(2) != fence.owner) {
      return Status(StatusCode::kAborted, "job \"" + job_id + "\" is owned by " + s.Text(2) + ", not " + fence.owner);
    }
    if (fence.lease_expired && s.Int(3) >= NowMs()) {
      return Status(StatusCode::kAborted, "the lease of job \"" + job_id + "\" has not expired");
    }
    return OkStatus();
  }

  static Status NotAShared(const char* what) {
    return Status(StatusCode::kUnimplemented, std::string(what) +
                                                  ": the embedded store is a migration source only; migrate into a "
                                                  "shared store (--store postgresql://...)");
  }

  static void ClearLeaseUnlessRunning(JobRecord* j) {
    if (j->state != JobState::kRunning) {
      j->owner.clear();
      j->lease_expires_unix_ms = 0;
    }
  }

  Status DeleteCheckpointLocked(const std::string& job_id) {
    Stmt d(db_, "DELETE FROM checkpoints WHERE job_id = ?");
    d.Bind(1, job_id);
    if (d.Step() != SQLITE_DONE) return d.Error("deleting the checkpoint of job " + job_id);
    return OkStatus();
  }

  /// Checkpoint clean-up and events after a job row was written. Requires tx_mu_.
  Status AfterJobWrite(const JobRecord& j) {
    if (IsTerminal(j.state)) KLS_RETURN_IF_ERROR(DeleteCheckpointLocked(j.id));
    Notify(StoreEvent::Kind::kJobChanged, j.id);
    if (j.state == JobState::kQueued) Notify(StoreEvent::Kind::kJobQueued, j.id);
    return OkStatus();
  }

  void Notify(StoreEvent::Kind kind, const std::string& name) { listener_.Deliver(StoreEvent{kind, name}); }

  static uint32_t Crc(const std::string& bytes) {
    return static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      sqlite3_free(err);  // the same text as sqlite3_errmsg, which SqliteError reports
      return SqliteError(db_, "sqlite");
    }
    return OkStatus();
  }

  std::string ArtifactPath(const std::string& file) const { return (fs::path(artifacts_) / file).string(); }

  std::string NewId(const char* prefix) {
    static std::atomic<uint64_t> counter{0};
    thread_local std::mt19937_64 rng(std::random_device{}());
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s-%llx%04llx", prefix, static_cast<unsigned long long>(NowMs()),
                  static_cast<unsigned long long>((rng() ^ counter++) & 0xffff));
    return buf;
  }

  static void BindJob(Stmt& s, const JobRecord& j) {
    s.Bind(1, j.id).Bind(2, j.dataset_id).Bind(3, j.method).Bind(4, j.options_json)
        .Bind(5, std::string(JobStateName(j.state))).Bind(6, j.priority).Bind(7, j.attempts)
        .Bind(8, j.deadline_seconds).Bind(9, j.error).Bind(10, j.kernel_name).Bind(11, j.kernel_version)
        .Bind(12, j.progress_json).Bind(13, j.created_unix_ms).Bind(14, j.started_unix_ms).Bind(15, j.finished_unix_ms)
        .Bind(16, j.owner).Bind(17, j.lease_expires_unix_ms).Bind(18, j.counted_failures)
        .Bind(19, j.last_attempt_end).Bind(20, j.lost_attempts).Bind(21, j.not_before_unix_ms);
  }

  static JobRecord ReadJob(const Stmt& s) {
    JobRecord j;
    j.id = s.Text(0);
    j.dataset_id = s.Text(1);
    j.method = s.Text(2);
    j.options_json = s.Text(3);
    auto st = ParseJobState(s.Text(4));
    j.state = st.ok() ? *st : JobState::kFailed;
    j.priority = static_cast<int>(s.Int(5));
    j.attempts = static_cast<int>(s.Int(6));
    j.deadline_seconds = s.Real(7);
    j.error = s.Text(8);
    j.kernel_name = s.Text(9);
    j.kernel_version = s.Int(10);
    j.progress_json = s.Text(11);
    j.created_unix_ms = s.Int(12);
    j.started_unix_ms = s.Int(13);
    j.finished_unix_ms = s.Int(14);
    j.owner = s.Text(15);
    j.lease_expires_unix_ms = s.Int(16);
    j.counted_failures = static_cast<int>(s.Int(17));
    j.last_attempt_end = s.Text(18);
    j.lost_attempts = static_cast<int>(s.Int(19));
    j.not_before_unix_ms = s.Int(20);
    return j;
  }

  StatusOr<DatasetRecord> ReadDataset(const std::string& id, std::string* artifact) {
    TxLock lock(tx_mu_);
    Stmt s(db_, "SELECT id, name, num_points, dim, num_classes, num_constraints, artifact, created_ms "
                "FROM datasets WHERE id = ?");
    s.Bind(1, id);
    if (s.Step() != SQLITE_ROW) return NotFoundError("data set \"" + id + "\" does not exist");
    DatasetRecord r;
    r.id = s.Text(0);
    r.name = s.Text(1);
    r.num_points = s.Int(2);
    r.dim = s.Int(3);
    r.num_classes = s.Int(4);
    r.num_constraints = s.Int(5);
    *artifact = s.Text(6);
    r.created_unix_ms = s.Int(7);
    Stmt a(db_, "SELECT version, summary FROM dataset_attributes WHERE dataset_id = ?");
    a.Bind(1, id);
    if (a.Step() == SQLITE_ROW) {
      r.attributes_version = a.Int(0);
      r.attributes_summary = a.Text(1);
    }
    return r;
  }

  StatusOr<KernelRecord> ReadKernel(const std::string& name, int64_t version, const std::string& alias,
                                    std::string* artifact) {
    TxLock lock(tx_mu_);
    if (!alias.empty()) {
      Stmt a(db_, "SELECT version FROM aliases WHERE name = ? AND alias = ?");
      a.Bind(1, name).Bind(2, alias);
      if (a.Step() != SQLITE_ROW) {
        return NotFoundError("kernel \"" + name + "\" has no alias \"" + alias + "\"");
      }
      version = a.Int(0);
    }
    Stmt s(db_, version == 0
                    ? "SELECT name, version, job_id, dataset_id, method, num_points, rank, summary_json, artifact, "
                      "created_ms FROM kernels WHERE name = ? ORDER BY version DESC LIMIT 1"
                    : "SELECT name, version, job_id, dataset_id, method, num_points, rank, summary_json, artifact, "
                      "created_ms FROM kernels WHERE name = ? AND version = ?");
    s.Bind(1, name);
    if (version) s.Bind(2, version);
    if (s.Step() != SQLITE_ROW) {
      return NotFoundError("kernel \"" + name + "\"" + (version ? " version " + std::to_string(version) : "") +
                           " does not exist");
    }
    KernelRecord r;
    r.name = s.Text(0);
    r.version = s.Int(1);
    r.job_id = s.Text(2);
    r.dataset_id = s.Text(3);
    r.method = s.Text(4);
    r.num_points = s.Int(5);
    r.rank = s.Int(6);
    r.summary_json = s.Text(7);
    *artifact = s.Text(8);
    r.created_unix_ms = s.Int(9);
    return r;
  }

  std::string dir_, artifacts_;
  sqlite3* db_ = nullptr;
  std::mutex kernel_mu_;  ///< kernel version numbering (taken before tx_mu_)
  /// The store has one SQLite connection, and a statement run while another
  /// thread's transaction (CommitJobKernel, DeleteKernel) is open on it joins
  /// that transaction. So every statement takes this lock: a write would
  /// otherwise be undone by that transaction's ROLLBACK (or lost with it in a
  /// crash before its COMMIT) after its caller was told OK, and a read would
  /// see a job SUCCEEDED before the COMMIT made it durable. Recursive: writes
  /// call the read helpers while holding it.
  std::recursive_mutex tx_mu_;
  ListenerSlot listener_;
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& data_dir) {
  auto s = std::make_unique<SqliteStore>();
  KLS_RETURN_IF_ERROR(s->Open(data_dir));
  return std::unique_ptr<Store>(std::move(s));
}

StatusOr<IntegrityReport> CheckDataDirectory(const std::string& data_dir) {
  const std::string what = "checking " + data_dir;
  return GuardExceptions(what.c_str(), [&]() -> StatusOr<IntegrityReport> {
    SqliteStore s;
    KLS_RETURN_IF_ERROR(s.Open(data_dir, SqliteStore::Mode::kCheck));
    return s.Check();
  });
}

}  // namespace kls::store
