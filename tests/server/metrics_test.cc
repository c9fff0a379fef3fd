// The Prometheus endpoint (server/metrics.h) of an in-process server with
// metrics_listen = 127.0.0.1:0: after a mix of RPCs (OK and errors), a job
// that succeeds, one that is cancelled and one that fails on a corrupted
// data set, GET /metrics reports the RPC, job, kernel cache, store and build
// series with the right labels and values, and `promtool check metrics`
// accepts the text. Also: request ids in trailing metadata, a busy
// metrics port, and `promtool check rules` / `check config` on
// deploy/prometheus.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/model/learned_kernel.h"
#include "core/social/social_model.h"
#include "kls/v1/jobs.grpc.pb.h"
#include "kls/v1/queries.grpc.pb.h"
#include "kls/v1/service.grpc.pb.h"
#include "server/kls_server.h"
#include "server/metrics.h"
#include "server/rpc_observer.h"
#include "temp_dir.h"
#include "tests/test_util/time_scale.h"
#include "test_server.h"
#include "raw_http.h"

namespace kls::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Labels = std::map<std::string, std::string>;

// GET http://127.0.0.1:port/path; returns the body, or "" (with a test
// failure) when the answer is not 200.
std::string HttpGet(int port, const std::string& path) {
  const kls::testing::RawHttpResponse r = kls::testing::RawHttpGet(port, path);
  EXPECT_THAT(r.status_line, HasSubstr(" 200")) << r.raw;
  return r.status_line.find(" 200") == std::string::npos ? "" : r.body;
}

struct Series {
  std::string name;
  Labels labels;
  double value = 0;
};

// Parses the text exposition format (no escaped quotes in our label values).
std::vector<Series> ParseExposition(const std::string& text) {
  std::vector<Series> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    Series s;
    const size_t brace = line.find('{');
    const size_t space = line.rfind(' ');
    if (brace != std::string::npos && brace < space) {
      s.name = line.substr(0, brace);
      const std::string body = line.substr(brace + 1, line.rfind('}') - brace - 1);
      size_t pos = 0;
      while (pos < body.size()) {
        const size_t eq = body.find('=', pos);
        const size_t close_quote = body.find('"', eq + 2);
        s.labels[body.substr(pos, eq - pos)] = body.substr(eq + 2, close_quote - eq - 2);
        pos = close_quote + 2;  // past `",`
      }
    } else {
      s.name = line.substr(0, space);
    }
    s.value = std::strtod(line.c_str() + space + 1, nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

class Scrape {
 public:
  explicit Scrape(std::string text) : text_(std::move(text)), series_(ParseExposition(text_)) {}
  /// Sum over the series called `name` whose labels include `labels`.
  double Sum(const std::string& name, const Labels& labels = {}) const {
    double total = 0;
    for (const Series& s : series_) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : labels) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) match = false;
      }
      if (match) total += s.value;
    }
    return total;
  }
  bool Has(const std::string& name, const Labels& labels = {}) const {
    for (const Series& s : series_) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : labels) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) match = false;
      }
      if (match) return true;
    }
    return false;
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::vector<Series> series_;
};

bool HavePromtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

