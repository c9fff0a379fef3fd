#include "server/http/http_gateway.h"

#include <civetweb.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <thread>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "client/client.h"
#include "core/data/csv_reader.h"
#include "kls/v1/kernels.pb.h"
#include "server/http/http_assets.h"
#include "server/http/http_translate.h"
#include "server/rpc_observer.h"

namespace kls::server::http {
namespace {

using google::protobuf::Message;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Header(mg_connection* conn, const char* name) {
  const char* v = mg_get_header(conn, name);
  return v == nullptr ? std::string() : std::string(v);
}

// The media type without parameters, lower case: "text/csv; charset=utf-8" → "text/csv".
std::string MediaType(const std::string& content_type) {
  std::string t = Lower(content_type.substr(0, content_type.find(';')));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  return t;
}

bool Accepts(const std::string& accept, const char* type) { return Lower(accept).find(type) != std::string::npos; }

grpc::ByteBuffer Serialize(const Message& m) {
  const std::string bytes = m.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

bool ParseBuffer(const grpc::ByteBuffer& buffer, Message* m) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return m->ParseFromString(bytes);
}

// One response being written: headers common to every answer of the gateway.
struct Reply {
  mg_connection* conn;
  std::string request_id;
  std::string cors_origin;  // set: echo it (a listed cross-origin request)

  void Start(int status, const std::string& content_type, long long length) const {
    mg_response_header_start(conn, status);
    mg_response_header_add(conn, "Content-Type", content_type.c_str(), -1);
    if (length >= 0) {
      mg_response_header_add(conn, "Content-Length", std::to_string(length).c_str(), -1);
    } else {
      mg_response_header_add(conn, "Transfer-Encoding", "chunked", -1);
    }
    if (!request_id.empty()) mg_response_header_add(conn, "X-Request-Id", request_id.c_str(), -1);
    mg_response_header_add(conn, "X-Content-Type-Options", "nosniff", -1);
    mg_response_header_add(conn, "Cache-Control", "no-store", -1);
    if (!cors_origin.empty()) {
      mg_response_header_add(conn, "Access-Control-Allow-Origin", cors_origin.c_str(), -1);
      mg_response_header_add(conn, "Access-Control-Expose-Headers", "X-Request-Id", -1);
      mg_response_header_add(conn, "Vary", "Origin", -1);
    }
  }
  int Send(int status, const std::string& content_type, const std::string& body,
           const std::vector<std::pair<std::string, std::string>>& extra = {}) const {
    Start(status, content_type, static_cast<long long>(body.size()));
    for (const auto& [k, v] : extra) mg_response_header_add(conn, k.c_str(), v.c_str(), -1);
    mg_response_header_send(conn);
    if (!body.empty()) mg_write(conn, body.data(), body.size());
    return status;
  }
  int Error(const Status& status, const std::vector<std::pair<std::string, std::string>>& extra = {}) const {
    return Send(HttpStatusOf(status.code()), "application/json", ErrorJson(status, request_id), extra);
  }
  // Chunked streaming.
  void BeginChunked(int status, const std::string& content_type,
                    const std::vector<std::pair<std::string, std::string>>& extra = {}) const {
    Start(status, content_type, -1);
    for (const auto& [k, v] : extra) mg_response_header_add(conn, k.c_str(), v.c_str(), -1);
    mg_response_header_send(conn);
  }
  bool Chunk(const std::string& data) const {
    return data.empty() || mg_send_chunk(conn, data.data(), static_cast<unsigned int>(data.size())) > 0;
  }
  void EndChunked() const { mg_send_chunk(conn, "", 0); }
};

}  // namespace

namespace {
class RequestThreads;
}  // namespace

struct HttpGateway::Impl {
  HttpGatewayOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  mg_context* ctx = nullptr;
  int port = 0;
  std::mutex mu;
  std::set<grpc::ClientContext*> active;  // open calls, cancelled by Stop()
  bool stopping = false;
  std::unique_ptr<RequestThreads> threads;

