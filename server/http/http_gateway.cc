#include "server/http/http_gateway.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
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

// Last: it pulls in <resolv.h>, whose `_res` macro breaks Eigen's headers.
#include <httplib.h>

namespace kls::server::http {
namespace {

using google::protobuf::Message;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
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

using Headers = std::vector<std::pair<std::string, std::string>>;

// One response being written: headers common to every answer of the gateway.
struct Reply {
  httplib::Response& res;
  std::string request_id;
  std::string cors_origin;  // set: echo it (a listed cross-origin request)

  void Common(int status, const Headers& extra) const {
    res.status = status;
    if (!request_id.empty()) res.set_header("X-Request-Id", request_id);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-store");
    if (!cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", cors_origin);
      res.set_header("Access-Control-Expose-Headers", "X-Request-Id");
      res.set_header("Vary", "Origin");
    }
    for (const auto& [k, v] : extra) res.set_header(k, v);
  }
  int Send(int status, const std::string& content_type, const std::string& body, const Headers& extra = {}) const {
    Common(status, extra);
    res.set_content(body, content_type);
    return status;
  }
  int Error(const Status& status, const Headers& extra = {}) const {
    return Send(HttpStatusOf(status.code()), "application/json", ErrorJson(status, request_id), extra);
  }
  // A chunked response whose body `provider` writes after the handler returned.
  int Stream(int status, const std::string& content_type, const Headers& extra,
             std::function<bool(size_t, httplib::DataSink&)> provider) const {
    Common(status, extra);
    res.set_chunked_content_provider(content_type, std::move(provider));
    return status;
  }
};

// The query string as sent (the library's parsed params drop repeated
// identical pairs, e.g. items=3&items=3).
std::string RawQuery(const httplib::Request& req) {
  const size_t q = req.target.find('?');
  return q == std::string::npos ? std::string() : req.target.substr(q + 1);
}

}  // namespace

struct HttpGateway::Impl {
  HttpGatewayOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  std::unique_ptr<httplib::Server> server;  // an httplib::SSLServer with TLS
  std::thread listener;
  int port = 0;
  std::mutex mu;
  std::set<grpc::ClientContext*> active;  // open calls, cancelled by Stop()
  bool stopping = false;

