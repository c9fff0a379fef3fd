// End to end: `kls-server --backup DIR --data-dir D` and `kls-server
// --restore DIR --data-dir NEW` with the real binary (server/store/backup.h).
//   * a stopped store: the restored server answers Datasets.List,
//     Kernels.List, Jobs.List, an Export of every kernel and TopK exactly as
//     the original;
//   * a RUNNING server while a client keeps uploading, learning, querying and
//     deleting kernels: the backup is consistent (restore passes the --check
//     integrity check) and every data set, kernel and finished job of the
//     snapshot answers as on the original;
//   * a flipped byte in an artifact or in kls.db is refused by --restore,
//     naming the file; a non-empty restore target and a non-empty backup
//     directory are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/synthetic.h"
#include "tests/e2e/process.h"
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

void StartServer(Server* s, const fs::path& data, const fs::path& scratch, const std::string& tag) {
  s->target = "127.0.0.1:" + std::to_string(FreePort());
  s->log = scratch / (tag + ".log");
  s->pid = Spawn({KLS_SERVER_BINARY, "--listen", s->target, "--data-dir", data.string(), "--workers", "1",
                  "--log-level", "info"},
                 scratch / (tag + ".out"), s->log, /*append_err=*/true);
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

void WaitForIdle(kls::Client& client) {
  const auto deadline = Clock::now() + Scaled(180);
  while (Clock::now() < deadline) {
    kls::v1::ListJobsRequest request;
    request.set_page_size(1000);
    auto jobs = client.ListJobs(request);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    bool busy = false;
    for (const auto& j : jobs->jobs()) busy |= j.state() == kls::v1::QUEUED || j.state() == kls::v1::RUNNING;
    if (!busy) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL() << "jobs still running after 180 s";
}

/// Rewrites `path` with one byte flipped (a new file: a backup's artifacts
/// may be hard links to the data directory's, which must stay intact).
void FlipByte(const fs::path& path, size_t offset) {
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), offset);
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
  fs::remove(path);
  std::ofstream(path, std::ios::binary) << bytes;
}

/// Rows of one query on a backup's kls.db.
std::vector<std::string> Query(const fs::path& db_path, const char* sql) {
  std::vector<std::string> rows;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  while (s && sqlite3_step(s) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < sqlite3_column_count(s); ++c) {
      const unsigned char* t = sqlite3_column_text(s, c);
      row += (c ? "\t" : "") + std::string(t ? reinterpret_cast<const char*>(t) : "");
    }
    rows.push_back(row);
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return rows;
}

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = fs::path(::testing::TempDir()) /
               ("kls-backup-" + std::to_string(getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(scratch_);
    fs::create_directories(scratch_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure()) fs::remove_all(scratch_, ec);
  }
  fs::path scratch_;
};

TEST_F(BackupTest, StoppedStoreRestoresIntoANewDirectoryAndAnswersIdentically) {
  const fs::path data = scratch_ / "data", backup = scratch_ / "backup", restored = scratch_ / "restored";
  Server original;
  ASSERT_NO_FATAL_FAILURE(StartServer(&original, data, scratch_, "original"));
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
  Stop(&original);

  const RunResult b = RunServerBinary({"--backup", backup.string(), "--data-dir", data.string()}, scratch_, "backup");
  ASSERT_EQ(b.rc, 0) << b.out << b.err;
  EXPECT_THAT(b.out, HasSubstr("1 data sets, 2 kernels, 2 jobs; 4 files"));
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(backup / "MANIFEST.json"));
  EXPECT_EQ(manifest["counts"]["kernels"], 2);
  EXPECT_EQ(manifest["files"].size(), 4u);
  EXPECT_EQ(manifest["kls_version"], KLS_EXPECTED_VERSION);

  // A backup into a directory that is not empty is refused.
  const RunResult again = RunServerBinary({"--backup", backup.string(), "--data-dir", data.string()}, scratch_, "again");
  EXPECT_NE(again.rc, 0);
  EXPECT_THAT(again.err, HasSubstr("is not empty"));

  const RunResult r = RunServerBinary({"--restore", backup.string(), "--data-dir", restored.string()}, scratch_, "restore");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ok: 1 data sets, 2 kernels, 2 jobs"));

  Server copy;
  ASSERT_NO_FATAL_FAILURE(StartServer(&copy, restored, scratch_, "restored"));
  EXPECT_EQ(Everything(*copy.client), before);
  kls::v1::KernelRef prod;
  prod.set_name("moons-kernel");
  prod.set_alias("prod");
  auto by_alias = copy.client->GetKernel(prod);
  ASSERT_TRUE(by_alias.ok()) << by_alias.status();
  EXPECT_EQ(by_alias->version(), 1);
  Stop(&copy);

  // A restore into a directory that is not empty is refused.
  const RunResult full = RunServerBinary({"--restore", backup.string(), "--data-dir", restored.string()}, scratch_, "full");
  EXPECT_NE(full.rc, 0);
  EXPECT_THAT(full.err, HasSubstr("is not empty"));

  // The original data directory is intact after all this (hard links).
  const RunResult check = RunServerBinary({"--check", "--data-dir", data.string()}, scratch_, "check");
  EXPECT_EQ(check.rc, 0) << check.out << check.err;
}

