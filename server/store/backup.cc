// Backups of the embedded store: see backup.h.
#include "server/store/backup.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "server/store/store.h"

namespace kls::store {
namespace {

namespace fs = std::filesystem;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Quote(const std::string& path) { return "\"" + path + "\""; }

Status FileError(const char* what, const std::string& path, int err) {
  return InternalError(std::string(what) + " " + Quote(path) + ": " + std::strerror(err));
}

struct Sqlite {
  sqlite3* db = nullptr;
  ~Sqlite() {
    if (db) sqlite3_close(db);
  }
};

struct Sha256 {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Sha256() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx); }
  void Update(const void* data, size_t n) { EVP_DigestUpdate(ctx, data, n); }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
      out += kHex[md[i] >> 4];
      out += kHex[md[i] & 15];
    }
    return out;
  }
};

Status FsyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return FileError("opening", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return FileError("fsync", path, err);
  return OkStatus();
}

/// Copies src to dst (created, must not exist), fsyncs it, and returns the
/// SHA-256 of the bytes copied. NOT_FOUND when src does not exist.
StatusOr<std::string> CopyFileHashed(const std::string& src, const std::string& dst, int64_t* size) {
  const int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    if (errno == ENOENT) return NotFoundError(Quote(src) + " does not exist");
    return FileError("opening", src, errno);
  }
  const int out = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    return FileError("creating", dst, err);
  }
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  int64_t total = 0;
  Status st = OkStatus();
  while (true) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      st = FileError("reading", src, errno);
      break;
    }
    if (n == 0) break;
    sha.Update(buf.data(), static_cast<size_t>(n));
    total += n;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0) {
        if (errno == EINTR) continue;
        st = FileError("writing", dst, errno);
        break;
      }
      done += w;
    }
    if (!st.ok()) break;
  }
  if (st.ok() && ::fsync(out) != 0) st = FileError("fsync", dst, errno);
  ::close(in);
  ::close(out);
  if (!st.ok()) return st;
  *size = total;
  return sha.Hex();
}

/// Removes everything inside `dir` (not `dir` itself).
void ClearDirectory(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) fs::remove_all(entry.path(), ec);
}

/// OK when `dir` does not exist or is an empty directory.
Status RequireAbsentOrEmpty(const std::string& dir, const std::string& allowed, const char* what) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return OkStatus();
  if (!fs::is_directory(dir, ec)) {
    return FailedPreconditionError(std::string(what) + " " + Quote(dir) + " exists and is not a directory");
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!allowed.empty() && entry.path().filename() == allowed) continue;
    return FailedPreconditionError(std::string(what) + " " + Quote(dir) + " is not empty (it holds " +
                                   Quote(entry.path().filename().string()) + "); give a new or empty directory");
  }
  if (ec) return InternalError("listing " + Quote(dir) + ": " + ec.message());
  return OkStatus();
}

