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
#include <signal.h>
#include <sqlite3.h>
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
#include "tests/e2e/server_process.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using kls::e2e::AdmmJob;
using kls::e2e::Everything;
using kls::e2e::KernelAnswers;
using kls::e2e::ReadFile;
using kls::e2e::Ref;
using kls::e2e::RunResult;
using kls::e2e::RunServerBinary;
using kls::e2e::Scaled;
using kls::e2e::Server;
using kls::e2e::Spawn;
using kls::e2e::UploadMoons;
using kls::e2e::WaitFor;

void StartServer(Server* s, const fs::path& data, const fs::path& scratch, const std::string& tag) {
  kls::e2e::StartServer(s, {"--data-dir", data.string(), "--workers", "1"}, scratch, tag);
}
void Stop(Server* s) { kls::e2e::Terminate(s, SIGTERM); }

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
    auto job = original.client->SubmitJob(AdmmJob(ds, "moons-kernel", iterations));
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
    auto job = original.client->SubmitJob(AdmmJob(base, "base-kernel", 30));
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
      if (client.SubmitJob(AdmmJob(ds, "bg-" + std::to_string(i), 10)).ok()) ++submitted;
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
