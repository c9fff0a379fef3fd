// The access log (config key access_log, server/rpc_observer.h): an
// in-process server with the HTTP gateway on; every gRPC call and every HTTP
// request gives exactly one info line with its method, status, milliseconds,
// request id and peer (an HTTP request's in-process gRPC call logs at debug
// only, so the request is not logged twice); access_log = false leaves no
// info line for a call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kls/v1/jobs.grpc.pb.h"
#include "kls/v1/service.grpc.pb.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "raw_http.h"
#include "test_server.h"

namespace kls::server {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Captures what the default logger writes ("LEVEL message" a line) while it lives.
class LogCapture {
 public:
  explicit LogCapture(spdlog::level::level_enum level) : previous_level_(spdlog::get_level()) {
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink_->set_pattern("%l %v");
    spdlog::default_logger()->sinks().push_back(sink_);
    spdlog::set_level(level);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    spdlog::set_level(previous_level_);
  }
  /// The lines logged so far that contain `needle`.
  std::vector<std::string> Lines(const std::string& needle) {
    spdlog::default_logger()->flush();
    std::vector<std::string> found;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) {
      if (line.find(needle) != std::string::npos) found.push_back(line);
    }
    return found;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum previous_level_;
};

// GET http://127.0.0.1:port/path with an X-Request-Id; returns the status line.
std::string HttpGet(int port, const std::string& path, const std::string& request_id) {
  return kls::testing::RawHttpGet(port, path, "X-Request-Id: " + request_id + "\r\n").status_line;
}

grpc::Status Echo(const KlsServer& server, const std::string& request_id) {
  auto stub = kls::v1::Admin::NewStub(grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata("x-request-id", request_id);
  kls::v1::EchoRequest request;
  request.set_payload("x");
  kls::v1::EchoResponse response;
  return stub->Echo(&ctx, request, &response);
}

ServerConfig ConfigWithHttp(const kls::testing::TempDir& dir, bool access_log) {
  ServerConfig config = kls::testing::TestServerConfig(dir);
  config.http_listen = "127.0.0.1:0";
  config.access_log = access_log;
  return config;
}

TEST(AccessLogTest, EveryCallGivesOneInfoLineWithMethodStatusTimeRequestIdAndPeer) {
  kls::testing::TempDir dir;
  KlsServer server(ConfigWithHttp(dir, /*access_log=*/true));
  ASSERT_TRUE(server.Start().ok());
  LogCapture log(spdlog::level::info);

  ASSERT_TRUE(Echo(server, "access-ok-1").ok());
  std::vector<std::string> lines = log.Lines("request access-ok-1");
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], MatchesRegex("info rpc /kls\\.v1\\.Admin/Echo OK in [0-9]+\\.[0-9] ms, request access-ok-1, "
                                     "peer ipv4:127\\.0\\.0\\.1:[0-9]+"));

  // An error is logged the same way, with its code.
  auto jobs = kls::v1::Jobs::NewStub(grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata("x-request-id", "access-err-1");
  kls::v1::GetJobRequest get;
  get.set_id("no-such-job");
  kls::v1::Job job;
  EXPECT_EQ(jobs->Get(&ctx, get, &job).error_code(), grpc::StatusCode::NOT_FOUND);
  lines = log.Lines("request access-err-1");
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("info rpc /kls.v1.Jobs/Get NOT_FOUND in "));

  // HTTP: one line, the gateway's (its gRPC call inside the process is debug).
  EXPECT_THAT(HttpGet(server.http_port(), "/v1/admin/get-server-info", "access-http-1"), HasSubstr(" 200"));
  lines = log.Lines("request access-http-1");
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], MatchesRegex("info http GET /v1/admin/get-server-info 200 in [0-9]+\\.[0-9] ms, "
                                     "request access-http-1, peer 127\\.0\\.0\\.1:[0-9]+"));
  EXPECT_THAT(HttpGet(server.http_port(), "/v1/jobs/get?id=nope", "access-http-2"), HasSubstr(" 404"));
  lines = log.Lines("request access-http-2");
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("info http GET /v1/jobs/get 404 in "));
}

TEST(AccessLogTest, OffLeavesNoInfoLineOnlyDebugOnes) {
  kls::testing::TempDir dir;
  KlsServer server(ConfigWithHttp(dir, /*access_log=*/false));
  ASSERT_TRUE(server.Start().ok());
  {
    LogCapture log(spdlog::level::info);
    ASSERT_TRUE(Echo(server, "access-off-1").ok());
    EXPECT_THAT(HttpGet(server.http_port(), "/v1/admin/get-server-info", "access-off-2"), HasSubstr(" 200"));
    EXPECT_THAT(log.Lines("access-off-"), ::testing::IsEmpty());
  }
  {
    // Still there at debug level.
    LogCapture log(spdlog::level::debug);
    ASSERT_TRUE(Echo(server, "access-off-3").ok());
    const std::vector<std::string> lines = log.Lines("request access-off-3");
    ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
    EXPECT_THAT(lines[0], HasSubstr("debug rpc /kls.v1.Admin/Echo OK in "));
  }
}

}  // namespace
}  // namespace kls::server