// Runs `promtool ARGS` (stdin from `input` when non-empty); exit status and output.
std::pair<int, std::string> Promtool(const std::string& args, const fs::path& input = {}) {
  std::string command = "promtool " + args;
  if (!input.empty()) command += " < '" + input.string() + "'";
  command += " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  std::string output;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) output.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

Dataset Iris(int n, PairwiseConstraints* constraints) {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(iris.ok()) << iris.status();
  Dataset d;
  d.features.resize(n, iris->dim());
  for (int i = 0; i < n; ++i) {
    const int src = static_cast<int>(static_cast<int64_t>(i) * iris->num_points() / n);
    d.features.row(i) = iris->features.row(src);
    d.labels.push_back(iris->labels[src]);
  }
  auto c = GenerateAdmmProtocol(d.labels, /*seed=*/7);
  EXPECT_TRUE(c.ok()) << c.status();
  *constraints = *c;
  return d;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig config = kls::testing::TestServerConfig(dir_);
    config.metrics_listen = "127.0.0.1:0";
    server_ = std::make_unique<KlsServer>(config);
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    ASSERT_NE(server_->metrics(), nullptr);
    ASSERT_GT(server_->metrics_port(), 0);
    client_ = kls::testing::ClientFor(*server_);
  }

  std::string Upload(int n) {
    PairwiseConstraints constraints;
    const Dataset data = Iris(n, &constraints);
    UploadOptions o;
    o.name = "iris";
    auto info = client_->UploadDataset(data, constraints, o);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->id() : "";
  }

  kls::v1::SubmitJobRequest KlAdmm(const std::string& dataset, const std::string& kernel, int iterations) {
    kls::v1::SubmitJobRequest r;
    r.set_dataset_id(dataset);
    r.set_kernel_name(kernel);
    r.mutable_kl_admm()->set_max_iterations(iterations);
    r.mutable_kl_admm()->set_tolerance(0);  // runs to its iteration cap
    return r;
  }

  kls::v1::Job RunToEnd(const kls::v1::SubmitJobRequest& r) {
    auto job = client_->SubmitJob(r);
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return {};
    auto done = client_->WatchJob(job->id(), [](const kls::v1::Job&) {}, 120);
    EXPECT_TRUE(done.ok()) << done.status();
    return done.ok() ? *done : kls::v1::Job{};
  }

  kls::testing::TempDir dir_;
  std::unique_ptr<KlsServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(MetricsTest, ScrapeAfterRpcsAndJobsHasTheSeriesAndPromtoolAcceptsIt) {
  // RPCs: two OK echoes, one NOT_FOUND.
  ASSERT_TRUE(client_->Echo("a").ok());
  ASSERT_TRUE(client_->Echo("b").ok());
  EXPECT_EQ(client_->GetJob("no-such-job").status().code(), StatusCode::kNotFound);

  // A job that succeeds, then two queries on its kernel (a miss, then a hit).
  const std::string dataset = Upload(40);
  const kls::v1::Job ok = RunToEnd(KlAdmm(dataset, "k", 5));
  ASSERT_EQ(ok.state(), kls::v1::SUCCEEDED) << ok.error();
  kls::v1::KernelRef ref;
  ref.set_name("k");
  ASSERT_TRUE(client_->Similarity(ref, {{0, 1}}).ok());
  ASSERT_TRUE(client_->Similarity(ref, {{2, 3}}).ok());

  // A job cancelled while queued or running.
  auto long_job = client_->SubmitJob(KlAdmm(dataset, "long", 1000000));
  ASSERT_TRUE(long_job.ok()) << long_job.status();
  ASSERT_TRUE(client_->CancelJob(long_job->id()).ok());
  auto cancelled = client_->WatchJob(long_job->id(), [](const kls::v1::Job&) {}, 120);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), kls::v1::CANCELLED);

  // A job that fails on a store error: its data set's artifact is corrupted
  // (embedded store only; the shared store keeps artifacts in the database).
  const bool embedded = !kls::testing::TestOnPostgres();
  if (embedded) {
    const std::string broken = Upload(30);
    int corrupted = 0;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(server_->data_dir()) / "artifacts")) {
      if (!e.is_regular_file() || e.path().filename() != broken + ".art") continue;
      std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(fs::file_size(e.path()) - 9));
      f.put('\x5a');
      ++corrupted;
    }
    ASSERT_EQ(corrupted, 1) << "the artifact of data set " << broken << " was not found";
    const kls::v1::Job failed = RunToEnd(KlAdmm(broken, "broken", 5));
    EXPECT_EQ(failed.state(), kls::v1::FAILED);
  }

  // A job's outcome is counted right after its terminal state is written,
  // so a watcher can see the state a moment before the counter moves. A
  // running job's cancel is written (and counted) by the Cancel RPC; its
  // worker records the solve time when the solver next checks for the stop,
  // a moment later: wait for both.
  const int finished = embedded ? 3 : 2;
  auto settled = [&](const Scrape& m) {
    const double attempts = m.Sum("kls_job_attempts_total", {{"method", "kl_admm"}});
    return m.Sum("kls_jobs_finished_total") >= finished &&
           m.Sum("kls_job_solve_seconds_count", {{"method", "kl_admm"}}) >= attempts - (embedded ? 1 : 0);
  };
  std::string text = HttpGet(server_->metrics_port(), "/metrics");
  for (int i = 0; i < 100 && !settled(Scrape(text)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = HttpGet(server_->metrics_port(), "/metrics");
  }
  const Scrape m(text);
  SCOPED_TRACE(m.text());

  // Per RPC method and status code.
  EXPECT_EQ(m.Sum("kls_rpc_requests_total", {{"method", "/kls.v1.Admin/Echo"}, {"code", "OK"}}), 2);
  EXPECT_EQ(m.Sum("kls_rpc_requests_total", {{"method", "/kls.v1.Jobs/Get"}, {"code", "NOT_FOUND"}}), 1);
  EXPECT_EQ(m.Sum("kls_rpc_requests_total", {{"method", "/kls.v1.Queries/Similarity"}, {"code", "OK"}}), 2);
  EXPECT_EQ(m.Sum("kls_rpc_requests_total", {{"method", "/kls.v1.Datasets/Upload"}, {"code", "OK"}}),
            embedded ? 2 : 1);
  EXPECT_EQ(m.Sum("kls_rpc_duration_seconds_count", {{"method", "/kls.v1.Admin/Echo"}, {"code", "OK"}}), 2);
  EXPECT_EQ(m.Sum("kls_rpc_duration_seconds_bucket", {{"method", "/kls.v1.Admin/Echo"}, {"code", "OK"}, {"le", "+Inf"}}),
            2);
  EXPECT_GT(m.Sum("kls_rpc_duration_seconds_sum", {{"method", "/kls.v1.Admin/Echo"}}), 0);
  EXPECT_EQ(m.Sum("kls_rpc_duration_seconds_count", {{"method", "/kls.v1.Jobs/Get"}, {"code", "NOT_FOUND"}}), 1);

  // Jobs: states from the store, outcomes, solve time, queue wait, attempts.
  const int jobs = finished;
  EXPECT_EQ(m.Sum("kls_jobs", {{"state", "succeeded"}}), 1);
  EXPECT_EQ(m.Sum("kls_jobs", {{"state", "cancelled"}}), 1);
  EXPECT_EQ(m.Sum("kls_jobs", {{"state", "failed"}}), embedded ? 1 : 0);
  EXPECT_EQ(m.Sum("kls_jobs", {{"state", "queued"}}), 0);
  EXPECT_EQ(m.Sum("kls_jobs", {{"state", "running"}}), 0);
  EXPECT_TRUE(m.Has("kls_jobs", {{"state", "queued"}}));
  EXPECT_EQ(m.Sum("kls_jobs_finished_total", {{"method", "kl_admm"}, {"outcome", "succeeded"}}), 1);
  EXPECT_EQ(m.Sum("kls_jobs_finished_total", {{"method", "kl_admm"}, {"outcome", "cancelled"}}), 1);
  EXPECT_EQ(m.Sum("kls_jobs_finished_total", {{"method", "kl_admm"}, {"outcome", "failed"}}), embedded ? 1 : 0);
  // Every job that a worker claimed ran one attempt; the cancelled one may
  // have been cancelled before any worker claimed it.
  const double attempts = m.Sum("kls_job_attempts_total", {{"method", "kl_admm"}});
  EXPECT_GE(attempts, jobs - 1);
  EXPECT_LE(attempts, jobs);
  EXPECT_EQ(m.Sum("kls_job_queue_wait_seconds_count", {{"method", "kl_admm"}}), attempts);
  EXPECT_EQ(m.Sum("kls_job_resumes_total", {{"method", "kl_admm"}}), 0);
  // The failed job's solver never ran (its data set could not be loaded).
  const double solves = m.Sum("kls_job_solve_seconds_count", {{"method", "kl_admm"}});
  EXPECT_EQ(solves, attempts - (embedded ? 1 : 0));
  EXPECT_GT(m.Sum("kls_job_solve_seconds_sum", {{"method", "kl_admm"}}), 0);
  EXPECT_EQ(m.Sum("kls_job_solve_seconds_bucket", {{"method", "kl_admm"}, {"le", "+Inf"}}), solves);

  // Kernel cache: the first query loaded the kernel, the second hit it.
  EXPECT_EQ(m.Sum("kls_kernel_cache_misses_total"), 1);
  EXPECT_EQ(m.Sum("kls_kernel_cache_hits_total"), 1);
  EXPECT_EQ(m.Sum("kls_kernel_cache_evictions_total"), 0);
  EXPECT_EQ(m.Sum("kls_kernel_cache_entries"), 1);
  EXPECT_GT(m.Sum("kls_kernel_cache_bytes"), 0);
  EXPECT_EQ(m.Sum("kls_kernel_cache_budget_bytes"), 1024.0 * 1024 * 1024);

  // Store: bytes written by kind; errors only for the corrupted artifact
  // (NOT_FOUND of the unknown job is an answer, not a store error).
  EXPECT_GE(m.Sum("kls_store_written_bytes_total", {{"kind", "dataset"}}), 40 * 4 * 8);
  EXPECT_GE(m.Sum("kls_store_written_bytes_total", {{"kind", "kernel"}}), 40 * 8);
  EXPECT_EQ(m.Sum("kls_store_errors_total", {{"code", "NOT_FOUND"}}), 0);
  if (embedded) {
    EXPECT_EQ(m.Sum("kls_store_errors_total", {{"operation", "load_dataset"}, {"code", "DATA_LOSS"}}), 1);
  } else {
    EXPECT_EQ(m.Sum("kls_store_errors_total"), 0);
  }

  // Build info.
  EXPECT_EQ(m.Sum("kls_build_info", {{"version", KlsVersion()}}), 1);
  EXPECT_TRUE(m.text().find("kls_build_info{commit=\"") != std::string::npos);

  // The same text as Render(), modulo the moving RPC series of this scrape.
  EXPECT_THAT(server_->metrics()->Render(), HasSubstr("kls_jobs_finished_total"));

  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (Debian package prometheus; deploy/install-deps.sh)";
  const fs::path file = fs::path(dir_.Sub("metrics.txt"));
  std::ofstream(file) << m.text();
  const auto [rc, out] = Promtool("check metrics", file);
  EXPECT_EQ(rc, 0) << out;
}

