// The RPC observer: a gRPC server interceptor on every call (KLS services,
// health, reflection) that
//   - gives the call a request id: the client's `x-request-id` metadata when
//     it sends a usable one (1..128 printable ASCII characters), otherwise 16
//     random hex digits; the id is sent back in the trailing metadata
//     (`x-request-id`), so a client can quote it;
//   - sets the thread's log context (server/log_context.h: request id, method,
//     peer) while the call's handler runs, so every line the handler logs
//     carries them in the JSON log format;
//   - logs one access-log line when the call ends: "rpc METHOD CODE in N ms,
//     request ID, peer PEER", at info level when the access log is on (config
//     key access_log, the default) and at debug level when it is off. Calls
//     from the HTTP gateway (server/http, an in-process channel: peer
//     "unknown") log at debug: the gateway writes the access line of an HTTP
//     request itself, with the HTTP peer, so each request is logged once;
//   - counts the call and its latency in Metrics (server/metrics.h), when
//     metrics are on.
// Calls refused by the token check (server/auth.h) never reach it.
//
// The synchronous server runs a call's interceptor hooks and its handler on
// one thread, which is what lets a thread-local context reach the handler.
#pragma once

#include <string>

#include <grpcpp/support/server_interceptor.h>

namespace kls::server {

class Metrics;

/// Metadata key of the request id, in both directions.
inline constexpr const char* kRequestIdKey = "x-request-id";

class RpcObserverFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  /// `metrics` may be null (metrics off); it must outlive the server.
  /// `access_log`: log every finished call at info level (else at debug).
  RpcObserverFactory(Metrics* metrics, bool access_log) : metrics_(metrics), access_log_(access_log) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics* metrics_;
  bool access_log_;
};

/// Whether `peer` (ServerContext::peer()) is the in-process channel of the
/// HTTP gateway.
bool IsInProcessPeer(const std::string& peer);

/// A client-sent request id, if usable (1..128 printable ASCII characters,
/// no spaces); otherwise a new random one.
std::string RequestIdFrom(const std::string& sent);

}  // namespace kls::server
