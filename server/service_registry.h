// ServiceRegistry: gRPC services that a build adds to kls-server from files
// outside server/. Such a file defines the service over the running server's
// parts (ServiceDeps: the kernel cache every query reads) and registers it at
// static initialization with KLS_REGISTER_GRPC_SERVICE, the way a solver
// family registers itself (server/jobs/solver_family.h); the build links the
// file whole into kls-server. KlsServer adds every registered service to its
// gRPC port beside kls.v1.Queries (only when it serves queries), so a query
// outside kls.v1 is one .proto, one core function and one service file
// (docs/ADDING_A_QUERY.md, "A worked example: the toy query").
//
// What such a service does not get: an HTTP/JSON route and an OpenAPI entry
// (both cover package kls.v1 only, server/http/http_routes.h), a health
// status of its own (the server's "" status covers it) and a scope of its
// own: with a tokens file its methods need the admin scope (server/auth.cc
// fails closed on methods it does not list). The RPC observer
// (server/rpc_observer.h) times and logs its calls like every other.
//
// Thread safety: Add runs during static initialization only; afterwards the
// registry is read-only and AddTo may run from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/impl/service_type.h>

namespace grpc {
class ServerBuilder;
}  // namespace grpc

namespace kls::server {

class KernelCache;

/// The parts of the running server a registered service may use; each
/// outlives the grpc::Server the service is registered on.
struct ServiceDeps {
  KernelCache* cache = nullptr;  ///< the kernels, their indices, attachments and item keys
};

/// Builds one service over the server's parts.
using ServiceFactory = std::function<std::unique_ptr<grpc::Service>(const ServiceDeps&)>;

class ServiceRegistry {
 public:
  static ServiceRegistry& Global();

  /// Registers `factory` under the full name of the service it builds
  /// ("package.Service"); a second service of the same name aborts the
  /// program (a build error in disguise, found at start-up).
  void Add(std::string full_name, ServiceFactory factory);

  /// The full names of the registered services, in registration order.
  std::vector<std::string> Names() const;

  /// Builds every registered service over `deps` and adds it to `builder`.
  /// The grpc::Server that `builder` builds owns them: they are destroyed
  /// with it (and with the builder, if it never builds one).
  void AddTo(grpc::ServerBuilder* builder, const ServiceDeps& deps) const;

 private:
  struct Entry {
    std::string full_name;
    ServiceFactory factory;
  };
  std::vector<Entry> entries_;
};

/// Registers a service at static initialization; in its file, at namespace
/// scope: KLS_REGISTER_GRPC_SERVICE(MyService, my::pkg::My::service_full_name());
/// `Class` derives from a generated `...::Service` and is constructible from
/// `const ServiceDeps&`.
#define KLS_REGISTER_GRPC_SERVICE(Class, full_name)                                                   \
  [[maybe_unused]] static const bool kls_registered_service_##Class = [] {                            \
    ::kls::server::ServiceRegistry::Global().Add(full_name, [](const ::kls::server::ServiceDeps& d) { \
      return std::unique_ptr<::grpc::Service>(std::make_unique<Class>(d));                            \
    });                                                                                               \
    return true;                                                                                      \
  }()

}  // namespace kls::server