// A query stops within 100 ms of the client's deadline or cancellation, as
// the server measures it (kls_rpc_duration_seconds): ClassifyUsers on a
// 5,000-user social kernel (a dense 5,000 × 5,000 harmonic solve, seconds in
// full), and Embed of 2,000 feature rows against 40,000 training rows (the
// harmonic extension behind TopK's feature queries; a single TopK feature
// row is a few milliseconds, too short to interrupt).
TEST_F(MetricsTest, QueriesStopWithin100MsOfTheDeadlineOrCancellation) {
  const int n = 5000;
  Eigen::MatrixXd v = Eigen::MatrixXd::Random(n, 8).cwiseAbs();  // positive strengths: one component
  store::KernelRecord record;
  record.name = "social5k";
  record.method = "social_strength";
  SocialGraph graph;
  graph.contacts.assign(n, {});
  graph.groups.assign(n, {});
  ASSERT_TRUE(server_->store()
                  ->PutKernel(record, *LearnedKernel::FromEmbedding(v), {{"social_graph", SerializeSocialGraph(graph)}})
                  .ok());
  auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  auto queries = kls::v1::Queries::NewStub(channel);
  kls::v1::ClassifyUsersRequest request;
  request.mutable_kernel()->set_name("social5k");
  for (int i = 0; i < 20; ++i) {
    request.add_labelled_users(i * 11);
    request.add_labels(i % 2);
  }
  request.add_users(4999);
  // Count and summed seconds of the finished calls of `method`, any code.
  auto totals = [&](const std::string& method) {
    const Scrape m(HttpGet(server_->metrics_port(), "/metrics"));
    const Labels labels = {{"method", "/kls.v1.Queries/" + method}};
    return std::make_pair(m.Sum("kls_rpc_duration_seconds_count", labels),
                          m.Sum("kls_rpc_duration_seconds_sum", labels));
  };
  // Runs `call` and returns the server-side seconds of that one call: the
  // observer's time from the call's arrival until the call is finished
  // (status sent, or — a call whose client is gone — the handler returned
  // and the call torn down), waiting until it has been counted.
  auto server_seconds = [&](const std::string& method, const std::function<void()>& call) {
    const auto before = totals(method);
    call();
    auto after = totals(method);
    for (int i = 0; i < 200 && after.first < before.first + 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      after = totals(method);
    }
    EXPECT_EQ(after.first, before.first + 1) << method;
    return after.second - before.second;
  };

  {  // Warm the cache (the kernel load is not what is measured), in full.
    grpc::ClientContext context;
    kls::v1::ClassifyUsersResponse response;
    const auto start = std::chrono::steady_clock::now();
    const grpc::Status full = queries->ClassifyUsers(&context, request, &response);
    ASSERT_TRUE(full.ok()) << full.error_message();
    std::printf("[ ClassifyUsers n=%d ] full answer in %.2f s\n", n,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  {
    const double seconds = server_seconds("ClassifyUsers", [&] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      kls::v1::ClassifyUsersResponse response;
      EXPECT_EQ(queries->ClassifyUsers(&context, request, &response).error_code(),
                grpc::StatusCode::DEADLINE_EXCEEDED);
    });
    std::printf("[ ClassifyUsers n=%d ] deadline 0.2 s: the handler returned after %.3f s\n", n, seconds);
    EXPECT_LE(seconds, 0.2 + 0.1 * kls::testing::TimeScale());
  }
  {
    const double seconds = server_seconds("ClassifyUsers", [&] {
      grpc::ClientContext context;
      kls::v1::ClassifyUsersResponse response;
      std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        context.TryCancel();
      });
      EXPECT_EQ(queries->ClassifyUsers(&context, request, &response).error_code(), grpc::StatusCode::CANCELLED);
      canceller.join();
    });
    std::printf("[ ClassifyUsers n=%d ] cancelled at 0.2 s: the handler returned after %.3f s\n", n, seconds);
    EXPECT_LE(seconds, 0.2 + 0.1 * kls::testing::TimeScale());
  }

  // The harmonic extension: a data set of 40,000 × 32 rows and a kernel over it.
  const int m = 40000, dim = 32;
  Dataset data;
  data.features = Eigen::MatrixXd::Random(m, dim);
  UploadOptions o;
  o.name = "wide";
  auto uploaded = client_->UploadDataset(data, PairwiseConstraints(), o);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  store::KernelRecord wide;
  wide.name = "wide";
  wide.method = "kl_admm";
  wide.dataset_id = uploaded->id();
  ASSERT_TRUE(
      server_->store()->PutKernel(wide, *LearnedKernel::FromEmbedding(Eigen::MatrixXd::Random(m, 8))).ok());
  kls::v1::EmbedRequest embed;
  embed.mutable_kernel()->set_name("wide");
  embed.set_dim(dim);
  const Eigen::MatrixXd rows = Eigen::MatrixXd::Random(1000, dim);
  for (int i = 0; i < rows.rows(); ++i)
    for (int j = 0; j < dim; ++j) embed.add_features(rows(i, j));
  {
    grpc::ClientContext context;
    kls::v1::EmbedResponse response;
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(queries->Embed(&context, embed, &response).ok());
    std::printf("[ Embed %d feature rows over %d ] full answer in %.2f s\n", static_cast<int>(rows.rows()), m,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  {
    const double seconds = server_seconds("Embed", [&] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
      kls::v1::EmbedResponse response;
      EXPECT_EQ(queries->Embed(&context, embed, &response).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    });
    std::printf("[ Embed ] deadline 0.1 s: the handler returned after %.3f s\n", seconds);
    EXPECT_LE(seconds, 0.1 + 0.1 * kls::testing::TimeScale());
  }
}

// The standard process_* series, read from /proc: present once each, with
// their types, plausible values (compared with what the test reads itself),
// and accepted by promtool.
TEST_F(MetricsTest, ProcessSeriesArePresentTypedAndPlausible) {
  const Scrape m(HttpGet(server_->metrics_port(), "/metrics"));
  const std::map<std::string, std::string> types = {
      {"process_cpu_seconds_total", "counter"},    {"process_resident_memory_bytes", "gauge"},
      {"process_virtual_memory_bytes", "gauge"},   {"process_start_time_seconds", "gauge"},
      {"process_open_fds", "gauge"},               {"process_max_fds", "gauge"}};
  for (const auto& [name, type] : types) {
    SCOPED_TRACE(name);
    EXPECT_THAT(m.text(), HasSubstr("# TYPE " + name + " " + type + "\n"));
    EXPECT_THAT(m.text(), HasSubstr("# HELP " + name + " "));
    EXPECT_TRUE(m.Has(name));
  }
  const double rss = m.Sum("process_resident_memory_bytes");
  const double vsz = m.Sum("process_virtual_memory_bytes");
  EXPECT_GT(rss, 1 << 20);  // a gRPC server with a store: well over 1 MiB
  EXPECT_GE(vsz, rss);
  const double cpu = m.Sum("process_cpu_seconds_total");
  EXPECT_GE(cpu, 0);
  rusage usage{};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &usage), 0);
  const double cpu_now = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  EXPECT_LE(cpu, cpu_now + 0.05);  // clock ticks round down; never ahead of getrusage
  // Started before the scrape (the server runs in this test's process),
  // within the last hour.
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double start = m.Sum("process_start_time_seconds");
  EXPECT_LE(start, now + 1);
  EXPECT_GE(start, now - 3600);
  const double open_fds = m.Sum("process_open_fds");
  const double max_fds = m.Sum("process_max_fds");
  EXPECT_GE(open_fds, 3);  // stdin, stdout, stderr at least; sockets and the store besides
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_cur != RLIM_INFINITY) {
    EXPECT_EQ(max_fds, static_cast<double>(files.rlim_cur));
    EXPECT_LE(open_fds, max_fds);
  }
  // CPU seconds never decrease.
  volatile double spin = 0;
  for (int i = 0; i < 20000000; ++i) spin = spin + i;
  const Scrape later(HttpGet(server_->metrics_port(), "/metrics"));
  EXPECT_GE(later.Sum("process_cpu_seconds_total"), cpu);

  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (Debian package prometheus; deploy/install-deps.sh)";
  const fs::path file = fs::path(dir_.Sub("process-metrics.txt"));
  std::ofstream(file) << m.text();
  const auto [rc, out] = Promtool("check metrics", file);
  EXPECT_EQ(rc, 0) << out;
}

