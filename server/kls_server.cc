#include "server/kls_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "server/admin_service.h"
#include "server/data_dir.h"

#ifndef KLS_VERSION
#define KLS_VERSION "unknown"
#endif

namespace kls::server {
namespace {

// Health service names this server reports on, besides "" (the whole server).
const char* const kServiceNames[] = {kls::v1::Admin::service_full_name()};

std::string HostOf(const std::string& listen) { return listen.substr(0, listen.rfind(':')); }

}  // namespace

const char* KlsVersion() { return KLS_VERSION; }

KlsServer::KlsServer(ServerConfig config) : config_(std::move(config)) {}

KlsServer::~KlsServer() { Stop(); }

Status KlsServer::Start() {
  if (server_) return FailedPreconditionError("server already started");
  KLS_RETURN_IF_ERROR(config_.Validate());

  KLS_ASSIGN_OR_RETURN(data_dir_, DataDir::Open(config_.data_dir));

  ServerFacts facts;
  facts.version = KLS_VERSION;
  facts.data_dir = data_dir_->path();
  facts.worker_threads = config_.ResolvedWorkers();
  facts.max_message_bytes = config_.max_message_bytes();
  admin_service_ = std::make_unique<AdminService>(std::move(facts));

  // Both are process-wide switches read when a ServerBuilder is created.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int selected_port = 0;
  // TODO(security): insecure credentials; TLS arrives with deployment beyond localhost.
  builder.AddListeningPort(config_.listen, grpc::InsecureServerCredentials(), &selected_port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes()));
  builder.SetMaxSendMessageSize(static_cast<int>(config_.max_message_bytes()));
  // gRPC sets SO_REUSEPORT by default, which would let a second server share
  // a busy port silently; a busy port must be an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(admin_service_.get());

  server_ = builder.BuildAndStart();
  if (!server_ || selected_port == 0) {
    server_.reset();
    data_dir_.reset();
    return Status(StatusCode::kUnavailable,
                  "cannot listen on " + config_.listen + " (address in use, or not an address of this machine)");
  }
  port_ = selected_port;
  SetServing(false);  // the default health service starts "" as SERVING

  // Open what lives in the data directory. The store and job recovery go here.
  const Status opened = data_dir_->RecordListenAddress(target());
  if (!opened.ok()) {
    Stop(std::chrono::milliseconds(0));
    return opened;
  }

  SetServing(true);
  spdlog::info("kls-server {} serving on {}:{} (data dir {}, {} workers, max message {} MiB)", KLS_VERSION,
               HostOf(config_.listen), port_, data_dir_->path(), config_.ResolvedWorkers(),
               config_.max_message_mb);
  return OkStatus();
}

void KlsServer::Stop(std::chrono::milliseconds grace) {
  if (!server_) return;
  SetServing(false);
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
  admin_service_.reset();
  data_dir_.reset();  // releases the lock only after no call can touch the directory
  spdlog::info("kls-server stopped");
}

void KlsServer::SetServing(bool serving) {
  if (!server_) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus("", serving);
  for (const char* name : kServiceNames) health->SetServingStatus(name, serving);
}

std::string KlsServer::target() const {
  std::string host = HostOf(config_.listen);
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "[::]") host = "[::1]";
  return host + ":" + std::to_string(port_);
}

std::string KlsServer::data_dir() const { return data_dir_ ? data_dir_->path() : std::string(); }

}  // namespace kls::server
