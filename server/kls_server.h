// KlsServer: owns one running kls-server — its data directory (locked), the
// gRPC server and the services registered on it. main.cc wraps it with flags
// and signal handling; tests run it in-process on port 0.
//
// Start-up order (each step only after the previous succeeded):
//   1. validate the config; read the tokens file and the TLS certificates
//      (server/auth.h) — a bad file fails here, before the data dir is touched;
//   2. open the data directory: create it, take the lock (fails fast, before
//      any port is bound, when another server owns it);
//   3. open the store (data_dir/kls.db + artifacts/) and check its integrity:
//      problems (corrupted or missing artifacts) are logged, not fatal — the
//      affected data sets and kernels answer DATA_LOSS, the rest is served;
//   4. start the JobManager: recovery (queued jobs re-queued, interrupted ones
//      re-queued or failed with a reason), then its worker pool;
//   5. start the metrics endpoint when metrics_listen is set (server/metrics.h);
//      build and start the gRPC server with the RPC observer
//      (server/rpc_observer.h: request ids, log context, RPC metrics) and its
//      services: Admin, Datasets, Jobs, Kernels, Queries, grpc.health.v1,
//      reflection; health NOT_SERVING;
//   6. start the HTTP/JSON gateway when http_listen is set
//      (server/http/http_gateway.h: an in-process channel to these services);
//   7. record the listen address in the lock file, health → SERVING.
// Steps 3–4 run before the port is bound so that no RPC can reach a store or
// job queue that is still recovering (a Submit racing recovery could queue a
// job twice); until then clients see UNAVAILABLE.
// Stop() reverses it: health NOT_SERVING, the HTTP gateway stops (its open
// SSE watches end), stop accepting calls (Shutdown with
// a grace deadline: in-flight calls finish or are cancelled; Watch streams
// end), JobManager::Shutdown (running solvers are cancelled and their jobs go
// back to queued), then the store is closed and the lock released.
//
// Thread safety: Start/Stop from one thread; port(), target(), SetServing()
// may be called from any thread once Start() returned OK.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/server.h>

#include "core/common/status.h"
#include "server/server_config.h"
#include "server/store/store.h"

namespace kls::server {

class AdminService;
class DataDir;
class DatasetsService;
class JobManager;
class JobsService;
class KernelCache;
class KernelsService;
class LiveIdentity;
class LiveTokens;
class Metrics;
class QueriesService;
class TokenTable;
struct TransportSecurity;
namespace http {
class HttpGateway;
}

/// Release string of this build, e.g. "0.1.0".
const char* KlsVersion();

class KlsServer {
 public:
  /// Default grace period for in-flight calls during Stop().
  static constexpr std::chrono::milliseconds kDefaultShutdownGrace{10000};

  explicit KlsServer(ServerConfig config);
  ~KlsServer();  // Stop()s if still running.
  KlsServer(const KlsServer&) = delete;
  KlsServer& operator=(const KlsServer&) = delete;

  /// See the start-up order above. Errors:
  ///   INVALID_ARGUMENT     bad config value, malformed tokens file or PEM file;
  ///   NOT_FOUND            tokens_file or a TLS file cannot be read;
  ///   FAILED_PRECONDITION  data dir is not a directory or is locked by another server;
  ///   PERMISSION_DENIED    data dir cannot be created or written;
  ///   UNAVAILABLE          the listen address cannot be bound.
  Status Start();

  /// Graceful shutdown; idempotent. Calls still running after `grace` are cancelled.
  void Stop(std::chrono::milliseconds grace = kDefaultShutdownGrace);

  /// Sets health for "" and every KLS service (drain before Stop, or tests).
  void SetServing(bool serving);

  /// What ReloadSecurity() did with each file set; a failed part kept the
  /// material the server had.
  struct ReloadReport {
    Status tokens;       ///< OK also when there is no tokens_file (nothing to reload)
    Status certificate;  ///< OK also when the server runs without TLS
    /// True when every part that is configured was reloaded.
    bool ok() const { return tokens.ok() && certificate.ok(); }
  };
  /// Re-reads tokens_file and the TLS certificate, key and client CA (what
  /// SIGHUP does): new calls are checked against the new tokens, new
  /// connections (gRPC and HTTPS) use the new certificate; open connections
  /// keep theirs. A file that cannot be read or is malformed is logged as an
  /// error and the server keeps the old tokens / certificate. Thread-safe
  /// once Start() returned OK; a no-op before.
  ReloadReport ReloadSecurity();

  /// Bound port (the chosen one when the config asked for port 0); 0 before Start().
  int port() const { return port_; }
  /// "HOST:PORT" a client on this machine can dial (0.0.0.0 / [::] become loopback).
  std::string target() const;
  /// Absolute data directory path; empty before Start().
  std::string data_dir() const;
  const ServerConfig& config() const { return config_; }
  /// The open store (tests put kernels into it directly); null before Start().
  store::Store* store() const { return store_.get(); }
  /// The cache of loaded kernels; null before Start().
  KernelCache* kernel_cache() const { return kernel_cache_.get(); }
  /// The metrics (server/metrics.h); null when metrics_listen is empty or before Start().
  Metrics* metrics() const { return metrics_.get(); }
  /// Bound port of the metrics endpoint; 0 when off or before Start().
  int metrics_port() const;
  /// The bound port of the HTTP/JSON API (http_listen), or 0 when off.
  int http_port() const;

 private:
  ServerConfig config_;
  /// Releases everything Start() created, in reverse order (no gRPC server).
  void ReleaseState();
  /// Pings the store every 500 ms and sets the KLS services' health.
  void ReadinessLoop();
  // Start()'s phases, in order.
  /// Opens the data directory's SQLite store (and checks its integrity) or
  /// the shared PostgreSQL store.
  Status OpenStore(bool shared);
  /// Recovers jobs and starts the worker pool; store events wake it.
  Status StartJobManager(bool shared);
  /// The gRPC services over the store, cache and job manager.
  void CreateServices(bool shared);
  /// The gRPC server on config_.listen: sets server_ and port_.
  Status StartGrpcServer(const std::shared_ptr<grpc::ServerCredentials>& credentials);
  /// The HTTP/JSON gateway (config_.http_listen), over the in-process channel.
  Status StartHttpGateway(const TransportSecurity& security);
  /// Warnings about an open server and the "serving on" lines.
  void LogServing(const TokenTable* tokens, bool shared) const;
  std::thread readiness_;
  std::mutex readiness_mu_;
  std::condition_variable readiness_cv_;
  bool stopping_ = false;

  // Destroyed in reverse order: services before the manager, cache and store
  // they point into, the lock, then the metrics they all report to.
  std::unique_ptr<Metrics> metrics_;
  // Tokens and TLS material, replaceable by ReloadSecurity(); they outlive
  // the gRPC server and the HTTP gateway that read them (declared before).
  std::shared_ptr<LiveTokens> tokens_;
  std::shared_ptr<LiveIdentity> identity_;
  std::mutex reload_mu_;
  std::unique_ptr<http::HttpGateway> http_;
  std::unique_ptr<DataDir> data_dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<KernelCache> kernel_cache_;
  std::unique_ptr<JobManager> job_manager_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<DatasetsService> datasets_service_;
  std::unique_ptr<JobsService> jobs_service_;
  std::unique_ptr<KernelsService> kernels_service_;
  std::unique_ptr<QueriesService> queries_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace kls::server