/// Copies `src_db` into `dst_db` with the online backup API in one read
/// transaction of a separate read-only connection; the copy is switched to
/// rollback-journal mode so that it is one self-contained file.
Status SnapshotDatabase(const std::string& src_db, const std::string& dst_db) {
  Sqlite src, dst;
  if (sqlite3_open_v2(src_db.c_str(), &src.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    return InternalError("opening " + Quote(src_db) + " read-only: " + (src.db ? sqlite3_errmsg(src.db) : "out of memory"));
  }
  sqlite3_busy_timeout(src.db, 5000);
  if (sqlite3_open_v2(dst_db.c_str(), &dst.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    return InternalError("creating " + Quote(dst_db) + ": " + (dst.db ? sqlite3_errmsg(dst.db) : "out of memory"));
  }
  sqlite3_backup* b = sqlite3_backup_init(dst.db, "main", src.db, "main");
  if (!b) return InternalError("starting the backup of " + Quote(src_db) + ": " + sqlite3_errmsg(dst.db));
  int rc = SQLITE_OK;
  // -1: every page in one step, i.e. one read transaction on the source.
  for (int tries = 0; tries < 600; ++tries) {
    rc = sqlite3_backup_step(b, -1);
    if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) {
    return InternalError("copying " + Quote(src_db) + " into " + Quote(dst_db) + ": " + sqlite3_errstr(rc) + " (" +
                         sqlite3_errmsg(src.db) + ")");
  }
  char* err = nullptr;
  if (sqlite3_exec(dst.db, "PRAGMA journal_mode=DELETE;", nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return InternalError("finishing " + Quote(dst_db) + ": " + msg);
  }
  return OkStatus();
}

struct SnapshotContents {
  std::vector<std::string> artifacts;  ///< file names under artifacts/
  int64_t datasets = 0, kernels = 0, jobs = 0, aliases = 0, schema_version = 0;
};

StatusOr<SnapshotContents> ReadSnapshot(const std::string& db_path) {
  Sqlite db;
  if (sqlite3_open_v2(db_path.c_str(), &db.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    return InternalError("opening " + Quote(db_path) + ": " + (db.db ? sqlite3_errmsg(db.db) : "out of memory"));
  }
  SnapshotContents out;
  auto query = [&](const char* sql, const std::function<void(sqlite3_stmt*)>& row) -> Status {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db.db, sql, -1, &s, nullptr) != SQLITE_OK) {
      return InternalError("reading " + Quote(db_path) + " (" + sql + "): " + sqlite3_errmsg(db.db));
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) row(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return InternalError("reading " + Quote(db_path) + ": " + sqlite3_errstr(rc));
    return OkStatus();
  };
  auto count = [&](const char* sql, int64_t* n) {
    return query(sql, [&](sqlite3_stmt* s) { *n = sqlite3_column_int64(s, 0); });
  };
  KLS_RETURN_IF_ERROR(query("SELECT artifact FROM datasets UNION SELECT artifact FROM kernels ORDER BY 1",
                            [&](sqlite3_stmt* s) {
                              const unsigned char* t = sqlite3_column_text(s, 0);
                              out.artifacts.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
                            }));
  KLS_RETURN_IF_ERROR(count("SELECT COUNT(*) FROM datasets", &out.datasets));
  KLS_RETURN_IF_ERROR(count("SELECT COUNT(*) FROM kernels", &out.kernels));
  KLS_RETURN_IF_ERROR(count("SELECT COUNT(*) FROM jobs", &out.jobs));
  KLS_RETURN_IF_ERROR(count("SELECT COUNT(*) FROM aliases", &out.aliases));
  // A schema_version table when the schema has one, else PRAGMA user_version.
  int64_t has_table = 0;
  KLS_RETURN_IF_ERROR(count("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
                            &has_table));
  KLS_RETURN_IF_ERROR(count(has_table ? "SELECT COALESCE(MAX(version), 0) FROM schema_version" : "PRAGMA user_version",
                            &out.schema_version));
  for (const std::string& a : out.artifacts) {
    if (a.empty() || a.find('/') != std::string::npos || a == "." || a == "..") {
      return DataLossError(Quote(db_path) + " names an artifact file " + Quote(a) + " that is not a plain file name");
    }
  }
  return out;
}

std::string UtcTime(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Status WriteManifest(const std::string& backup_dir, const nlohmann::json& manifest) {
  const std::string path = (fs::path(backup_dir) / kBackupManifest).string();
  const std::string tmp = path + ".tmp";
  const std::string text = manifest.dump(2) + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FileError("creating", tmp, errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return FileError("writing", tmp, err);
    }
    done += static_cast<size_t>(w);
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return FileError("fsync", tmp, err);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return FileError("renaming into place", path, errno);
  return FsyncPath(backup_dir, true);
}

// One snapshot attempt. *vanished is set (and OK returned) when an artifact
// the snapshot names no longer exists in the source.
StatusOr<BackupReport> SnapshotOnce(const std::string& data_dir, const std::string& backup_dir,
                                    const std::string& kls_version, std::string* vanished) {
  const std::string src_db = (fs::path(data_dir) / "kls.db").string();
  const std::string dst_db = (fs::path(backup_dir) / "kls.db").string();
  const std::string src_art = (fs::path(data_dir) / "artifacts").string();
  const std::string dst_art = (fs::path(backup_dir) / "artifacts").string();
  std::error_code ec;
  fs::create_directories(dst_art, ec);
  if (ec) return InternalError("creating " + Quote(dst_art) + ": " + ec.message());
  // Artifacts first, then the database: every artifact file present now is
  // linked (or copied) before the snapshot, so a record the snapshot names
  // whose kernel or data set is deleted right after cannot lose its file.
  // Only artifacts committed between this pass and the snapshot are taken
  // afterwards; the ones the snapshot does not name are dropped again.
  std::set<std::string> taken;  // file names under dst_art
  int64_t linked = 0;
  std::set<std::string> linked_names;
  // OK with *gone set when src does not exist.
  auto take = [&](const std::string& name, bool* gone) -> Status {
    const std::string src = (fs::path(src_art) / name).string();
    const std::string dst = (fs::path(dst_art) / name).string();
    *gone = false;
    // Artifacts are never changed once renamed into place (a new version is
    // a new file), so a hard link is as good as a copy of the snapshot's file.
    if (::link(src.c_str(), dst.c_str()) == 0) {
      linked_names.insert(name);
      taken.insert(name);
      return OkStatus();
    }
    if (errno == ENOENT && !fs::exists(src, ec)) {
      *gone = true;
      return OkStatus();
    }
    int64_t size = 0;
    auto copied = CopyFileHashed(src, dst, &size);
    if (!copied.ok()) {
      if (copied.status().code() == StatusCode::kNotFound) {
        *gone = true;
        std::error_code ignored;
        fs::remove(dst, ignored);
        return OkStatus();
      }
      return copied.status();
    }
    taken.insert(name);
    return OkStatus();
  };
  {
    std::vector<std::string> present;
    for (const auto& entry : fs::directory_iterator(src_art, ec)) {
      const std::string name = entry.path().filename().string();
      // A "*.tmp.<pid>" file is a write in progress (WriteFileAtomically).
      if (name.find(".tmp.") == std::string::npos) present.push_back(name);
    }
    if (ec) return InternalError("listing " + Quote(src_art) + ": " + ec.message());
    for (const std::string& name : present) {
      bool gone = false;
      KLS_RETURN_IF_ERROR(take(name, &gone));
    }
  }
  const int64_t taken_ms = NowMs();
  KLS_RETURN_IF_ERROR(SnapshotDatabase(src_db, dst_db));
  KLS_ASSIGN_OR_RETURN(const SnapshotContents contents, ReadSnapshot(dst_db));

  BackupReport report;
  report.datasets = contents.datasets;
  report.kernels = contents.kernels;
  report.jobs = contents.jobs;
  report.schema_version = contents.schema_version;
  nlohmann::json files = nlohmann::json::array();
  auto add = [&](const std::string& rel) -> Status {
    int64_t size = 0;
    KLS_ASSIGN_OR_RETURN(const std::string sha, Sha256File((fs::path(backup_dir) / rel).string(), &size));
    files.push_back({{"path", rel}, {"bytes", size}, {"sha256", sha}});
    ++report.files;
    report.bytes += size;
    return OkStatus();
  };
  KLS_RETURN_IF_ERROR(add("kls.db"));
  const std::set<std::string> named(contents.artifacts.begin(), contents.artifacts.end());
  for (const std::string& name : contents.artifacts) {
    if (!taken.count(name)) {
      bool gone = false;
      KLS_RETURN_IF_ERROR(take(name, &gone));
      if (gone) {
        *vanished = (fs::path(src_art) / name).string();
        return report;
      }
    }
    if (linked_names.count(name)) ++linked;
    KLS_RETURN_IF_ERROR(add("artifacts/" + name));
  }
  for (const std::string& name : taken) {
    if (!named.count(name)) fs::remove(fs::path(dst_art) / name, ec);
  }
  report.linked = linked;
  KLS_RETURN_IF_ERROR(FsyncPath(dst_db, false));
  KLS_RETURN_IF_ERROR(FsyncPath(dst_art, true));
  KLS_RETURN_IF_ERROR(FsyncPath(backup_dir, true));

  // The backup must be a healthy data directory: the same check as --check.
  KLS_ASSIGN_OR_RETURN(const IntegrityReport check, CheckDataDirectory(backup_dir));
  if (!check.problems.empty()) {
    std::string all;
    for (const std::string& p : check.problems) all += "\n  " + p;
    return DataLossError("the snapshot of " + Quote(data_dir) + " is damaged (the source is too: run kls-server "
                         "--check on it):" + all);
  }

  nlohmann::json manifest = {
      {"format", "kls-backup/1"},
      {"kls_version", kls_version},
      {"store", "sqlite"},
      {"schema_version", contents.schema_version},
      {"created_unix_ms", taken_ms},
      {"created", UtcTime(taken_ms)},
      {"source", fs::absolute(data_dir).lexically_normal().string()},
      {"counts",
       {{"datasets", contents.datasets}, {"kernels", contents.kernels}, {"jobs", contents.jobs},
        {"aliases", contents.aliases}}},
      {"files", files},
  };
  KLS_RETURN_IF_ERROR(WriteManifest(backup_dir, manifest));
  return report;
}

/// A manifest path is "kls.db" or "artifacts/<plain file name>".
bool SafeManifestPath(const std::string& p) {
  if (p == "kls.db") return true;
  const std::string prefix = "artifacts/";
  if (p.rfind(prefix, 0) != 0) return false;
  const std::string name = p.substr(prefix.size());
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

StatusOr<std::string> Sha256File(const std::string& path, int64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError(Quote(path) + " does not exist");
    return FileError("opening", path, errno);
  }
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  int64_t total = 0;
  while (true) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return FileError("reading", path, err);
    }
    if (n == 0) break;
    sha.Update(buf.data(), static_cast<size_t>(n));
    total += n;
  }
  ::close(fd);
  *size = total;
  return sha.Hex();
}

StatusOr<BackupReport> BackupDataDirectory(const std::string& data_dir, const std::string& backup_dir,
                                           const std::string& kls_version) {
  std::error_code ec;
  const std::string src_db = (fs::path(data_dir) / "kls.db").string();
  if (!fs::is_regular_file(src_db, ec)) {
    return NotFoundError(Quote(src_db) + " does not exist; " + Quote(data_dir) + " is not a kls data directory");
  }
  KLS_RETURN_IF_ERROR(RequireAbsentOrEmpty(backup_dir, "", "the backup directory"));
  const bool created = !fs::exists(backup_dir, ec);
  fs::create_directories(backup_dir, ec);
  if (ec) return InternalError("creating " + Quote(backup_dir) + ": " + ec.message());
  if (fs::equivalent(backup_dir, data_dir, ec)) {
    return FailedPreconditionError("the backup directory is the data directory " + Quote(data_dir));
  }
  auto give_up = [&](Status s) -> StatusOr<BackupReport> {
    if (created) {
      fs::remove_all(backup_dir, ec);
    } else {
      ClearDirectory(backup_dir);
    }
    return s;
  };
  std::string vanished;
  for (int attempt = 1; attempt <= kMaxSnapshotAttempts; ++attempt) {
    ClearDirectory(backup_dir);
    vanished.clear();
    StatusOr<BackupReport> r = GuardExceptions("backing up", [&]() -> StatusOr<BackupReport> {
      return SnapshotOnce(data_dir, backup_dir, kls_version, &vanished);
    });
    if (!r.ok()) return give_up(r.status());
    if (vanished.empty()) {
      r->attempts = attempt;
      return r;
    }
    // A record was deleted (with its file) after the snapshot: take a new one.
    std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
  }
  return give_up(Status(StatusCode::kAborted,
                        "artifact " + Quote(vanished) + ", named by the snapshot of " + Quote(src_db) +
                            ", was deleted before it could be copied, in " + std::to_string(kMaxSnapshotAttempts) +
                            " snapshots in a row (kernels or data sets are being deleted continuously); try again"));
}

StatusOr<RestoreReport> RestoreBackup(const std::string& backup_dir, const std::string& data_dir,
                                      const std::string& allowed_existing) {
  std::error_code ec;
  const std::string manifest_path = (fs::path(backup_dir) / kBackupManifest).string();
  if (!fs::is_regular_file(manifest_path, ec)) {
    return NotFoundError(Quote(manifest_path) + " does not exist; " + Quote(backup_dir) +
                         " is not a complete kls backup");
  }
  KLS_RETURN_IF_ERROR(RequireAbsentOrEmpty(data_dir, allowed_existing, "the restore target"));
  nlohmann::json manifest;
  {
    std::ifstream in(manifest_path);
    try {
      manifest = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      return DataLossError(Quote(manifest_path) + " is not valid JSON: " + e.what());
    }
  }
  RestoreReport report;
  struct Entry {
    std::string path, sha256;
    int64_t bytes = 0;
  };
  std::vector<Entry> entries;
  try {
    if (manifest.value("format", "") != "kls-backup/1") {
      return DataLossError(Quote(manifest_path) + ": format " + Quote(manifest.value("format", "")) +
                           " is not kls-backup/1");
    }
    report.kls_version = manifest.value("kls_version", "");
    const auto& counts = manifest.at("counts");
    report.datasets = counts.value("datasets", int64_t{0});
    report.kernels = counts.value("kernels", int64_t{0});
    report.jobs = counts.value("jobs", int64_t{0});
    std::set<std::string> seen;
    for (const auto& f : manifest.at("files")) {
      Entry e{f.at("path").get<std::string>(), f.at("sha256").get<std::string>(), f.at("bytes").get<int64_t>()};
      if (!SafeManifestPath(e.path) || !seen.insert(e.path).second) {
        return DataLossError(Quote(manifest_path) + " lists " + Quote(e.path) +
                             ", which is not kls.db or artifacts/<file>, or is listed twice");
      }
      entries.push_back(std::move(e));
    }
    if (!seen.count("kls.db")) return DataLossError(Quote(manifest_path) + " does not list kls.db");
  } catch (const std::exception& e) {
    return DataLossError(Quote(manifest_path) + " is malformed: " + e.what());
  }

  // Every checksum before anything is copied.
  for (const Entry& e : entries) {
    const std::string path = (fs::path(backup_dir) / e.path).string();
    int64_t size = 0;
    auto sha = Sha256File(path, &size);
    if (!sha.ok()) {
      return DataLossError("backup file " + Quote(path) + " listed in the manifest cannot be read: " +
                           sha.status().ToString());
    }
    if (size != e.bytes || *sha != e.sha256) {
      return DataLossError("backup file " + Quote(path) + " is damaged: " + std::to_string(size) + " bytes, SHA-256 " +
                           *sha + "; the manifest says " + std::to_string(e.bytes) + " bytes, SHA-256 " + e.sha256);
    }
  }

  fs::create_directories(fs::path(data_dir) / "artifacts", ec);
  if (ec) return InternalError("creating " + Quote((fs::path(data_dir) / "artifacts").string()) + ": " + ec.message());
  for (const Entry& e : entries) {
    const std::string src = (fs::path(backup_dir) / e.path).string();
    const std::string dst = (fs::path(data_dir) / e.path).string();
    int64_t size = 0;
    KLS_ASSIGN_OR_RETURN(const std::string sha, CopyFileHashed(src, dst, &size));
    if (size != e.bytes || sha != e.sha256) {
      return DataLossError("backup file " + Quote(src) + " changed while it was restored (SHA-256 " + sha +
                           ", the manifest says " + e.sha256 + ")");
    }
    ++report.files;
    report.bytes += size;
  }
  KLS_RETURN_IF_ERROR(FsyncPath((fs::path(data_dir) / "artifacts").string(), true));
  KLS_RETURN_IF_ERROR(FsyncPath(data_dir, true));
  return report;
}

}  // namespace kls::store