TEST_F(MetricsTest, RequestIdIsEchoedInTrailingMetadata) {
  auto stub = kls::v1::Admin::NewStub(grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  kls::v1::EchoRequest request;
  request.set_payload("x");
  kls::v1::EchoResponse response;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-request-id", "test-123");
    ASSERT_TRUE(stub->Echo(&ctx, request, &response).ok());
    const auto& trailing = ctx.GetServerTrailingMetadata();
    auto it = trailing.find("x-request-id");
    ASSERT_NE(it, trailing.end());
    EXPECT_EQ(std::string(it->second.data(), it->second.size()), "test-123");
  }
  {
    // None sent: the server makes one up (16 hex digits), different per call.
    std::string ids[2];
    for (std::string& id : ids) {
      grpc::ClientContext ctx;
      ASSERT_TRUE(stub->Echo(&ctx, request, &response).ok());
      auto it = ctx.GetServerTrailingMetadata().find("x-request-id");
      ASSERT_NE(it, ctx.GetServerTrailingMetadata().end());
      id.assign(it->second.data(), it->second.size());
      EXPECT_THAT(id, ::testing::MatchesRegex("[0-9a-f]{16}"));
    }
    EXPECT_NE(ids[0], ids[1]);
  }
  {
    // Errors carry it too.
    auto jobs = kls::v1::Jobs::NewStub(grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-request-id", "err-1");
    kls::v1::GetJobRequest get;
    get.set_id("nope");
    kls::v1::Job job;
    EXPECT_EQ(jobs->Get(&ctx, get, &job).error_code(), grpc::StatusCode::NOT_FOUND);
    auto it = ctx.GetServerTrailingMetadata().find("x-request-id");
    ASSERT_NE(it, ctx.GetServerTrailingMetadata().end());
    EXPECT_EQ(std::string(it->second.data(), it->second.size()), "err-1");
  }
  EXPECT_EQ(RequestIdFrom("has space").size(), 16u);
  EXPECT_EQ(RequestIdFrom(std::string(129, 'a')).size(), 16u);
  EXPECT_EQ(RequestIdFrom("abc-DEF_1.2"), "abc-DEF_1.2");
}

TEST(MetricsStartTest, BusyMetricsPortFailsTheStartNamingTheField) {
  // Hold a listening socket on a free port.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string busy = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  kls::testing::TempDir dir;
  ServerConfig config = kls::testing::TestServerConfig(dir);
  config.metrics_listen = busy;
  KlsServer server(config);
  const Status s = server.Start();
  close(fd);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("metrics_listen = '" + busy + "'"));

  // Off by default: no endpoint, no Metrics.
  kls::testing::TempDir dir2;
  KlsServer plain(kls::testing::TestServerConfig(dir2));
  ASSERT_TRUE(plain.Start().ok());
  EXPECT_EQ(plain.metrics(), nullptr);
  EXPECT_EQ(plain.metrics_port(), 0);
}

TEST(PrometheusDeployTest, PromtoolAcceptsTheRulesAndTheScrapeConfig) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (Debian package prometheus; deploy/install-deps.sh)";
  const fs::path deploy = fs::path(KLS_SOURCE_DIR) / "deploy" / "prometheus";
  const auto [rules_rc, rules_out] = Promtool("check rules '" + (deploy / "alerts.yml").string() + "'");
  EXPECT_EQ(rules_rc, 0) << rules_out;
  const auto [config_rc, config_out] = Promtool("check config '" + (deploy / "prometheus.yml").string() + "'");
  EXPECT_EQ(config_rc, 0) << config_out;
}

}  // namespace
}  // namespace kls::server
