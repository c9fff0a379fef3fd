// Several real kls-server replicas on one real PostgreSQL (ctest label
// `distributed`), and the checkpoint/resume path of a single server on the
// embedded store (label `e2e`).
//
// Every replica is the real binary with --store on a throwaway PostgreSQL
// (tests/test_util/postgres_server.h) started on a random loopback port;
// leases are short (2 s) and checkpoints frequent (0.3 s of solve time) so
// that each scenario runs in seconds. The scenarios, one test each:
//   1. jobs submitted to any replica run on several, each produces exactly
//      one kernel version, and every replica answers every kernel identically;
//   2. kill -9 of the replica running a long KL-ADMM job: another replica
//      resumes it from its checkpoint within lease + 2 s (attempt 2, the
//      iteration count continues) and the result equals an uninterrupted
//      run's objective;
//   3. SIGSTOP of that replica past its lease: another finishes the job; after
//      SIGCONT the late replica's commit is refused — one kernel version;
//   4. during 2 and 3, a client sending similarity and top-k queries round
//      robin to the live replicas (retrying UNAVAILABLE on the next one) sees
//      at least 99.9 % success;
//   5. PostgreSQL stopped for 10 s: readiness goes NOT_SERVING and back,
//      liveness stays SERVING, cached kernels keep answering, the running
//      job is neither lost nor failed;
//   6. SIGTERM on the replica running a job: it continues elsewhere within
//      2 s, resumed from a checkpoint (not from iteration 0), and the
//      replica exits 0.
// All traffic goes to 127.0.0.1; every wait is bounded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/synthetic.h"
#include "tests/e2e/server_process.h"
#include "tests/test_util/postgres_server.h"
#include "tests/test_util/time_scale.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using kls::e2e::ReadFile;
using kls::e2e::Ref;
using kls::e2e::Scaled;
using kls::e2e::Server;
using kls::e2e::Spawn;
using kls::e2e::Terminate;
using kls::e2e::TopKAnswers;
using kls::e2e::WaitFor;

constexpr double kLeaseSeconds = 2.0;

/// The replicas' clients time out after 5 s: a query to a dead replica is
/// retried on the next one soon enough.
void StartProcess(Server* s, std::vector<std::string> args, const fs::path& scratch, const std::string& tag) {
  kls::e2e::StartServer(s, std::move(args), scratch, tag, /*client_timeout_seconds=*/5);
}

/// A KL-ADMM job on the two-moons set that runs to its iteration cap
/// (tolerance 0) at the fixed rank RankBound(|T|) = 63 (no rank escalation):
/// long enough to be interrupted, the same work every time.
kls::v1::SubmitJobRequest LongJob(const std::string& dataset_id, const std::string& kernel, int iterations) {
  return kls::e2e::AdmmJob(dataset_id, kernel, iterations, /*rank=*/63);
}

/// The summary JSON of a kernel version.
nlohmann::json Summary(kls::Client& client, const std::string& name, int64_t version) {
  auto info = client.GetKernel(Ref(name, version));
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? nlohmann::json::parse(info->summary_json()) : nlohmann::json::object();
}

