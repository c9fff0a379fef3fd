// End to end: the documented PostgreSQL backup procedure (docs/RELIABILITY.md,
// Backups) with the real binaries: pg_dump -Fc of the database while a
// replica serves it, pg_restore into a new database, `kls-server --check
// --store` on it, and a replica on the restored database answers Datasets.List,
// Kernels.List, Jobs.List, an Export of every kernel and TopK exactly as the
// original.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/synthetic.h"
#include "tests/e2e/process.h"
#include "tests/test_util/postgres_server.h"
#include "tests/test_util/time_scale.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using kls::e2e::ReadFile;
using kls::e2e::Spawn;
using kls::e2e::WaitFor;

std::chrono::milliseconds Scaled(int seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(1000.0 * seconds * kls::testing::TimeScale()));
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

kls::v1::KernelRef Ref(const std::string& name, int64_t version) {
  kls::v1::KernelRef r;
  r.set_name(name);
  r.set_version(version);
  return r;
}

struct Server {
  pid_t pid = -1;
  std::string target;
  fs::path log;
  std::unique_ptr<kls::Client> client;
  ~Server() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      WaitFor(pid, std::chrono::seconds(10));
    }
  }
};

void StartServer(Server* s, const std::vector<std::string>& store_args, const fs::path& scratch,
                 const std::string& tag) {
  s->target = "127.0.0.1:" + std::to_string(FreePort());
  s->log = scratch / (tag + ".log");
  std::vector<std::string> args = {KLS_SERVER_BINARY, "--listen", s->target, "--workers", "1", "--log-level", "info"};
  args.insert(args.end(), store_args.begin(), store_args.end());
  s->pid = Spawn(args, scratch / (tag + ".out"), s->log, /*append_err=*/true);
  ASSERT_GT(s->pid, 0);
  kls::ClientOptions options;
  options.target = s->target;
  options.timeout_seconds = 10;
  s->client = std::make_unique<kls::Client>(options);
  const auto deadline = Clock::now() + Scaled(30);
  while (Clock::now() < deadline) {
    ASSERT_EQ(WaitFor(s->pid, std::chrono::milliseconds(0)), -1) << tag << " exited:\n" << ReadFile(s->log);
    auto health = s->client->CheckHealth("kls.v1.Queries");
    if (health.ok() && *health == kls::ServingStatus::kServing) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << tag << " not ready within 30 s:\n" << ReadFile(s->log);
}

void Stop(Server* s) {
  if (s->pid <= 0) return;
  kill(s->pid, SIGTERM);
  if (WaitFor(s->pid, Scaled(30)) == -1) {
    kill(s->pid, SIGKILL);
    WaitFor(s->pid, Scaled(10));
  }
  s->pid = -1;
}

struct RunResult {
  int rc = -1;
  std::string out, err;
};

/// Runs kls-server with `args` to completion.
RunResult RunServerBinary(const std::vector<std::string>& args, const fs::path& scratch, const std::string& tag) {
  std::vector<std::string> argv = {KLS_SERVER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const fs::path out = scratch / (tag + ".out"), err = scratch / (tag + ".err");
  RunResult r;
  const pid_t pid = Spawn(argv, out, err);
  if (pid <= 0) return r;
  r.rc = WaitFor(pid, Scaled(120));
  if (r.rc == -1) kill(pid, SIGKILL);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

kls::v1::SubmitJobRequest Job(const std::string& dataset_id, const std::string& kernel, int iterations) {
  kls::v1::SubmitJobRequest submit;
  submit.set_dataset_id(dataset_id);
  submit.set_kernel_name(kernel);
  submit.mutable_kl_admm()->set_max_iterations(iterations);
  submit.mutable_kl_admm()->set_tolerance(0);
  submit.mutable_kl_admm()->set_num_threads(1);
  return submit;
}

std::string UploadMoons(kls::Client& client, const std::string& name, int n, int seed) {
  auto moons = kls::MakeTwoMoons(n, 0.05, seed);
  EXPECT_TRUE(moons.ok());
  auto constraints = kls::GenerateAdmmProtocol(moons->labels, seed);
  EXPECT_TRUE(constraints.ok());
  kls::UploadOptions upload;
  upload.name = name;
  auto uploaded = client.UploadDataset(*moons, *constraints, upload);
  EXPECT_TRUE(uploaded.ok()) << uploaded.status();
  return uploaded.ok() ? uploaded->id() : "";
}

/// What a client gets for one kernel version: its record, its exported
/// embedding (exact doubles) and the top-5 of two items.
std::string KernelAnswers(kls::Client& client, const kls::v1::KernelRef& ref) {
  std::string out;
  auto info = client.GetKernel(ref);
  if (!info.ok()) return "get: " + info.status().ToString();
  out += info->ShortDebugString() + "\n";
  auto exported = client.ExportKernel(ref);
  if (!exported.ok()) return out + "export: " + exported.status().ToString();
  out += exported->info.ShortDebugString() + "\n";
  const auto& e = exported->embedding;
  out += std::to_string(e.rows()) + "x" + std::to_string(e.cols()) + ":";
  out.append(reinterpret_cast<const char*>(e.data()), sizeof(double) * static_cast<size_t>(e.size()));
  char buf[64];
  for (int item : {0, 7}) {
    kls::v1::TopKRequest topk;
    *topk.mutable_kernel() = ref;
    topk.set_item(item);
    topk.set_k(5);
    auto r = client.TopK(topk);
    if (!r.ok()) return out + "topk: " + r.status().ToString();
    out += "|";
    for (const auto& s : r->items()) {
      std::snprintf(buf, sizeof buf, "%d:%.17g ", s.index(), s.score());
      out += buf;
    }
  }
  return out;
}

/// Datasets.List, Kernels.List, Jobs.List and every kernel's answers.
std::string Everything(kls::Client& client) {
  std::string out;
  auto datasets = client.ListDatasets();
  if (!datasets.ok()) return "datasets: " + datasets.status().ToString();
  for (const auto& d : *datasets) out += "dataset " + d.ShortDebugString() + "\n";
  auto kernels = client.ListKernels();
  if (!kernels.ok()) return out + "kernels: " + kernels.status().ToString();
  for (const auto& k : *kernels) {
    out += "kernel " + k.ShortDebugString() + "\n";
    out += KernelAnswers(client, Ref(k.name(), k.version())) + "\n";
  }
  kls::v1::ListJobsRequest request;
  request.set_page_size(1000);
  auto jobs = client.ListJobs(request);
  if (!jobs.ok()) return out + "jobs: " + jobs.status().ToString();
  for (const auto& j : jobs->jobs()) {
    out += "job " + j.id() + " " + kls::v1::JobState_Name(j.state()) + " " + j.kernel_name() + " v" +
           std::to_string(j.kernel_version()) + "\n";
  }
  return out;
}


/// A PostgreSQL client tool of the server's version when one is installed
/// under /usr/lib/postgresql, else /usr/bin's.
std::string PgTool(const std::string& tool) {
  std::error_code ec;
  std::string best;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path p = entry.path() / "bin" / tool;
    if (fs::exists(p) && p.string() > best) best = p.string();
  }
  return best.empty() ? "/usr/bin/" + tool : best;
}

int RunTool(const std::vector<std::string>& args, const fs::path& scratch, const std::string& tag) {
  const pid_t pid = Spawn(args, scratch / (tag + ".out"), scratch / (tag + ".err"));
  if (pid <= 0) return -1;
  return WaitFor(pid, Scaled(120));
}

TEST(PostgresBackup, PgDumpWhileServingThenPgRestoreIntoANewDatabasePassesCheckAndAnswersIdentically) {
  const fs::path scratch = fs::path(::testing::TempDir()) / ("kls-pg-backup-" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  kls::testing::PostgresServer pg;
  ASSERT_TRUE(pg.Init()) << pg.error();

  Server original;
  ASSERT_NO_FATAL_FAILURE(
      StartServer(&original, {"--store", pg.uri(), "--cache-dir", (scratch / "cache1").string()}, scratch, "original"));
  const std::string ds = UploadMoons(*original.client, "moons", 200, 3);
  ASSERT_FALSE(ds.empty());
  for (int iterations : {20, 40}) {
    auto job = original.client->SubmitJob(Job(ds, "moons-kernel", iterations));
    ASSERT_TRUE(job.ok()) << job.status();
    auto done = original.client->WatchJob(job->id(), [](const kls::v1::Job&) {});
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(done->state(), kls::v1::SUCCEEDED) << done->error();
  }
  ASSERT_TRUE(original.client->SetAlias("moons-kernel", "prod", 1).ok());
  const std::string before = Everything(*original.client);
  ASSERT_THAT(before, HasSubstr("kernel name: \"moons-kernel\" version: 2"));

  // The documented procedure, while the replica keeps serving.
  const fs::path dump = scratch / "kls.dump";
  ASSERT_EQ(RunTool({PgTool("pg_dump"), "-Fc", "-d", pg.uri(), "-f", dump.string()}, scratch, "pg_dump"), 0)
      << ReadFile(scratch / "pg_dump.err");
  ASSERT_TRUE(pg.CreateDatabase("kls_restored")) << pg.error();
  ASSERT_EQ(RunTool({PgTool("pg_restore"), "-d", pg.uri("kls_restored"), dump.string()}, scratch, "pg_restore"), 0)
      << ReadFile(scratch / "pg_restore.err");

  const RunResult check = RunServerBinary({"--check", "--store", pg.uri("kls_restored")}, scratch, "check");
  ASSERT_EQ(check.rc, 0) << check.out << check.err;
  EXPECT_THAT(check.out, HasSubstr("ok: 1 data sets, 2 kernels, 2 jobs, 0 problems"));

  Server copy;
  ASSERT_NO_FATAL_FAILURE(StartServer(
      &copy, {"--store", pg.uri("kls_restored"), "--cache-dir", (scratch / "cache2").string()}, scratch, "restored"));
  EXPECT_EQ(Everything(*copy.client), before);
  Stop(&copy);
  Stop(&original);

  // A damaged artifact in the database is found by --check --store.
  ASSERT_TRUE(pg.Psql("kls_restored",
                      "UPDATE artifact_chunks SET bytes = set_byte(bytes, 100, get_byte(bytes, 100) # 1) "
                      "WHERE artifact_id = (SELECT artifact FROM kernels ORDER BY version LIMIT 1) AND seq = 0;"))
      << pg.error();
  const RunResult damaged = RunServerBinary({"--check", "--store", pg.uri("kls_restored")}, scratch, "damaged");
  EXPECT_EQ(damaged.rc, 1) << damaged.out << damaged.err;
  EXPECT_THAT(damaged.out, HasSubstr("PROBLEM: kernel moons-kernel v1"));
  fs::remove_all(scratch);
}

}  // namespace
