// Backups of the embedded store (kls-server --backup / --restore).
//
// BackupDataDirectory takes a consistent snapshot of a data directory while a
// server may be running on it (it does not take the directory's lock): the
// SQLite online backup API copies kls.db through a separate read-only
// connection in one read transaction, then every artifact the COPIED database
// names is hard-linked (same file system; artifacts are immutable once
// renamed into place) or copied into the backup. Artifacts written after the
// snapshot are not needed; an artifact the snapshot names that was deleted
// meanwhile (a kernel or data set deleted during the backup) makes the whole
// snapshot be taken again, and after kMaxSnapshotAttempts the backup fails
// naming the file. Last, MANIFEST.json lists every file with its size and
// SHA-256, the KLS version, the schema version, the time and the counts, and
// the backup is checked like `--check` (so a backup that exists is healthy).
//
// Layout of a backup: DIR/kls.db (rollback-journal mode, self-contained),
// DIR/artifacts/<file>, DIR/MANIFEST.json (written last, atomically: a
// directory without it is an incomplete backup).
//
// RestoreBackup verifies every file of the manifest (size and SHA-256) before
// it copies anything, then copies them into an empty data directory.
#pragma once

#include <cstdint>
#include <string>

#include "core/common/status.h"

namespace kls::store {

/// Name of the manifest inside a backup directory.
inline constexpr const char* kBackupManifest = "MANIFEST.json";
/// Snapshots taken before giving up on artifacts deleted during the backup.
inline constexpr int kMaxSnapshotAttempts = 5;

struct BackupReport {
  int64_t datasets = 0, kernels = 0, jobs = 0;
  int64_t files = 0;           ///< files in the manifest (kls.db + artifacts)
  int64_t bytes = 0;           ///< their total size
  int64_t linked = 0;          ///< artifacts hard-linked rather than copied
  int attempts = 0;            ///< snapshots taken (> 1 when artifacts vanished)
  int64_t schema_version = 0;
};

/// Backs up `data_dir` into `backup_dir`, which must not exist or be empty
/// (FAILED_PRECONDITION otherwise). NOT_FOUND when data_dir has no kls.db;
/// DATA_LOSS / INTERNAL naming the file on a read or write error. On failure
/// what this call created in backup_dir is removed.
StatusOr<BackupReport> BackupDataDirectory(const std::string& data_dir, const std::string& backup_dir,
                                           const std::string& kls_version);

struct RestoreReport {
  int64_t files = 0, bytes = 0;
  int64_t datasets = 0, kernels = 0, jobs = 0;  ///< counts the manifest states
  std::string kls_version;                       ///< the version that took the backup
};

/// Verifies `backup_dir`'s manifest (every listed file's size and SHA-256;
/// DATA_LOSS naming the first file that differs or is missing) and copies the
/// files into `data_dir`, which must exist and contain nothing but
/// `allowed_existing` (the lock file of the caller, FAILED_PRECONDITION
/// otherwise). Does not check the restored store: run CheckDataDirectory.
StatusOr<RestoreReport> RestoreBackup(const std::string& backup_dir, const std::string& data_dir,
                                      const std::string& allowed_existing = "");

/// Hex SHA-256 of a file's bytes; *size its length.
StatusOr<std::string> Sha256File(const std::string& path, int64_t* size);

}  // namespace kls::store
