// kls-bench load: closed-loop RPC load against a running kls-server on this
// machine. C client threads, each with its own kls::Client, call one RPC back
// to back for S seconds; the result is the throughput (calls per second over
// all clients) and the latency percentiles of the successful calls.
//
//   kls-bench load --target 127.0.0.1:PORT --rpc echo,similarity --clients 2 --seconds 5 --json
//
// RPCs:
//   echo        Admin.Echo with a --payload-bytes payload: the baseline (transport
//               + framework, no work);
//   similarity  Queries.Similarity, --batch random pairs per call;
//   topk        Queries.TopK for a random item, k = --k (one GEMV over n × dim).
// similarity and topk need a kernel: --kernel REF, or else a random n × dim
// embedding (--n, --dim, --seed) is uploaded with Kernels.Import first and
// deleted afterwards (unless --keep-kernel). The reference is resolved once to
// an explicit version, as a ranking backend pinning a version would do, so
// every call is answered from the server's kernel cache.
//
// With --http HOST:PORT (kls-server --http-listen), every RPC of --rpc also
// runs over the HTTP/JSON API as "http_<rpc>" (POST /v1/admin/echo,
// /v1/queries/similarity, /v1/queries/top-k with the same requests as JSON,
// one keep-alive HTTP/1.1 connection per client, each response parsed as
// JSON), right after its gRPC phase in every round, and the output adds
// "http_<rpc>_over_<rpc>" throughput ratios.
//
// A comma-separated --rpc runs the RPCs back to back in one invocation, in
// --rounds alternating rounds (echo, similarity, echo, similarity, ...) so a
// load change on a shared machine hits both alike, and prints each one's
// figures plus "<rpc>_over_<first rpc>" throughput ratios.
//
// Safety: traffic only to loopback targets (127.0.0.1, localhost, [::1]);
// every loop is bounded by --seconds and every call by its own deadline.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "client/client.h"
#include "core/common/solve_control.h"

namespace kls::bench {
namespace {

using Clock = std::chrono::steady_clock;

Status CheckLoopback(const std::string& target) {
  std::string t = target;
  for (const char* prefix : {"ipv4:", "ipv6:", "dns:///", "dns:"}) {
    if (t.rfind(prefix, 0) == 0) t = t.substr(std::string(prefix).size());
  }
  const size_t colon = t.rfind(':');
  const std::string host = colon == std::string::npos ? t : t.substr(0, colon);
  for (const char* ok : {"127.0.0.1", "localhost", "[::1]"}) {
    if (host == ok) return OkStatus();
  }
  return InvalidArgumentError("--target = '" + target +
                              "' is not a loopback address; kls-bench load only sends traffic to "
                              "127.0.0.1, localhost or [::1]");
}

struct Args {
  std::string target = "127.0.0.1:50051";
  std::string rpc = "echo";
  std::string kernel;
  int clients = 2;
  double seconds = 5.0;
  int rounds = 2;
  int n = 10000;
  int dim = 32;
  int batch = 1;
  int k = 10;
  int payload_bytes = 16;
  uint64_t seed = 1;
  double call_timeout_seconds = 5.0;
  bool keep_kernel = false;
  std::string http;  ///< --http HOST:PORT: also over the HTTP/JSON API
};

struct Tally {
  int64_t calls = 0;
  int64_t errors = 0;
  double seconds = 0;              // wall time of the phases summed
  std::vector<double> latency_ms;  // successful calls
  std::string first_error;
};

// A keep-alive HTTP/1.1 connection that POSTs JSON and reads
// Content-Length-framed answers (all the gateway's unary answers are).
class HttpConnection {
 public:
  explicit HttpConnection(std::string target) : target_(std::move(target)) {}
  ~HttpConnection() { Close(); }