  int Handle(mg_connection* conn);
  int Api(mg_connection* conn, const mg_request_info* info, const Reply& reply);
  Status ReadBody(mg_connection* conn, const mg_request_info* info, int64_t limit, std::string* body);
  // Runs one call of `method` (`unary`: one request and one response):
  // writes `requests`, then hands each response to
  // `on_response` (false = stop: the call is cancelled). While no response
  // arrives for `heartbeat_every`, calls `heartbeat` (false = the client is
  // gone: cancel). Returns the call's status.
  Status Call(const std::string& method, bool unary, const std::string& request_id, double timeout_seconds,
              const std::vector<std::unique_ptr<Message>>& requests,
              const std::function<bool(const grpc::ByteBuffer&)>& on_response,
              const std::function<bool()>& heartbeat = nullptr);
  int UploadTabular(mg_connection* conn, const mg_request_info* info, const Reply& reply, const std::string& type);
  int SetAttributesCsv(mg_connection* conn, const mg_request_info* info, const Reply& reply);
  int ServeAsset(const std::string& path, const std::string& verb, const Reply& reply);
  bool OriginAllowed(const std::string& origin, const std::string& host, bool tls) const;
};

namespace {

// civetweb's request threads have 100 KiB stacks, too small for parsing,
// protobuf's JSON and gRPC calls; each request runs on one of these threads
// (default 8 MiB stacks) while its civetweb thread waits.
class RequestThreads {
 public:
  explicit RequestThreads(int count) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~RequestThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  int Run(const std::function<int()>& work) {
    std::packaged_task<int()> task(work);
    std::future<int> result = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return result.get();
  }

