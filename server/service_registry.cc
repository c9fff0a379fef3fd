#include "server/service_registry.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>
#include <grpcpp/impl/service_type.h>
#include <spdlog/spdlog.h>

namespace kls::server {
namespace {

using Services = std::vector<std::shared_ptr<grpc::Service>>;

// The services reach the server through a builder plugin: its InitServer
// registers them with the ServerInitializer, which holds them for the
// server's lifetime (gRPC's reflection service is added the same way). So the
// grpc::Server owns them, and KlsServer keeps nothing for them.
class RegisteredServicesPlugin : public grpc::ServerBuilderPlugin {
 public:
  explicit RegisteredServicesPlugin(Services services) : services_(std::move(services)) {}
  std::string name() override { return "kls_registered_services"; }
  void InitServer(grpc::ServerInitializer* si) override {
    for (const std::shared_ptr<grpc::Service>& s : services_) {
      if (!si->RegisterService(s)) spdlog::error("a registered gRPC service could not be added (a method twice?)");
    }
  }
  void Finish(grpc::ServerInitializer*) override {}
  void ChangeArguments(const std::string&, void*) override {}
  bool has_sync_methods() const override {
    for (const auto& s : services_)
      if (s->has_synchronous_methods()) return true;
    return false;
  }
  bool has_async_methods() const override {
    for (const auto& s : services_)
      if (s->has_async_methods()) return true;
    return false;
  }

 private:
  Services services_;
};

// The option the builder asks for its plugins when it builds the server.
class RegisteredServicesOption : public grpc::ServerBuilderOption {
 public:
  explicit RegisteredServicesOption(Services services) : services_(std::move(services)) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<RegisteredServicesPlugin>(std::move(services_)));
  }

 private:
  Services services_;
};

}  // namespace

ServiceRegistry& ServiceRegistry::Global() {
  static ServiceRegistry* registry = new ServiceRegistry();  // never destroyed: read by late threads
  return *registry;
}

void ServiceRegistry::Add(std::string full_name, ServiceFactory factory) {
  for (const Entry& e : entries_) {
    if (e.full_name == full_name) {
      std::fprintf(stderr, "kls: gRPC service \"%s\" registered twice\n", full_name.c_str());
      std::abort();
    }
  }
  entries_.push_back(Entry{std::move(full_name), std::move(factory)});
}

std::vector<std::string> ServiceRegistry::Names() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.full_name);
  return out;
}

void ServiceRegistry::AddTo(grpc::ServerBuilder* builder, const ServiceDeps& deps) const {
  if (entries_.empty()) return;
  Services services;
  for (const Entry& e : entries_) services.push_back(e.factory(deps));
  builder->SetOption(std::make_unique<RegisteredServicesOption>(std::move(services)));
}

}  // namespace kls::server