TEST_F(BackupTest, AFlippedByteInAnArtifactOrInTheDatabaseIsRefusedNamingTheFile) {
  const fs::path data = scratch_ / "data", backup = scratch_ / "backup";
  {
    Server original;
    ASSERT_NO_FATAL_FAILURE(StartServer(&original, data, scratch_, "original"));
    ASSERT_FALSE(UploadMoons(*original.client, "moons", 100, 5).empty());
    Stop(&original);
  }
  const RunResult b = RunServerBinary({"--backup", backup.string(), "--data-dir", data.string()}, scratch_, "backup");
  ASSERT_EQ(b.rc, 0) << b.out << b.err;
  std::string artifact;
  for (const auto& entry : fs::directory_iterator(backup / "artifacts")) artifact = entry.path().filename().string();
  ASSERT_FALSE(artifact.empty());

  for (const std::string& victim : {"artifacts/" + artifact, std::string("kls.db")}) {
    SCOPED_TRACE(victim);
    const fs::path damaged = scratch_ / ("damaged-" + std::to_string(victim.size()));
    fs::copy(backup, damaged, fs::copy_options::recursive);
    ASSERT_NO_FATAL_FAILURE(FlipByte(damaged / victim, fs::file_size(damaged / victim) / 2));
    const fs::path target = scratch_ / ("target-" + std::to_string(victim.size()));
    const RunResult r = RunServerBinary({"--restore", damaged.string(), "--data-dir", target.string()}, scratch_, "restore");
    EXPECT_NE(r.rc, 0) << r.out;
    EXPECT_THAT(r.err, HasSubstr((damaged / victim).string()));
    EXPECT_THAT(r.err, HasSubstr("damaged"));
    // Nothing was copied into the target (the lock file aside).
    for (const auto& entry : fs::directory_iterator(target)) {
      EXPECT_EQ(entry.path().filename(), "kls-server.lock");
    }
  }
  // The original data directory was not touched by the flips.
  const RunResult check = RunServerBinary({"--check", "--data-dir", data.string()}, scratch_, "check");
  EXPECT_EQ(check.rc, 0) << check.out << check.err;
}

