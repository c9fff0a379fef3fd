// End to end: the real kls-server with `--log-format json --log-level debug
// --metrics-listen 127.0.0.1:0`. Calls sent with `x-request-id` metadata get
// the id back in the trailing metadata, and the server's log line of each
// call carries it with the method and the peer; a job's lines carry its id;
// every line of stderr parses as one JSON object; the metrics endpoint
// announced in the log answers GET /metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "kls/v1/jobs.grpc.pb.h"
#include "kls/v1/service.grpc.pb.h"
#include "tests/e2e/process.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using kls::e2e::ReadFile;
using kls::e2e::Spawn;
using kls::e2e::WaitFor;
using Clock = std::chrono::steady_clock;

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    (void)!write(fd, request.data(), request.size());
    char buf[8192];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

std::string Trailing(const grpc::ClientContext& ctx, const std::string& key) {
  auto it = ctx.GetServerTrailingMetadata().find(key);
  return it == ctx.GetServerTrailingMetadata().end() ? "" : std::string(it->second.data(), it->second.size());
}

class LogFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kls-log-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    scratch_ = pattern;
  }
  void TearDown() override {
    if (pid_ > 0 && WaitFor(pid_, std::chrono::milliseconds(0)) == -1) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    fs::remove_all(scratch_, ignored);
  }

  fs::path scratch_;
  pid_t pid_ = -1;
};

