#include "server/rpc_observer.h"

#include <grpcpp/server_context.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>

#include "core/common/status.h"
#include "server/log_context.h"
#include "server/metrics.h"

namespace kls::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

std::string NewRequestId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

class RpcObserver final : public grpc::experimental::Interceptor {
 public:
  RpcObserver(grpc::experimental::ServerRpcInfo* info, Metrics* metrics, bool access_log)
      : info_(info), metrics_(metrics), access_log_(access_log), method_(info->method() != nullptr ? info->method() : ""),
        start_(std::chrono::steady_clock::now()), serial_(next_serial_.fetch_add(1) + 1) {
    std::lock_guard<std::mutex> publish(mu_);  // orders the members above before every hook
  }

  ~RpcObserver() override {
    std::lock_guard<std::mutex> lock(mu_);
    // A call that ended without sending a status (cancelled by the client,
    // or the server shutting down).
    if (!finished_) Finish(grpc::StatusCode::CANCELLED, /*log=*/false);
    Leave();
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Observe(methods);
    }
    methods->Proceed();  // outside the lock: it may run the next hook of this call
  }

 private:
  // gRPC runs one call's hooks one at a time, possibly on different threads,
  // ordered by its own (uninstrumented, Abseil) synchronization; mu_ makes
  // that order explicit in our code, for ThreadSanitizer and for readers.
  void Observe(grpc::experimental::InterceptorBatchMethods* methods) {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      std::string sent;
      if (auto* md = methods->GetRecvInitialMetadata()) {
        auto it = md->find(kRequestIdKey);
        if (it != md->end()) sent.assign(it->second.data(), it->second.size());
      }
      request_id_ = RequestIdFrom(sent);
      if (info_->server_context() != nullptr) peer_ = info_->server_context()->peer();
    }
    if (request_id_.empty()) request_id_ = NewRequestId();
    Enter();
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      if (auto* trailing = methods->GetSendTrailingMetadata()) trailing->emplace(kRequestIdKey, request_id_);
      Finish(methods->GetSendStatus().error_code(), /*log=*/true);
      Leave();
    }
  }

  // The thread's log context names this call until Leave().
  void Enter() {
    LogContext& c = CurrentLogContext();
    if (c.call == serial_) return;
    c.call = serial_;
    c.request_id = request_id_;
    c.method = method_;
    c.peer = peer_;
  }
  void Leave() {
    LogContext& c = CurrentLogContext();
    if (c.call != serial_) return;  // another call's (or nobody's) thread
    c.call = 0;
    c.request_id.clear();
    c.method.clear();
    c.peer.clear();
  }

  void Finish(grpc::StatusCode code, bool log) {
    finished_ = true;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (metrics_ != nullptr) metrics_->ObserveRpc(method_, static_cast<int>(code), seconds);
    if (log) {
      const bool info = access_log_ && !IsInProcessPeer(peer_);
      spdlog::log(info ? spdlog::level::info : spdlog::level::debug,
                  "rpc {} {} in {:.1f} ms, request {}, peer {}", method_,
                  StatusCodeName(static_cast<StatusCode>(code)), seconds * 1000.0, request_id_, peer_);
    }
  }

  grpc::experimental::ServerRpcInfo* const info_;
  Metrics* const metrics_;
  const bool access_log_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
  const uint64_t serial_;  ///< never 0, never reused
  static inline std::atomic<uint64_t> next_serial_{0};
  std::string request_id_;
  std::string peer_;
  bool finished_ = false;
  std::mutex mu_;
};

}  // namespace

std::string RequestIdFrom(const std::string& sent) {
  bool usable = !sent.empty() && sent.size() <= 128;
  for (char ch : sent) {
    if (ch <= ' ' || ch > '~') usable = false;
  }
  return usable ? sent : NewRequestId();
}

// gRPC gives the calls of Server::InProcessChannel() the peer "unknown"
// (other versions say "inproc..."); a network client's peer is always its
// address ("ipv4:...", "ipv6:...", "unix:...").
bool IsInProcessPeer(const std::string& peer) { return peer == "unknown" || peer.rfind("inproc", 0) == 0; }

grpc::experimental::Interceptor* RpcObserverFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RpcObserver(info, metrics_, access_log_);
}

}  // namespace kls::server
