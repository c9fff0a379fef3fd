// DataDir: the directory a kls-server owns. Opening it creates it if needed and
// takes an exclusive flock(2) on <dir>/kls-server.lock, held until the DataDir
// is destroyed, so two servers (or two KlsServer objects in one process) can
// never share a data directory. The lock file records the holder's pid and
// listen address, which the refusal message quotes and scripts may read.
//
// Thread safety: not thread-safe; owned by KlsServer.
#pragma once

#include <memory>
#include <string>

#include "core/common/status.h"

namespace kls::server {

class DataDir {
 public:
  /// Name of the lock file inside the data directory.
  static constexpr const char* kLockFileName = "kls-server.lock";

  /// Creates `path` (and parents) if missing, then locks it.
  ///   FAILED_PRECONDITION  path exists but is not a directory, or another
  ///                        server holds the lock (message names its pid).
  ///   PERMISSION_DENIED    cannot create or write the directory.
  static StatusOr<std::unique_ptr<DataDir>> Open(const std::string& path);

  ~DataDir();  // Releases the lock (the lock file stays; it is harmless).
  DataDir(const DataDir&) = delete;
  DataDir& operator=(const DataDir&) = delete;

  /// Absolute, normalised path.
  const std::string& path() const { return path_; }

  /// Rewrites the lock file as "pid=<pid>\nlisten=<listen>\n".
  Status RecordListenAddress(const std::string& listen);

 private:
  DataDir(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}
  Status WriteLockFile(const std::string& contents);

  std::string path_;
  int lock_fd_ = -1;
};

}  // namespace kls::server