 private:
  void Loop() {
    while (true) {
      std::packaged_task<int()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<int()>> queue_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

int OnLog(const mg_connection* conn, const char* message) {
  (void)conn;
  spdlog::info("http: {}", message);
  return 1;
}

// TLS with the server's own certificate files (civetweb's ssl_certificate
// wants key and chain in one file; the config has them apart).
int OnInitSsl(void* ssl_ctx, void* user_data) {
  auto* options = static_cast<const HttpGatewayOptions*>(user_data);
  SSL_CTX* ctx = static_cast<SSL_CTX*>(ssl_ctx);
  if (SSL_CTX_use_certificate_chain_file(ctx, options->security.cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, options->security.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    spdlog::error("http: cannot load the TLS certificate {} / key {}", options->security.cert_file,
                  options->security.key_file);
    return -1;
  }
  if (!options->security.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, options->security.client_ca_file.c_str(), nullptr) != 1) {
      spdlog::error("http: cannot load the client CA {}", options->security.client_ca_file);
      return -1;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return 1;  // initialized here: civetweb loads no files
}

}  // namespace

int OnRequest(mg_connection* conn, void* cbdata) {
  auto* impl = static_cast<HttpGateway::Impl*>(cbdata);
  return impl->threads->Run([impl, conn] { return impl->Handle(conn); });
}

bool HttpGateway::Impl::OriginAllowed(const std::string& origin, const std::string& host, bool tls) const {
  if (origin == std::string(tls ? "https://" : "http://") + host) return true;  // the console itself
  for (const std::string& o : options.cors_origins) {
    if (o == "*" || o == origin) return true;
  }
  return false;
}

Status HttpGateway::Impl::ReadBody(mg_connection* conn, const mg_request_info* info, int64_t limit,
                                   std::string* body) {
  body->clear();
  if (info->content_length > limit) {
    return ResourceExhaustedError("request body of " + std::to_string(info->content_length) +
                                  " bytes is over the limit of " + std::to_string(limit) + " bytes");
  }
  if (info->content_length > 0) body->reserve(static_cast<size_t>(info->content_length));
  // On the heap: civetweb's worker threads have small stacks.
  std::vector<char> buf(64 * 1024);
  while (true) {
    const int got = mg_read(conn, buf.data(), buf.size());
    if (got <= 0) break;
    body->append(buf.data(), static_cast<size_t>(got));
    if (static_cast<int64_t>(body->size()) > limit) {
      return ResourceExhaustedError("request body is over the limit of " + std::to_string(limit) + " bytes");
    }
  }
  return OkStatus();
}

Status HttpGateway::Impl::Call(const std::string& method, bool unary, const std::string& request_id,
                               double timeout_seconds, const std::vector<std::unique_ptr<Message>>& requests,
                               const std::function<bool(const grpc::ByteBuffer&)>& on_response,
                               const std::function<bool()>& heartbeat) {
  grpc::ClientContext context;
  context.AddMetadata(kRequestIdKey, request_id);
  if (timeout_seconds > 0) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::duration_cast<std::chrono::system_clock::duration>(
                             std::chrono::duration<double>(timeout_seconds)));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) return Status(StatusCode::kUnavailable, "the server is shutting down");
    active.insert(&context);
  }
  if (unary) {
    // One request, one response: the callback API (no completion queue to
    // create per call; measurably faster than the streaming path below).
    grpc::ByteBuffer request = Serialize(*requests.front());
    grpc::ByteBuffer response;
    std::mutex done_mu;
    std::condition_variable done_cv;
    bool done = false;
    grpc::Status status;
    stub->UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
      std::lock_guard<std::mutex> lock(done_mu);
      status = std::move(s);
      done = true;
      done_cv.notify_one();
    });
    {
      std::unique_lock<std::mutex> lock(done_mu);
      done_cv.wait(lock, [&] { return done; });
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      active.erase(&context);
    }
    if (!status.ok()) return Status(static_cast<StatusCode>(status.error_code()), status.error_message());
    if (!on_response(response)) return InternalError("the response does not parse");
    return OkStatus();
  }
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub->PrepareCall(&context, method, &cq);
  // Each operation is started and waited for in turn, so the next event is
  // always the one just started.
  const auto wait = [&](bool with_heartbeat) {
    void* tag = nullptr;
    bool ok = false;
    while (true) {
      const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(15);
      const grpc::CompletionQueue::NextStatus s =
          with_heartbeat && heartbeat ? cq.AsyncNext(&tag, &ok, deadline)
                                      : (cq.Next(&tag, &ok) ? grpc::CompletionQueue::GOT_EVENT
                                                            : grpc::CompletionQueue::SHUTDOWN);
      if (s == grpc::CompletionQueue::GOT_EVENT) return ok;
      if (s == grpc::CompletionQueue::SHUTDOWN) return false;
      if (!heartbeat()) context.TryCancel();  // TIMEOUT: is the client still there?
    }
  };
  int tag = 0;
  call->StartCall(&tag);
  bool ok = wait(false);
  for (size_t i = 0; ok && i < requests.size(); ++i) {
    call->Write(Serialize(*requests[i]), &tag);
    ok = wait(false);
  }
  if (ok) {
    call->WritesDone(&tag);
    ok = wait(false);
  }
  bool reading = true;
  while (reading) {
    grpc::ByteBuffer buffer;
    call->Read(&buffer, &tag);
    if (!wait(true)) break;
    if (!on_response(buffer)) {
      context.TryCancel();
      reading = false;
    }
  }
  grpc::Status status;
  call->Finish(&status, &tag);
  wait(false);
  cq.Shutdown();
  void* ignored_tag;
  bool ignored_ok;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    active.erase(&context);
  }
  if (status.ok()) return OkStatus();
  return Status(static_cast<StatusCode>(status.error_code()), status.error_message());
}

