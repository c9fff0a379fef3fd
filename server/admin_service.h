// kls.v1.Admin: Echo, GetServerInfo and Backup. Echo and GetServerInfo are
// thin and never block, so they run on gRPC's callback threads directly;
// Backup (a snapshot of the embedded store, server/store/backup.h — the code
// of `kls-server --backup`) runs on a thread of its own, one at a time, and
// finishes the call from there.
//
// Thread safety: handlers may run concurrently; the service holds immutable
// facts fixed at construction and the backup thread (joined by the
// destructor, which gRPC's Shutdown/Wait lets run only after the call ended).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "kls/v1/service.grpc.pb.h"

namespace kls::server {

/// What GetServerInfo reports; fixed when the server starts.
struct ServerFacts {
  std::string version;        ///< e.g. "0.1.0"
  std::string data_dir;       ///< absolute path
  int worker_threads = 0;     ///< job worker pool size
  int64_t max_message_bytes = 0;
  /// True on the PostgreSQL store (Backup is refused: pg_dump backs it up).
  bool shared_store = false;
  /// Where Backup writes snapshots (config backup_dir); empty = Backup refused.
  std::string backup_dir;
  std::chrono::steady_clock::time_point started_at = std::chrono::steady_clock::now();
};

class AdminService final : public kls::v1::Admin::CallbackService {
 public:
  explicit AdminService(ServerFacts facts) : facts_(std::move(facts)) {}
  ~AdminService() override;

  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context, const kls::v1::EchoRequest* request,
                                 kls::v1::EchoResponse* response) override;

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const kls::v1::GetServerInfoRequest* request,
                                          kls::v1::ServerInfo* response) override;

  grpc::ServerUnaryReactor* Backup(grpc::CallbackServerContext* context, const kls::v1::BackupRequest* request,
                                   kls::v1::BackupResponse* response) override;

 private:
  const ServerFacts facts_;
  std::mutex backup_mu_;
  bool backup_running_ = false;  // guarded by backup_mu_
  std::string backup_running_path_;
  std::thread backup_thread_;
};

}  // namespace kls::server
