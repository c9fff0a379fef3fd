// Metrics: the Prometheus metrics of one kls-server process, served over
// HTTP at GET /metrics on `metrics_listen` (off by default). prometheus-cpp
// keeps the counters and histograms and serves them (its pull exposer);
// gauges that belong to shared state are read at scrape time.
//
//   kls_rpc_requests_total{method,code}           counter: finished RPCs (method = gRPC path
//                                                 "/kls.v1.Jobs/Submit", code = "OK", "NOT_FOUND", ...)
//   kls_rpc_duration_seconds{method,code}         histogram: RPC latency, call start → status sent
//   kls_jobs{state}                               gauge: jobs in queued, running, succeeded, failed,
//                                                 cancelled (Store::CountJobs at scrape time; with a
//                                                 shared store every replica reports the whole queue)
//   kls_jobs_finished_total{method,outcome}       counter: jobs this replica finished
//                                                 (outcome succeeded, failed, cancelled)
//   kls_job_solve_seconds{method}                 histogram: solver run time of each attempt
//   kls_job_queue_wait_seconds{method}            histogram: submit → first claim
//   kls_job_attempts_total{method}                counter: attempts started on this replica
//   kls_job_resumes_total{method}                 counter: of those, attempts resumed from a checkpoint
//   kls_kernel_cache_bytes / _entries / _budget_bytes   gauges: the loaded-kernel cache
//   kls_kernel_cache_hits_total / _misses_total / _evictions_total   counters
//   kls_store_errors_total{operation,code}        counter: store calls that failed for a reason of the
//                                                 store (UNAVAILABLE, DATA_LOSS, INTERNAL, ...; not
//                                                 NOT_FOUND, ABORTED fences and other answers about
//                                                 the request)
//   kls_store_written_bytes_total{kind}           counter: payload bytes of successful writes (kind
//                                                 dataset, kernel, checkpoint): matrices, keys and
//                                                 attachments; headers and metadata rows not counted
//   kls_build_info{version,commit}                gauge, always 1
//   process_cpu_seconds_total                     counter: user + system CPU seconds (/proc/self/stat)
//   process_resident_memory_bytes                 gauge: resident set size
//   process_virtual_memory_bytes                  gauge: virtual memory size
//   process_start_time_seconds                    gauge: process start, seconds since the Unix epoch
//   process_open_fds / process_max_fds            gauges: open descriptors (/proc/self/fd) and
//                                                 their soft limit (RLIMIT_NOFILE)
//   (the standard series of Prometheus client libraries, read from /proc at
//   scrape time; a file that cannot be read leaves its series out)
//
// RPCs refused by the token check (server/auth.h) end in gRPC's auth filter
// before any handler or interceptor sees them, and are not counted.
//
// Thread safety: every method is safe to call concurrently.
#pragma once

#include <memory>
#include <string>

#include "core/common/status.h"
#include "server/jobs/job_manager.h"
#include "server/store/store.h"

namespace kls::server {

class KernelCache;

class Metrics final : public JobMetricsSink {
 public:
  Metrics();
  ~Metrics() override;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  /// Serves GET /metrics on `listen` ("HOST:PORT"; port 0 picks a free port).
  /// UNAVAILABLE naming metrics_listen when the address cannot be bound.
  Status Serve(const std::string& listen);
  /// Stops the HTTP endpoint (idempotent); call before the scrape sources go away.
  void StopServing();
  /// The bound port of the endpoint; 0 when not serving.
  int port() const;

  /// What kls_jobs and the kernel cache gauges read at scrape time (either
  /// may be null: not reported). Both must outlive the endpoint.
  void SetScrapeSources(store::Store* store, const KernelCache* cache);

  /// The exposition text, as GET /metrics answers it.
  std::string Render() const;

  /// One finished RPC; `grpc_code` is the numeric gRPC status code.
  void ObserveRpc(const std::string& method, int grpc_code, double seconds);

  /// Wraps `store` so that its failures and written bytes are counted; the
  /// result forwards every call. This object must outlive it.
  std::unique_ptr<store::Store> Instrument(std::unique_ptr<store::Store> store);

  // JobMetricsSink.
  void AttemptStarted(const std::string& method, double queue_wait_seconds, bool resumed) override;
  void SolveEnded(const std::string& method, double seconds) override;
  void JobFinished(const std::string& method, store::JobState state) override;

  /// Store accounting (used by Instrument's wrapper).
  void StoreFailed(const char* operation, StatusCode code);
  void StoreWrote(const char* kind, int64_t bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kls::server