  // POSTs `body` to `path`; the answer's body into *response. An HTTP status
  // other than 200 is an error carrying the answer.
  Status Post(const std::string& path, const std::string& body, std::string* response) {
    if (fd_ < 0) KLS_RETURN_IF_ERROR(Connect());
    std::string request = "POST " + path + " HTTP/1.1\r\nHost: " + target_ +
                          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
    if (!SendAll(request)) {
      Close();  // the server closed an idle connection: once more on a new one
      KLS_RETURN_IF_ERROR(Connect());
      if (!SendAll(request)) return Status(StatusCode::kUnavailable, "http: cannot send to " + target_);
    }
    // Headers.
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Receive()) return Status(StatusCode::kUnavailable, "http: connection closed by " + target_);
    }
    const std::string head = buffer_.substr(0, header_end);
    const int status = head.size() > 12 ? std::atoi(head.c_str() + 9) : 0;
    size_t length = 0;
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t cl = lower.find("content-length:");
    if (cl == std::string::npos) return InternalError("http: answer without Content-Length");
    length = static_cast<size_t>(std::strtoull(head.c_str() + cl + 15, nullptr, 10));
    while (buffer_.size() < header_end + 4 + length) {
      if (!Receive()) return Status(StatusCode::kUnavailable, "http: connection closed mid-answer");
    }
    response->assign(buffer_, header_end + 4, length);
    buffer_.erase(0, header_end + 4 + length);
    if (lower.find("connection: close") != std::string::npos) Close();
    if (status != 200) return InternalError("http " + std::to_string(status) + ": " + *response);
    return OkStatus();
  }

 private:
  Status Connect() {
    const size_t colon = target_.rfind(':');
    std::string host = target_.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::atoi(target_.c_str() + colon + 1)));
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
      return InvalidArgumentError("--http = '" + target_ + "': not an IPv4 HOST:PORT");
    }
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Close();
      return Status(StatusCode::kUnavailable, "http: cannot connect to " + target_);
    }
    buffer_.clear();
    return OkStatus();
  }
  bool SendAll(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t w = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (w <= 0) return false;
      sent += static_cast<size_t>(w);
    }
    return true;
  }
  bool Receive() {
    char chunk[65536];
    const ssize_t r = recv(fd_, chunk, sizeof(chunk), 0);
    if (r <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(r));
    return true;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    buffer_.clear();
  }
  std::string target_;
  int fd_ = -1;
  std::string buffer_;
};

// One call of `rpc` from a client thread; returns its status. "http_<rpc>"
// makes the same call over the HTTP/JSON API.
class Caller {
 public:
  Caller(const Args& a, const std::string& target, const std::string& rpc, const kls::v1::KernelRef& kernel, int n,
         uint64_t seed)
      : a_(a), rpc_(rpc), kernel_(kernel), n_(n), rng_(seed), payload_(a.payload_bytes, 'x') {
    if (rpc_.rfind("http_", 0) == 0) {
      http_ = std::make_unique<HttpConnection>(a.http);
      kernel_json_ = {{"name", kernel.name()}, {"version", std::to_string(kernel.version())}};
    }
    ClientOptions options;
    options.target = target;
    options.timeout_seconds = a.call_timeout_seconds;
    client_ = std::make_unique<Client>(options);
    topk_.mutable_kernel()->CopyFrom(kernel);
    topk_.set_k(a.k);
    topk_.set_exclude_self(true);
  }

  Status Call() {
    if (http_) return HttpCall();
    if (rpc_ == "echo") return client_->Echo(payload_).status();
    std::uniform_int_distribution<int> item(0, n_ - 1);
    if (rpc_ == "similarity") {
      pairs_.resize(a_.batch);
      for (auto& p : pairs_) p = {item(rng_), item(rng_)};
      return client_->Similarity(kernel_, pairs_).status();
    }
    topk_.set_item(item(rng_));
    return client_->TopK(topk_).status();
  }

  Status HttpCall() {
    std::uniform_int_distribution<int> item(0, n_ - 1);
    nlohmann::json body;
    std::string path;
    if (rpc_ == "http_echo") {
      path = "/v1/admin/echo";
      body = {{"payload", Base64(payload_)}};
    } else if (rpc_ == "http_similarity") {
      path = "/v1/queries/similarity";
      nlohmann::json is = nlohmann::json::array(), js = nlohmann::json::array();
      for (int t = 0; t < a_.batch; ++t) {
        is.push_back(item(rng_));
        js.push_back(item(rng_));
      }
      body = {{"kernel", kernel_json_}, {"i", is}, {"j", js}};
    } else {
      path = "/v1/queries/top-k";
      body = {{"kernel", kernel_json_}, {"item", item(rng_)}, {"k", a_.k}, {"excludeSelf", true}};
    }
    std::string answer;
    KLS_RETURN_IF_ERROR(http_->Post(path, body.dump(), &answer));
    const nlohmann::json parsed = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return InternalError("http: the answer is not JSON");
    return OkStatus();
  }

