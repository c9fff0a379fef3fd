// Shared Store on PostgreSQL (kls-server --store postgresql://...), through
// libpq's C API. Every replica is the same stateless process pointed at one
// database; see OpenPostgresStore in store.h and docs/ARCHITECTURE.md.
//
// Why artifacts live in the database as chunked bytea rows
// (artifact_chunks(artifact_id, seq, bytes), 1 MiB each) rather than large
// objects or a shared file system:
//   * transactional with the record: the chunks and the data-set / kernel row
//     are written in ONE transaction, so an artifact and its record appear
//     together or not at all, and a delete removes both (no crash leftovers,
//     no unreferenced artifacts to collect);
//   * no orphans: large objects outlive the rows that name them unless
//     vacuumlo runs; chunk rows go with a foreign key ON DELETE CASCADE;
//   * pg_dump, point-in-time recovery and streaming replication carry them
//     like any other row, so a standby is a complete copy;
//   * 1 MiB rows stay far below bytea's 1 GB limit and let a reader stream a
//     large artifact without one giant allocation on the server.
// The bytes are exactly the KLSART01 image (artifact.h), so every replica
// verifies the same CRC-32 when it caches a copy locally.
//
// Local replica cache: LoadDataset / LoadModel serve a checksum-verified,
// memory-mapped file under cache_dir named by the artifact id. Artifact ids
// are never reused (a new version is a new artifact), so a cached file never
// goes stale; a file that fails verification is deleted and fetched once
// more. Least recently used files go when the cache exceeds its budget (a
// mapped file stays readable after its unlink).
//
// Clocks: lease arithmetic uses the database server's clock
// (clock_timestamp()), so replicas' clocks need not agree. Records' created /
// finished times are written by the caller, as with SQLite.
//
// Events: writes NOTIFY channel kls_events inside their transaction (sent on
// commit) with payload "<store token> <kind> <name>". This process's own
// events are delivered directly after the commit; the LISTEN thread drops
// those (same token) and delivers every other replica's.
#include <libpq-fe.h>
#include <poll.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "server/store/artifact.h"
#include "server/store/listener_slot.h"
#include "server/store/record_artifacts.h"
#include "server/store/store.h"

namespace kls::store {
namespace {

namespace fs = std::filesystem;

/// The schema this build writes. Bump it with a migration step in Migrate().
/// Expand/contract: every step must keep the previous release working on the
/// migrated database (add tables and columns with defaults; drop or change
/// what the previous release uses only one release later), because a replica
/// serves on a schema up to one version newer than its own
/// (kNewestServedSchema): during a rollout the old replicas stay ready after
/// the new release's migration ran.
constexpr int kSchemaVersion = kPostgresSchemaVersion;
/// The newest database schema this build serves on, without migrating it.
constexpr int kNewestServedSchema = kSchemaVersion + 1;
/// pg_advisory_xact_lock key serializing schema creation / migration ("kls\0schm").
constexpr int64_t kSchemaLockKey = 0x6b6c7300736368;
/// Class id of the per-kernel-name advisory locks (version numbering).
constexpr int kKernelLockClass = 0x6b6c73;
constexpr size_t kChunkBytes = 1 << 20;
constexpr const char* kChannel = "kls_events";
/// libpq connect_timeout (seconds) unless the URI sets one: calls never hang
/// on an unreachable server.
constexpr const char* kDefaultConnectTimeoutSeconds = "5";

Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
Status AbortedError(std::string m) { return {StatusCode::kAborted, std::move(m)}; }

// ---- libpq RAII -------------------------------------------------------------

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

/// Positional parameters of PQexecParams: text by default, binary for bytea.
/// Views must outlive the call; Text() copies.
class Params {
 public:
  Params& Text(std::string v) {
    owned_.push_back(std::move(v));
    return View(owned_.back().data(), owned_.back().size(), 0);
  }
  Params& Int(int64_t v) { return Text(std::to_string(v)); }
  Params& Real(double v) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return Text(buf);
  }
  Params& Bytes(const char* data, size_t n) { return View(data, n, 1); }
  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  Params& View(const char* data, size_t n, int format) {
    values_.push_back(data);
    lengths_.push_back(static_cast<int>(n));
    formats_.push_back(format);
    return *this;
  }
  std::deque<std::string> owned_;  // deque: stable addresses
  std::vector<const char*> values_;
  std::vector<int> lengths_, formats_;
};

std::string GetText(const PGresult* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
}
int64_t GetInt(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  return std::strtoll(PQgetvalue(r, row, col), nullptr, 10);
}
double GetReal(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  return std::strtod(PQgetvalue(r, row, col), nullptr);
}
/// A binary-format int8 column.
int64_t GetBinaryInt8(const PGresult* r, int row, int col) {
  uint64_t v = 0;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  for (int k = 0; k < 8; ++k) v = (v << 8) | p[k];
  return static_cast<int64_t>(v);
}

uint32_t Crc32Of(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t at = 0;
  while (at < bytes.size()) {
    const uInt n = static_cast<uInt>(std::min<size_t>(bytes.size() - at, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), n);
    at += n;
  }
  return static_cast<uint32_t>(crc);
}

/// Random 64-bit hex, for ids that must never repeat across replicas.
std::string RandomHex(int digits) {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::string out;
  while (static_cast<int>(out.size()) < digits) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
    out += buf;
  }
  out.resize(digits);
  return out;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Ids like the SQLite store's ("job-<ms hex><random>"), with enough
/// randomness that replicas creating ids in the same millisecond never collide.
std::string NewId(const char* prefix) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s-%llx", prefix, static_cast<unsigned long long>(NowMs()));
  return buf + RandomHex(8);
}

Conn Connect(const PostgresStoreOptions& o) {
  // connect_timeout first: a value in the URI (expanded from dbname) overrides it.
  const std::string options =
      o.idle_in_transaction_seconds > 0
          ? "-c idle_in_transaction_session_timeout=" +
                std::to_string(std::max<int64_t>(1, std::llround(o.idle_in_transaction_seconds * 1000)))
          : std::string();
  const char* keys[] = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                        "keepalives_count", "options", "dbname", nullptr};
  const char* values[] = {kDefaultConnectTimeoutSeconds, "1", "10", "5", "3", options.c_str(), o.uri.c_str(), nullptr};
  Conn c(PQconnectdbParams(keys, values, /*expand_dbname=*/1));
  // Server notices ("relation already exists, skipping") are not errors; libpq would print them to stderr.
  if (c) PQsetNoticeProcessor(c.get(), [](void*, const char*) {}, nullptr);
  return c;
}

std::string ConnError(PGconn* c) {
  std::string m = c ? PQerrorMessage(c) : "out of memory";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

/// The status of a failed statement on `c`, naming the operation `op`:
/// UNAVAILABLE when the connection is lost (class 08, 57P0x — the server
/// shutting down or restarting — or a dead socket), ABORTED for a
/// serialization failure or deadlock (40001, 40P01), INTERNAL otherwise.
Status StatementError(PGconn* c, const PGresult* r, const std::string& op) {
  std::string msg = r ? PQresultErrorMessage(r) : "";
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (msg.empty()) msg = ConnError(c);
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state ? state : "";
  if (PQstatus(c) != CONNECTION_OK || sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P0", 0) == 0) {
    return UnavailableError(op + ": PostgreSQL is unavailable: " + msg);
  }
  if (sqlstate == "40001" || sqlstate == "40P01") return AbortedError(op + ": " + msg);
  return InternalError(op + ": PostgreSQL: " + msg);
}

/// Runs one statement on `c` (a pooled connection or the liveness session);
/// `binary_result` asks for binary columns (bytea). Errors: StatementError.
StatusOr<Result> ExecOn(PGconn* c, const std::string& sql, const Params& p, const std::string& op,
                        bool binary_result = false) {
  Result r(PQexecParams(c, sql.c_str(), p.size(), nullptr, p.values(), p.lengths(), p.formats(),
                        binary_result ? 1 : 0));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
  return StatementError(c, r.get(), op);
}

// ---- schema -------------------------------------------------------------------

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE artifacts (
  id text PRIMARY KEY, bytes bigint NOT NULL, chunks integer NOT NULL, created_ms bigint NOT NULL);
CREATE TABLE artifact_chunks (
  artifact_id text NOT NULL REFERENCES artifacts(id) ON DELETE CASCADE, seq integer NOT NULL,
  bytes bytea NOT NULL, PRIMARY KEY (artifact_id, seq));
CREATE TABLE datasets (
  id text PRIMARY KEY, name text NOT NULL, num_points bigint NOT NULL, dim bigint NOT NULL,
  num_classes bigint NOT NULL, num_constraints bigint NOT NULL,
  artifact text NOT NULL REFERENCES artifacts(id), created_ms bigint NOT NULL);
CREATE TABLE jobs (
  seq bigserial UNIQUE, id text PRIMARY KEY, dataset_id text NOT NULL, method text NOT NULL,
  options_json text NOT NULL, state text NOT NULL, priority integer NOT NULL, attempts integer NOT NULL,
  deadline_seconds double precision NOT NULL, error text NOT NULL, kernel_name text NOT NULL,
  kernel_version bigint NOT NULL, progress_json text NOT NULL, created_ms bigint NOT NULL,
  started_ms bigint NOT NULL, finished_ms bigint NOT NULL, owner text NOT NULL DEFAULT '',
  lease_expires timestamptz, counted_failures integer NOT NULL DEFAULT 0);
CREATE INDEX jobs_claim ON jobs (priority DESC, seq) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (owner, lease_expires) WHERE state = 'running';
CREATE INDEX jobs_state ON jobs (state, seq);
CREATE TABLE kernels (
  name text NOT NULL, version bigint NOT NULL, job_id text NOT NULL, dataset_id text NOT NULL,
  method text NOT NULL, num_points bigint NOT NULL, rank bigint NOT NULL, summary_json text NOT NULL,
  artifact text NOT NULL REFERENCES artifacts(id), created_ms bigint NOT NULL, PRIMARY KEY (name, version));
CREATE TABLE aliases (
  name text NOT NULL, alias text NOT NULL, version bigint NOT NULL, PRIMARY KEY (name, alias));
CREATE TABLE checkpoints (
  job_id text PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE, attempt integer NOT NULL,
  iteration bigint NOT NULL, solver text NOT NULL, bytes bytea NOT NULL, crc32 bigint NOT NULL,
  created_ms bigint NOT NULL);
)sql";