int HttpGateway::Impl::Handle(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string verb = info->request_method != nullptr ? info->request_method : "";
  const std::string path = info->local_uri != nullptr ? info->local_uri : "/";
  Reply reply{conn, RequestIdFrom(Header(conn, "X-Request-Id")), ""};
  const auto start = std::chrono::steady_clock::now();

  const std::string origin = Header(conn, "Origin");
  if (!origin.empty()) {
    if (!OriginAllowed(origin, Header(conn, "Host"), info->is_ssl != 0)) {
      return reply.Error(Status(StatusCode::kPermissionDenied,
                                "cross-origin request from " + origin +
                                    " refused: list the origin in the server's http_cors_origins"));
    }
    reply.cors_origin = origin;
  }
  if (verb == "OPTIONS") {  // CORS preflight (or a plain OPTIONS)
    return reply.Send(204, "text/plain", "",
                      {{"Allow", "GET, POST, OPTIONS"},
                       {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                       {"Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, X-Request-Id"},
                       {"Access-Control-Max-Age", "600"}});
  }
  int status;
  if (path.rfind("/v1/", 0) == 0) {
    status = Api(conn, info, reply);
  } else {
    status = ServeAsset(path, verb, reply);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  spdlog::log(status < 400 ? spdlog::level::debug : spdlog::level::info, "http {} {} {} in {:.1f} ms, request {}, peer {}",
              verb, path, status, ms, reply.request_id, info->remote_addr);
  return status;
}

// KLS_HTTP_CONSOLE_DIR (developers of the console): serve the console's files
// from this directory, read at every request, instead of the copies compiled
// in; /openapi.json stays the compiled-in one.
std::optional<HttpAsset> ConsoleFileFromDisk(const std::string& path, std::string* storage) {
  const char* dir = std::getenv("KLS_HTTP_CONSOLE_DIR");
  if (dir == nullptr || *dir == '\0' || path == "/openapi.json" || path.find("..") != std::string::npos) {
    return std::nullopt;
  }
  const std::string name = path == "/" ? "/index.html" : path;
  std::ifstream in(std::string(dir) + name, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  *storage = bytes.str();
  const std::string ext = name.substr(name.find_last_of('.') + 1);
  const char* type = ext == "html" ? "text/html; charset=utf-8"
                     : ext == "js" ? "text/javascript; charset=utf-8"
                     : ext == "css" ? "text/css; charset=utf-8"
                     : ext == "svg" ? "image/svg+xml"
                                    : "application/octet-stream";
  return HttpAsset{path, type, *storage};
}

int HttpGateway::Impl::ServeAsset(const std::string& path, const std::string& verb, const Reply& reply) {
  std::string storage;
  const std::optional<HttpAsset> from_disk = ConsoleFileFromDisk(path, &storage);
  const HttpAsset* asset = from_disk ? &*from_disk : FindHttpAsset(path);
  if (asset == nullptr) {
    return reply.Error(NotFoundError("no page " + path + " (the console is at /, the API under /v1/, its "
                                     "description at /openapi.json)"));
  }
  if (verb != "GET" && verb != "HEAD") {
    return reply.Error(UnimplementedError("method " + verb + " is not allowed on " + path + " (allowed: GET)"),
                       {{"Allow", "GET"}});
  }
  // The console's pages run only their own scripts and talk only to this
  // server: text from the data (item keys, names) can never become code.
  std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Security-Policy",
       "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"}};
  if (verb == "HEAD") {
    reply.Start(200, std::string(asset->content_type), static_cast<long long>(asset->body.size()));
    for (const auto& [k, v] : headers) mg_response_header_add(reply.conn, k.c_str(), v.c_str(), -1);
    mg_response_header_send(reply.conn);
    return 200;
  }
  return reply.Send(200, std::string(asset->content_type), std::string(asset->body), headers);
}

int HttpGateway::Impl::Api(mg_connection* conn, const mg_request_info* info, const Reply& reply) {
  const std::string verb = info->request_method;
  const std::string path = info->local_uri;
  const std::string query = info->query_string != nullptr ? info->query_string : "";
  StatusOr<const HttpRoute*> matched = MatchRoute(KlsHttpRoutes(), verb, path);
  if (!matched.ok()) {
    if (matched.status().code() == StatusCode::kUnimplemented) {
      const HttpRoute* same_path = nullptr;
      for (const HttpRoute& r : KlsHttpRoutes()) {
        if (r.path == path) same_path = &r;
      }
      return reply.Send(405, "application/json", ErrorJson(matched.status(), reply.request_id),
                        {{"Allow", same_path != nullptr ? AllowedVerbs(*same_path) : "POST"}});
    }
    return reply.Error(matched.status());
  }
  const HttpRoute& route = **matched;
  if (const Status auth = Authorize(options.tokens.get(), route.grpc_method, Header(conn, "Authorization"));
      !auth.ok()) {
    std::vector<std::pair<std::string, std::string>> extra;
    if (auth.code() == StatusCode::kUnauthenticated) extra.emplace_back("WWW-Authenticate", "Bearer");
    return reply.Error(auth, extra);
  }
  const std::string type = MediaType(Header(conn, "Content-Type"));
  const std::string accept = Header(conn, "Accept");
  if (verb == "POST" && route.grpc_method == "/kls.v1.Datasets/Upload" &&
      (type == "text/csv" || type == "application/x-libsvm" || type == "text/x-libsvm" || type == "text/plain")) {
    return UploadTabular(conn, info, reply, type);
  }
  if (verb == "POST" && route.grpc_method == "/kls.v1.Datasets/SetAttributes" && type == "text/csv") {
    return SetAttributesCsv(conn, info, reply);
  }
  // JSON bodies: application/json, no type, or curl -d's default
  // (application/x-www-form-urlencoded) — the body is read as JSON either way.
  if (verb == "POST" && !type.empty() && type != "application/json" &&
      type != "application/x-www-form-urlencoded") {
    return reply.Error(InvalidArgumentError("Content-Type '" + type + "': " + route.path +
                                            " takes application/json" +
                                            (route.grpc_method == "/kls.v1.Datasets/Upload"
                                                 ? " (an array of UploadDatasetRequest), text/csv or "
                                                   "application/x-libsvm"
                                                 : route.grpc_method == "/kls.v1.Datasets/SetAttributes"
                                                       ? " (an array of SetAttributesRequest) or text/csv"
                                                       : "")));
  }
  std::string body;
  if (verb == "POST") {
    if (const Status s = ReadBody(conn, info, options.max_body_bytes, &body); !s.ok()) {
      return reply.Send(413, "application/json", ErrorJson(s, reply.request_id));
    }
  }
  StatusOr<std::vector<std::unique_ptr<Message>>> requests = RequestMessages(route, verb, query, body);
  if (!requests.ok()) return reply.Error(requests.status());
  const Message* response_type =
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(route.method->output_type());

  // Server streams as Server-Sent Events: one "message" event per response,
  // then "end" (or "error" with the status as JSON).
  if (route.server_streaming && Accepts(accept, "text/event-stream")) {
    reply.BeginChunked(200, "text/event-stream", {{"X-Accel-Buffering", "no"}});
    bool client_gone = !reply.Chunk(": " + route.grpc_method + "\n\n");
    const Status s = Call(
        route.grpc_method, false, reply.request_id, 0, *requests,
        [&](const grpc::ByteBuffer& buffer) {
          std::unique_ptr<Message> m(response_type->New());
          if (!ParseBuffer(buffer, m.get())) return false;
          client_gone = !reply.Chunk("event: message\ndata: " + MessageToJson(*m) + "\n\n");
          return !client_gone;
        },
        [&] {
          client_gone = client_gone || !reply.Chunk(": keep-alive\n\n");
          return !client_gone;
        });
    if (!client_gone) {
      if (s.ok()) {
        reply.Chunk("event: end\ndata: {}\n\n");
      } else {
        reply.Chunk("event: error\ndata: " + ErrorJson(s, reply.request_id) + "\n\n");
      }
      reply.EndChunked();
    }
    return 200;
  }
  // Kernels.Export as CSV: "row,v0,...,v{r-1}", one line per item.
  if (route.grpc_method == "/kls.v1.Kernels/Export" && Accepts(accept, "text/csv")) {
    bool started = false;
    bool client_gone = false;
    int rank = 0;
    const Status s = Call(route.grpc_method, false, reply.request_id, 0, *requests, [&](const grpc::ByteBuffer& buffer) {
      kls::v1::ExportKernelChunk chunk;
      if (!ParseBuffer(buffer, &chunk)) return false;
      std::ostringstream out;
      out.precision(17);
      if (chunk.has_info()) {
        rank = std::max(1, chunk.info().rank());
        const std::string file = chunk.info().name() + "-v" + std::to_string(chunk.info().version()) + ".csv";
        reply.BeginChunked(200, "text/csv", {{"Content-Disposition", "attachment; filename=\"" + file + "\""}});
        started = true;
        out << "row";
        for (int c = 0; c < rank; ++c) out << ",v" << c;
        out << "\n";
      }
      if (!started) return false;
      const int64_t rows = chunk.values_size() / rank;
      for (int64_t r = 0; r < rows; ++r) {
        out << chunk.first_row() + r;
        for (int c = 0; c < rank; ++c) out << "," << chunk.values(static_cast<int>(r * rank + c));
        out << "\n";
      }
      client_gone = !reply.Chunk(out.str());
      return !client_gone;
    });
    if (!started) return reply.Error(s.ok() ? InternalError("the export sent no kernel header") : s);
    if (!client_gone) reply.EndChunked();  // an error after the header can only cut the download short
    return 200;
  }
  std::vector<std::string> responses;
  const bool unary = !route.client_streaming && !route.server_streaming;
  const Status s = Call(route.grpc_method, unary, reply.request_id, route.server_streaming ? 0 : options.call_timeout_seconds,
                        *requests, [&](const grpc::ByteBuffer& buffer) {
                          std::unique_ptr<Message> m(response_type->New());
                          if (!ParseBuffer(buffer, m.get())) return false;
                          responses.push_back(MessageToJson(*m));
                          return true;
                        });
  if (!s.ok()) return reply.Error(s);
  if (!route.server_streaming) {
    if (responses.size() != 1) return reply.Error(InternalError("the call returned no response"));
    return reply.Send(200, "application/json", responses[0]);
  }
  std::string array = "[";
  for (size_t i = 0; i < responses.size(); ++i) {
    if (i > 0) array += ",";
    array += responses[i];
  }
  array += "]";
  return reply.Send(200, "application/json", array);
}

// POST /v1/datasets/upload with a CSV or LIBSVM body: the rows as the C++
// client would send them (client/client.h UploadDataset), over the in-process
// channel. Query parameters: name, format (csv | libsvm; default from the
// Content-Type), num_features (LIBSVM), protocol, seed, and the protocol's own
// parameters as protocol.FIELD (kls.v1.ConstraintProtocol: protocol.fraction,
// protocol.must_fraction, protocol.self_pairs, ...).
int HttpGateway::Impl::UploadTabular(mg_connection* conn, const mg_request_info* info, const Reply& reply,
                                     const std::string& type) {
  const std::string query = info->query_string != nullptr ? info->query_string : "";
  std::string body;
  if (const Status s = ReadBody(conn, info, options.max_upload_bytes, &body); !s.ok()) {
    return reply.Send(413, "application/json", ErrorJson(s, reply.request_id));
  }
  std::string format = QueryValue(query, "format");
  if (format.empty()) format = type == "text/csv" ? "csv" : "libsvm";
  int num_features = 0;
  const std::string nf = QueryValue(query, "num_features");
  if (!nf.empty()) {
    char* end = nullptr;
    const long v = std::strtol(nf.c_str(), &end, 10);
    if (end == nf.c_str() || *end != '\0' || v < 0 || v > 100'000'000) {
      return reply.Error(InvalidArgumentError("query parameter 'num_features': '" + nf +
                                              "' is not a non-negative integer"));
    }
    num_features = static_cast<int>(v);
  }
  const std::string name = QueryValue(query, "name");
  std::istringstream in(body);
  const std::string source = name.empty() ? std::string("body") : name;
  StatusOr<Dataset> data = format == "csv"      ? ParseCsv(in, source)
                           : format == "libsvm" ? ParseLibsvm(in, source, num_features)
                                                : StatusOr<Dataset>(InvalidArgumentError(
                                                      "query parameter 'format': '" + format +
                                                      "' is not csv or libsvm"));
  if (!data.ok()) return reply.Error(data.status());
  body.clear();
  body.shrink_to_fit();
  UploadOptions upload;
  upload.name = name;
  const std::string protocol = QueryValue(query, "protocol");
  if (const Status s = QueryToMessage(query, "protocol.", &upload.protocol); !s.ok()) return reply.Error(s);
  if (!protocol.empty()) {
    upload.protocol.set_name(protocol);
    const std::string seed = QueryValue(query, "seed");
    if (!seed.empty()) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(seed.c_str(), &end, 10);
      if (end == seed.c_str() || *end != '\0') {
        return reply.Error(InvalidArgumentError("query parameter 'seed': '" + seed + "' is not an integer"));
      }
      upload.protocol.set_seed(v);
    }
  }
  ClientOptions client_options;
  client_options.request_id = reply.request_id;
  client_options.timeout_seconds = options.call_timeout_seconds;
  Client client(channel, client_options);
  const StatusOr<kls::v1::DatasetInfo> uploaded = client.UploadDataset(*data, PairwiseConstraints(), upload);
  if (!uploaded.ok()) return reply.Error(uploaded.status());
  return reply.Send(200, "application/json", MessageToJson(*uploaded));
}