  static std::string Base64(const std::string& in) {
    static const char* kTable = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
      const unsigned v = (unsigned(uint8_t(in[i])) << 16) | (unsigned(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
      for (int s = 18; s >= 0; s -= 6) out += kTable[(v >> s) & 63];
    }
    if (i < in.size()) {
      unsigned v = unsigned(uint8_t(in[i])) << 16;
      if (i + 1 < in.size()) v |= unsigned(uint8_t(in[i + 1])) << 8;
      out += kTable[(v >> 18) & 63];
      out += kTable[(v >> 12) & 63];
      out += i + 1 < in.size() ? kTable[(v >> 6) & 63] : '=';
      out += '=';
    }
    return out;
  }

 private:
  const Args& a_;
  const std::string rpc_;
  const kls::v1::KernelRef kernel_;
  const int n_;
  std::mt19937_64 rng_;
  std::string payload_;
  std::vector<std::pair<int, int>> pairs_;
  kls::v1::TopKRequest topk_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<HttpConnection> http_;
  nlohmann::json kernel_json_;
};

/// The comma-separated --target list (several replicas: clients are spread
/// over them round robin, client c on target c mod count).
std::vector<std::string> Targets(const Args& a) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= a.target.size();) {
    const size_t comma = std::min(a.target.find(',', at), a.target.size());
    out.push_back(a.target.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// Runs `rpc` from a.clients threads for `seconds` (bounded), adding to `tally`.
void RunPhase(const Args& a, const std::string& rpc, const kls::v1::KernelRef& kernel, int n, double seconds,
              uint64_t seed, bool record, Tally* tally) {
  std::vector<Tally> per(a.clients);
  std::vector<std::unique_ptr<Caller>> callers;
  const std::vector<std::string> targets = Targets(a);
  for (int c = 0; c < a.clients; ++c) {
    callers.push_back(std::make_unique<Caller>(a, targets[c % targets.size()], rpc, kernel, n, seed + c));
  }
  // One untimed call per client establishes its connection.
  for (auto& caller : callers) (void)caller->Call();
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < a.clients; ++c) {
    threads.emplace_back([&, c] {
      Tally& t = per[c];
      while (Clock::now() < stop) {
        const auto t0 = Clock::now();
        const Status s = callers[c]->Call();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        ++t.calls;
        if (s.ok()) {
          t.latency_ms.push_back(ms);
        } else {
          ++t.errors;
          if (t.first_error.empty()) t.first_error = s.ToString();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (!record) return;
  tally->seconds += elapsed;
  for (Tally& t : per) {
    tally->calls += t.calls;
    tally->errors += t.errors;
    tally->latency_ms.insert(tally->latency_ms.end(), t.latency_ms.begin(), t.latency_ms.end());
    if (tally->first_error.empty()) tally->first_error = t.first_error;
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  // Nearest rank: the smallest value with at least p% of the samples at or below it.
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  const size_t idx = std::min(v.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(idx), v.end());
  return v[idx];
}

nlohmann::json Summary(const std::string& rpc, const Tally& t) {
  const int64_t ok = t.calls - t.errors;
  nlohmann::json j = {{"rpc", rpc},
                      {"calls", t.calls},
                      {"qps", t.seconds > 0 ? static_cast<double>(ok) / t.seconds : 0.0},
                      {"p50_ms", Percentile(t.latency_ms, 50)},
                      {"p99_ms", Percentile(t.latency_ms, 99)},
                      {"errors", t.errors},
                      {"seconds", t.seconds}};
  if (!t.first_error.empty()) j["first_error"] = t.first_error;
  return j;
}

int Run(const Args& a, bool json) {
  for (const std::string& t : Targets(a)) {
    if (const Status s = CheckLoopback(t); !s.ok()) return Fail(s);
  }
  std::vector<std::string> rpcs;
  for (size_t at = 0; at <= a.rpc.size();) {
    const size_t comma = std::min(a.rpc.find(',', at), a.rpc.size());
    rpcs.push_back(a.rpc.substr(at, comma - at));
    at = comma + 1;
  }
  if (!a.http.empty()) {
    if (const Status s = CheckLoopback(a.http); !s.ok()) return Fail(s);
    std::vector<std::string> both;
    for (const std::string& r : rpcs) {
      both.push_back(r);
      both.push_back("http_" + r);
    }
    rpcs = both;
  }
  bool needs_kernel = false;
  for (std::string r : rpcs) {
    if (r.rfind("http_", 0) == 0) r = r.substr(5);
    if (r != "echo" && r != "similarity" && r != "topk") {
      return Fail(InvalidArgumentError("--rpc: '" + r + "' is not one of echo, similarity, topk"));
    }
    needs_kernel |= r != "echo";
  }
  if (a.clients < 1 || a.clients > 4096) {
    return Fail(InvalidArgumentError("--clients = " + std::to_string(a.clients) + " must be in [1, 4096]"));
  }
  if (!(a.seconds > 0 && a.seconds <= 3600)) {
    return Fail(InvalidArgumentError("--seconds = " + FormatNumber(a.seconds) + " must be in (0, 3600]"));
  }
  if (a.rounds < 1 || a.rounds > 100) {
    return Fail(InvalidArgumentError("--rounds = " + std::to_string(a.rounds) + " must be in [1, 100]"));
  }
  if (a.batch < 1 || a.batch > 100000) {
    return Fail(InvalidArgumentError("--batch = " + std::to_string(a.batch) + " must be in [1, 100000]"));
  }
  if (a.payload_bytes < 0 || a.payload_bytes > (1 << 20)) {
    return Fail(InvalidArgumentError("--payload-bytes = " + std::to_string(a.payload_bytes) +
                                     " must be in [0, 1048576]"));
  }

  ClientOptions options;
  options.target = Targets(a).front();
  options.timeout_seconds = std::max(a.call_timeout_seconds, 30.0);
  Client setup(options);
  kls::v1::KernelRef kernel;
  int n = 0;
  bool imported = false;
  double import_seconds = 0;
  if (needs_kernel) {
    if (!a.kernel.empty()) {
      auto ref = ParseKernelRef(a.kernel);
      if (!ref.ok()) return Fail(ref.status());
      auto info = setup.GetKernel(*ref);
      if (!info.ok()) return Fail(info.status().WithContext("--kernel " + a.kernel));
      kernel.set_name(info->name());
      kernel.set_version(info->version());
      n = static_cast<int>(info->num_points());
    } else {
      if (a.n < 2 || a.dim < 1) {
        return Fail(InvalidArgumentError("--n = " + std::to_string(a.n) + ", --dim = " + std::to_string(a.dim) +
                                         ": need n >= 2 and dim >= 1"));
      }
      std::mt19937_64 rng(a.seed);
      std::normal_distribution<double> normal(0.0, 1.0);
      LearnedKernel::Embedding v(a.n, a.dim);
      for (Eigen::Index t = 0; t < v.size(); ++t) v.data()[t] = normal(rng) / std::sqrt(double(a.dim));
      const Stopwatch watch;
      auto info = setup.ImportKernel("kls-bench-load-" + std::to_string(a.seed), v);
      if (!info.ok()) return Fail(info.status().WithContext("importing the random embedding"));
      import_seconds = watch.Seconds();
      kernel.set_name(info->name());
      kernel.set_version(info->version());
      n = a.n;
      imported = true;
    }
  }

  std::map<std::string, Tally> tallies;
  const double phase = a.seconds / a.rounds;
  // Warm-up (not recorded): connections, the server's kernel cache, CPU caches.
  for (const std::string& r : rpcs) RunPhase(a, r, kernel, n, std::min(0.5, phase), a.seed, false, nullptr);
  for (int round = 0; round < a.rounds; ++round) {
    for (const std::string& r : rpcs) {
      RunPhase(a, r, kernel, n, phase, a.seed + 1000 * (round + 1), true, &tallies[r]);
    }
  }
  if (imported && !a.keep_kernel) {
    if (Status s = setup.DeleteKernel(kernel.name(), kernel.version()); !s.ok()) {
      std::cerr << "warning: could not delete the imported kernel: " << s.ToString() << "\n";
    }
  }

  nlohmann::json out = {{"benchmark", "load"},   {"target", a.target},  {"clients", a.clients},
                        {"seconds", a.seconds},  {"rounds", a.rounds},  {"batch", a.batch},
                        {"payload_bytes", a.payload_bytes}};
  if (needs_kernel) {
    out["kernel"] = kernel.name() + ":" + std::to_string(kernel.version());
    out["n"] = n;
    if (imported) {
      out["dim"] = a.dim;
      out["import_seconds"] = import_seconds;
    }
  }
  if (rpcs.size() == 1) {
    out.update(Summary(rpcs[0], tallies[rpcs[0]]));
  } else {
    nlohmann::json results = nlohmann::json::object();
    for (const std::string& r : rpcs) results[r] = Summary(r, tallies[r]);
    out["results"] = results;
    const double base = results[rpcs[0]]["qps"].get<double>();
    for (size_t t = 1; t < rpcs.size(); ++t) {
      if (rpcs[t].rfind("http_", 0) == 0) {  // over its own gRPC phase
        const std::string grpc = rpcs[t].substr(5);
        const double g = results[grpc]["qps"].get<double>();
        out[rpcs[t] + "_over_" + grpc] = g > 0 ? results[rpcs[t]]["qps"].get<double>() / g : 0.0;
      } else if (a.http.empty()) {
        out[rpcs[t] + "_over_" + rpcs[0]] = base > 0 ? results[rpcs[t]]["qps"].get<double>() / base : 0.0;
      }
    }
  }
  out["machine"] = MachineInfo();
  Emit(out, json);
  int64_t errors = 0;
  for (auto& [r, t] : tallies) errors += t.errors;
  return errors == 0 ? 0 : 1;
}

}  // namespace

Runner RegisterLoad(CLI::App& app, bool* json) {
  auto a = std::make_shared<Args>();
  app.add_option("--target", a->target, "kls-server HOST:PORT (loopback only); a comma list of replicas spreads the clients over them")->capture_default_str();
  app.add_option("--rpc", a->rpc, "echo, similarity, topk, or a comma list run back to back (echo,similarity)")
      ->capture_default_str();
  app.add_option("--kernel", a->kernel, "NAME[:VERSION|@ALIAS] to query (default: import a random one)");
  app.add_option("--clients", a->clients, "concurrent client threads, each with its own channel")
      ->capture_default_str();
  app.add_option("--seconds", a->seconds, "measured seconds per RPC (split over --rounds)")->capture_default_str();
  app.add_option("--rounds", a->rounds, "alternating rounds when several RPCs are given")->capture_default_str();
  app.add_option("--n", a->n, "items of the random embedding")->capture_default_str();
  app.add_option("--dim", a->dim, "dimension of the random embedding")->capture_default_str();
  app.add_option("--batch", a->batch, "pairs per Similarity call")->capture_default_str();
  app.add_option("--k", a->k, "k of TopK")->capture_default_str();
  app.add_option("--payload-bytes", a->payload_bytes, "Echo payload size")->capture_default_str();
  app.add_option("--seed", a->seed, "seed of the embedding and the query stream")->capture_default_str();
  app.add_option("--call-timeout-seconds", a->call_timeout_seconds, "deadline of each call")->capture_default_str();
  app.add_option("--http", a->http,
                 "kls-server's --http-listen HOST:PORT (loopback): also run every RPC over the HTTP/JSON API and "
                 "report http_<rpc>_over_<rpc>");
  app.add_flag("--keep-kernel", a->keep_kernel, "do not delete the imported kernel afterwards");
  return [a, json]() -> int { return Run(*a, *json); };
}

KLS_BENCH_SUBCOMMAND("load", "closed-loop RPC load against a kls-server (echo, similarity, topk)", RegisterLoad);

}  // namespace kls::bench
