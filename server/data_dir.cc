#include "server/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace kls::server {
namespace {

namespace fs = std::filesystem;

Status ErrnoStatus(int err, const std::string& what) {
  const std::string message = what + ": " + std::strerror(err);
  if (err == EACCES || err == EPERM || err == EROFS) return {StatusCode::kPermissionDenied, message};
  return InternalError(message);
}

// What the current holder wrote into the lock file, as "pid 123, listening on
// 127.0.0.1:50051"; empty if nothing useful is there.
std::string DescribeHolder(const std::string& lock_path) {
  std::ifstream in(lock_path);
  std::string line, pid, listen;
  while (std::getline(in, line)) {
    if (line.rfind("pid=", 0) == 0) pid = line.substr(4);
    if (line.rfind("listen=", 0) == 0) listen = line.substr(7);
  }
  std::string out;
  if (!pid.empty()) out = "pid " + pid;
  if (!listen.empty()) out += (out.empty() ? "" : ", ") + std::string("listening on ") + listen;
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<DataDir>> DataDir::Open(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("data directory path is empty");
  std::error_code ec;
  const fs::path dir = fs::absolute(path, ec).lexically_normal();
  if (ec) return InternalError("data directory '" + path + "': " + ec.message());

  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    return FailedPreconditionError("data directory '" + dir.string() +
                                   "' exists but is not a directory; pass --data-dir a directory path");
  }
  if (!fs::exists(st)) {
    fs::create_directories(dir, ec);
    if (ec) return ErrnoStatus(ec.value(), "cannot create data directory '" + dir.string() + "'");
  }

  // Drop a trailing separator so messages read "/x/kls-data", not "/x/kls-data/".
  std::string dir_string = dir.string();
  while (dir_string.size() > 1 && dir_string.back() == '/') dir_string.pop_back();

  const std::string lock_path = (fs::path(dir_string) / kLockFileName).string();
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot open lock file '" + lock_path + "'");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      const std::string holder = DescribeHolder(lock_path);
      return FailedPreconditionError("data directory '" + dir_string + "' is in use by another kls-server" +
                                     (holder.empty() ? "" : " (" + holder + ")") +
                                     "; stop it or choose another --data-dir (lock file " + lock_path + ")");
    }
    return ErrnoStatus(err, "cannot lock '" + lock_path + "'");
  }

  std::unique_ptr<DataDir> data_dir(new DataDir(dir_string, fd));
  KLS_RETURN_IF_ERROR(data_dir->WriteLockFile("pid=" + std::to_string(::getpid()) + "\n"));
  return data_dir;
}

DataDir::~DataDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing the descriptor releases the flock
}

Status DataDir::RecordListenAddress(const std::string& listen) {
  return WriteLockFile("pid=" + std::to_string(::getpid()) + "\nlisten=" + listen + "\n");
}

Status DataDir::WriteLockFile(const std::string& contents) {
  // Readers only look at this file after failing to take the lock, so a reader
  // may at worst see a half-written record; it is informational only.
  if (::ftruncate(lock_fd_, 0) != 0) return ErrnoStatus(errno, "cannot write lock file in '" + path_ + "'");
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::pwrite(lock_fd_, contents.data() + written, contents.size() - written,
                               static_cast<off_t>(written));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot write lock file in '" + path_ + "'");
    }
    written += static_cast<size_t>(n);
  }
  return OkStatus();
}

}  // namespace kls::server
