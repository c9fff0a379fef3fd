// Crash safety of the real kls-server: SIGKILL at random moments while
// clients import kernels, upload data sets and learning jobs run, at least
// kKills times on one data directory. After every kill:
//   - `kls-server --check --data-dir DIR` (SQLite integrity_check, every
//     artifact's CRC-32 and shape) exits 0 on what the crash left;
// and after every restart:
//   - every import and upload that returned OK before the kill is there, and
//     every kernel — imported or learned by a job that was seen succeeded —
//     exports bit for bit what it did before and answers Similarity / TopK
//     identically;
//   - every job that Submit acknowledged still exists, has been started at most
//     max_attempts (2, set on the command line) times, and a failed job
//     carries its reason.
// At the end (no more kills) every job reaches a terminal state within a
// bounded wait, nothing is queued or running, every succeeded job has exactly
// one kernel version (a job is never stored twice), and a final check after a
// clean SIGTERM finds no leftovers at all.
//
// All traffic goes to 127.0.0.1; every wait and loop is bounded in time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/synthetic.h"
#include "core/model/learned_kernel.h"
#include "tests/e2e/process.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using kls::e2e::ReadFile;
using kls::e2e::Spawn;
using kls::e2e::WaitFor;

constexpr int kKills = 22;
constexpr int kImportN = 400;
constexpr int kImportDim = 16;

// The embedding of import number `seed`, regenerated on demand to compare.
kls::LearnedKernel::Embedding ImportEmbedding(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  kls::LearnedKernel::Embedding v(kImportN, kImportDim);
  for (Eigen::Index t = 0; t < v.size(); ++t) v.data()[t] = normal(rng);
  return v;
}

kls::v1::KernelRef Ref(const std::string& name, int64_t version) {
  kls::v1::KernelRef r;
  r.set_name(name);
  r.set_version(version);
  return r;
}

// What a kernel answered when first seen: compared after every restart.
struct KernelSnapshot {
  kls::LearnedKernel::Embedding embedding;
  std::vector<double> similarity;       // for kPairs
  std::vector<int> topk_index;          // TopK(item 3, k 5)
  std::vector<double> topk_score;
};

const std::vector<std::pair<int, int>> kPairs = {{0, 1}, {2, 2}, {5, 9}, {7, 3}};

kls::StatusOr<KernelSnapshot> Snapshot(kls::Client& client, const std::string& name, int64_t version) {
  KernelSnapshot s;
  KLS_ASSIGN_OR_RETURN(kls::ExportedKernel exported, client.ExportKernel(Ref(name, version)));
  s.embedding = std::move(exported.embedding);
  KLS_ASSIGN_OR_RETURN(s.similarity, client.Similarity(Ref(name, version), kPairs));
  kls::v1::TopKRequest topk;
  *topk.mutable_kernel() = Ref(name, version);
  topk.set_item(3);
  topk.set_k(5);
  topk.set_exclude_self(true);
  KLS_ASSIGN_OR_RETURN(kls::v1::TopKResponse response, client.TopK(topk));
  for (const auto& item : response.items()) {
    s.topk_index.push_back(item.index());
    s.topk_score.push_back(item.score());
  }
  return s;
}

