// kls.v1.Admin: Echo and GetServerInfo. Handlers are thin and never block, so
// they run on gRPC's callback threads directly.
//
// Thread safety: handlers may run concurrently; the service holds only
// immutable facts fixed at construction.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "kls/v1/service.grpc.pb.h"

namespace kls::server {

/// What GetServerInfo reports; fixed when the server starts.
struct ServerFacts {
  std::string version;        ///< e.g. "0.1.0"
  std::string data_dir;       ///< absolute path
  int worker_threads = 0;     ///< job worker pool size
  int64_t max_message_bytes = 0;
  std::chrono::steady_clock::time_point started_at = std::chrono::steady_clock::now();
};

class AdminService final : public kls::v1::Admin::CallbackService {
 public:
  explicit AdminService(ServerFacts facts) : facts_(std::move(facts)) {}

  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context, const kls::v1::EchoRequest* request,
                                 kls::v1::EchoResponse* response) override;

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const kls::v1::GetServerInfoRequest* request,
                                          kls::v1::ServerInfo* response) override;

 private:
  const ServerFacts facts_;
};

}  // namespace kls::server