/// Sends Similarity and TopK round robin over the live replicas until
/// stopped; an UNAVAILABLE answer (or a dead replica) is retried once on the
/// next replica before it counts as a failure.
class QueryLoad {
 public:
  QueryLoad(std::vector<Server>* servers, std::string kernel) : servers_(servers), kernel_(std::move(kernel)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~QueryLoad() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void SetDown(int index, bool down) {
    std::lock_guard<std::mutex> lock(mu_);
    if (down) down_.insert(index); else down_.erase(index);
  }
  int64_t ok() const { return ok_; }
  int64_t failed() const { return failed_; }

 private:
  void Run() {
    std::vector<std::unique_ptr<kls::Client>> clients;
    for (const Server& s : *servers_) {
      kls::ClientOptions options;
      options.target = s.target;
      options.timeout_seconds = 1;
      clients.push_back(std::make_unique<kls::Client>(options));
    }
    const std::vector<std::pair<int, int>> pairs = {{0, 1}, {5, 9}, {17, 3}};
    size_t next = 0;
    const auto deadline = Clock::now() + Scaled(120);
    while (!stop_ && Clock::now() < deadline) {
      bool done = false;
      for (int tries = 0; tries < 2 && !done; ++tries) {
        size_t i;
        {
          std::lock_guard<std::mutex> lock(mu_);
          do {
            i = next++ % clients.size();
          } while (down_.count(static_cast<int>(i)) && down_.size() < clients.size());
        }
        kls::Status status = kls::OkStatus();
        if (next % 2 == 0) {
          status = clients[i]->Similarity(Ref(kernel_, 1), pairs).status();
        } else {
          kls::v1::TopKRequest topk;
          *topk.mutable_kernel() = Ref(kernel_, 1);
          topk.set_item(3);
          topk.set_k(5);
          status = clients[i]->TopK(topk).status();
        }
        done = status.ok();
        if (!done && status.code() != kls::StatusCode::kUnavailable &&
            status.code() != kls::StatusCode::kDeadlineExceeded) {
          break;  // a wrong answer, not a dead replica: no retry
        }
      }
      (done ? ok_ : failed_)++;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  std::vector<Server>* servers_;
  const std::string kernel_;
  std::mutex mu_;
  std::set<int> down_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ok_{0}, failed_{0};
  std::thread thread_;
};

class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = fs::path(::testing::TempDir()) /
               ("kls-replicas-" + std::to_string(getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(scratch_);
    fs::create_directories(scratch_);
    ASSERT_TRUE(pg_.Init()) << pg_.error();
    servers_.resize(3);
    for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(StartReplica(i));
    for (Server& s : servers_) replica_by_pid_[s.pid] = &s - servers_.data();

    auto moons = kls::MakeTwoMoons(600, 0.05, 1);
    ASSERT_TRUE(moons.ok());
    auto constraints = kls::GenerateAdmmProtocol(moons->labels, 1);
    ASSERT_TRUE(constraints.ok());
    kls::UploadOptions upload;
    upload.name = "moons";
    auto uploaded = servers_[0].client->UploadDataset(*moons, *constraints, upload);
    ASSERT_TRUE(uploaded.ok()) << uploaded.status();
    dataset_id_ = uploaded->id();
  }

  void TearDown() override {
    for (Server& s : servers_) Terminate(&s, SIGKILL);
    if (HasFailure()) {
      for (size_t i = 0; i < servers_.size(); ++i) {
        std::cerr << "---- replica " << i << " log tail ----\n" << Tail(ReadFile(servers_[i].log));
      }
    }
    fs::remove_all(scratch_);
  }

  static std::string Tail(const std::string& text) {
    return text.size() > 6000 ? text.substr(text.size() - 6000) : text;
  }

  virtual double LeaseSeconds() const { return kLeaseSeconds; }

  void StartReplica(int i) {
    const fs::path cache = scratch_ / ("cache" + std::to_string(i));
    ASSERT_NO_FATAL_FAILURE(StartProcess(&servers_[i],
                                        {"--store", pg_.uri(), "--cache-dir", cache.string(), "--workers", "1",
                                         "--lease-seconds", std::to_string(LeaseSeconds()), "--checkpoint-seconds",
                                         "0.3"},
                                        scratch_, "replica" + std::to_string(i)));
  }

  /// The replica (index) whose process owns `job` now; -1 if none is known.
  int OwnerOf(const kls::v1::Job& job) const {
    // Replica ids are "<host>-<pid>-<random>".
    const std::string& owner = job.owner();
    const size_t last = owner.rfind('-');
    if (last == std::string::npos) return -1;
    const size_t before = owner.rfind('-', last - 1);
    if (before == std::string::npos) return -1;
    const pid_t pid = std::atoi(owner.substr(before + 1, last - before - 1).c_str());
    auto it = replica_by_pid_.find(pid);
    return it == replica_by_pid_.end() ? -1 : it->second;
  }

  /// Any live replica's client.
  kls::Client& Live(int not_this = -1) {
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (static_cast<int>(i) != not_this && servers_[i].alive()) return *servers_[i].client;
    }
    return *servers_[0].client;
  }

  /// Polls the job (through any live replica other than `avoid`) until `pred`
  /// holds or `timeout` passes; returns the last snapshot.
  kls::v1::Job WaitJob(const std::string& id, const std::function<bool(const kls::v1::Job&)>& pred,
                       std::chrono::milliseconds timeout, int avoid = -1) {
    kls::v1::Job last;
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto job = Live(avoid).GetJob(id);
      if (job.ok()) {
        last = *job;
        if (pred(last)) return last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return last;
  }

  /// A kernel learned and queried on every replica (so cached everywhere).
  void LearnQueryKernel(const std::string& name) {
    auto job = servers_[0].client->SubmitJob(LongJob(dataset_id_, name, 30));
    ASSERT_TRUE(job.ok()) << job.status();
    auto done = WaitJob(job->id(), [](const kls::v1::Job& j) { return j.state() == kls::v1::SUCCEEDED; },
                        Scaled(60));
    ASSERT_EQ(done.state(), kls::v1::SUCCEEDED) << done.error();
    for (Server& s : servers_) {
      ASSERT_TRUE(s.client->Similarity(Ref(name, 1), {{0, 1}}).ok());
    }
  }

  /// Submits the long job; waits until it runs with progress past a few
  /// checkpoints; returns (job, index of the owning replica).
  std::pair<kls::v1::Job, int> StartLongJob(const std::string& kernel, int iterations) {
    auto job = servers_[1].client->SubmitJob(LongJob(dataset_id_, kernel, iterations));
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return {kls::v1::Job(), -1};
    auto running = WaitJob(job->id(),
                           [](const kls::v1::Job& j) {
                             return (j.state() == kls::v1::RUNNING && j.progress().elapsed_seconds() > 0.7) ||
                                    j.state() == kls::v1::SUCCEEDED || j.state() == kls::v1::FAILED;
                           },
                           Scaled(60));
    EXPECT_EQ(running.state(), kls::v1::RUNNING) << "the job finished too soon or never ran";
    return {running, OwnerOf(running)};
  }

  /// The same job run start to finish without interruption: its objective.
  double ReferenceObjective(const std::string& kernel, int iterations) {
    auto job = servers_[2].client->SubmitJob(LongJob(dataset_id_, kernel, iterations));
    EXPECT_TRUE(job.ok()) << job.status();
    auto done = WaitJob(job->id(), [](const kls::v1::Job& j) { return j.state() == kls::v1::SUCCEEDED; },
                        Scaled(120));
    EXPECT_EQ(done.state(), kls::v1::SUCCEEDED) << done.error();
    EXPECT_EQ(done.attempts(), 1);
    const nlohmann::json summary = Summary(*servers_[2].client, kernel, 1);
    EXPECT_EQ(summary.value("resumed_from_iteration", -1), 0);
    return summary.value("objective", std::nan(""));
  }

  /// Checks the moved job's result: succeeded at attempt >= 2, resumed from a
  /// checkpoint, full iteration count, the reference objective, one version.
  void ExpectResumedResult(const std::string& id, const std::string& kernel, int iterations, double reference) {
    auto done = WaitJob(id, [](const kls::v1::Job& j) { return j.state() == kls::v1::SUCCEEDED || j.state() == kls::v1::FAILED; },
                        Scaled(120));
    ASSERT_EQ(done.state(), kls::v1::SUCCEEDED) << done.error();
    EXPECT_GE(done.attempts(), 2);
    EXPECT_EQ(done.counted_failures(), 0);
    const nlohmann::json summary = Summary(Live(), kernel, 1);
    EXPECT_GT(summary.value("resumed_from_iteration", 0), 0) << summary.dump();
    EXPECT_EQ(summary.value("iterations", 0), iterations) << summary.dump();
    const double objective = summary.value("objective", std::nan(""));
    EXPECT_NEAR(objective, reference, 1e-6 * std::max(1.0, std::abs(reference))) << summary.dump();
    auto versions = Live().ListKernels(kernel);
    ASSERT_TRUE(versions.ok());
    EXPECT_EQ(versions->size(), 1u) << "a job must produce exactly one kernel version";
  }

  fs::path scratch_;
  kls::testing::PostgresServer pg_;
  std::vector<Server> servers_;
  std::map<pid_t, int> replica_by_pid_;
  std::string dataset_id_;
};

// About 2.5 s of solve on an idle 2-core machine: long enough to be interrupted after
// a couple of 0.3 s checkpoints on a fast machine, short enough on a slow one.
// Under a sanitizer (KLS_TEST_TIME_SCALE > 1) each iteration costs 3–30× more
// (and the query load and three replicas share the cores), so the job shrinks
// by the same factor, to at least 400 iterations: still several checkpoints
// before the 0.7 s the tests wait for, and a whole job of minutes, not hours.
const int kLongIterations = std::max(400, static_cast<int>(4000 / kls::testing::TimeScale()));

TEST_F(ReplicasTest, JobsRunEverywhereOnceAndEveryReplicaAnswersTheSame) {
  std::vector<std::string> ids;
  for (int j = 0; j < 6; ++j) {
    auto job = servers_[j % 3].client->SubmitJob(LongJob(dataset_id_, "k" + std::to_string(j), 150));
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  std::set<int> owners;
  const auto deadline = Clock::now() + Scaled(120);
  std::set<std::string> finished;
  while (finished.size() < ids.size() && Clock::now() < deadline) {
    for (const std::string& id : ids) {
      auto job = servers_[0].client->GetJob(id);
      ASSERT_TRUE(job.ok()) << job.status();
      if (job->state() == kls::v1::RUNNING) owners.insert(OwnerOf(*job));
      if (job->state() == kls::v1::SUCCEEDED) finished.insert(id);
      ASSERT_NE(job->state(), kls::v1::FAILED) << job->error();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(finished.size(), ids.size());
  owners.erase(-1);
  EXPECT_GE(owners.size(), 2u) << "six jobs on three one-worker replicas ran on one replica only";
  for (int j = 0; j < 6; ++j) {
    const std::string name = "k" + std::to_string(j);
    auto versions = servers_[1].client->ListKernels(name);
    ASSERT_TRUE(versions.ok());
    EXPECT_EQ(versions->size(), 1u) << name;
    std::vector<double> first;
    std::vector<int> first_topk;
    for (Server& s : servers_) {
      auto sim = s.client->Similarity(Ref(name, 1), {{0, 1}, {2, 200}, {300, 599}});
      ASSERT_TRUE(sim.ok()) << sim.status();
      kls::v1::TopKRequest topk;
      *topk.mutable_kernel() = Ref(name, 0);  // latest: resolved through the store
      topk.set_item(7);
      topk.set_k(10);
      auto top = s.client->TopK(topk);
      ASSERT_TRUE(top.ok()) << top.status();
      std::vector<int> items;
      for (const auto& it : top->items()) items.push_back(it.index());
      if (first.empty()) {
        first = *sim;
        first_topk = items;
      } else {
        EXPECT_EQ(*sim, first) << name;  // the same bytes, so bit-equal answers
        EXPECT_EQ(items, first_topk) << name;
      }
    }
  }
  // An alias set on one replica is seen by the others within a second.
  ASSERT_TRUE(servers_[0].client->SetAlias("k0", "prod", 1).ok());
  kls::v1::KernelRef prod;
  prod.set_name("k0");
  prod.set_alias("prod");
  for (Server& s : servers_) {
    auto sim = s.client->Similarity(prod, {{0, 1}});
    EXPECT_TRUE(sim.ok()) << sim.status();
  }
}

TEST_F(ReplicasTest, KillNineResumesTheJobOnAnotherReplicaFromItsCheckpoint) {
  ASSERT_NO_FATAL_FAILURE(LearnQueryKernel("q"));
  const double reference = ReferenceObjective("reference", kLongIterations);
  QueryLoad load(&servers_, "q");
  auto [job, owner] = StartLongJob("moved", kLongIterations);
  ASSERT_GE(owner, 0) << job.owner();
  const int before = job.progress().iteration();
  ASSERT_GT(before, 0);
  load.SetDown(owner, true);
  ASSERT_EQ(kill(servers_[owner].pid, SIGKILL), 0);
  const auto killed = Clock::now();
  WaitFor(servers_[owner].pid, Scaled(5));
  servers_[owner].pid = -1;
  auto moved = WaitJob(job.id(),
                       [](const kls::v1::Job& j) {
                         // Re-queued (attempt 1, QUEUED) is not yet "taken over".
                         return j.attempts() >= 2 || j.state() == kls::v1::SUCCEEDED || j.state() == kls::v1::FAILED ||
                                j.state() == kls::v1::CANCELLED;
                       },
                       Scaled(30), owner);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  EXPECT_GE(moved.attempts(), 2);
  EXPECT_LE(seconds, kLeaseSeconds + 2.0 * kls::testing::TimeScale()) << "the job was not taken over within lease + 2 s";
  ASSERT_NO_FATAL_FAILURE(ExpectResumedResult(job.id(), "moved", kLongIterations, reference));
  load.Stop();
  EXPECT_GE(load.ok(), 100);
  EXPECT_GE(static_cast<double>(load.ok()) / (load.ok() + load.failed()), 0.999)
      << load.failed() << " of " << load.ok() + load.failed() << " queries failed";
}

// Replicas with 30 s leases: a replica killed with -9 is known to be gone at
// once (its liveness lock in PostgreSQL went with its sessions), so another
// replica resumes its job from the checkpoint within a few heartbeats instead
// of after the lease.
class LongLeaseReplicasTest : public ReplicasTest {
 protected:
  double LeaseSeconds() const override { return 30.0; }
};

TEST_F(LongLeaseReplicasTest, AKilledReplicasJobIsTakenOverLongBeforeItsLeaseRunsOut) {
  const double reference = ReferenceObjective("reference", kLongIterations);
  auto [job, owner] = StartLongJob("handed-over", kLongIterations);
  ASSERT_GE(owner, 0) << job.owner();
  ASSERT_EQ(kill(servers_[owner].pid, SIGKILL), 0);
  const auto killed = Clock::now();
  WaitFor(servers_[owner].pid, Scaled(5));
  servers_[owner].pid = -1;
  auto moved = WaitJob(job.id(), [](const kls::v1::Job& j) { return j.attempts() >= 2 || j.state() != kls::v1::RUNNING; },
                       Scaled(40), owner);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  EXPECT_GE(moved.attempts(), 2);
  // The survivors look for dead replicas at every heartbeat (a quarter of the lease, 7.5 s).
  EXPECT_LE(seconds, 12.0 * kls::testing::TimeScale()) << "not taken over long before the 30 s lease ran out";
  ASSERT_NO_FATAL_FAILURE(ExpectResumedResult(job.id(), "handed-over", kLongIterations, reference));
}

TEST_F(ReplicasTest, APausedReplicaPastItsLeaseCannotCommit) {
  ASSERT_NO_FATAL_FAILURE(LearnQueryKernel("q"));
  QueryLoad load(&servers_, "q");
  auto [job, owner] = StartLongJob("fenced", kLongIterations);
  ASSERT_GE(owner, 0) << job.owner();
  load.SetDown(owner, true);
  ASSERT_EQ(kill(servers_[owner].pid, SIGSTOP), 0);
  auto done = WaitJob(job.id(), [](const kls::v1::Job& j) { return j.state() == kls::v1::SUCCEEDED; },
                      Scaled(120), owner);
  ASSERT_EQ(done.state(), kls::v1::SUCCEEDED) << done.error();
  EXPECT_GE(done.attempts(), 2);
  ASSERT_EQ(kill(servers_[owner].pid, SIGCONT), 0);
  load.SetDown(owner, false);
  // The late replica wakes up mid-solve with attempt 1: its next progress or
  // checkpoint write, and any commit, are fenced out.
  std::this_thread::sleep_for(Scaled(3));
  auto versions = Live().ListKernels("fenced");
  ASSERT_TRUE(versions.ok());
  EXPECT_EQ(versions->size(), 1u);
  auto after = Live().GetJob(job.id());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state(), kls::v1::SUCCEEDED);
  EXPECT_EQ(after->kernel_version(), 1);
  EXPECT_THAT(ReadFile(servers_[owner].log), ::testing::HasSubstr("lease"));
  load.Stop();
  EXPECT_GE(static_cast<double>(load.ok()) / (load.ok() + load.failed()), 0.999)
      << load.failed() << " of " << load.ok() + load.failed() << " queries failed";
}

TEST_F(ReplicasTest, PostgresOutageMakesReplicasNotReadyButCachedKernelsAnswer) {
  ASSERT_NO_FATAL_FAILURE(LearnQueryKernel("q"));
  auto [job, owner] = StartLongJob("through-outage", kLongIterations);
  ASSERT_GE(owner, 0);
  ASSERT_TRUE(pg_.Stop()) << pg_.error();
  const auto stopped = Clock::now();
  // Readiness goes NOT_SERVING on every replica; liveness stays SERVING;
  // cached kernels keep answering.
  std::set<int> not_ready;
  int64_t answered = 0, refused = 0;
  while (Clock::now() - stopped < Scaled(10)) {
    for (size_t i = 0; i < servers_.size(); ++i) {
      auto ready = servers_[i].client->CheckHealth("kls.v1.Queries");
      if (ready.ok() && *ready == kls::ServingStatus::kNotServing) not_ready.insert(i);
      auto live = servers_[i].client->CheckHealth("");
      EXPECT_TRUE(live.ok() && *live == kls::ServingStatus::kServing) << "liveness of replica " << i;
      (servers_[i].client->Similarity(Ref("q", 1), {{0, 1}, {4, 5}}).ok() ? answered : refused)++;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(not_ready.size(), 3u);
  EXPECT_EQ(refused, 0) << answered << " cached queries answered, " << refused << " refused";
  ASSERT_TRUE(pg_.Start()) << pg_.error();
  const auto restarted = Clock::now();
  for (size_t i = 0; i < servers_.size(); ++i) {
    bool ready = false;
    while (!ready && Clock::now() - restarted < Scaled(15)) {
      auto h = servers_[i].client->CheckHealth("kls.v1.Queries");
      ready = h.ok() && *h == kls::ServingStatus::kServing;
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(ready) << "replica " << i << " not ready again within 15 s";
    EXPECT_EQ(WaitFor(servers_[i].pid, std::chrono::milliseconds(0)), -1) << "replica " << i << " exited";
  }
  auto done = WaitJob(job.id(), [](const kls::v1::Job& j) { return j.state() != kls::v1::RUNNING && j.state() != kls::v1::QUEUED; },
                      Scaled(120));
  EXPECT_EQ(done.state(), kls::v1::SUCCEEDED) << done.error();
  EXPECT_EQ(done.counted_failures(), 0);
}

TEST_F(ReplicasTest, SigtermHandsRunningJobsToAnotherReplicaAtOnce) {
  auto [job, owner] = StartLongJob("drained", kLongIterations);
  ASSERT_GE(owner, 0) << job.owner();
  ASSERT_EQ(kill(servers_[owner].pid, SIGTERM), 0);
  const auto signalled = Clock::now();
  auto moved = WaitJob(job.id(),
                       [](const kls::v1::Job& j) { return j.attempts() >= 2 || j.state() == kls::v1::SUCCEEDED; },
                       Scaled(30), owner);
  const double seconds = std::chrono::duration<double>(Clock::now() - signalled).count();
  EXPECT_GE(moved.attempts(), 2);
  EXPECT_LE(seconds, 2.0) << "the drained job was not running elsewhere within 2 s";
  EXPECT_EQ(WaitFor(servers_[owner].pid, Scaled(30)), 0) << "the drained replica did not exit 0";
  servers_[owner].pid = -1;
  auto done = WaitJob(job.id(), [](const kls::v1::Job& j) { return j.state() == kls::v1::SUCCEEDED; },
                      Scaled(120), owner);
  ASSERT_EQ(done.state(), kls::v1::SUCCEEDED) << done.error();
  EXPECT_EQ(done.counted_failures(), 0);
  const nlohmann::json summary = Summary(Live(owner), "drained", 1);
  EXPECT_GT(summary.value("resumed_from_iteration", 0), 0) << "the job restarted from iteration 0: " << summary.dump();
  EXPECT_EQ(summary.value("iterations", 0), kLongIterations);
}

// The embedded store: kill -9 of the only server during a KL-ADMM job; after
// the restart the job continues from its checkpoint.
TEST(EmbeddedResume, KillNineThenRestartContinuesFromTheCheckpoint) {
  const fs::path scratch = fs::path(::testing::TempDir()) / ("kls-embedded-resume-" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const std::vector<std::string> args = {"--data-dir", (scratch / "data").string(), "--workers", "1",
                                         "--checkpoint-seconds", "0.3"};
  Server server;
  ASSERT_NO_FATAL_FAILURE(StartProcess(&server, args, scratch, "embedded"));
  auto moons = kls::MakeTwoMoons(600, 0.05, 1);
  auto constraints = kls::GenerateAdmmProtocol(moons->labels, 1);
  kls::UploadOptions upload;
  upload.name = "moons";
  auto uploaded = server.client->UploadDataset(*moons, *constraints, upload);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  auto job = server.client->SubmitJob(LongJob(uploaded->id(), "resumed", kLongIterations));
  ASSERT_TRUE(job.ok()) << job.status();
  const auto deadline = Clock::now() + Scaled(60);
  kls::v1::Job running;
  while (Clock::now() < deadline) {
    auto j = server.client->GetJob(job->id());
    ASSERT_TRUE(j.ok());
    running = *j;
    if (running.state() == kls::v1::RUNNING && running.progress().elapsed_seconds() > 0.7) break;
    ASSERT_NE(running.state(), kls::v1::SUCCEEDED) << "the job finished before it could be interrupted";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(running.state(), kls::v1::RUNNING);
  Terminate(&server, SIGKILL);
  ASSERT_NO_FATAL_FAILURE(StartProcess(&server, args, scratch, "embedded"));
  kls::v1::Job done;
  const auto finish_by = Clock::now() + Scaled(120);
  while (Clock::now() < finish_by) {
    auto j = server.client->GetJob(job->id());
    ASSERT_TRUE(j.ok());
    done = *j;
    if (done.state() != kls::v1::RUNNING && done.state() != kls::v1::QUEUED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(done.state(), kls::v1::SUCCEEDED) << done.error() << "\n" << ReadFile(server.log);
  EXPECT_EQ(done.attempts(), 2);
  EXPECT_EQ(done.counted_failures(), 0);
  const nlohmann::json summary = Summary(*server.client, "resumed", 1);
  EXPECT_GE(summary.value("resumed_from_iteration", 0), running.progress().iteration() / 2) << summary.dump();
  EXPECT_GT(summary.value("resumed_from_iteration", 0), 0) << summary.dump();
  EXPECT_EQ(summary.value("iterations", 0), kLongIterations);
  Terminate(&server, SIGTERM);
  fs::remove_all(scratch);
}

/// Unix milliseconds of a server log line's "[YYYY-MM-DD HH:MM:SS.mmm]"
/// stamp (local time, as the server writes it); -1 when the line has none.
int64_t LogLineUnixMs(const std::string& line) {
  std::tm tm{};
  int millis = 0;
  if (std::sscanf(line.c_str(), "[%d-%d-%d %d:%d:%d.%d]", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &millis) != 7) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&tm)) * 1000 + millis;
}

// A job that has solved for more than 20 s, on a server with the default
// --checkpoint-seconds (30), is killed with SIGKILL: after the restart it
// resumes from a checkpoint at most max(1 s, 10 %) of its solve time old —
// the early, growing checkpoint gaps (CheckpointTimer), not the 30 s interval.
TEST(EmbeddedResume, AKillAfterTwentySecondsRedoesAtMostTenPercent) {
  const fs::path scratch = fs::path(::testing::TempDir()) / ("kls-redo-" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const std::vector<std::string> args = {"--data-dir", (scratch / "data").string(), "--workers", "1"};
  Server server;
  ASSERT_NO_FATAL_FAILURE(StartProcess(&server, args, scratch, "redo"));
  const std::string dataset = kls::e2e::UploadMoons(*server.client, "moons", 600, 5);
  ASSERT_FALSE(dataset.empty());
  // Runs until cancelled: tolerance 0, no deadline, more iterations than it can do.
  auto job = server.client->SubmitJob(LongJob(dataset, "redo", 100000000));
  ASSERT_TRUE(job.ok()) << job.status();
  kls::v1::Job running;
  const auto deadline = Clock::now() + Scaled(90);
  while (Clock::now() < deadline) {
    auto j = server.client->GetJob(job->id());
    ASSERT_TRUE(j.ok()) << j.status();
    running = *j;
    ASSERT_TRUE(running.state() == kls::v1::QUEUED || running.state() == kls::v1::RUNNING) << running.error();
    if (running.state() == kls::v1::RUNNING && running.progress().elapsed_seconds() >= 20.5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(running.progress().elapsed_seconds(), 20.5) << "the job did not run 20 s within 90 s";
  const int64_t killed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  Terminate(&server, SIGKILL);

  // Attempt 1 in the log: when it started and its checkpoints (time, iteration).
  const std::string id = job->id();
  int64_t started_ms = -1;
  std::map<int64_t, int64_t> checkpoint_ms;  // iteration → when it was written
  double last_write_ms = 0;                  // the last checkpoint's store write
  {
    std::istringstream log(ReadFile(server.log));
    for (std::string line; std::getline(log, line);) {
      long long iteration = 0;
      const size_t at = line.find("job " + id + ": ");
      if (at == std::string::npos) continue;
      const std::string what = line.substr(at + 6 + id.size());
      if (what.rfind("running (attempt 1,", 0) == 0) started_ms = LogLineUnixMs(line);
      double write_ms = 0;
      if (std::sscanf(what.c_str(), "checkpoint at iteration %lld (attempt 1, %lf ms)", &iteration, &write_ms) == 2) {
        checkpoint_ms[iteration] = LogLineUnixMs(line);
        last_write_ms = write_ms;
      }
    }
  }
  ASSERT_GT(started_ms, 0) << ReadFile(server.log);
  ASSERT_FALSE(checkpoint_ms.empty()) << ReadFile(server.log);
  const double solved = (killed_ms - started_ms) / 1000.0;
  EXPECT_GE(solved, 20.0);

  ASSERT_NO_FATAL_FAILURE(StartProcess(&server, args, scratch, "redo"));
  long long resumed_from = -1;
  const auto resume_by = Clock::now() + Scaled(30);
  while (resumed_from < 0 && Clock::now() < resume_by) {
    const std::string log = ReadFile(server.log);
    const size_t at = log.find("job " + id + ": resuming from the checkpoint at iteration ");
    if (at != std::string::npos) {
      std::sscanf(log.c_str() + at, ("job " + id + ": resuming from the checkpoint at iteration %lld").c_str(),
                  &resumed_from);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ASSERT_GE(resumed_from, 0) << "no resume within 30 s:\n" << ReadFile(server.log);
  // It resumed from attempt 1's last checkpoint, written at most
  // max(1 s, 10 % of the solve time) before the kill (the schedule promises
  // max(0.1 s, 10 %); + 0.2 s for the log line and the kill's own timing) —
  // unless that checkpoint's write was so slow (a loaded disk) that the
  // schedule's 20 x cost spacing is longer.
  // (A checkpoint committed in the instant between its write and its log
  // line would be newer still: the resume point is never older.)
  ASSERT_GE(resumed_from, checkpoint_ms.rbegin()->first);
  const double age =
      resumed_from == checkpoint_ms.rbegin()->first ? (killed_ms - checkpoint_ms.rbegin()->second) / 1000.0 : 0.0;
  EXPECT_LE(age, std::max({1.0, 0.1 * solved, 20 * last_write_ms / 1000}) + 0.2)
      << "killed after " << solved << " s, resumed from a checkpoint " << age << " s old ("
      << checkpoint_ms.size() << " checkpoints, the last written in " << last_write_ms << " ms)";
  // With only the 30 s interval there would be none in 20 s.
  EXPECT_GE(checkpoint_ms.size(), 3u) << "the early checkpoints are missing";
  ASSERT_TRUE(server.client->CancelJob(id).ok());
  Terminate(&server, SIGTERM);
  fs::remove_all(scratch);
}

/// The answers a client gets for `ref`: similarities of fixed pairs and the
/// top-5 of two items, as printable text (exact doubles).
std::string Answers(kls::Client& client, const kls::v1::KernelRef& ref) {
  std::string out;
  auto sim = client.Similarity(ref, {{0, 1}, {5, 9}, {17, 3}, {42, 42}});
  if (!sim.ok()) return "similarity: " + sim.status().ToString();
  char buf[64];
  for (double v : *sim) {
    std::snprintf(buf, sizeof buf, "%.17g ", v);
    out += buf;
  }
  return out + TopKAnswers(client, ref, {3, 100});
}

// kls-server --migrate-from DIR --store URI copies an embedded data directory
// into PostgreSQL; afterwards a replica on that store answers every kernel
// (by version and by alias) exactly as the embedded server did, and a second
// run of the migration copies nothing twice.
TEST(Migrate, ADataDirectoryCopiedIntoPostgresAnswersIdentically) {
  const fs::path scratch = fs::path(::testing::TempDir()) / ("kls-migrate-" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  kls::testing::PostgresServer pg;
  ASSERT_TRUE(pg.Init()) << pg.error();
  const std::string data = (scratch / "data").string();
  Server embedded;
  ASSERT_NO_FATAL_FAILURE(StartProcess(&embedded, {"--data-dir", data, "--workers", "1"}, scratch, "embedded"));
  auto moons = kls::MakeTwoMoons(200, 0.05, 3);
  ASSERT_TRUE(moons.ok());
  auto constraints = kls::GenerateAdmmProtocol(moons->labels, 3);
  ASSERT_TRUE(constraints.ok());
  kls::UploadOptions upload;
  upload.name = "moons";
  auto uploaded = embedded.client->UploadDataset(*moons, *constraints, upload);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  for (int iterations : {20, 40}) {  // two versions of one kernel
    auto job = embedded.client->SubmitJob(LongJob(uploaded->id(), "moons-kernel", iterations));
    ASSERT_TRUE(job.ok()) << job.status();
    auto done = embedded.client->WatchJob(job->id(), [](const kls::v1::Job&) {});
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(done->state(), kls::v1::SUCCEEDED) << done->error();
  }
  ASSERT_TRUE(embedded.client->SetAlias("moons-kernel", "prod", 1).ok());
  kls::v1::KernelRef by_alias;
  by_alias.set_name("moons-kernel");
  by_alias.set_alias("prod");
  const std::vector<kls::v1::KernelRef> refs = {Ref("moons-kernel", 1), Ref("moons-kernel", 2), by_alias};
  std::vector<std::string> before;
  for (const auto& ref : refs) before.push_back(Answers(*embedded.client, ref));
  for (const auto& b : before) ASSERT_EQ(b.find(':') != std::string::npos, true) << b;
  Terminate(&embedded, SIGTERM);

  const std::vector<std::string> migrate = {KLS_SERVER_BINARY, "--migrate-from", data, "--store", pg.uri()};
  for (int run = 0; run < 2; ++run) {
    const fs::path out = scratch / ("migrate" + std::to_string(run) + ".out");
    const pid_t pid = Spawn(migrate, out, scratch / "migrate.err", /*append_err=*/true);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(WaitFor(pid, Scaled(60)), 0) << ReadFile(scratch / "migrate.err");
    const std::string report = ReadFile(out);
    if (run == 0) {
      EXPECT_THAT(report, ::testing::HasSubstr("migrated 1 data sets, 2 kernel versions, 1 aliases, 2 jobs"));
    } else {
      EXPECT_THAT(report, ::testing::HasSubstr("migrated 0 data sets, 0 kernel versions")) << "a re-run copies nothing twice";
    }
  }

  Server replica;
  ASSERT_NO_FATAL_FAILURE(StartProcess(&replica, {"--store", pg.uri(), "--cache-dir", (scratch / "cache").string()},
                                      scratch, "replica"));
  for (size_t i = 0; i < refs.size(); ++i) {
    EXPECT_EQ(Answers(*replica.client, refs[i]), before[i]) << "kernel ref " << refs[i].ShortDebugString();
  }
  auto versions = replica.client->ListKernels("moons-kernel");
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_EQ(versions->size(), 2u);
  auto dataset = replica.client->GetDataset(uploaded->id());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  Terminate(&replica, SIGTERM);
  fs::remove_all(scratch);
}

}  // namespace