bool SameBits(const kls::LearnedKernel::Embedding& a, const kls::LearnedKernel::Embedding& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.size())) == 0;
}

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kls-crash-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    scratch_ = fs::canonical(pattern);
    data_dir_ = scratch_ / "data";
    server_log_ = scratch_ / "server.log";
  }
  void TearDown() override {
    if (server_pid_ > 0 && WaitFor(server_pid_, std::chrono::milliseconds(0)) == -1) {
      kill(server_pid_, SIGKILL);
      waitpid(server_pid_, nullptr, 0);
    }
    std::error_code ignored;
    if (!HasFailure()) fs::remove_all(scratch_, ignored);  // kept for a post-mortem otherwise
  }

  // Starts kls-server on a free port; waits (≤ 30 s) until it is SERVING.
  void StartServer() {
    std::error_code ignored;
    fs::remove(data_dir_ / "kls-server.lock", ignored);  // the new address must not be confused with the old
    server_pid_ = Spawn({KLS_SERVER_BINARY, "--listen", "127.0.0.1:0", "--data-dir", data_dir_.string(), "--workers",
                         "2", "--log-level", "info",
                         // No checkpoints: every interruption here is one the
                         // solver made no progress past, so it counts (the
                         // resume path has its own tests).
                         "--max-attempts", "2", "--checkpoint-seconds", "86400"},
                        scratch_ / "server.out", server_log_, /*append_err=*/true);
    ASSERT_GT(server_pid_, 0);
    std::string target;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (target.empty() && Clock::now() < deadline) {
      std::istringstream lock(ReadFile(data_dir_ / "kls-server.lock"));
      for (std::string line; std::getline(lock, line);) {
        if (line.rfind("listen=", 0) == 0) target = line.substr(7);
      }
      ASSERT_EQ(WaitFor(server_pid_, std::chrono::milliseconds(0)), -1) << "kls-server exited:\n" << Log();
      if (target.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_FALSE(target.empty()) << Log();
    ASSERT_THAT(target, ::testing::StartsWith("127.0.0.1:"));
    kls::ClientOptions options;
    options.target = target;
    options.timeout_seconds = 5;
    client_ = std::make_unique<kls::Client>(options);
    while (Clock::now() < deadline) {
      auto health = client_->CheckHealth();
      if (health.ok() && *health == kls::ServingStatus::kServing) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "kls-server not SERVING within 30 s:\n" << Log();
  }

  void KillServer() {
    ASSERT_EQ(kill(server_pid_, SIGKILL), 0);
    EXPECT_EQ(WaitFor(server_pid_, std::chrono::seconds(10)), 128 + SIGKILL);
    server_pid_ = -1;
  }

  // `kls-server --check`; returns its exit status and stdout.
  std::pair<int, std::string> Check() {
    const fs::path out = scratch_ / "check.out";
    const pid_t pid = Spawn({KLS_SERVER_BINARY, "--check", "--data-dir", data_dir_.string()}, out,
                            scratch_ / "check.err", false);
    EXPECT_GT(pid, 0);
    int code = WaitFor(pid, std::chrono::seconds(30));
    if (code == -1) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    return {code, ReadFile(out) + ReadFile(scratch_ / "check.err")};
  }

  std::string Log() const {
    const std::string log = ReadFile(server_log_);
    return log.size() > 6000 ? "..." + log.substr(log.size() - 6000) : log;
  }

  // Everything the clients were told is durable, checked after a restart.
  void VerifyDurable() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, seed] : imports_) {
      auto exported = client_->ExportKernel(Ref(name, 1));
      ASSERT_TRUE(exported.ok()) << "imported kernel " << name << " lost: " << exported.status();
      EXPECT_TRUE(SameBits(exported->embedding, ImportEmbedding(seed))) << name;
    }
    for (const auto& [key, snapshot] : kernels_) {
      auto now = Snapshot(*client_, key.first, key.second);
      ASSERT_TRUE(now.ok()) << "kernel " << key.first << " v" << key.second << ": " << now.status();
      EXPECT_TRUE(SameBits(now->embedding, snapshot.embedding)) << key.first;
      EXPECT_EQ(now->similarity, snapshot.similarity) << key.first;
      EXPECT_EQ(now->topk_index, snapshot.topk_index) << key.first;
      EXPECT_EQ(now->topk_score, snapshot.topk_score) << key.first;
    }
    for (const std::string& id : datasets_) {
      auto d = client_->GetDataset(id);
      ASSERT_TRUE(d.ok()) << "data set " << id << " lost: " << d.status();
    }
    for (const std::string& id : jobs_) {
      auto job = client_->GetJob(id);
      ASSERT_TRUE(job.ok()) << "job " << id << " lost: " << job.status();
      EXPECT_LE(job->attempts(), 2) << id;
      if (job->state() == kls::v1::FAILED) {
        EXPECT_FALSE(job->error().empty()) << id;
      }
    }
  }

  // Remembers every newly succeeded job's kernel (under mu_ by the caller).
  void SnapshotSucceededJobs(kls::Client& client) {
    std::vector<std::string> ids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ids.assign(jobs_.begin(), jobs_.end());
    }
    for (const std::string& id : ids) {
      auto job = client.GetJob(id);
      if (!job.ok() || job->state() != kls::v1::SUCCEEDED) continue;
      const std::pair<std::string, int64_t> key{job->kernel_name(), job->kernel_version()};
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (kernels_.count(key)) continue;
      }
      auto snapshot = Snapshot(client, key.first, key.second);
      if (!snapshot.ok()) continue;  // the kill may interrupt it; the next round retries
      std::lock_guard<std::mutex> lock(mu_);
      kernels_.emplace(key, std::move(snapshot).value());
    }
  }

  fs::path scratch_, data_dir_, server_log_;
  pid_t server_pid_ = -1;
  std::unique_ptr<kls::Client> client_;

  std::mutex mu_;
  std::map<std::string, uint64_t> imports_;                              // name → seed (OK'd imports)
  std::map<std::pair<std::string, int64_t>, KernelSnapshot> kernels_;  // learned kernels seen succeeded
  std::set<std::string> datasets_;                                       // OK'd uploads
  std::set<std::string> jobs_;                                           // OK'd submissions
  std::string long_job_;
};