  void Handle(const httplib::Request& req, httplib::Response& res);
  int Api(const httplib::Request& req, const Reply& reply);
  using Requests = std::shared_ptr<std::vector<std::unique_ptr<Message>>>;
  // A server stream as Server-Sent Events (Api's `Accept: text/event-stream`).
  int StreamEvents(const HttpRoute& route, const Reply& reply, Requests shared, const Message* response_type);
  // Kernels.Export as CSV (Api's `Accept: text/csv`).
  int ExportCsv(const HttpRoute& route, const Reply& reply, Requests shared);
  // Runs one call of `method` (`unary`: one request and one response):
  // writes `requests`, then hands each response to `on_response` (false =
  // stop: the call is cancelled). While no response arrives for 15 s, calls
  // `heartbeat` (false = the client is gone: cancel). Returns the status.
  Status Call(const std::string& method, bool unary, const std::string& request_id, double timeout_seconds,
              const std::vector<std::unique_ptr<Message>>& requests,
              const std::function<bool(const grpc::ByteBuffer&)>& on_response,
              const std::function<bool()>& heartbeat = nullptr);
  int UploadTabular(const httplib::Request& req, const Reply& reply, const std::string& type);
  int SetAttributesCsv(const httplib::Request& req, const Reply& reply);
  int ServeAsset(const std::string& path, const std::string& verb, const Reply& reply);
  bool OriginAllowed(const std::string& origin, const std::string& host) const;
};

bool HttpGateway::Impl::OriginAllowed(const std::string& origin, const std::string& host) const {
  const bool tls = !options.security.cert_file.empty();
  if (origin == std::string(tls ? "https://" : "http://") + host) return true;  // the console itself
  for (const std::string& o : options.cors_origins) {
    if (o == "*" || o == origin) return true;
  }
  return false;
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

void HttpGateway::Impl::Handle(const httplib::Request& req, httplib::Response& res) {
  const std::string& verb = req.method;
  const std::string& path = req.path;
  Reply reply{res, RequestIdFrom(req.get_header_value("X-Request-Id")), ""};
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  const std::string origin = req.get_header_value("Origin");
  if (!origin.empty() && !OriginAllowed(origin, req.get_header_value("Host"))) {
    status = reply.Error(Status(StatusCode::kPermissionDenied,
                                "cross-origin request from " + origin +
                                    " refused: list the origin in the server's http_cors_origins"));
  } else {
    if (!origin.empty()) reply.cors_origin = origin;
    if (verb == "OPTIONS") {  // CORS preflight (or a plain OPTIONS)
      status = reply.Send(204, "text/plain", "",
                          {{"Allow", "GET, POST, OPTIONS"},
                           {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                           {"Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, X-Request-Id"},
                           {"Access-Control-Max-Age", "600"}});
    } else if (path.rfind("/v1/", 0) == 0) {
      status = Api(req, reply);
    } else {
      status = ServeAsset(path, verb, reply);
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // The access-log line of the request (the in-process gRPC calls it makes
  // log at debug level: server/rpc_observer.h).
  spdlog::log(options.access_log ? spdlog::level::info : spdlog::level::debug,
              "http {} {} {} in {:.1f} ms, request {}, peer {}:{}", verb, path, status, ms, reply.request_id,
              req.remote_addr, req.remote_port);
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
    return reply.Send(405, "application/json",
                      ErrorJson(UnimplementedError("method " + verb + " is not allowed on " + path + " (allowed: GET)"),
                                reply.request_id),
                      {{"Allow", "GET"}});
  }
  // The console's pages run only their own scripts and talk only to this
  // server: text from the data (item keys, names) can never become code.
  // (HEAD: the same headers; the library leaves the body out.)
  return reply.Send(200, std::string(asset->content_type), std::string(asset->body),
                    {{"Content-Security-Policy",
                      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                      "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"},
                     {"X-Frame-Options", "DENY"},
                     {"Referrer-Policy", "no-referrer"}});
}

int HttpGateway::Impl::Api(const httplib::Request& req, const Reply& reply) {
  const std::string& verb = req.method;
  const std::string& path = req.path;
  const std::string query = RawQuery(req);
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
  const std::shared_ptr<const TokenTable> tokens = options.tokens ? options.tokens->Get() : nullptr;
  if (const Status auth = Authorize(tokens.get(), route.grpc_method, req.get_header_value("Authorization"));
      !auth.ok()) {
    std::vector<std::pair<std::string, std::string>> extra;
    if (auth.code() == StatusCode::kUnauthenticated) extra.emplace_back("WWW-Authenticate", "Bearer");
    return reply.Error(auth, extra);
  }
  const std::string type = MediaType(req.get_header_value("Content-Type"));
  const std::string accept = req.get_header_value("Accept");
  if (verb == "POST" && route.grpc_method == "/kls.v1.Datasets/Upload" &&
      (type == "text/csv" || type == "application/x-libsvm" || type == "text/x-libsvm" || type == "text/plain")) {
    return UploadTabular(req, reply, type);
  }
  if (verb == "POST" && route.grpc_method == "/kls.v1.Datasets/SetAttributes" && type == "text/csv") {
    return SetAttributesCsv(req, reply);
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
  if (static_cast<int64_t>(req.body.size()) > options.max_body_bytes) {
    return reply.Send(413, "application/json",
                      ErrorJson(ResourceExhaustedError("request body of " + std::to_string(req.body.size()) +
                                                       " bytes is over the limit of " +
                                                       std::to_string(options.max_body_bytes) + " bytes"),
                                reply.request_id));
  }
  StatusOr<std::vector<std::unique_ptr<Message>>> requests =
      RequestMessages(route, verb, query, verb == "POST" ? std::string_view(req.body) : std::string_view());
  if (!requests.ok()) return reply.Error(requests.status());
  const Message* response_type =
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(route.method->output_type());

  // Server streams as Server-Sent Events: one "message" event per response,
  // then "end" (or "error" with the status as JSON).
  // The stream runs in the response's content provider, after this returns.
  auto shared = std::make_shared<std::vector<std::unique_ptr<Message>>>(std::move(requests).value());
  if (route.server_streaming && Accepts(accept, "text/event-stream")) {
    return StreamEvents(route, reply, shared, response_type);
  }
  // Kernels.Export as CSV: "row,v0,...,v{r-1}", one line per item. The
  // kernel is looked up first, so a bad reference is an HTTP error, not a
  // cut-off download.
  if (route.grpc_method == "/kls.v1.Kernels/Export" && Accepts(accept, "text/csv")) {
    return ExportCsv(route, reply, shared);
  }
  std::vector<std::string> responses;
  const bool unary = !route.client_streaming && !route.server_streaming;
  const Status s = Call(route.grpc_method, unary, reply.request_id, route.server_streaming ? 0 : options.call_timeout_seconds,
                        *shared, [&](const grpc::ByteBuffer& buffer) {
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

int HttpGateway::Impl::StreamEvents(const HttpRoute& route, const Reply& reply, Requests shared,
                                    const Message* response_type) {
  const std::string method = route.grpc_method;
  const std::string request_id = reply.request_id;
  return reply.Stream(
      200, "text/event-stream", {{"X-Accel-Buffering", "no"}},
      [this, method, request_id, shared, response_type](size_t, httplib::DataSink& sink) {
        const auto write = [&sink](const std::string& text) { return sink.write(text.data(), text.size()); };
        bool client_gone = !write(": " + method + "\n\n");
        const Status s = Call(
            method, false, request_id, 0, *shared,
            [&](const grpc::ByteBuffer& buffer) {
              std::unique_ptr<Message> m(response_type->New());
              if (!ParseBuffer(buffer, m.get())) return false;
              client_gone = !write("event: message\ndata: " + MessageToJson(*m) + "\n\n");
              return !client_gone;
            },
            [&] {
              client_gone = client_gone || !write(": keep-alive\n\n");
              return !client_gone;
            });
        if (client_gone) return false;
        write(s.ok() ? std::string("event: end\ndata: {}\n\n")
                     : "event: error\ndata: " + ErrorJson(s, request_id) + "\n\n");
        sink.done();
        return true;
      });
}

int HttpGateway::Impl::ExportCsv(const HttpRoute& route, const Reply& reply, Requests shared) {
  std::vector<std::unique_ptr<Message>> get;
  get.push_back(std::make_unique<kls::v1::GetKernelRequest>());
  *static_cast<kls::v1::GetKernelRequest&>(*get[0]).mutable_kernel() =
      static_cast<const kls::v1::ExportKernelRequest&>(*(*shared)[0]).kernel();
  kls::v1::KernelInfo info;
  const Status found = Call("/kls.v1.Kernels/Get", true, reply.request_id, options.call_timeout_seconds, get,
                            [&](const grpc::ByteBuffer& buffer) { return ParseBuffer(buffer, &info); });
  if (!found.ok()) return reply.Error(found);
  const std::string method = route.grpc_method;
  const std::string request_id = reply.request_id;
  const std::string file = info.name() + "-v" + std::to_string(info.version()) + ".csv";
  return reply.Stream(
      200, "text/csv", {{"Content-Disposition", "attachment; filename=\"" + file + "\""}},
      [this, method, request_id, shared](size_t, httplib::DataSink& sink) {
        int rank = 0;
        bool client_gone = false;
        const Status s = Call(method, false, request_id, 0, *shared, [&](const grpc::ByteBuffer& buffer) {
          kls::v1::ExportKernelChunk chunk;
          if (!ParseBuffer(buffer, &chunk)) return false;
          std::ostringstream out;
          out.precision(17);
          if (chunk.has_info()) {
            rank = std::max(1, chunk.info().rank());
            out << "row";
            for (int c = 0; c < rank; ++c) out << ",v" << c;
            out << "\n";
          }
          if (rank == 0) return false;
          const int64_t rows = chunk.values_size() / rank;
          for (int64_t r = 0; r < rows; ++r) {
            out << chunk.first_row() + r;
            for (int c = 0; c < rank; ++c) out << "," << chunk.values(static_cast<int>(r * rank + c));
            out << "\n";
          }
          const std::string text = out.str();
          client_gone = !sink.write(text.data(), text.size());
          return !client_gone;
        });
        // An error after the header can only cut the download short.
        if (client_gone || !s.ok()) return false;
        sink.done();
        return true;
      });
}

// POST /v1/datasets/upload with a CSV or LIBSVM body: the rows as the C++
// client would send them (client/client.h UploadDataset), over the in-process
// channel. Query parameters: name, format (csv | libsvm; default from the
// Content-Type), num_features (LIBSVM), protocol, seed, and the protocol's own
// parameters as protocol.FIELD (kls.v1.ConstraintProtocol: protocol.fraction,
// protocol.must_fraction, protocol.self_pairs, ...).
int HttpGateway::Impl::UploadTabular(const httplib::Request& req, const Reply& reply, const std::string& type) {
  const std::string query = RawQuery(req);
  const std::string& body = req.body;
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
int HttpGateway::Impl::SetAttributesCsv(const httplib::Request& req, const Reply& reply) {
  const std::string query = RawQuery(req);
  const std::string dataset = QueryValue(query, "dataset_id");
  if (dataset.empty()) {
    return reply.Error(InvalidArgumentError("query parameter 'dataset_id' is missing: the data set (id or name) "
                                            "whose attributes the CSV body replaces"));
  }
  const std::string& body = req.body;
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
  if (!impl_->server) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    for (grpc::ClientContext* c : impl_->active) c->TryCancel();
  }
  impl_->server->stop();
  if (impl_->listener.joinable()) impl_->listener.join();
  impl_->server.reset();
}

StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(HttpGatewayOptions options,
                                                         std::shared_ptr<grpc::Channel> channel) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->channel = channel;
  impl->stub = std::make_unique<grpc::GenericStub>(channel);
  const HttpGatewayOptions& o = impl->options;
  if (o.security.cert_file.empty()) {
    impl->server = std::make_unique<httplib::Server>();
  } else {
    // The gRPC port's own certificate, key and (mutual TLS) client CA.
    auto tls = std::make_unique<httplib::SSLServer>(
        o.security.cert_file.c_str(), o.security.key_file.c_str(),
        o.security.client_ca_file.empty() ? nullptr : o.security.client_ca_file.c_str());
    if (!tls->is_valid()) {
      return InvalidArgumentError("http_listen: cannot set up TLS with tls_cert_file '" + o.security.cert_file +
                                  "' and tls_key_file '" + o.security.key_file + "'");
    }
    // Each handshake takes the identity current at that moment, so a
    // reloaded certificate serves new connections without a restart.
    if (o.identity) o.identity->InstallOn(tls->ssl_context());
    impl->server = std::move(tls);
  }
  httplib::Server& server = *impl->server;
  const size_t threads = static_cast<size_t>(std::max(2, o.threads));
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Bodies up to the upload limit are read; JSON routes then check max_body_bytes.
  server.set_payload_max_length(static_cast<size_t>(std::max(o.max_body_bytes, o.max_upload_bytes)));
  server.set_keep_alive_timeout(30);
  server.set_keep_alive_max_count(100000);
  server.set_read_timeout(30, 0);
  server.set_tcp_nodelay(true);
  server.set_address_family(AF_INET);
  Impl* self = impl.get();
  // Every path and verb goes to Handle, which routes (the library reads the
  // body first; HEAD is answered as GET without the body).
  const auto handle = [self](const httplib::Request& req, httplib::Response& res) { self->Handle(req, res); };
  server.Get(".*", handle);
  server.Post(".*", handle);
  server.Put(".*", handle);
  server.Patch(".*", handle);
  server.Delete(".*", handle);
  server.Options(".*", handle);
  // A body over the limit never reaches Handle: say so in the API's format.
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 413 && res.body.empty()) {  // refused by the library before Handle
      const std::string id = RequestIdFrom(req.get_header_value("X-Request-Id"));
      res.set_header("X-Request-Id", id);
      res.set_content(ErrorJson(ResourceExhaustedError("request body is over the server's limit"), id),
                      "application/json");
    }
  });
  const size_t colon = o.listen.rfind(':');
  const std::string host = o.listen.substr(0, colon);
  const int wanted = std::atoi(o.listen.c_str() + colon + 1);
  const int bound = wanted == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, wanted) ? wanted : -1);
  if (bound <= 0) {
    return Status(StatusCode::kUnavailable, "cannot listen for HTTP on " + o.listen +
                                                " (address in use, or not an IPv4 address of this machine)");
  }
  impl->port = bound;
  impl->listener = std::thread([self] { self->server->listen_after_bind(); });
  return std::unique_ptr<HttpGateway>(new HttpGateway(std::move(impl)));
}

}  // namespace kls::server::http
