#include "client/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "client/grpc_status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "kls/v1/service.grpc.pb.h"

namespace kls {

struct Client::Stubs {
  std::unique_ptr<kls::v1::Admin::Stub> admin;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
};

namespace {

void SetDeadline(const ClientOptions& options, grpc::ClientContext* context) {
  const auto timeout = std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::duration<double>(options.timeout_seconds));
  context->set_deadline(std::chrono::system_clock::now() + timeout);
}

}  // namespace

const char* ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kUnknown: return "UNKNOWN";
    case ServingStatus::kServing: return "SERVING";
    case ServingStatus::kNotServing: return "NOT_SERVING";
    case ServingStatus::kServiceUnknown: return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

Client::Client(ClientOptions options) : options_(std::move(options)), stubs_(std::make_unique<Stubs>()) {
  grpc::ChannelArguments args;
  // gRPC sizes are int; clamp so a careless option cannot overflow.
  const int max_bytes = std::clamp(options_.max_message_mb, 1, 2047) * 1024 * 1024;
  args.SetMaxReceiveMessageSize(max_bytes);
  args.SetMaxSendMessageSize(max_bytes);
  // TODO(security): insecure credentials until the server offers TLS.
  channel_ = grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args);
  stubs_->admin = kls::v1::Admin::NewStub(channel_);
  stubs_->health = grpc::health::v1::Health::NewStub(channel_);
}

Client::~Client() = default;

StatusOr<std::string> Client::Echo(const std::string& payload) {
  grpc::ClientContext context;
  SetDeadline(options_, &context);
  kls::v1::EchoRequest request;
  request.set_payload(payload);
  kls::v1::EchoResponse response;
  const grpc::Status status = stubs_->admin->Echo(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::move(*response.mutable_payload());
}

StatusOr<kls::v1::ServerInfo> Client::GetServerInfo() {
  grpc::ClientContext context;
  SetDeadline(options_, &context);
  kls::v1::ServerInfo info;
  const grpc::Status status = stubs_->admin->GetServerInfo(&context, kls::v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

StatusOr<ServingStatus> Client::CheckHealth(const std::string& service) {
  grpc::ClientContext context;
  SetDeadline(options_, &context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stubs_->health->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING: return ServingStatus::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING: return ServingStatus::kNotServing;
    case grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN: return ServingStatus::kServiceUnknown;
    default: return ServingStatus::kUnknown;
  }
}

}  // namespace kls
