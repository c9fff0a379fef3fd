#include "server/admin_service.h"

namespace kls::server {

grpc::ServerUnaryReactor* AdminService::Echo(grpc::CallbackServerContext* context,
                                             const kls::v1::EchoRequest* request,
                                             kls::v1::EchoResponse* response) {
  response->set_payload(request->payload());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::GetServerInfo(grpc::CallbackServerContext* context,
                                                      const kls::v1::GetServerInfoRequest* /*request*/,
                                                      kls::v1::ServerInfo* response) {
  const std::chrono::duration<double> uptime = std::chrono::steady_clock::now() - facts_.started_at;
  response->set_version(facts_.version);
  response->set_data_dir(facts_.data_dir);
  response->set_uptime_seconds(uptime.count());
  response->set_worker_threads(facts_.worker_threads);
  response->set_max_message_bytes(facts_.max_message_bytes);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kls::server