TEST_F(LogFormatTest, JsonLinesCarryTheClientsRequestIdMethodPeerAndJobId) {
  const fs::path data = scratch_ / "data", log = scratch_ / "server.log";
  pid_ = Spawn({KLS_SERVER_BINARY, "--listen", "127.0.0.1:0", "--data-dir", data.string(), "--workers", "1",
                "--log-format", "json", "--log-level", "debug", "--metrics-listen", "127.0.0.1:0"},
               scratch_ / "server.out", log);
  ASSERT_GT(pid_, 0);

  // The listen address from the lock file; the metrics port from the log.
  std::string target;
  int metrics_port = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while ((target.empty() || metrics_port == 0) && Clock::now() < deadline) {
    ASSERT_EQ(WaitFor(pid_, std::chrono::milliseconds(0)), -1) << "kls-server exited early:\n" << ReadFile(log);
    std::istringstream lock(ReadFile(data / "kls-server.lock"));
    for (std::string line; std::getline(lock, line);) {
      if (line.rfind("listen=", 0) == 0) target = line.substr(7);
    }
    std::smatch m;
    const std::string text = ReadFile(log);
    static const std::regex kMetrics("metrics: http://127\\.0\\.0\\.1:([0-9]+)/metrics");
    if (std::regex_search(text, m, kMetrics)) metrics_port = std::stoi(m[1]);
    if (target.empty() || metrics_port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(target.empty()) << ReadFile(log);
  ASSERT_GT(metrics_port, 0) << ReadFile(log);

  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)));
  auto admin = kls::v1::Admin::NewStub(channel);
  auto jobs = kls::v1::Jobs::NewStub(channel);

  // An OK call (logged at debug) and an error (logged at info), each with the client's id.
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-request-id", "test-123");
    kls::v1::EchoRequest request;
    request.set_payload("hello");
    kls::v1::EchoResponse response;
    ASSERT_TRUE(admin->Echo(&ctx, request, &response).ok());
    EXPECT_EQ(Trailing(ctx, "x-request-id"), "test-123");
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-request-id", "test-404");
    kls::v1::GetJobRequest request;
    request.set_id("no-such-job");
    kls::v1::Job job;
    EXPECT_EQ(jobs->Get(&ctx, request, &job).error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(Trailing(ctx, "x-request-id"), "test-404");
  }

  // A job: its "queued" line has the Submit call's request id and the job
  // id; the worker's lines have the job id.
  auto iris = kls::ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  kls::Dataset d;
  d.features.resize(30, iris->dim());
  for (int i = 0; i < 30; ++i) {  // every fifth row: all three classes
    d.features.row(i) = iris->features.row(i * 5);
    d.labels.push_back(iris->labels[i * 5]);
  }
  auto constraints = kls::GenerateAdmmProtocol(d.labels, 7);
  ASSERT_TRUE(constraints.ok()) << constraints.status();
  kls::ClientOptions options;
  options.target = target;
  auto client = std::make_unique<kls::Client>(options);
  kls::UploadOptions upload;
  upload.name = "iris30";
  auto dataset = client->UploadDataset(d, *constraints, upload);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  std::string job_id;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-request-id", "submit-7");
    kls::v1::SubmitJobRequest request;
    request.set_dataset_id(dataset->id());
    request.mutable_kl_admm()->set_max_iterations(3);
    kls::v1::Job job;
    ASSERT_TRUE(jobs->Submit(&ctx, request, &job).ok());
    job_id = job.id();
  }
  auto done = client->WatchJob(job_id, [](const kls::v1::Job&) {}, 60);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), kls::v1::SUCCEEDED);

  // The endpoint announced in the log serves the metrics.
  // The outcome is counted right after the terminal state is written: a
  // watcher may see the state first.
  std::string scrape = HttpGet(metrics_port, "/metrics");
  for (int i = 0; i < 100 && scrape.find("outcome=\"succeeded\"} 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    scrape = HttpGet(metrics_port, "/metrics");
  }
  EXPECT_THAT(scrape, HasSubstr("200 OK"));
  EXPECT_THAT(scrape, HasSubstr("kls_rpc_requests_total{code=\"OK\",method=\"/kls.v1.Admin/Echo\"} 1"));
  EXPECT_THAT(scrape, HasSubstr("kls_jobs_finished_total{method=\"kl_admm\",outcome=\"succeeded\"} 1"));

  // Idle connections slow gRPC's shutdown down: close them first.
  client.reset();
  admin.reset();
  jobs.reset();
  channel.reset();
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(WaitFor(pid_, std::chrono::seconds(20)), 0);
  pid_ = -1;

  const std::string text = ReadFile(log);
  std::istringstream lines(text);
  int parsed = 0;
  bool echo_line = false, error_line = false, queued_line = false, worker_line = false;
  static const std::regex kTime("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z");
  for (std::string line; std::getline(lines, line);) {
    SCOPED_TRACE(line);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not one JSON object";
    ++parsed;
    ASSERT_TRUE(j.contains("time") && j["time"].is_string());
    EXPECT_TRUE(std::regex_match(j["time"].get<std::string>(), kTime));
    ASSERT_TRUE(j.contains("level") && j["level"].is_string());
    ASSERT_TRUE(j.contains("message") && j["message"].is_string());
    const std::string message = j["message"];
    const std::string request_id = j.value("request_id", "");
    if (request_id == "test-123") {
      EXPECT_EQ(j.value("method", ""), "/kls.v1.Admin/Echo");
      EXPECT_THAT(j.value("peer", ""), HasSubstr("127.0.0.1"));
      EXPECT_EQ(j["level"], "info");  // the access log (access_log, on by default)
      EXPECT_THAT(message, HasSubstr("rpc /kls.v1.Admin/Echo OK"));
      echo_line = true;
    }
    if (request_id == "test-404") {
      EXPECT_EQ(j.value("method", ""), "/kls.v1.Jobs/Get");
      EXPECT_EQ(j["level"], "info");
      EXPECT_THAT(message, HasSubstr("NOT_FOUND"));
      error_line = true;
    }
    if (request_id == "submit-7" && message.find(": queued") != std::string::npos) {
      EXPECT_EQ(j.value("job_id", ""), job_id);
      EXPECT_EQ(j.value("method", ""), "/kls.v1.Jobs/Submit");
      queued_line = true;
    }
    if (!j.contains("request_id") && j.value("job_id", "") == job_id &&
        message.find("succeeded") != std::string::npos) {
      worker_line = true;
    }
    // Lines outside any call or job carry no empty context fields.
    for (const char* key : {"request_id", "method", "peer", "job_id"}) {
      if (j.contains(key)) EXPECT_FALSE(j[key].get<std::string>().empty()) << key;
    }
  }
  EXPECT_GT(parsed, 5);
  EXPECT_TRUE(echo_line) << text;
  EXPECT_TRUE(error_line) << text;
  EXPECT_TRUE(queued_line) << text;
  EXPECT_TRUE(worker_line) << text;
}

TEST_F(LogFormatTest, BadLogFormatOrMetricsListenIsRefusedNamingTheField) {
  const fs::path out = scratch_ / "out", err = scratch_ / "err";
  pid_ = Spawn({KLS_SERVER_BINARY, "--data-dir", (scratch_ / "d").string(), "--log-format", "xml"}, out, err);
  EXPECT_EQ(WaitFor(pid_, std::chrono::seconds(20)), 2);
  EXPECT_THAT(ReadFile(err), HasSubstr("log_format = 'xml' is not one of text, json"));
  pid_ = Spawn({KLS_SERVER_BINARY, "--data-dir", (scratch_ / "d").string(), "--metrics-listen", "nowhere"}, out, err);
  EXPECT_EQ(WaitFor(pid_, std::chrono::seconds(20)), 2);
  EXPECT_THAT(ReadFile(err), HasSubstr("metrics_listen = 'nowhere'"));
  pid_ = -1;
}

}  // namespace