TEST_F(CrashTest, KillNineDuringUploadsAndJobsLosesNothing) {
  const auto test_start = Clock::now();
  std::mt19937_64 rng(20261122);

  // The data set every job learns on: two moons with the KL-ADMM protocol.
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto moons = kls::MakeTwoMoons(200, 0.05, 1);
  ASSERT_TRUE(moons.ok());
  auto constraints = kls::GenerateAdmmProtocol(moons->labels, 1);
  ASSERT_TRUE(constraints.ok());
  kls::UploadOptions upload;
  upload.name = "moons";
  auto base = client_->UploadDataset(*moons, *constraints, upload);
  ASSERT_TRUE(base.ok()) << base.status();
  datasets_.insert(base->id());

  int kills_during_jobs = 0, kills_during_imports = 0, leftovers_seen = 0;
  uint64_t next_seed = 1;
  for (int round = 0; round < kKills; ++round) {
    if (round > 0) {
      ASSERT_NO_FATAL_FAILURE(StartServer());
      ASSERT_NO_FATAL_FAILURE(VerifyDurable()) << "after kill " << round << "\n" << Log();
    }
    if (round == 0) {
      // One long, high-priority job: running at the first two kills, so the
      // restart path must re-queue it once and then fail it with the reason.
      kls::v1::SubmitJobRequest submit;
      submit.set_dataset_id(base->id());
      submit.set_kernel_name("long-job-kernel");
      submit.set_priority(10);
      submit.set_deadline_seconds(60);
      submit.mutable_kl_admm()->set_max_iterations(100000000);
      submit.mutable_kl_admm()->set_tolerance(0);
      submit.mutable_kl_admm()->set_num_threads(1);
      auto job = client_->SubmitJob(submit);
      ASSERT_TRUE(job.ok()) << job.status();
      long_job_ = job->id();
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.insert(job->id());
    }
    // Two jobs per round, each a KL-ADMM run that stops at its 0.4 s deadline
    // (tolerance 0), so kills land inside solvers and their stores.
    for (int j = 0; j < 2; ++j) {
      kls::v1::SubmitJobRequest submit;
      submit.set_dataset_id(base->id());
      submit.set_kernel_name("job-kernel-" + std::to_string(round) + "-" + std::to_string(j));
      submit.set_deadline_seconds(0.4);
      submit.mutable_kl_admm()->set_max_iterations(1000000);
      submit.mutable_kl_admm()->set_tolerance(0);
      submit.mutable_kl_admm()->set_num_threads(1);
      auto job = client_->SubmitJob(submit);
      ASSERT_TRUE(job.ok()) << job.status();
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.insert(job->id());
    }

    // Clients: imports and data-set uploads back to back; a poller that
    // snapshots newly succeeded jobs. All stop when the server dies.
    std::atomic<bool> stop{false};
    std::atomic<int> importing{0};
    std::thread importer([&, seed0 = next_seed] {
      uint64_t seed = seed0;
      for (int t = 0; !stop && t < 200; ++t, ++seed) {
        if (t % 4 == 3) {  // every fourth: a data-set upload
          auto d = kls::MakeTwoMoons(300, 0.1, seed);
          kls::UploadOptions o;
          o.name = "upload-" + std::to_string(seed);
          importing = 1;
          auto info = client_->UploadDataset(*d, kls::PairwiseConstraints{}, o);
          importing = 0;
          if (info.ok()) {
            std::lock_guard<std::mutex> lock(mu_);
            datasets_.insert(info->id());
          }
          continue;
        }
        const std::string name = "imported-" + std::to_string(seed);
        importing = 1;
        auto info = client_->ImportKernel(name, ImportEmbedding(seed));
        importing = 0;
        if (info.ok()) {
          EXPECT_EQ(info->version(), 1);
          std::lock_guard<std::mutex> lock(mu_);
          imports_[name] = seed;
        }
      }
    });
    next_seed += 1000;
    std::thread poller([&] {
      while (!stop) {
        SnapshotSucceededJobs(*client_);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });

    // A random moment inside the activity.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 900)(rng)));
    kills_during_imports += importing.load();
    {
      // A job counts as interrupted if some job was running at the kill.
      kls::v1::ListJobsRequest list;
      list.set_state(kls::v1::RUNNING);
      auto r = client_->ListJobs(list);
      kills_during_jobs += r.ok() && r->jobs_size() > 0;
    }
    ASSERT_NO_FATAL_FAILURE(KillServer());
    stop = true;
    importer.join();
    poller.join();

    const auto [code, report] = Check();
    ASSERT_EQ(code, 0) << "integrity check after kill " << round + 1 << ":\n" << report;
    for (size_t at = report.find("leftover ("); at != std::string::npos; at = report.find("leftover (", at + 1)) {
      ++leftovers_seen;
    }
  }

  // No more kills: every job must finish (bounded wait), nothing stays queued or running.
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_NO_FATAL_FAILURE(VerifyDurable()) << Log();
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  std::map<std::string, kls::v1::Job> final_jobs;
  while (Clock::now() < deadline) {
    final_jobs.clear();
    for (const std::string& id : jobs_) {
      auto job = client_->GetJob(id);
      ASSERT_TRUE(job.ok()) << job.status();
      final_jobs[id] = *job;
    }
    const bool done = std::all_of(final_jobs.begin(), final_jobs.end(), [](const auto& e) {
      return e.second.state() == kls::v1::SUCCEEDED || e.second.state() == kls::v1::FAILED ||
             e.second.state() == kls::v1::CANCELLED;
    });
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int succeeded = 0, failed = 0, requeued = 0;
  for (const auto& [id, job] : final_jobs) {
    ASSERT_TRUE(job.state() == kls::v1::SUCCEEDED || job.state() == kls::v1::FAILED)
        << "job " << id << " stuck in state " << job.state() << "\n" << Log();
    EXPECT_LE(job.attempts(), 2);
    requeued += job.attempts() > 1;
    if (job.state() == kls::v1::FAILED) {
      ++failed;
      EXPECT_THAT(job.error(), HasSubstr("interrupted 2 times with no checkpoint progress")) << id;
      continue;
    }
    ++succeeded;
    // Exactly one stored version per job: recovery never stores a job twice.
    auto versions = client_->ListKernels(job.kernel_name());
    ASSERT_TRUE(versions.ok());
    int mine = 0;
    for (const auto& k : *versions) mine += k.job_id() == id;
    EXPECT_EQ(mine, 1) << "job " << id << " stored " << mine << " kernels";
    EXPECT_EQ(job.kernel_version(), 1);
  }
  ASSERT_EQ(final_jobs.count(long_job_), 1u);
  EXPECT_EQ(final_jobs[long_job_].state(), kls::v1::FAILED);
  EXPECT_EQ(final_jobs[long_job_].attempts(), 2);
  SnapshotSucceededJobs(*client_);
  const std::string log = ReadFile(server_log_);
  int finished_at_recovery = 0;
  for (size_t at = log.find("was stored before the server stopped"); at != std::string::npos;
       at = log.find("was stored before the server stopped", at + 1)) {
    ++finished_at_recovery;
  }

  // Clean stop; nothing left over now.
  ASSERT_EQ(kill(server_pid_, SIGTERM), 0);
  EXPECT_EQ(WaitFor(server_pid_, std::chrono::seconds(30)), 0) << Log();
  server_pid_ = -1;
  const auto [code, report] = Check();
  EXPECT_EQ(code, 0) << report;
  EXPECT_THAT(report, HasSubstr("0 problems, 0 leftovers")) << report;

  const double seconds = std::chrono::duration<double>(Clock::now() - test_start).count();
  std::cout << "crash test: " << kKills << " kills (" << kills_during_jobs << " with a job running, "
            << kills_during_imports << " inside an import/upload call), " << leftovers_seen
            << " crash-leftover files reported by --check; " << finished_at_recovery
            << " jobs found finished (kernel stored) at recovery; " << imports_.size() << " imports, " << datasets_.size()
            << " data sets, " << jobs_.size() << " jobs (" << succeeded << " succeeded, " << failed
            << " failed after two interrupted attempts, " << requeued << " re-queued at least once), "
            << kernels_.size() << " learned kernels compared after every restart; " << seconds << " s\n";
  EXPECT_LT(seconds, 180.0);
}

}  // namespace