// Version 2: the last version issued per kernel name, so a version number is
// never given twice, even after its kernel was deleted.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE IF NOT EXISTS kernel_names (name text PRIMARY KEY, last_version bigint NOT NULL);
)sql";

// Version 3: item attributes per data set (ItemAttributes::Serialize bytes).
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE IF NOT EXISTS dataset_attributes (
  dataset_id text PRIMARY KEY REFERENCES datasets(id) ON DELETE CASCADE, version bigint NOT NULL,
  summary text NOT NULL, bytes bytea NOT NULL, crc32 bigint NOT NULL);
)sql";

// Version 4: why each job's last attempt ended, its lost attempts and its
// back-off (JobRecord). Added with defaults: a running replica of the
// previous release names only the columns it knows, and its writes keep
// working (a job it re-queues gets no back-off).
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS last_attempt_end text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS lost_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS not_before_ms bigint NOT NULL DEFAULT 0;
)sql";

// Version 5: the replicas' liveness locks (RegisterReplica). A table of its
// own: a replica of the previous release never registers, so its jobs are
// never taken for a dead owner's — they wait for their lease, as before.
constexpr const char* kSchemaV5 = R"sql(
CREATE TABLE IF NOT EXISTS kls_replicas (
  owner text PRIMARY KEY, lock_key integer NOT NULL, registered_at timestamptz NOT NULL);
)sql";

/// Class id of the replicas' liveness locks, pg_advisory_lock(class, key):
/// a replica holds its key on a session of its own for as long as it lives.
constexpr int kLivenessLockClass = 0x6b6c72;

/// SQL condition: a session of this database holds the liveness lock whose
/// key is the SQL expression `key`.
std::string LivenessHeldSql(const std::string& key) {
  return "EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM "
         "pg_database WHERE datname = current_database()) AND l.classid = " +
         std::to_string(kLivenessLockClass) + " AND l.objid = " + key + "::oid AND l.objsubid = 2 AND l.granted)";
}
/// SQL condition on a row of `jobs`: its owner is provably gone. The owner
/// registered a liveness lock (kls_replicas) during this database server's
/// life and no session holds it any more: PostgreSQL ends the session of a
/// client that died (kill -9, OOM kill, crash) and drops its locks at once.
/// An owner that never registered (a replica of an earlier release) or that
/// registered before the server restarted (every lock was dropped then, and
/// the owner takes a new one at its next heartbeat) is never taken for gone:
/// its jobs wait for their lease to run out, as before.
const std::string& OwnerGoneSql() {
  static const std::string sql =
      "EXISTS (SELECT 1 FROM kls_replicas r WHERE r.owner = jobs.owner AND r.registered_at > "
      "pg_postmaster_start_time() AND NOT " + LivenessHeldSql("r.lock_key") + ")";
  return sql;
}

/// The job's attempt may be taken over: its lease ran out or its owner is gone.
const std::string& LeaseEndedSql() {
  static const std::string sql = "(lease_expires IS NULL OR lease_expires < clock_timestamp() OR " + OwnerGoneSql() + ")";
  return sql;
}

/// Milliseconds since the epoch on the database clock, as SQL.
constexpr const char* kDbNowMs = "floor(extract(epoch from clock_timestamp()) * 1000)::bigint";

constexpr const char* kJobColumns =
    "id, dataset_id, method, options_json, state, priority, attempts, deadline_seconds, error, kernel_name, "
    "kernel_version, progress_json, created_ms, started_ms, finished_ms, owner, "
    "COALESCE(floor(extract(epoch from lease_expires) * 1000)::bigint, 0), counted_failures, last_attempt_end, "
    "lost_attempts, not_before_ms, seq";
/// Column of seq in kJobColumns.
constexpr int kJobSeqColumn = 21;

JobRecord ReadJob(const PGresult* r, int row) {
  JobRecord j;
  j.id = GetText(r, row, 0);
  j.dataset_id = GetText(r, row, 1);
  j.method = GetText(r, row, 2);
  j.options_json = GetText(r, row, 3);
  auto st = ParseJobState(GetText(r, row, 4));
  j.state = st.ok() ? *st : JobState::kFailed;
  j.priority = static_cast<int>(GetInt(r, row, 5));
  j.attempts = static_cast<int>(GetInt(r, row, 6));
  j.deadline_seconds = GetReal(r, row, 7);
  j.error = GetText(r, row, 8);
  j.kernel_name = GetText(r, row, 9);
  j.kernel_version = GetInt(r, row, 10);
  j.progress_json = GetText(r, row, 11);
  j.created_unix_ms = GetInt(r, row, 12);
  j.started_unix_ms = GetInt(r, row, 13);
  j.finished_unix_ms = GetInt(r, row, 14);
  j.owner = GetText(r, row, 15);
  j.lease_expires_unix_ms = GetInt(r, row, 16);
  j.counted_failures = static_cast<int>(GetInt(r, row, 17));
  j.last_attempt_end = GetText(r, row, 18);
  j.lost_attempts = static_cast<int>(GetInt(r, row, 19));
  j.not_before_unix_ms = GetInt(r, row, 20);
  return j;
}

/// Parameters as BindJob orders them; a job inserted running gets a lease
/// that has already run out (its owner, if any, must renew it).
constexpr const char* kInsertJobSql =
    "INSERT INTO jobs (id, dataset_id, method, options_json, state, priority, attempts, deadline_seconds, error, "
    "kernel_name, kernel_version, progress_json, created_ms, started_ms, finished_ms, owner, counted_failures, "
    "last_attempt_end, lost_attempts, not_before_ms, lease_expires) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,"
    "$13,$14,$15,$16,$17,$18,$19,$20, CASE WHEN $5 = 'running' THEN clock_timestamp() END)";

constexpr const char* kKernelColumns =
    "name, version, job_id, dataset_id, method, num_points, rank, summary_json, artifact, created_ms";

KernelRecord ReadKernel(const PGresult* r, int row, std::string* artifact) {
  KernelRecord k;
  k.name = GetText(r, row, 0);
  k.version = GetInt(r, row, 1);
  k.job_id = GetText(r, row, 2);
  k.dataset_id = GetText(r, row, 3);
  k.method = GetText(r, row, 4);
  k.num_points = GetInt(r, row, 5);
  k.rank = GetInt(r, row, 6);
  k.summary_json = GetText(r, row, 7);
  if (artifact) *artifact = GetText(r, row, 8);
  k.created_unix_ms = GetInt(r, row, 9);
  return k;
}

constexpr const char* kDatasetColumns =
    "id, name, num_points, dim, num_classes, num_constraints, artifact, created_ms, "
    "COALESCE((SELECT version FROM dataset_attributes WHERE dataset_id = datasets.id), 0), "
    "COALESCE((SELECT summary FROM dataset_attributes WHERE dataset_id = datasets.id), '')";

DatasetRecord ReadDataset(const PGresult* r, int row, std::string* artifact) {
  DatasetRecord d;
  d.id = GetText(r, row, 0);
  d.name = GetText(r, row, 1);
  d.num_points = GetInt(r, row, 2);
  d.dim = GetInt(r, row, 3);
  d.num_classes = GetInt(r, row, 4);
  d.num_constraints = GetInt(r, row, 5);
  if (artifact) *artifact = GetText(r, row, 6);
  d.created_unix_ms = GetInt(r, row, 7);
  d.attributes_version = GetInt(r, row, 8);
  d.attributes_summary = GetText(r, row, 9);
  return d;
}

/// The fence as SQL conditions on jobs, appended to `sql`, parameters added to `p`.
void AppendFence(const JobFence& fence, std::string* sql, Params* p) {
  p->Text(JobStateName(fence.state));
  *sql += " AND state = $" + std::to_string(p->size());
  p->Int(fence.attempt);
  *sql += " AND attempts = $" + std::to_string(p->size());
  if (!fence.owner.empty()) {
    *sql += " AND owner = $" + std::to_string(p->size() + 1);
    p->Text(fence.owner);
  }
  if (fence.lease_expired) *sql += " AND " + LeaseEndedSql();
}

char KindChar(StoreEvent::Kind k) {
  switch (k) {
    case StoreEvent::Kind::kJobQueued: return 'q';
    case StoreEvent::Kind::kJobChanged: return 'j';
    case StoreEvent::Kind::kKernelChanged: return 'k';
    case StoreEvent::Kind::kDatasetChanged: return 'd';
  }
  return '?';
}

// ---- the store ------------------------------------------------------------------

class PostgresStore;

/// One pooled connection, held for the duration of one store call.
class PooledConn {
 public:
  PooledConn(PostgresStore* store, int slot, PGconn* conn, std::string op)
      : store_(store), slot_(slot), conn_(conn), op_(std::move(op)) {}
  PooledConn(const PooledConn&) = delete;
  PooledConn& operator=(const PooledConn&) = delete;
  ~PooledConn();

  PGconn* get() const { return conn_; }
  const std::string& op() const { return op_; }

