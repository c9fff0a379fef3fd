// What the current thread is working on, for log lines: the RPC (request id,
// method, peer; set by the RPC observer, server/rpc_observer.h) or the job
// (set by the JobManager's workers). The JSON log format (server/logging.h)
// adds the non-empty fields to every line logged on the thread; the text
// format does not show them.
//
// Header-only so that kls::jobs (which does not link kls::server) can set the
// job id. Thread-local: spdlog's synchronous loggers format on the calling
// thread, which is what makes this work.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace kls::server {

struct LogContext {
  std::string request_id;
  std::string method;   ///< gRPC path, "/kls.v1.Jobs/Submit"
  std::string peer;     ///< "ipv4:127.0.0.1:5678"
  std::string job_id;
  uint64_t call = 0;  ///< serial number of the call that set the RPC fields (0 = none)
};

/// This thread's context.
inline LogContext& CurrentLogContext() {
  static thread_local LogContext context;
  return context;
}

/// Sets the job id of this thread's log lines for its lifetime.
class ScopedJobLogContext {
 public:
  explicit ScopedJobLogContext(std::string job_id) : previous_(std::move(CurrentLogContext().job_id)) {
    CurrentLogContext().job_id = std::move(job_id);
  }
  ~ScopedJobLogContext() { CurrentLogContext().job_id = std::move(previous_); }
  ScopedJobLogContext(const ScopedJobLogContext&) = delete;
  ScopedJobLogContext& operator=(const ScopedJobLogContext&) = delete;

 private:
  std::string previous_;
};

}  // namespace kls::server