// POST /v1/datasets/set-attributes?dataset_id=ID with a CSV body.
int HttpGateway::Impl::SetAttributesCsv(mg_connection* conn, const mg_request_info* info, const Reply& reply) {
  const std::string query = info->query_string != nullptr ? info->query_string : "";
  const std::string dataset = QueryValue(query, "dataset_id");
  if (dataset.empty()) {
    return reply.Error(InvalidArgumentError("query parameter 'dataset_id' is missing: the data set (id or name) "
                                            "whose attributes the CSV body replaces"));
  }
  std::string body;
  if (const Status s = ReadBody(conn, info, options.max_upload_bytes, &body); !s.ok()) {
    return reply.Send(413, "application/json", ErrorJson(s, reply.request_id));
  }
  ClientOptions client_options;
  client_options.request_id = reply.request_id;
  client_options.timeout_seconds = options.call_timeout_seconds;
  Client client(channel, client_options);
  const StatusOr<kls::v1::DatasetInfo> set = client.SetAttributes(dataset, body);
  if (!set.ok()) return reply.Error(set.status());
  return reply.Send(200, "application/json", MessageToJson(*set));
}

HttpGateway::HttpGateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpGateway::~HttpGateway() { Stop(); }

int HttpGateway::port() const { return impl_->port; }

