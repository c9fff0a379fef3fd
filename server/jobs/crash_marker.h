// CrashMarker: evidence that a job's own solver crashed the process.
//
// A process killed from outside (kill -9, a node loss, the kernel's OOM
// killer) leaves nothing behind but its expired lease, and the job manager
// does not count such an attempt against the job (job_manager.h). A crash
// *signal* raised in the thread that runs a job's solve — SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGABRT (abort, a failed assertion) — is evidence against
// that job: the handler installed here writes one line "JOB_ID ATTEMPT SIGNAL"
// to a marker file with write(2) and fsync(2) (async-signal-safe), then hands
// the signal to the previous handler (or the default action: the process
// dies as it would have). The next start of the server on the same
// directory reads the marker (Take) and records the attempt as crash_signal.
// Other jobs running in the same process at the time stay process_lost.
//
// Thread safety: Scope is per thread; the handler only reads the calling
// thread's own slot.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace kls::server {

class CrashMarker {
 public:
  struct Entry {
    std::string job_id;
    int attempt = 0;
    int signal = 0;
  };

  /// Opens (creates, appends to) the marker file at `path` and installs the
  /// process's crash-signal handlers (once per process).
  static StatusOr<std::unique_ptr<CrashMarker>> Open(const std::string& path);
  ~CrashMarker();

  CrashMarker(const CrashMarker&) = delete;
  CrashMarker& operator=(const CrashMarker&) = delete;

  /// While alive, a crash signal on the constructing thread records this
  /// job attempt in `marker` (nullptr: nothing is recorded).
  class Scope {
   public:
    Scope(const CrashMarker* marker, const std::string& job_id, int attempt);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  /// The entries of the marker file at `path` (none if it does not exist),
  /// and truncates it. Malformed lines are skipped.
  static StatusOr<std::vector<Entry>> Take(const std::string& path);

 private:
  explicit CrashMarker(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kls::server