TEST_F(BackupTest, RunningServerBackupWhileAClientUploadsLearnsAndDeletesRestoresConsistently) {
  const fs::path data = scratch_ / "data", backup = scratch_ / "backup", restored = scratch_ / "restored";
  Server original;
  ASSERT_NO_FATAL_FAILURE(StartServer(&original, data, scratch_, "original"));
  const std::string base = UploadMoons(*original.client, "base", 200, 1);
  ASSERT_FALSE(base.empty());
  {
    auto job = original.client->SubmitJob(Job(base, "base-kernel", 30));
    ASSERT_TRUE(job.ok()) << job.status();
    auto done = original.client->WatchJob(job->id(), [](const kls::v1::Job&) {});
    ASSERT_TRUE(done.ok() && done->state() == kls::v1::SUCCEEDED);
  }

  // Traffic: uploads, jobs, queries and deletions of older kernels, from a
  // second client, until the backup is done.
  std::atomic<bool> stop{false};
  std::atomic<int> uploads{0}, submitted{0}, deleted{0}, queries{0};
  std::thread traffic([&] {
    kls::ClientOptions options;
    options.target = original.target;
    options.timeout_seconds = 10;
    kls::Client client(options);
    for (int i = 0; !stop.load(); ++i) {
      const std::string ds = UploadMoons(client, "bg-" + std::to_string(i), 120, 10 + i);
      if (ds.empty()) continue;
      ++uploads;
      if (client.SubmitJob(Job(ds, "bg-" + std::to_string(i), 10)).ok()) ++submitted;
      kls::v1::TopKRequest topk;
      *topk.mutable_kernel() = Ref("base-kernel", 1);
      topk.set_item(i % 200);
      topk.set_k(3);
      if (client.TopK(topk).ok()) ++queries;
      if (i >= 3 && client.DeleteKernel("bg-" + std::to_string(i - 3), 0).ok()) ++deleted;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const RunResult b = RunServerBinary({"--backup", backup.string(), "--data-dir", data.string()}, scratch_, "backup");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  traffic.join();
  ASSERT_EQ(b.rc, 0) << b.out << b.err;
  EXPECT_THAT(b.out, HasSubstr("backup of"));
  EXPECT_GT(uploads.load(), 0);
  EXPECT_GT(submitted.load(), 0);
  ASSERT_NO_FATAL_FAILURE(WaitForIdle(*original.client));

  const RunResult r = RunServerBinary({"--restore", backup.string(), "--data-dir", restored.string()}, scratch_, "restore");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ok: "));
  EXPECT_THAT(r.out, HasSubstr(" 0 problems"));

  // What the snapshot holds, read from the backup's own database.
  const fs::path db = backup / "kls.db";
  const std::vector<std::string> snap_datasets = Query(db, "SELECT id FROM datasets ORDER BY id");
  const std::vector<std::string> snap_kernels = Query(db, "SELECT name, version FROM kernels ORDER BY name, version");
  const std::vector<std::string> snap_done =
      Query(db, "SELECT id FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled') ORDER BY id");
  const nlohmann::json manifest = nlohmann::json::parse(ReadFile(backup / "MANIFEST.json"));
  EXPECT_EQ(manifest["counts"]["datasets"], snap_datasets.size());
  EXPECT_EQ(manifest["counts"]["kernels"], snap_kernels.size());
  EXPECT_GE(snap_datasets.size(), 2u) << "the backup ran before any upload of the traffic";

  Server copy;
  ASSERT_NO_FATAL_FAILURE(StartServer(&copy, restored, scratch_, "restored"));
  // Data sets: exactly the snapshot's, each as the original has it.
  auto restored_datasets = copy.client->ListDatasets();
  ASSERT_TRUE(restored_datasets.ok()) << restored_datasets.status();
  std::vector<std::string> ids;
  for (const auto& d : *restored_datasets) {
    ids.push_back(d.id());
    auto o = original.client->GetDataset(d.id());
    auto c = copy.client->GetDataset(d.id());
    ASSERT_TRUE(o.ok() && c.ok()) << d.id() << ": " << o.status() << " " << c.status();
    EXPECT_EQ(c->ShortDebugString(), o->ShortDebugString());
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, snap_datasets);
  // Kernels: every version of the snapshot is listed and answers (record,
  // export, top-k) as on the original, unless the traffic deleted it there
  // after the snapshot.
  auto restored_kernels = copy.client->ListKernels();
  ASSERT_TRUE(restored_kernels.ok()) << restored_kernels.status();
  std::set<std::string> listed;
  for (const auto& k : *restored_kernels) listed.insert(k.name() + "\t" + std::to_string(k.version()));
  int compared = 0;
  for (const std::string& row : snap_kernels) {
    EXPECT_TRUE(listed.count(row)) << row << " is in the backup but not listed by the restored server";
    const std::string name = row.substr(0, row.find('\t'));
    const int64_t version = std::stoll(row.substr(row.find('\t') + 1));
    if (!original.client->GetKernel(Ref(name, version)).ok()) continue;  // deleted after the snapshot
    EXPECT_EQ(KernelAnswers(*copy.client, Ref(name, version)), KernelAnswers(*original.client, Ref(name, version)))
        << row;
    ++compared;
  }
  EXPECT_GE(compared, 1);
  EXPECT_TRUE(listed.count("base-kernel\t1"));
  // Jobs finished in the snapshot are as on the original.
  for (const std::string& id : snap_done) {
    auto c = copy.client->GetJob(id);
    auto o = original.client->GetJob(id);
    ASSERT_TRUE(c.ok() && o.ok()) << id;
    EXPECT_EQ(c->state(), o->state()) << id;
    EXPECT_EQ(c->kernel_name(), o->kernel_name()) << id;
    EXPECT_EQ(c->kernel_version(), o->kernel_version()) << id;
  }
  std::printf("traffic during the backup: %d uploads, %d jobs, %d queries, %d deletions; %s", uploads.load(),
              submitted.load(), queries.load(), deleted.load(), b.out.c_str());
  Stop(&copy);
  Stop(&original);
}

}  // namespace