  /// Runs one statement; `binary_result` asks for binary columns (bytea).
  /// UNAVAILABLE when the connection is lost (the pool reconnects on next
  /// use), INTERNAL for other database errors; both name the operation.
  StatusOr<Result> Exec(const std::string& sql, const Params& p = Params(), bool binary_result = false) {
    return ExecOn(conn_, sql, p, op_, binary_result);
  }
  Status Run(const std::string& sql, const Params& p = Params()) { return Exec(sql, p).status(); }
  /// Several statements without parameters (schema scripts).
  Status RunScript(const char* sql) {
    Result r(PQexec(conn_, sql));
    if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK) return OkStatus();
    return StatementError(conn_, r.get(), op_);
  }

  /// Emits `event` (NOTIFY, sent at commit) and remembers it for local delivery.
  Status Notify(StoreEvent::Kind kind, const std::string& name);

  std::vector<StoreEvent>& pending_events() { return events_; }
  void DeliverEvents();

 private:
  PostgresStore* store_;
  int slot_;
  PGconn* conn_;
  std::string op_;
  std::vector<StoreEvent> events_;
};

/// BEGIN on construction, ROLLBACK unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(PooledConn& c) : c_(c) {}
  Status Begin() {
    KLS_RETURN_IF_ERROR(c_.Run("BEGIN"));
    open_ = true;
    return OkStatus();
  }
  /// Commits, then delivers the events the transaction emitted to this
  /// process's listener (other replicas get them through NOTIFY).
  Status Commit() {
    open_ = false;
    Status st = c_.Run("COMMIT");
    if (st.ok()) c_.DeliverEvents();
    c_.pending_events().clear();
    return st;
  }
  ~Transaction() {
    if (open_) {
      Result r(PQexec(c_.get(), "ROLLBACK"));
      c_.pending_events().clear();
    }
  }

 private:
  PooledConn& c_;
  bool open_ = false;
};

/// A registered replica's liveness lock (PostgresStore::RegisterReplica).
struct Liveness {
  Conn session;  ///< the session holding it
  int key = -1;  ///< pg_advisory_lock(kLivenessLockClass, key)
};

class PostgresStore final : public Store {
 public:
  ~PostgresStore() override {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    if (listener_thread_.joinable()) listener_thread_.join();
    if (remove_cache_dir_) {
      std::error_code ec;
      fs::remove_all(cache_dir_, ec);
    }
  }

