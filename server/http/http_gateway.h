// HttpGateway: kls-server's HTTP/1.1 listener (--http-listen, config key
// http_listen): the REST/JSON API of every kls.v1 method (http_routes.h), the
// OpenAPI document at /openapi.json and the web console at /.
//
// Every API request becomes a gRPC call on an in-process channel to this
// server's own services — the same handlers, RPC observer (request ids, JSON
// logs, RPC metrics), message-size limits and status codes as a gRPC client
// gets; nothing is implemented twice. The gateway itself adds only what HTTP
// needs:
//   - the bearer-token check (server/auth.h Authorize: same tokens, same
//     scopes, same messages) before the call — the in-process channel does
//     not pass through the port's credentials;
//   - the request id: the client's X-Request-Id when usable, else a new one,
//     sent as x-request-id metadata and returned in the X-Request-Id header;
//   - CORS: a request with an Origin header is served only when the origin is
//     this server itself or is listed in http_cors_origins ("*" = any);
//   - body limits: max_body_bytes for JSON, max_upload_bytes for CSV/LIBSVM
//     uploads (413 beyond);
//   - errors as {"code","message","details"} with the HTTP status of the code.
// Streams: Jobs.Watch (and any server stream) as Server-Sent Events with
// Accept: text/event-stream; Kernels.Export as CSV with Accept: text/csv;
// Datasets.Upload from a CSV or LIBSVM body, Datasets.SetAttributes from a CSV
// body (README "HTTP/JSON API").
//
// The HTTP server is cpp-httplib (docs/DEPENDENCIES.md): a pool of `threads`
// threads, keep-alive, HTTPS through OpenSSL with the gRPC port's certificate
// and key (and client certificates when tls_client_ca_file is set).
//
// Thread safety: Start/Stop from one thread; requests run on the pool.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "server/auth.h"

namespace grpc {
class Channel;
}

namespace kls::server::http {

struct HttpGatewayOptions {
  std::string listen;  ///< HOST:PORT; port 0 picks a free one
  TransportSecurity security;  ///< cert_file empty = plain HTTP
  /// With TLS, the current certificate, key and client CA for each new
  /// connection (replaced by a SIGHUP reload); null = the files of `security`
  /// as read at start.
  std::shared_ptr<LiveIdentity> identity;
  std::shared_ptr<LiveTokens> tokens;  ///< null = authorization off; read at every request
  std::vector<std::string> cors_origins;     ///< extra origins allowed ("*" = any)
  int64_t max_body_bytes = 64ll << 20;       ///< JSON bodies (the server's max message size)
  int64_t max_upload_bytes = 1024ll << 20;   ///< CSV / LIBSVM upload bodies
  int threads = 16;                          ///< worker threads (an open SSE stream holds one)
  double call_timeout_seconds = 600;         ///< deadline of one unary call
  /// Log every request ("http VERB PATH STATUS in N ms, request ID, peer
  /// ADDR:PORT") at info level; false = at debug level (config key access_log).
  bool access_log = true;
};

class HttpGateway {
 public:
  /// Binds and starts serving. UNAVAILABLE if the address cannot be bound;
  /// INVALID_ARGUMENT for a bad address or TLS files.
  static StatusOr<std::unique_ptr<HttpGateway>> Start(HttpGatewayOptions options,
                                                      std::shared_ptr<grpc::Channel> channel);
  ~HttpGateway();  // Stop()s
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;

  /// The bound port.
  int port() const;
  /// Cancels open streams (SSE watches end), then stops the listener and
  /// waits for the request threads. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit HttpGateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kls::server::http
