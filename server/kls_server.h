// KlsServer: owns one running kls-server — its data directory (locked), the
// gRPC server and the services registered on it. main.cc wraps it with flags
// and signal handling; tests run it in-process on port 0.
//
// Start-up order (each step only after the previous succeeded):
//   1. validate the config;
//   2. open the data directory: create it, take the lock (fails fast, before
//      any port is bound, when another server owns it);
//   3. build and start the gRPC server (Admin, grpc.health.v1, reflection)
//      with health NOT_SERVING for "" and "kls.v1.Admin";
//   4. open what lives in the data directory (today only the lock record;
//      the store and job recovery slot in here);
//   5. health → SERVING.
// Stop() reverses it: health NOT_SERVING, Shutdown with a grace deadline
// (in-flight calls finish or are cancelled), then the lock is released.
//
// Thread safety: Start/Stop from one thread; port(), target(), SetServing()
// may be called from any thread once Start() returned OK.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "core/common/status.h"
#include "server/server_config.h"

namespace kls::server {

class AdminService;
class DataDir;

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
  ///   INVALID_ARGUMENT     bad config value;
  ///   FAILED_PRECONDITION  data dir is not a directory or is locked by another server;
  ///   PERMISSION_DENIED    data dir cannot be created or written;
  ///   UNAVAILABLE          the listen address cannot be bound.
  Status Start();

  /// Graceful shutdown; idempotent. Calls still running after `grace` are cancelled.
  void Stop(std::chrono::milliseconds grace = kDefaultShutdownGrace);

  /// Sets health for "" and every KLS service (drain before Stop, or tests).
  void SetServing(bool serving);

  /// Bound port (the chosen one when the config asked for port 0); 0 before Start().
  int port() const { return port_; }
  /// "HOST:PORT" a client on this machine can dial (0.0.0.0 / [::] become loopback).
  std::string target() const;
  /// Absolute data directory path; empty before Start().
  std::string data_dir() const;
  const ServerConfig& config() const { return config_; }

 private:
  ServerConfig config_;
  std::unique_ptr<DataDir> data_dir_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace kls::server