void HttpGateway::Stop() {
  if (impl_->ctx == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    for (grpc::ClientContext* c : impl_->active) c->TryCancel();
  }
  mg_stop(impl_->ctx);
  impl_->ctx = nullptr;
  impl_->threads.reset();
}

StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(HttpGatewayOptions options,
                                                         std::shared_ptr<grpc::Channel> channel) {
  static std::once_flag init_once;
  std::call_once(init_once, [] { mg_init_library(MG_FEATURES_TLS); });
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->channel = channel;
  impl->stub = std::make_unique<grpc::GenericStub>(channel);
  impl->threads = std::make_unique<RequestThreads>(std::max(2, impl->options.threads));
  const bool tls = !impl->options.security.cert_file.empty();
  const std::string ports = impl->options.listen + (tls ? "s" : "");
  const std::string threads = std::to_string(std::max(2, impl->options.threads));
  const char* mg_options[] = {"listening_ports", ports.c_str(),
                              "num_threads", threads.c_str(),
                              "enable_keep_alive", "yes",
                              "keep_alive_timeout_ms", "30000",
                              "request_timeout_ms", "30000",
                              "tcp_nodelay", "1",
                              "ssl_protocol_version", "4",
                              // CORS is OriginAllowed's alone: civetweb would otherwise answer every
                              // preflight itself, for any origin ("*" by default), without the gateway.
                              "access_control_allow_origin", "",
                              "access_control_allow_methods", "",
                              nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = OnLog;
  if (tls) callbacks.init_ssl = OnInitSsl;
  impl->ctx = mg_start(&callbacks, &impl->options, mg_options);
  if (impl->ctx == nullptr) {
    return Status(StatusCode::kUnavailable, "cannot listen for HTTP on " + impl->options.listen +
                                                " (address in use, not an address of this machine, or bad TLS files)");
  }
  mg_set_request_handler(impl->ctx, "/", OnRequest, impl.get());
  mg_server_port ports_out[4];
  const int n = mg_get_server_ports(impl->ctx, 4, ports_out);
  impl->port = n > 0 ? ports_out[0].port : 0;
  return std::unique_ptr<HttpGateway>(new HttpGateway(std::move(impl)));
}

}  // namespace kls::server::http