  Status Open(const PostgresStoreOptions& options) {
    if (options.uri.empty()) return InvalidArgumentError("PostgreSQL store: uri is empty");
    if (options.pool_size < 1) {
      return InvalidArgumentError("pool_size = " + std::to_string(options.pool_size) + " must be >= 1");
    }
    if (options.cache_disk_bytes < 0) {
      return InvalidArgumentError("cache_disk_bytes = " + std::to_string(options.cache_disk_bytes) + " must be >= 0");
    }
    options_ = options;
    token_ = RandomHex(16);
    slots_.resize(options.pool_size);
    free_.resize(options.pool_size);
    for (int i = 0; i < options.pool_size; ++i) free_[i] = i;
    KLS_RETURN_IF_ERROR(OpenCache());
    KLS_RETURN_IF_ERROR(Migrate());
    listener_thread_ = std::thread([this] { ListenLoop(); });
    // Events committed after Open returns must reach SetListener's callback:
    // wait (bounded) until the LISTEN is in place. Past the bound the store
    // still opens; the listener's first connection delivers "anything may
    // have changed" when it comes up.
    std::unique_lock<std::mutex> lock(stop_mu_);
    stop_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return listening_ || stop_; });
    return OkStatus();
  }

  /// Hands out a live connection; UNAVAILABLE (naming `op`) when none can be made.
  StatusOr<std::unique_ptr<PooledConn>> Acquire(const std::string& op) {
    int slot;
    {
      std::unique_lock<std::mutex> lock(pool_mu_);
      pool_cv_.wait(lock, [&] { return !free_.empty(); });
      slot = free_.back();
      free_.pop_back();
    }
    Conn& c = slots_[slot];
    // A connection the server closed (restart, idle kill) is noticed here,
    // before any statement is sent: PQconsumeInput reads the pending
    // termination message or fails on the dead socket.
    if (c && (PQstatus(c.get()) != CONNECTION_OK || !PQconsumeInput(c.get()) ||
              PQtransactionStatus(c.get()) != PQTRANS_IDLE)) {
      c.reset();
    }
    if (!c) {
      c = Connect(options_);
      if (PQstatus(c.get()) != CONNECTION_OK) {
        const std::string msg = ConnError(c.get());
        c.reset();
        Release(slot);
        return UnavailableError(op + ": PostgreSQL is unavailable: " + msg);
      }
    }
    return std::make_unique<PooledConn>(this, slot, c.get(), op);
  }

  void Release(int slot) {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      free_.push_back(slot);
    }
    pool_cv_.notify_one();
  }

  /// Delivers events a committed transaction emitted to this process's listener.
  void Deliver(const std::vector<StoreEvent>& events) { listener_.Deliver(events); }

  const std::string& token() const { return token_; }

  // ---- data sets -------------------------------------------------------------
  StatusOr<DatasetRecord> PutDataset(const std::string& name, const StoredDataset& d) override {
    KLS_ASSIGN_OR_RETURN(std::string image, EncodeDatasetArtifact(d));
    DatasetRecord r;
    r.id = NewId("ds");
    r.name = name;
    r.num_points = d.data.num_points();
    r.dim = d.data.dim();
    r.num_classes = d.data.num_classes();
    r.num_constraints = d.constraints.size();
    r.created_unix_ms = NowMs();
    const std::string artifact = NewId("a");
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("PutDataset"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    KLS_RETURN_IF_ERROR(InsertArtifact(*c, artifact, image));
    KLS_RETURN_IF_ERROR(c->Run("INSERT INTO datasets (id, name, num_points, dim, num_classes, num_constraints, "
                               "artifact, created_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
                               Params().Text(r.id).Text(r.name).Int(r.num_points).Int(r.dim).Int(r.num_classes)
                                   .Int(r.num_constraints).Text(artifact).Int(r.created_unix_ms)));
    KLS_RETURN_IF_ERROR(tx.Commit());
    // This replica will likely read it back soon (training): cache it now.
    CachePut(artifact, image);
    return r;
  }

  StatusOr<DatasetRecord> GetDatasetRecord(const std::string& id) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("GetDatasetRecord"));
    return FetchDataset(*c, id, nullptr);
  }

  StatusOr<StoredDataset> LoadDataset(const std::string& id) override {
    std::string artifact;
    DatasetRecord r;
    {
      KLS_ASSIGN_OR_RETURN(auto c, Acquire("LoadDataset"));
      KLS_ASSIGN_OR_RETURN(r, FetchDataset(*c, id, &artifact));
    }
    KLS_ASSIGN_OR_RETURN(auto a, OpenCached(artifact, "LoadDataset"));
    return DecodeDatasetArtifact(*a, r);
  }

  StatusOr<std::vector<DatasetRecord>> ListDatasets() override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ListDatasets"));
    KLS_ASSIGN_OR_RETURN(Result r,
                         c->Exec(std::string("SELECT ") + kDatasetColumns + " FROM datasets ORDER BY created_ms, id"));
    std::vector<DatasetRecord> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(ReadDataset(r.get(), i, nullptr));
    return out;
  }

  Status DeleteDataset(const std::string& id) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("DeleteDataset"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec("DELETE FROM datasets WHERE id = $1 RETURNING artifact", Params().Text(id)));
    if (PQntuples(r.get()) == 0) return NotFoundError("data set \"" + id + "\" does not exist");
    const std::string artifact = GetText(r.get(), 0, 0);
    KLS_RETURN_IF_ERROR(c->Run("DELETE FROM artifacts WHERE id = $1", Params().Text(artifact)));
    KLS_RETURN_IF_ERROR(c->Notify(StoreEvent::Kind::kDatasetChanged, id));
    KLS_RETURN_IF_ERROR(tx.Commit());
    CacheRemove(artifact);
    return OkStatus();
  }

  StatusOr<int64_t> PutDatasetAttributes(const std::string& dataset_id, const std::string& summary,
                                         const std::string& bytes) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("PutDatasetAttributes"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    // Locks the data set's row: a concurrent delete waits, or this sees it gone.
    KLS_ASSIGN_OR_RETURN(Result d, c->Exec("SELECT 1 FROM datasets WHERE id = $1 FOR UPDATE", Params().Text(dataset_id)));
    if (PQntuples(d.get()) == 0) return NotFoundError("data set \"" + dataset_id + "\" does not exist");
    KLS_ASSIGN_OR_RETURN(
        Result r, c->Exec("INSERT INTO dataset_attributes (dataset_id, version, summary, bytes, crc32) "
                          "VALUES ($1, 1, $2, $3::bytea, $4) ON CONFLICT (dataset_id) DO UPDATE SET version = "
                          "dataset_attributes.version + 1, summary = EXCLUDED.summary, bytes = EXCLUDED.bytes, "
                          "crc32 = EXCLUDED.crc32 RETURNING version",
                          Params().Text(dataset_id).Text(bytes.empty() ? std::string() : summary)
                              .Bytes(bytes.data(), bytes.size()).Int(Crc32Of(bytes))));
    const int64_t version = GetInt(r.get(), 0, 0);
    KLS_RETURN_IF_ERROR(c->Notify(StoreEvent::Kind::kDatasetChanged, dataset_id));
    KLS_RETURN_IF_ERROR(tx.Commit());
    return version;
  }

  StatusOr<std::optional<StoredAttributes>> GetDatasetAttributes(const std::string& dataset_id) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("GetDatasetAttributes"));
    KLS_RETURN_IF_ERROR(FetchDataset(*c, dataset_id, nullptr).status());
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec("SELECT version, summary, bytes, crc32 FROM dataset_attributes "
                                           "WHERE dataset_id = $1",
                                           Params().Text(dataset_id), /*binary_result=*/true));
    if (PQntuples(r.get()) == 0) return std::optional<StoredAttributes>();
    StoredAttributes a;
    a.version = GetBinaryInt8(r.get(), 0, 0);
    a.summary = GetText(r.get(), 0, 1);
    a.bytes = GetText(r.get(), 0, 2);
    const uint32_t crc = static_cast<uint32_t>(GetBinaryInt8(r.get(), 0, 3));
    if (Crc32Of(a.bytes) != crc) {
      return DataLossError("the attributes of data set " + dataset_id + " fail their CRC-32");
    }
    if (a.bytes.empty()) return std::optional<StoredAttributes>();
    return std::optional<StoredAttributes>(std::move(a));
  }

  // ---- jobs ----------------------------------------------------------------------
  StatusOr<JobRecord> CreateJob(JobRecord job) override {
    job.id = NewId("job");
    job.created_unix_ms = NowMs();
    if (job.kernel_name.empty()) job.kernel_name = job.id;
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("CreateJob"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    Params p;
    BindJob(job, &p);
    KLS_RETURN_IF_ERROR(c->Run(kInsertJobSql, p));
    KLS_RETURN_IF_ERROR(NotifyJobWrite(*c, job.id, job.state));
    KLS_RETURN_IF_ERROR(tx.Commit());
    return job;
  }

  StatusOr<JobRecord> GetJob(const std::string& id) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("GetJob"));
    KLS_ASSIGN_OR_RETURN(Result r,
                         c->Exec(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = $1", Params().Text(id)));
    if (PQntuples(r.get()) == 0) return NotFoundError("job \"" + id + "\" does not exist");
    return ReadJob(r.get(), 0);
  }

  Status UpdateJob(const JobRecord& job) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("UpdateJob"));
    return WriteJob(*c, job, nullptr);
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
    std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE seq > $1";
    Params p;
    p.Int(after);
    if (f.state) {
      p.Text(JobStateName(*f.state));
      sql += " AND state = $" + std::to_string(p.size());
    }
    if (!f.dataset_id.empty()) {
      p.Text(f.dataset_id);
      sql += " AND dataset_id = $" + std::to_string(p.size());
    }
    p.Int(f.page_size + 1);
    sql += " ORDER BY seq LIMIT $" + std::to_string(p.size());
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ListJobs"));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec(sql, p));
    const int n = PQntuples(r.get());
    std::vector<JobRecord> out;
    int64_t last_seq = 0;
    for (int i = 0; i < n && i < f.page_size; ++i) {
      out.push_back(ReadJob(r.get(), i));
      last_seq = GetInt(r.get(), i, kJobSeqColumn);
    }
    if (next_token) *next_token = n > f.page_size ? std::to_string(last_seq) : "";
    return out;
  }

  StatusOr<int64_t> CountJobs(JobState state) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("CountJobs"));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec("SELECT COUNT(*) FROM jobs WHERE state = $1", Params().Text(JobStateName(state))));
    return GetInt(r.get(), 0, 0);
  }

  // ---- shared queue ----------------------------------------------------------------
  StatusOr<std::optional<JobRecord>> ClaimJob(const std::string& replica_id, int64_t lease_ms) override {
    if (lease_ms <= 0) return InvalidArgumentError("lease_ms = " + std::to_string(lease_ms) + " must be > 0");
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ClaimJob"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    // SKIP LOCKED: concurrent claimers pass over each other's rows instead of
    // waiting, and a row another claimer just took no longer matches
    // state = 'queued' when re-checked, so no job is claimed twice.
    KLS_ASSIGN_OR_RETURN(
        Result r,
        c->Exec(std::string("UPDATE jobs SET state = 'running', attempts = attempts + 1, owner = $1, "
                            "lease_expires = clock_timestamp() + $2::float8 * interval '1 millisecond', started_ms = ") +
                    kDbNowMs +
                    ", finished_ms = 0, error = '', progress_json = '', not_before_ms = 0 WHERE id = (SELECT id FROM jobs "
                    "WHERE state = 'queued' AND not_before_ms <= " +
                    kDbNowMs +
                    " ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING " +
                    kJobColumns,
                Params().Text(replica_id).Int(lease_ms)));
    if (PQntuples(r.get()) == 0) return std::optional<JobRecord>();
    JobRecord job = ReadJob(r.get(), 0);
    KLS_RETURN_IF_ERROR(c->Notify(StoreEvent::Kind::kJobChanged, job.id));
    KLS_RETURN_IF_ERROR(tx.Commit());
    return std::optional<JobRecord>(std::move(job));
  }

  StatusOr<std::vector<std::string>> RenewLeases(const std::string& replica_id, int64_t lease_ms) override {
    if (lease_ms <= 0) return InvalidArgumentError("lease_ms = " + std::to_string(lease_ms) + " must be > 0");
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("RenewLeases"));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec("UPDATE jobs SET lease_expires = clock_timestamp() + $2::float8 * interval "
                                           "'1 millisecond' WHERE state = 'running' AND owner = $1 RETURNING id",
                                           Params().Text(replica_id).Int(lease_ms)));
    std::vector<std::string> ids;
    for (int i = 0; i < PQntuples(r.get()); ++i) ids.push_back(GetText(r.get(), i, 0));
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  Status UpdateJobFenced(const JobRecord& job, const JobFence& fence) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("UpdateJobFenced"));
    return WriteJob(*c, job, &fence);
  }

  StatusOr<KernelRecord> CommitJobKernel(JobRecord job, const JobFence& fence, KernelRecord record,
                                         const LearnedKernel& kernel,
                                         const std::vector<Attachment>& attachments) override {
    if (record.name.empty()) return InvalidArgumentError("kernel name is empty");
    KLS_ASSIGN_OR_RETURN(std::string image, EncodeKernelArtifact(kernel, attachments));
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("CommitJobKernel"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    // The fence first, with the job row locked until commit: a re-queue or
    // a concurrent commit of another attempt waits for us or fences us out.
    std::string sql = "SELECT 1 FROM jobs WHERE id = $1";
    Params p;
    p.Text(job.id);
    AppendFence(fence, &sql, &p);
    KLS_ASSIGN_OR_RETURN(Result locked, c->Exec(sql + " FOR UPDATE", p));
    if (PQntuples(locked.get()) == 0) return FenceError(*c, job.id, fence);
    std::string artifact;
    KLS_ASSIGN_OR_RETURN(KernelRecord r, InsertKernel(*c, std::move(record), kernel, image, &artifact));
    job.state = JobState::kSucceeded;
    job.kernel_name = r.name;
    job.kernel_version = r.version;
    KLS_RETURN_IF_ERROR(WriteJobInTransaction(*c, job, nullptr));
    KLS_RETURN_IF_ERROR(tx.Commit());
    CachePut(artifact, image);
    return r;
  }

  StatusOr<std::vector<JobRecord>> ListExpiredLeases() override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ListExpiredLeases"));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec(std::string("SELECT ") + kJobColumns +
                                           " FROM jobs WHERE state = 'running' AND " + LeaseEndedSql() +
                                           " ORDER BY seq"));
    std::vector<JobRecord> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(ReadJob(r.get(), i));
    return out;
  }

  Status RegisterReplica(const std::string& replica_id) override {
    if (replica_id.empty()) return InvalidArgumentError("replica_id is empty");
    std::lock_guard<std::mutex> lock(liveness_mu_);
    Liveness& l = liveness_[replica_id];
    if (l.session) {
      // Confirmed each heartbeat: the session is up and still holds the key.
      StatusOr<Result> held = ExecOn(l.session.get(),
                                     "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = "
                                     "'advisory' AND classid = $1::int::oid AND objid = $2::int::oid AND objsubid = 2 "
                                     "AND granted)",
                                     Params().Int(kLivenessLockClass).Int(l.key), "liveness");
      if (held.ok() && GetText(held->get(), 0, 0) == "t") return OkStatus();
    }
    l.session.reset();
    return TakeLivenessLock(replica_id, &l);
  }

  // ---- checkpoints ---------------------------------------------------------------
  Status PutCheckpoint(const CheckpointRecord& cp, const JobFence& fence) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("PutCheckpoint"));
    Params p;
    p.Text(cp.job_id).Int(cp.attempt).Int(cp.iteration).Text(cp.solver).Bytes(cp.bytes.data(), cp.bytes.size())
        .Int(Crc32Of(cp.bytes));
    // FOR SHARE: a concurrent terminal write (which deletes the checkpoint)
    // waits for this one, or this one sees the job no longer running.
    std::string sql = std::string("INSERT INTO checkpoints (job_id, attempt, iteration, solver, bytes, crc32, "
                                  "created_ms) SELECT $1::text, $2::int, $3::bigint, $4::text, $5::bytea, $6::bigint, ") +
                      kDbNowMs + " FROM jobs WHERE id = $1";
    AppendFence(fence, &sql, &p);
    sql += " FOR SHARE ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, iteration = "
           "EXCLUDED.iteration, solver = EXCLUDED.solver, bytes = EXCLUDED.bytes, crc32 = EXCLUDED.crc32, "
           "created_ms = EXCLUDED.created_ms";
    // Committed without waiting for the WAL flush: a checkpoint only saves
    // work. A killed replica loses nothing by it (the database still writes
    // the commit out within wal_writer_delay); a crash of the database server
    // itself may lose the last fraction of a second of checkpoints, and the
    // job then resumes from an older one. Job states, kernels and data sets
    // keep durable commits.
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    KLS_RETURN_IF_ERROR(c->Run("SET LOCAL synchronous_commit = off"));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec(sql, p));
    if (std::strcmp(PQcmdTuples(r.get()), "0") == 0) return FenceError(*c, cp.job_id, fence);
    return tx.Commit();
  }

  StatusOr<std::optional<CheckpointRecord>> GetCheckpoint(const std::string& job_id) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("GetCheckpoint"));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec("SELECT attempt::int8, iteration, solver, bytes, crc32, created_ms FROM "
                                           "checkpoints WHERE job_id = $1",
                                           Params().Text(job_id), /*binary_result=*/true));
    if (PQntuples(r.get()) == 0) return std::optional<CheckpointRecord>();
    CheckpointRecord cp;
    cp.job_id = job_id;
    cp.attempt = static_cast<int>(GetBinaryInt8(r.get(), 0, 0));
    cp.iteration = GetBinaryInt8(r.get(), 0, 1);
    cp.solver = GetText(r.get(), 0, 2);
    cp.bytes = GetText(r.get(), 0, 3);
    const uint32_t crc = static_cast<uint32_t>(GetBinaryInt8(r.get(), 0, 4));
    cp.created_unix_ms = GetBinaryInt8(r.get(), 0, 5);
    if (Crc32Of(cp.bytes) != crc) {
      return DataLossError("checkpoint of job " + job_id + " fails its CRC-32");
    }
    return std::optional<CheckpointRecord>(std::move(cp));
  }

  void SetListener(std::function<void(const StoreEvent&)> listener) override { listener_.Set(std::move(listener)); }

  Status Ping() override {
    auto c = Acquire("Ping");
    if (!c.ok()) return c.status();
    auto r = (*c)->Exec("SELECT version FROM kls_schema");
    if (!r.ok()) return UnavailableError(r.status().message());
    if (PQntuples(r->get()) != 1) return UnavailableError("Ping: kls_schema has no version row");
    const int64_t v = GetInt(r->get(), 0, 0);
    if (v < kSchemaVersion || v > kNewestServedSchema) {
      return UnavailableError("Ping: database schema version " + std::to_string(v) + ", this kls-server uses " +
                              std::to_string(kSchemaVersion) + " and serves on " + std::to_string(kSchemaVersion) +
                              ".." + std::to_string(kNewestServedSchema));
    }
    return OkStatus();
  }

  // ---- kernels ---------------------------------------------------------------------
  StatusOr<KernelRecord> PutKernel(KernelRecord record, const LearnedKernel& kernel,
                                   const std::vector<Attachment>& attachments) override {
    if (record.name.empty()) return InvalidArgumentError("kernel name is empty");
    KLS_ASSIGN_OR_RETURN(std::string image, EncodeKernelArtifact(kernel, attachments));
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("PutKernel"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    std::string artifact;
    KLS_ASSIGN_OR_RETURN(KernelRecord r, InsertKernel(*c, std::move(record), kernel, image, &artifact));
    KLS_RETURN_IF_ERROR(tx.Commit());
    CachePut(artifact, image);
    return r;
  }

  StatusOr<KernelRecord> GetKernelRecord(const std::string& name, int64_t version,
                                         const std::string& alias) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("GetKernelRecord"));
    return FetchKernel(*c, name, version, alias, nullptr);
  }

  StatusOr<LearnedKernel> LoadKernel(const std::string& name, int64_t version) override {
    KLS_ASSIGN_OR_RETURN(StoredModel m, LoadModel(name, version));
    return std::move(m.kernel);
  }

  StatusOr<StoredModel> LoadModel(const std::string& name, int64_t version) override {
    std::string artifact;
    KernelRecord r;
    {
      KLS_ASSIGN_OR_RETURN(auto c, Acquire("LoadModel"));
      KLS_ASSIGN_OR_RETURN(r, FetchKernel(*c, name, version, "", &artifact));
    }
    KLS_ASSIGN_OR_RETURN(auto a, OpenCached(artifact, "LoadModel"));
    return DecodeKernelArtifact(*a, r);
  }

  StatusOr<std::vector<KernelRecord>> ListKernels(const std::string& name) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ListKernels"));
    Params p;
    std::string sql = std::string("SELECT ") + kKernelColumns + " FROM kernels";
    if (!name.empty()) {
      sql += " WHERE name = $1 ORDER BY version";
      p.Text(name);
    } else {
      sql += " ORDER BY name, version";
    }
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec(sql, p));
    std::vector<KernelRecord> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(ReadKernel(r.get(), i, nullptr));
    return out;
  }

  Status DeleteKernel(const std::string& name, int64_t version) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("DeleteKernel"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    Params p;
    p.Text(name);
    if (version) p.Int(version);
    const std::string where = version ? " WHERE name = $1 AND version = $2" : " WHERE name = $1";
    KLS_RETURN_IF_ERROR(c->Run("DELETE FROM aliases" + where, p));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec("DELETE FROM kernels" + where + " RETURNING artifact", p));
    if (PQntuples(r.get()) == 0) {
      return NotFoundError("kernel \"" + name + "\"" + (version ? " version " + std::to_string(version) : "") +
                           " does not exist");
    }
    std::vector<std::string> artifacts;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      artifacts.push_back(GetText(r.get(), i, 0));
      KLS_RETURN_IF_ERROR(c->Run("DELETE FROM artifacts WHERE id = $1", Params().Text(artifacts.back())));
    }
    KLS_RETURN_IF_ERROR(c->Notify(StoreEvent::Kind::kKernelChanged, name));
    KLS_RETURN_IF_ERROR(tx.Commit());
    for (const auto& a : artifacts) CacheRemove(a);
    return OkStatus();
  }

  Status SetAlias(const std::string& name, const std::string& alias, int64_t version) override {
    if (alias.empty()) return InvalidArgumentError("alias is empty");
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("SetAlias"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    // Lock the version against a concurrent DeleteKernel (which deletes
    // aliases first, then versions) until the alias is in.
    KLS_RETURN_IF_ERROR(LockKernelName(*c, name));
    KLS_RETURN_IF_ERROR(FetchKernel(*c, name, version, "", nullptr).status());
    KLS_RETURN_IF_ERROR(c->Run("INSERT INTO aliases (name, alias, version) VALUES ($1, $2, $3) ON CONFLICT (name, "
                               "alias) DO UPDATE SET version = EXCLUDED.version",
                               Params().Text(name).Text(alias).Int(version)));
    KLS_RETURN_IF_ERROR(c->Notify(StoreEvent::Kind::kKernelChanged, name));
    KLS_RETURN_IF_ERROR(tx.Commit());
    return OkStatus();
  }

  // ---- migration (CopyStore): records keep their ids, versions and times -----------
  StatusOr<std::vector<AliasRecord>> ListAliases() override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ListAliases"));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec("SELECT name, alias, version FROM aliases ORDER BY name, alias"));
    std::vector<AliasRecord> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      out.push_back({GetText(r.get(), i, 0), GetText(r.get(), i, 1), GetInt(r.get(), i, 2)});
    }
    return out;
  }

  Status ImportDataset(const DatasetRecord& r, const StoredDataset& data) override {
    KLS_ASSIGN_OR_RETURN(std::string image, EncodeDatasetArtifact(data));
    const std::string artifact = NewId("a");
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ImportDataset"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    KLS_RETURN_IF_ERROR(InsertArtifact(*c, artifact, image));
    KLS_ASSIGN_OR_RETURN(
        Result ins, c->Exec("INSERT INTO datasets (id, name, num_points, dim, num_classes, num_constraints, artifact, "
                            "created_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (id) DO NOTHING",
                            Params().Text(r.id).Text(r.name).Int(data.data.num_points()).Int(data.data.dim())
                                .Int(data.data.num_classes()).Int(data.constraints.size()).Text(artifact)
                                .Int(r.created_unix_ms)));
    if (std::strcmp(PQcmdTuples(ins.get()), "0") == 0) {
      return Status(StatusCode::kAlreadyExists, "data set \"" + r.id + "\" already exists");
    }
    return tx.Commit();
  }

  Status ImportKernel(const KernelRecord& r, const StoredModel& model) override {
    if (r.name.empty() || r.version < 1) {
      return InvalidArgumentError("kernel \"" + r.name + "\" version " + std::to_string(r.version) +
                                  ": a name and a version >= 1 are needed");
    }
    KLS_ASSIGN_OR_RETURN(std::string image, EncodeKernelArtifact(model.kernel, model.attachments));
    const std::string artifact = NewId("a");
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ImportKernel"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    KLS_RETURN_IF_ERROR(LockKernelName(*c, r.name));
    KLS_RETURN_IF_ERROR(InsertArtifact(*c, artifact, image));
    KLS_ASSIGN_OR_RETURN(
        Result ins,
        c->Exec("INSERT INTO kernels (name, version, job_id, dataset_id, method, num_points, rank, summary_json, "
                "artifact, created_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT (name, version) DO NOTHING",
                Params().Text(r.name).Int(r.version).Text(r.job_id).Text(r.dataset_id).Text(r.method)
                    .Int(model.kernel.num_points()).Int(model.kernel.rank()).Text(r.summary_json).Text(artifact)
                    .Int(r.created_unix_ms)));
    if (std::strcmp(PQcmdTuples(ins.get()), "0") == 0) {
      return Status(StatusCode::kAlreadyExists,
                    "kernel \"" + r.name + "\" version " + std::to_string(r.version) + " already exists");
    }
    KLS_RETURN_IF_ERROR(c->Notify(StoreEvent::Kind::kKernelChanged, r.name));
    return tx.Commit();
  }

  Status ImportJob(const JobRecord& job) override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("ImportJob"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    Params p;
    BindJob(job, &p);
    KLS_ASSIGN_OR_RETURN(Result ins, c->Exec(std::string(kInsertJobSql) + " ON CONFLICT (id) DO NOTHING", p));
    if (std::strcmp(PQcmdTuples(ins.get()), "0") == 0) {
      return Status(StatusCode::kAlreadyExists, "job \"" + job.id + "\" already exists");
    }
    KLS_RETURN_IF_ERROR(NotifyJobWrite(*c, job.id, job.state));
    return tx.Commit();
  }

  StatusOr<std::vector<std::string>> CheckIntegrity() override {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("CheckIntegrity"));
    std::vector<std::string> problems;
    KLS_ASSIGN_OR_RETURN(Result refs,
                         c->Exec("SELECT 'data set ' || id, artifact FROM datasets UNION ALL "
                                 "SELECT 'kernel ' || name || ' v' || version, artifact FROM kernels ORDER BY 1"));
    for (int i = 0; i < PQntuples(refs.get()); ++i) {
      const std::string what = GetText(refs.get(), i, 0);
      const std::string artifact = GetText(refs.get(), i, 1);
      auto bytes = FetchArtifact(*c, artifact);
      if (!bytes.ok()) {
        if (bytes.status().code() == StatusCode::kUnavailable) return bytes.status();
        problems.push_back(what + ": " + bytes.status().ToString());
        continue;
      }
      Status st = VerifyArtifactBytes(*bytes, "artifact \"" + artifact + "\"");
      if (!st.ok()) problems.push_back(what + ": " + st.ToString());
    }
    KLS_ASSIGN_OR_RETURN(Result orphans, c->Exec("SELECT id FROM artifacts a WHERE NOT EXISTS (SELECT 1 FROM datasets "
                                                 "d WHERE d.artifact = a.id) AND NOT EXISTS (SELECT 1 FROM kernels k "
                                                 "WHERE k.artifact = a.id) ORDER BY id"));
    for (int i = 0; i < PQntuples(orphans.get()); ++i) {
      problems.push_back("unreferenced artifact " + GetText(orphans.get(), i, 0));
    }
    KLS_ASSIGN_OR_RETURN(Result aliases, c->Exec("SELECT name, alias, version FROM aliases WHERE NOT EXISTS (SELECT 1 "
                                                 "FROM kernels k WHERE k.name = aliases.name AND k.version = "
                                                 "aliases.version) ORDER BY name, alias"));
    for (int i = 0; i < PQntuples(aliases.get()); ++i) {
      problems.push_back("alias " + GetText(aliases.get(), i, 0) + "@" + GetText(aliases.get(), i, 1) +
                         " names missing version " + GetText(aliases.get(), i, 2));
    }
    return problems;
  }

  /// The artifact's file in the local cache.
  std::string CachePath(const std::string& artifact) const {
    return (fs::path(cache_dir_) / (artifact + ".art")).string();
  }

 private:
  // ---- schema ----------------------------------------------------------------------
  Status Migrate() {
    KLS_ASSIGN_OR_RETURN(auto c, Acquire("opening the PostgreSQL store"));
    Transaction tx(*c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    // Replicas starting together: the first creates, the others wait here and
    // then find the current version.
    KLS_RETURN_IF_ERROR(c->Run("SELECT pg_advisory_xact_lock($1)", Params().Int(kSchemaLockKey)));
    KLS_RETURN_IF_ERROR(c->Run("CREATE TABLE IF NOT EXISTS kls_schema (version integer NOT NULL)"));
    KLS_ASSIGN_OR_RETURN(Result r, c->Exec("SELECT version FROM kls_schema"));
    if (PQntuples(r.get()) > 1) {
      return FailedPreconditionError("kls_schema has " + std::to_string(PQntuples(r.get())) + " rows, expected one");
    }
    const int64_t version = PQntuples(r.get()) ? GetInt(r.get(), 0, 0) : 0;
    if (version > kNewestServedSchema) {
      return FailedPreconditionError("database schema version " + std::to_string(version) +
                                     " is newer than this kls-server supports (" + std::to_string(kSchemaVersion) +
                                     ", and serves on up to " + std::to_string(kNewestServedSchema) +
                                     "); upgrade kls-server");
    }
    if (version > kSchemaVersion) {
      // The next release migrated it (a rollout in progress): served as it
      // is, never migrated back (expand/contract, kNewestServedSchema).
      KLS_RETURN_IF_ERROR(tx.Commit());
      if (options_.schema_versions != nullptr) *options_.schema_versions = {version, version};
      return OkStatus();
    }
    if (version == 0) KLS_RETURN_IF_ERROR(c->RunScript(kSchemaV1));
    if (version < 2) KLS_RETURN_IF_ERROR(c->RunScript(kSchemaV2));
    if (version < 3) KLS_RETURN_IF_ERROR(c->RunScript(kSchemaV3));
    if (version < 4) KLS_RETURN_IF_ERROR(c->RunScript(kSchemaV4));
    if (version < 5) KLS_RETURN_IF_ERROR(c->RunScript(kSchemaV5));
    if (version == 0) {
      KLS_RETURN_IF_ERROR(c->Run("INSERT INTO kls_schema (version) VALUES ($1)", Params().Int(kSchemaVersion)));
    } else if (version < kSchemaVersion) {
      KLS_RETURN_IF_ERROR(c->Run("UPDATE kls_schema SET version = $1", Params().Int(kSchemaVersion)));
    }
    KLS_RETURN_IF_ERROR(tx.Commit());
    if (options_.schema_versions != nullptr) *options_.schema_versions = {version, kSchemaVersion};
    return OkStatus();
  }

  // ---- replica liveness ---------------------------------------------------------------
  /// On a session of its own: a fresh liveness key for `owner`, held until
  /// the process (or the session) ends, and recorded in kls_replicas; then
  /// the records of owners that are gone and own no running job are dropped.
  /// Called with liveness_mu_ held.
  Status TakeLivenessLock(const std::string& owner, Liveness* l) {
    const std::string op = "registering replica " + owner;
    Conn c = Connect(options_);
    if (PQstatus(c.get()) != CONNECTION_OK) {
      return UnavailableError(op + ": PostgreSQL is unavailable: " + ConnError(c.get()));
    }
    std::mt19937 rng(std::random_device{}());
    int key = -1;
    for (int tries = 0; tries < 16 && key < 0; ++tries) {
      const int candidate = static_cast<int>(rng() & 0x7fffffff);
      KLS_ASSIGN_OR_RETURN(Result r, ExecOn(c.get(), "SELECT pg_try_advisory_lock($1::int, $2::int)",
                                            Params().Int(kLivenessLockClass).Int(candidate), op));
      if (GetText(r.get(), 0, 0) == "t") key = candidate;
    }
    if (key < 0) return InternalError(op + ": no free liveness key after 16 tries");
    KLS_RETURN_IF_ERROR(ExecOn(c.get(),
                               "INSERT INTO kls_replicas (owner, lock_key, registered_at) VALUES ($1, $2::int, "
                               "clock_timestamp()) ON CONFLICT (owner) DO UPDATE SET lock_key = EXCLUDED.lock_key, "
                               "registered_at = EXCLUDED.registered_at",
                               Params().Text(owner).Int(key), op)
                            .status());
    KLS_RETURN_IF_ERROR(ExecOn(c.get(),
                               "DELETE FROM kls_replicas d WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE state = "
                               "'running' AND owner = d.owner) AND NOT " + LivenessHeldSql("d.lock_key"),
                               Params(), op)
                            .status());
    l->session = std::move(c);
    l->key = key;
    return OkStatus();
  }

  // ---- helpers on a connection ------------------------------------------------------
  StatusOr<DatasetRecord> FetchDataset(PooledConn& c, const std::string& id, std::string* artifact) {
    KLS_ASSIGN_OR_RETURN(Result r, c.Exec(std::string("SELECT ") + kDatasetColumns + " FROM datasets WHERE id = $1",
                                          Params().Text(id)));
    if (PQntuples(r.get()) == 0) return NotFoundError("data set \"" + id + "\" does not exist");
    return ReadDataset(r.get(), 0, artifact);
  }

  StatusOr<KernelRecord> FetchKernel(PooledConn& c, const std::string& name, int64_t version,
                                     const std::string& alias, std::string* artifact) {
    if (!alias.empty()) {
      KLS_ASSIGN_OR_RETURN(Result a, c.Exec("SELECT version FROM aliases WHERE name = $1 AND alias = $2",
                                            Params().Text(name).Text(alias)));
      if (PQntuples(a.get()) == 0) return NotFoundError("kernel \"" + name + "\" has no alias \"" + alias + "\"");
      version = GetInt(a.get(), 0, 0);
    }
    Params p;
    p.Text(name);
    std::string sql = std::string("SELECT ") + kKernelColumns + " FROM kernels WHERE name = $1";
    if (version) {
      sql += " AND version = $2";
      p.Int(version);
    } else {
      sql += " ORDER BY version DESC LIMIT 1";
    }
    KLS_ASSIGN_OR_RETURN(Result r, c.Exec(sql, p));
    if (PQntuples(r.get()) == 0) {
      return NotFoundError("kernel \"" + name + "\"" + (version ? " version " + std::to_string(version) : "") +
                           " does not exist");
    }
    return ReadKernel(r.get(), 0, artifact);
  }

  Status LockKernelName(PooledConn& c, const std::string& name) {
    return c.Run("SELECT pg_advisory_xact_lock($1, hashtext($2))", Params().Int(kKernelLockClass).Text(name));
  }

  /// Inside a transaction: version max+1 under the name's advisory lock, the
  /// artifact chunks, the kernel row, and the kernel-changed event.
  StatusOr<KernelRecord> InsertKernel(PooledConn& c, KernelRecord r, const LearnedKernel& kernel,
                                      const std::string& image, std::string* artifact) {
    KLS_RETURN_IF_ERROR(LockKernelName(c, r.name));
    // Never a version given before, even one whose kernel was deleted.
    KLS_ASSIGN_OR_RETURN(Result v, c.Exec("SELECT GREATEST((SELECT COALESCE(MAX(version), 0) FROM kernels WHERE name = "
                                          "$1), (SELECT COALESCE(MAX(last_version), 0) FROM kernel_names WHERE name = "
                                          "$1)) + 1",
                                          Params().Text(r.name)));
    r.version = GetInt(v.get(), 0, 0);
    KLS_RETURN_IF_ERROR(c.Run("INSERT INTO kernel_names (name, last_version) VALUES ($1, $2) ON CONFLICT (name) DO "
                              "UPDATE SET last_version = GREATEST(kernel_names.last_version, EXCLUDED.last_version)",
                              Params().Text(r.name).Int(r.version)));
    r.num_points = kernel.num_points();
    r.rank = kernel.rank();
    r.created_unix_ms = NowMs();
    *artifact = NewId("a");
    KLS_RETURN_IF_ERROR(InsertArtifact(c, *artifact, image));
    KLS_RETURN_IF_ERROR(c.Run("INSERT INTO kernels (name, version, job_id, dataset_id, method, num_points, rank, "
                              "summary_json, artifact, created_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
                              Params().Text(r.name).Int(r.version).Text(r.job_id).Text(r.dataset_id).Text(r.method)
                                  .Int(r.num_points).Int(r.rank).Text(r.summary_json).Text(*artifact)
                                  .Int(r.created_unix_ms)));
    KLS_RETURN_IF_ERROR(c.Notify(StoreEvent::Kind::kKernelChanged, r.name));
    return r;
  }

  Status InsertArtifact(PooledConn& c, const std::string& id, const std::string& image) {
    const int chunks = static_cast<int>((image.size() + kChunkBytes - 1) / kChunkBytes);
    KLS_RETURN_IF_ERROR(c.Run("INSERT INTO artifacts (id, bytes, chunks, created_ms) VALUES ($1, $2, $3, $4)",
                              Params().Text(id).Int(static_cast<int64_t>(image.size())).Int(chunks).Int(NowMs())));
    for (int k = 0; k < chunks; ++k) {
      const size_t at = static_cast<size_t>(k) * kChunkBytes;
      const size_t n = std::min(kChunkBytes, image.size() - at);
      KLS_RETURN_IF_ERROR(c.Run("INSERT INTO artifact_chunks (artifact_id, seq, bytes) VALUES ($1, $2, $3)",
                                Params().Text(id).Int(k).Bytes(image.data() + at, n)));
    }
    return OkStatus();
  }

  /// The artifact's bytes from its chunks; DATA_LOSS when chunks are missing.
  StatusOr<std::string> FetchArtifact(PooledConn& c, const std::string& id) {
    KLS_ASSIGN_OR_RETURN(Result meta, c.Exec("SELECT bytes, chunks FROM artifacts WHERE id = $1", Params().Text(id)));
    if (PQntuples(meta.get()) == 0) return DataLossError("artifact \"" + id + "\" is missing from the database");
    const int64_t bytes = GetInt(meta.get(), 0, 0);
    const int64_t chunks = GetInt(meta.get(), 0, 1);
    std::string out;
    out.reserve(static_cast<size_t>(bytes));
    // One chunk per statement: a large artifact never needs one giant result.
    for (int64_t k = 0; k < chunks; ++k) {
      KLS_ASSIGN_OR_RETURN(Result r, c.Exec("SELECT bytes FROM artifact_chunks WHERE artifact_id = $1 AND seq = $2",
                                            Params().Text(id).Int(k), /*binary_result=*/true));
      if (PQntuples(r.get()) == 0) {
        return DataLossError("artifact \"" + id + "\" is missing chunk " + std::to_string(k) + " of " +
                             std::to_string(chunks));
      }
      out.append(PQgetvalue(r.get(), 0, 0), PQgetlength(r.get(), 0, 0));
    }
    if (static_cast<int64_t>(out.size()) != bytes) {
      return DataLossError("artifact \"" + id + "\" has " + std::to_string(out.size()) + " bytes in its chunks, " +
                           std::to_string(bytes) + " recorded");
    }
    return out;
  }

  static void BindJob(const JobRecord& j, Params* p) {
    p->Text(j.id).Text(j.dataset_id).Text(j.method).Text(j.options_json).Text(JobStateName(j.state))
        .Int(j.priority).Int(j.attempts).Real(j.deadline_seconds).Text(j.error).Text(j.kernel_name)
        .Int(j.kernel_version).Text(j.progress_json).Int(j.created_unix_ms).Int(j.started_unix_ms)
        .Int(j.finished_unix_ms).Text(j.owner).Int(j.counted_failures).Text(j.last_attempt_end)
        .Int(j.lost_attempts).Int(j.not_before_unix_ms);
  }

  Status NotifyJobWrite(PooledConn& c, const std::string& id, JobState state) {
    KLS_RETURN_IF_ERROR(c.Notify(StoreEvent::Kind::kJobChanged, id));
    if (state == JobState::kQueued) KLS_RETURN_IF_ERROR(c.Notify(StoreEvent::Kind::kJobQueued, id));
    return OkStatus();
  }

  /// UpdateJob / UpdateJobFenced: one transaction, events delivered after it.
  Status WriteJob(PooledConn& c, const JobRecord& job, const JobFence* fence) {
    Transaction tx(c);
    KLS_RETURN_IF_ERROR(tx.Begin());
    KLS_RETURN_IF_ERROR(WriteJobInTransaction(c, job, fence));
    KLS_RETURN_IF_ERROR(tx.Commit());
    return OkStatus();
  }

  /// One UPDATE (fenced when `fence` is set). A running state keeps the
  /// stored lease (and owner, unless the record names one); any other state
  /// clears both; a terminal state deletes the checkpoint.
  Status WriteJobInTransaction(PooledConn& c, const JobRecord& job, const JobFence* fence) {
    Params p;
    BindJob(job, &p);
    std::string sql =
        "UPDATE jobs SET dataset_id = $2, method = $3, options_json = $4, state = $5, priority = $6, "
        "attempts = $7, deadline_seconds = $8, error = $9, kernel_name = $10, kernel_version = $11, "
        "progress_json = $12, created_ms = $13, started_ms = $14, finished_ms = $15, "
        "owner = CASE WHEN $5 = 'running' THEN COALESCE(NULLIF($16, ''), owner) ELSE '' END, "
        "counted_failures = $17, last_attempt_end = $18, lost_attempts = $19, not_before_ms = $20, "
        "lease_expires = CASE WHEN $5 = 'running' THEN COALESCE(lease_expires, clock_timestamp()) END "
        "WHERE id = $1";
    if (fence) AppendFence(*fence, &sql, &p);
    KLS_ASSIGN_OR_RETURN(Result r, c.Exec(sql, p));
    if (std::strcmp(PQcmdTuples(r.get()), "0") == 0) {
      if (!fence) return NotFoundError("job \"" + job.id + "\" does not exist");
      return FenceError(c, job.id, *fence);
    }
    if (IsTerminal(job.state)) {
      KLS_RETURN_IF_ERROR(c.Run("DELETE FROM checkpoints WHERE job_id = $1", Params().Text(job.id)));
    }
    return NotifyJobWrite(c, job.id, job.state);
  }

  /// After a fenced write matched no row: NOT_FOUND for an unknown job,
  /// ABORTED saying which condition failed (the SQLite store's messages).
  Status FenceError(PooledConn& c, const std::string& id, const JobFence& fence) {
    KLS_ASSIGN_OR_RETURN(Result r, c.Exec("SELECT state, attempts, owner, " + LeaseEndedSql() +
                                              " FROM jobs WHERE id = $1",
                                          Params().Text(id)));
    if (PQntuples(r.get()) == 0) return NotFoundError("job \"" + id + "\" does not exist");
    const std::string state = GetText(r.get(), 0, 0);
    const int64_t attempts = GetInt(r.get(), 0, 1);
    const std::string owner = GetText(r.get(), 0, 2);
    if (state != JobStateName(fence.state) || attempts != fence.attempt) {
      return AbortedError("job \"" + id + "\" is " + state + " at attempt " + std::to_string(attempts) + ", not " +
                          JobStateName(fence.state) + " at attempt " + std::to_string(fence.attempt));
    }
    if (!fence.owner.empty() && owner != fence.owner) {
      return AbortedError("job \"" + id + "\" is owned by " + owner + ", not " + fence.owner);
    }
    if (fence.lease_expired && GetText(r.get(), 0, 3) == "f") {
      return AbortedError("the lease of job \"" + id + "\" has not expired");
    }
    // The row changed between the write and this read: report it as a lost race.
    return AbortedError("job \"" + id + "\" changed concurrently; fenced write refused");
  }

  // ---- local artifact cache ------------------------------------------------------------
  Status OpenCache() {
    std::error_code ec;
    if (options_.cache_dir.empty()) {
      std::string pattern = (fs::temp_directory_path(ec) / "kls-pg-cache-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr) {
        return InternalError("creating a cache directory \"" + pattern + "\": " + std::strerror(errno));
      }
      cache_dir_ = pattern;
      remove_cache_dir_ = true;
      return OkStatus();
    }
    cache_dir_ = options_.cache_dir;
    fs::create_directories(cache_dir_, ec);
    if (ec) return InternalError("creating cache directory \"" + cache_dir_ + "\": " + ec.message());
    // Index what a previous run left, oldest modification first; temporaries
    // of an interrupted download are removed.
    std::vector<std::pair<fs::file_time_type, std::string>> found;
    for (const auto& e : fs::directory_iterator(cache_dir_, ec)) {
      const std::string f = e.path().filename().string();
      if (f.find(".tmp.") != std::string::npos) {
        fs::remove(e.path(), ec);
        continue;
      }
      if (e.path().extension() != ".art") continue;
      found.emplace_back(e.last_write_time(ec), e.path().stem().string());
    }
    std::sort(found.begin(), found.end());
    std::lock_guard<std::mutex> lock(cache_mu_);
    for (const auto& [t, id] : found) {
      std::error_code size_ec;
      const auto size = fs::file_size(CachePath(id), size_ec);
      if (!size_ec) TouchLocked(id, static_cast<int64_t>(size));
    }
    EvictLocked("");
    return OkStatus();
  }

  /// Records `id` (of `bytes`) as most recently used.
  void TouchLocked(const std::string& id, int64_t bytes) {
    auto it = cache_index_.find(id);
    if (it != cache_index_.end()) {
      cache_lru_.splice(cache_lru_.end(), cache_lru_, it->second);
      return;
    }
    cache_lru_.push_back({id, bytes});
    cache_index_[id] = std::prev(cache_lru_.end());
    cache_bytes_ += bytes;
  }

  /// Removes least recently used files until the budget holds (never `keep`).
  void EvictLocked(const std::string& keep) {
    if (options_.cache_disk_bytes <= 0) return;
    auto it = cache_lru_.begin();
    while (cache_bytes_ > options_.cache_disk_bytes && it != cache_lru_.end()) {
      if (it->id == keep) {
        ++it;
        continue;
      }
      std::error_code ec;
      fs::remove(CachePath(it->id), ec);
      cache_bytes_ -= it->bytes;
      cache_index_.erase(it->id);
      it = cache_lru_.erase(it);
    }
  }

  void CacheRemove(const std::string& id) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    std::error_code ec;
    fs::remove(CachePath(id), ec);
    auto it = cache_index_.find(id);
    if (it == cache_index_.end()) return;
    cache_bytes_ -= it->second->bytes;
    cache_lru_.erase(it->second);
    cache_index_.erase(it);
  }

  /// Writes a verified image to the cache (best effort: a failure only means
  /// a later download).
  void CachePut(const std::string& id, const std::string& image) {
    auto guard = LockArtifact(id);
    if (!WriteFileAtomically(CachePath(id), image).ok()) return;
    std::lock_guard<std::mutex> lock(cache_mu_);
    TouchLocked(id, static_cast<int64_t>(image.size()));
    EvictLocked(id);
  }

  /// Serializes downloads of one artifact (they share a temporary file name).
  std::shared_ptr<std::mutex> ArtifactMutex(const std::string& id) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    for (auto it = artifact_mu_.begin(); it != artifact_mu_.end();) {
      it = it->second.use_count() == 1 ? artifact_mu_.erase(it) : std::next(it);
    }
    auto& m = artifact_mu_[id];
    if (!m) m = std::make_shared<std::mutex>();
    return m;
  }
  struct ArtifactLock {
    std::shared_ptr<std::mutex> mu;
    std::unique_lock<std::mutex> lock;
  };
  ArtifactLock LockArtifact(const std::string& id) {
    ArtifactLock l{ArtifactMutex(id), {}};
    l.lock = std::unique_lock<std::mutex>(*l.mu);
    return l;
  }

  /// The verified, mapped artifact from the cache, downloading it on a miss;
  /// a cached file failing verification is deleted and downloaded once more.
  StatusOr<std::shared_ptr<MappedArtifact>> OpenCached(const std::string& id, const std::string& op) {
    const std::string path = CachePath(id);
    auto guard = LockArtifact(id);
    auto a = MappedArtifact::Open(path);
    if (a.ok()) {
      std::lock_guard<std::mutex> lock(cache_mu_);
      TouchLocked(id, static_cast<int64_t>((*a)->file_bytes()));
      return a;
    }
    if (a.status().code() != StatusCode::kNotFound) CacheRemove(id);  // corrupted or truncated: refetch
    std::string image;
    {
      KLS_ASSIGN_OR_RETURN(auto c, Acquire(op));
      KLS_ASSIGN_OR_RETURN(image, FetchArtifact(*c, id));
    }
    KLS_RETURN_IF_ERROR(VerifyArtifactBytes(image, "artifact \"" + id + "\" in the database"));
    KLS_RETURN_IF_ERROR(WriteFileAtomically(path, image));
    a = MappedArtifact::Open(path);
    if (!a.ok()) return a.status();
    std::lock_guard<std::mutex> lock(cache_mu_);
    TouchLocked(id, static_cast<int64_t>((*a)->file_bytes()));
    EvictLocked(id);
    return a;
  }

  // ---- LISTEN thread ------------------------------------------------------------------
  /// Waits up to `d` unless the store is closing; true when closing.
  bool SleepOrStop(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(stop_mu_);
    return stop_cv_.wait_for(lock, d, [&] { return stop_; });
  }
  bool Stopping() {
    std::lock_guard<std::mutex> lock(stop_mu_);
    return stop_;
  }

  void ListenLoop() {
    auto backoff = std::chrono::milliseconds(100);
    while (!Stopping()) {
      Conn conn = Connect(options_);
      if (PQstatus(conn.get()) == CONNECTION_OK) {
        Result r(PQexec(conn.get(), (std::string("LISTEN ") + kChannel).c_str()));
        if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK) {
          backoff = std::chrono::milliseconds(100);
          {
            std::lock_guard<std::mutex> lock(stop_mu_);
            listening_ = true;
          }
          stop_cv_.notify_all();
          // Events sent while this replica was not listening are lost:
          // "anything may have changed" (store.h, SetListener).
          Deliver({StoreEvent{StoreEvent::Kind::kKernelChanged, ""}, StoreEvent{StoreEvent::Kind::kJobQueued, ""},
                   StoreEvent{StoreEvent::Kind::kDatasetChanged, ""}});
          PollNotifications(conn.get());
          continue;
        }
      }
      conn.reset();
      if (SleepOrStop(backoff)) return;
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
  }

  /// Dispatches notifications until the connection breaks or the store closes.
  void PollNotifications(PGconn* conn) {
    const int fd = PQsocket(conn);
    while (!Stopping()) {
      pollfd p{fd, POLLIN, 0};
      const int n = ::poll(&p, 1, 100);  // short: the loop also watches stop_
      if (n < 0 && errno != EINTR) return;
      if (n > 0) {
        if (!PQconsumeInput(conn)) return;
        while (PGnotify* note = PQnotifies(conn)) {
          Dispatch(note->extra ? note->extra : "");
          PQfreemem(note);
        }
      }
      if (PQstatus(conn) != CONNECTION_OK) return;
    }
  }

  /// Payload "<token> <kind char> <name>"; our own events were delivered already.
  void Dispatch(const std::string& payload) {
    const size_t a = payload.find(' ');
    if (a == std::string::npos || payload.size() < a + 3) return;
    if (payload.compare(0, a, token_) == 0) return;
    StoreEvent e;
    switch (payload[a + 1]) {
      case 'q': e.kind = StoreEvent::Kind::kJobQueued; break;
      case 'j': e.kind = StoreEvent::Kind::kJobChanged; break;
      case 'k': e.kind = StoreEvent::Kind::kKernelChanged; break;
      case 'd': e.kind = StoreEvent::Kind::kDatasetChanged; break;
      default: return;
    }
    e.name = payload.size() > a + 3 ? payload.substr(a + 3) : "";
    Deliver({e});
  }

  struct CacheEntry {
    std::string id;
    int64_t bytes;
  };

  PostgresStoreOptions options_;
  std::string token_;  ///< identifies this store instance's NOTIFY payloads

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<Conn> slots_;  ///< slot i is used only by the holder of i
  std::vector<int> free_;

  ListenerSlot listener_;

  std::mutex liveness_mu_;                    ///< guards liveness_
  std::map<std::string, Liveness> liveness_;  ///< by replica id (one per process, several in tests)

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  bool listening_ = false;  ///< the listener's first LISTEN succeeded (guarded by stop_mu_)
  std::thread listener_thread_;

  std::string cache_dir_;
  bool remove_cache_dir_ = false;
  std::mutex cache_mu_;  ///< guards the LRU index and artifact_mu_
  std::list<CacheEntry> cache_lru_;  ///< least recently used first
  std::unordered_map<std::string, std::list<CacheEntry>::iterator> cache_index_;
  int64_t cache_bytes_ = 0;
  std::map<std::string, std::shared_ptr<std::mutex>> artifact_mu_;
};

PooledConn::~PooledConn() { store_->Release(slot_); }

void PooledConn::DeliverEvents() {
  store_->Deliver(events_);
  events_.clear();
}

Status PooledConn::Notify(StoreEvent::Kind kind, const std::string& name) {
  events_.push_back({kind, name});
  return Run("SELECT pg_notify($1, $2)",
             Params().Text(kChannel).Text(store_->token() + " " + KindChar(kind) + " " + name));
}

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const PostgresStoreOptions& options) {
  return GuardExceptions("opening the PostgreSQL store", [&]() -> StatusOr<std::unique_ptr<Store>> {
    auto s = std::make_unique<PostgresStore>();
    KLS_RETURN_IF_ERROR(s->Open(options));
    return std::unique_ptr<Store>(std::move(s));
  });
}

}  // namespace kls::store
