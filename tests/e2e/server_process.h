// A real kls-server for the end-to-end tests: started on a free loopback port
// with a connected client, waited for until it serves, stopped by signal; and
// the answers a client gets from it, as comparable text (exact doubles), so
// that a restored backup, a migrated store or another replica can be checked
// to answer identically.
//
// The including test defines KLS_SERVER_BINARY (its CMake target does).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/synthetic.h"
#include "tests/e2e/process.h"
#include "tests/test_util/time_scale.h"

#ifndef KLS_SERVER_BINARY
#error "define KLS_SERVER_BINARY (the kls-server path) before including server_process.h"
#endif

namespace kls::e2e {

/// A wall-clock bound widened by KLS_TEST_TIME_SCALE (sanitizer builds).
inline std::chrono::milliseconds Scaled(int seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(1000.0 * seconds * kls::testing::TimeScale()));
}

/// A loopback port free at the time of the call.
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

inline kls::v1::KernelRef Ref(const std::string& name, int64_t version) {
  kls::v1::KernelRef r;
  r.set_name(name);
  r.set_version(version);
  return r;
}

inline std::unique_ptr<kls::Client> Connect(const std::string& target, int timeout_seconds) {
  kls::ClientOptions options;
  options.target = target;
  options.timeout_seconds = timeout_seconds;
  return std::make_unique<kls::Client>(options);
}

/// One kls-server process; killed when the Server goes, so a failed
/// assertion does not leave it running after the test.
struct Server {
  pid_t pid = -1;
  std::string target;
  std::filesystem::path log;
  std::unique_ptr<kls::Client> client;
  bool alive() const { return pid > 0; }

  Server() = default;
  Server(Server&& o) noexcept
      : pid(std::exchange(o.pid, -1)), target(std::move(o.target)), log(std::move(o.log)), client(std::move(o.client)) {}
  Server& operator=(Server&&) = delete;
  ~Server() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      WaitFor(pid, std::chrono::seconds(10));
    }
  }
};

/// Starts kls-server with `args` (after the binary; --listen and --log-level
/// info are added) on a free port, stderr appended to scratch/TAG.log, and
/// waits until readiness of kls.v1.Queries is SERVING. The client's calls
/// time out after `client_timeout_seconds`.
inline void StartServer(Server* s, std::vector<std::string> args, const std::filesystem::path& scratch,
                        const std::string& tag, int client_timeout_seconds = 10) {
  s->target = "127.0.0.1:" + std::to_string(FreePort());
  s->log = scratch / (tag + ".log");
  args.insert(args.begin(), {KLS_SERVER_BINARY, "--listen", s->target, "--log-level", "info"});
  s->pid = Spawn(args, scratch / (tag + ".out"), s->log, /*append_err=*/true);
  ASSERT_GT(s->pid, 0);
  s->client = Connect(s->target, client_timeout_seconds);
  const auto deadline = std::chrono::steady_clock::now() + Scaled(30);
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(WaitFor(s->pid, std::chrono::milliseconds(0)), -1) << tag << " exited:\n" << ReadFile(s->log);
    auto health = s->client->CheckHealth("kls.v1.Queries");
    if (health.ok() && *health == kls::ServingStatus::kServing) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << tag << " not ready within 30 s:\n" << ReadFile(s->log);
}

/// Sends `signal_number` (after SIGCONT, in case it was stopped) and waits
/// 30 s (scaled) for the exit, then SIGKILL.
inline void Terminate(Server* s, int signal_number = SIGTERM) {
  if (!s->alive()) return;
  kill(s->pid, SIGCONT);
  kill(s->pid, signal_number);
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

/// Runs kls-server with `args` to completion (at most 120 s, scaled).
inline RunResult RunServerBinary(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                                 const std::string& tag) {
  std::vector<std::string> argv = {KLS_SERVER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::filesystem::path out = scratch / (tag + ".out"), err = scratch / (tag + ".err");
  RunResult r;
  const pid_t pid = Spawn(argv, out, err);
  if (pid <= 0) return r;
  r.rc = WaitFor(pid, Scaled(120));
  if (r.rc == -1) kill(pid, SIGKILL);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

/// A single-threaded KL-ADMM job that runs to its iteration cap (tolerance
/// 0): the same work every time — the learn alone, without the baseline
/// guard's second learn. `rank` 0 = the solver's choice.
inline kls::v1::SubmitJobRequest AdmmJob(const std::string& dataset_id, const std::string& kernel, int iterations,
                                         int rank = 0) {
  kls::v1::SubmitJobRequest submit;
  submit.set_dataset_id(dataset_id);
  submit.set_kernel_name(kernel);
  submit.mutable_kl_admm()->set_max_iterations(iterations);
  submit.mutable_kl_admm()->set_tolerance(0);
  if (rank > 0) submit.mutable_kl_admm()->set_rank(rank);
  submit.set_baseline_guard(false);
  submit.mutable_kl_admm()->set_num_threads(1);
  return submit;
}

/// Uploads two moons of `n` points with the KL-ADMM protocol's pairs; the
/// data set's id ("" after a failed expectation).
inline std::string UploadMoons(kls::Client& client, const std::string& name, int n, int seed) {
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

/// The top-5 of each of `items` under `ref`, as "|i:score ..." per item.
inline std::string TopKAnswers(kls::Client& client, const kls::v1::KernelRef& ref, std::initializer_list<int> items) {
  std::string out;
  char buf[64];
  for (int item : items) {
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

/// What a client gets for one kernel version: its record, its exported
/// embedding (exact doubles) and the top-5 of two items.
inline std::string KernelAnswers(kls::Client& client, const kls::v1::KernelRef& ref) {
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
  return out + TopKAnswers(client, ref, {0, 7});
}

/// Datasets.List, Kernels.List, Jobs.List and every kernel's answers.
inline std::string Everything(kls::Client& client) {
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

}  // namespace kls::e2e
