// kls::Client: a small synchronous C++ client for a kls-server. Every call
// carries a deadline (ClientOptions::timeout_seconds) and returns a kls::Status
// whose code is the gRPC status code and whose message is the server's text,
// so `status.ToString()` reads "UNAVAILABLE: failed to connect to all addresses".
//
// Thread safety: one Client may be used from many threads at once (gRPC
// channels and stubs are thread-safe; the client holds no other state).
#pragma once

#include <memory>
#include <string>

#include "core/common/status.h"
#include "kls/v1/service.pb.h"

namespace grpc {
class Channel;
}

namespace kls {

struct ClientOptions {
  /// HOST:PORT (any gRPC target string works, e.g. "dns:///kls.internal:50051").
  std::string target = "127.0.0.1:50051";
  /// Deadline for each call, in seconds.
  double timeout_seconds = 10.0;
  /// Largest message the client receives or sends, in MiB; keep it at least
  /// the server's max_message_mb (ServerInfo.max_message_bytes).
  int max_message_mb = 64;
};

/// Health of one service as grpc.health.v1 reports it.
enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };

/// "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN".
const char* ServingStatusName(ServingStatus status);

class Client {
 public:
  /// Creates the channel; connecting happens lazily on the first call, so a
  /// server that is down shows up as UNAVAILABLE from that call.
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Admin.Echo: the payload back, byte for byte.
  StatusOr<std::string> Echo(const std::string& payload);

  /// Admin.GetServerInfo.
  StatusOr<kls::v1::ServerInfo> GetServerInfo();

  /// grpc.health.v1.Health.Check for `service` ("" = the whole server).
  /// NOT_FOUND if the server does not know the service.
  StatusOr<ServingStatus> CheckHealth(const std::string& service = "");

  const ClientOptions& options() const { return options_; }

 private:
  struct Stubs;
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace kls
