// kls-server --migrate-only (issue 38, item 4) on the real binary:
//   * PostgreSQL: a new database gets the schema; a database at the previous
//     schema version (5's table and 4's columns dropped, version set back to 3) with data
//     in it is upgraded in place by two migrators started together — one
//     migrates, the other waits on the advisory lock and finds it current —
//     and a server on it then answers exactly as before;
//   * expand/contract: a running replica stays ready, answers and runs a job
//     while the next release's migration (version 6: new columns on its
//     tables, a new table, an index, under the schema lock) runs and after
//     it, a new one starts on it; two
//     versions newer makes it not-ready; a much newer one is refused;
//   * the embedded store: migrated with its data directory's lock, refused
//     while a server runs on it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "tests/e2e/server_process.h"
#include "tests/test_util/postgres_server.h"

namespace kls::e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class MigrateOnlyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = fs::temp_directory_path() / ("kls-migrate-" + std::to_string(getpid()));
    fs::remove_all(scratch_);
    fs::create_directories(scratch_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(scratch_);
  }
  fs::path scratch_;
};

TEST_F(MigrateOnlyTest, PostgresAtThePreviousSchemaIsUpgradedInPlaceOnce) {
  kls::testing::PostgresServer pg;
  ASSERT_TRUE(pg.Init()) << pg.error();

  RunResult r = RunServerBinary({"--migrate-only", "--store", pg.uri()}, scratch_, "create");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("schema created at version 5"));
  r = RunServerBinary({"--migrate-only", "--store", pg.uri()}, scratch_, "again");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("schema already at version 5: nothing to migrate"));

  // Data written at the current schema, then the database put back to the
  // one two versions back (version 3: the jobs table without version 4's
  // columns, no replica registry of version 5): both steps run.
  std::string before;
  {
    Server s;
    ASSERT_NO_FATAL_FAILURE(StartServer(&s, {"--workers", "1", "--store", pg.uri(), "--cache-dir",
                                             (scratch_ / "cache1").string()},
                                        scratch_, "first"));
    const std::string ds = UploadMoons(*s.client, "moons", 120, 5);
    ASSERT_FALSE(ds.empty());
    auto job = s.client->SubmitJob(AdmmJob(ds, "moons-kernel", 30));
    ASSERT_TRUE(job.ok()) << job.status();
    auto done = s.client->WatchJob(job->id(), [](const kls::v1::Job&) {});
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(done->state(), kls::v1::SUCCEEDED) << done->error();
    before = Everything(*s.client);
    Terminate(&s);
  }
  ASSERT_TRUE(pg.Psql("kls",
                      "ALTER TABLE jobs DROP COLUMN last_attempt_end, DROP COLUMN lost_attempts, "
                      "DROP COLUMN not_before_ms; DROP TABLE kls_replicas; UPDATE kls_schema SET version = 3;"))
      << pg.error();
  ASSERT_FALSE(pg.Psql("kls", "SELECT lost_attempts FROM jobs")) << "the column is gone";

  // Two migrators at once (e.g. a Job retried while the first still runs):
  // both succeed, exactly one migrates.
  const std::vector<std::string> argv = {KLS_SERVER_BINARY, "--migrate-only", "--store", pg.uri()};
  const pid_t a = Spawn(argv, scratch_ / "a.out", scratch_ / "a.err");
  const pid_t b = Spawn(argv, scratch_ / "b.out", scratch_ / "b.err");
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_EQ(WaitFor(a, Scaled(60)), 0) << ReadFile(scratch_ / "a.err");
  EXPECT_EQ(WaitFor(b, Scaled(60)), 0) << ReadFile(scratch_ / "b.err");
  const std::string outs = ReadFile(scratch_ / "a.out") + ReadFile(scratch_ / "b.out");
  EXPECT_THAT(outs, HasSubstr("schema migrated from version 3 to 5"));
  EXPECT_THAT(outs, HasSubstr("schema already at version 5: nothing to migrate"));
  EXPECT_TRUE(pg.Psql("kls", "SELECT last_attempt_end, lost_attempts, not_before_ms FROM jobs")) << pg.error();
  EXPECT_TRUE(pg.Psql("kls", "SELECT owner, lock_key, registered_at FROM kls_replicas")) << pg.error();

  // A server on the upgraded database answers as before the downgrade.
  Server s;
  ASSERT_NO_FATAL_FAILURE(StartServer(&s, {"--workers", "1", "--store", pg.uri(), "--cache-dir",
                                           (scratch_ / "cache2").string()},
                                      scratch_, "after"));
  EXPECT_EQ(Everything(*s.client), before);

  // Expand/contract: the next release's migration to version 6 — an expand
  // step as the next kls-server would run it: under the schema's advisory
  // lock, in one transaction, new nullable columns on the tables this release
  // reads and writes (jobs, kernels), a new table and an index, holding its
  // locks for 2 s — under a running replica of this release, which keeps
  // answering queries, stays ready throughout (readiness polled every 50 ms)
  // and still runs a job to its end (its INSERTs name their columns, so new
  // columns do not break them); a replica of this release still starts on it;
  // --migrate-only of this release leaves it alone.
  std::atomic<bool> migrated{false};
  std::thread migration([&] {
    migrated = pg.Psql("kls",
                       "BEGIN; SELECT pg_advisory_xact_lock(30237063692641128); "  // kSchemaLockKey
                       "ALTER TABLE jobs ADD COLUMN tenant text; ALTER TABLE kernels ADD COLUMN labels text; "
                       "CREATE TABLE kernel_labels (name text NOT NULL, version bigint NOT NULL, label text NOT NULL, "
                       "PRIMARY KEY (name, version, label)); CREATE INDEX jobs_tenant ON jobs (tenant); "
                       "UPDATE kls_schema SET version = 6; SELECT pg_sleep(2); COMMIT;");
  });
  const auto migration_started = std::chrono::steady_clock::now();
  int pings = 0, answers = 0;
  const std::string moons = [&] {
    auto datasets = s.client->ListDatasets();
    return datasets.ok() && !datasets->empty() ? datasets->front().id() : std::string();
  }();
  ASSERT_FALSE(moons.empty());
  auto during = s.client->SubmitJob(AdmmJob(moons, "during-migration", 30));
  while (std::chrono::steady_clock::now() - migration_started < std::chrono::milliseconds(3500)) {
    auto health = s.client->CheckHealth("kls.v1.Queries");
    ASSERT_TRUE(health.ok()) << health.status();
    ASSERT_EQ(*health, kls::ServingStatus::kServing)
        << "NOT_SERVING during the migration, after " << pings * 50 << " ms";
    ++pings;
    auto sim = s.client->Similarity(Ref("moons-kernel", 1), {{0, 1}, {2, 3}});
    EXPECT_TRUE(sim.ok()) << sim.status();
    answers += sim.ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  migration.join();
  ASSERT_TRUE(migrated) << pg.error();
  EXPECT_GE(answers, 30);
  ASSERT_TRUE(during.ok()) << during.status();
  auto during_done = s.client->WatchJob(during->id(), [](const kls::v1::Job&) {});
  ASSERT_TRUE(during_done.ok()) << during_done.status();
  EXPECT_EQ(during_done->state(), kls::v1::SUCCEEDED) << during_done->error();
  ASSERT_TRUE(pg.Psql("kls", "SELECT tenant FROM jobs; SELECT labels FROM kernels; SELECT * FROM kernel_labels"))
      << pg.error();
  // The job run during the migration is new; everything else is as before.
  ASSERT_TRUE(s.client->DeleteKernel("during-migration", 1).ok());
  const auto without_its_job = [](std::string all) {
    const size_t job_line = all.find(" during-migration v");
    if (job_line != std::string::npos) {
      const size_t start = all.rfind('\n', job_line) + 1, end = all.find('\n', job_line);
      all.erase(start, end - start + 1);
    }
    return all;
  };
  EXPECT_EQ(without_its_job(Everything(*s.client)), before);
  {
    Server next;
    ASSERT_NO_FATAL_FAILURE(StartServer(&next, {"--workers", "1", "--store", pg.uri(), "--cache-dir",
                                                (scratch_ / "cache3").string()},
                                        scratch_, "on-v6"));
    EXPECT_EQ(without_its_job(Everything(*next.client)), before);
    Terminate(&next);
  }
  r = RunServerBinary({"--migrate-only", "--store", pg.uri()}, scratch_, "v6");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("schema already at version 6, one newer than this kls-server's 5"));
  // Two versions newer (the previous release's leftovers may be contracted):
  // the replica goes not-ready, without exiting.
  ASSERT_TRUE(pg.Psql("kls", "UPDATE kls_schema SET version = 7")) << pg.error();
  bool not_ready = false;
  const auto deadline = std::chrono::steady_clock::now() + Scaled(10);
  while (!not_ready && std::chrono::steady_clock::now() < deadline) {
    auto health = s.client->CheckHealth("kls.v1.Queries");
    not_ready = health.ok() && *health == kls::ServingStatus::kNotServing;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(not_ready) << "a replica on a schema two versions newer must go not-ready";
  Terminate(&s);

  // A schema newer than the binary is refused, naming both versions.
  ASSERT_TRUE(pg.Psql("kls", "UPDATE kls_schema SET version = 99")) << pg.error();
  r = RunServerBinary({"--migrate-only", "--store", pg.uri()}, scratch_, "newer");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("database schema version 99 is newer than this kls-server supports (5, and serves "
                               "on up to 6)"));
}

TEST_F(MigrateOnlyTest, EmbeddedStoreIsMigratedUnderItsLock) {
  const std::string data = (scratch_ / "data").string();
  RunResult r = RunServerBinary({"--migrate-only", "--data-dir", data}, scratch_, "new");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("is at this build's schema"));
  Server s;
  ASSERT_NO_FATAL_FAILURE(StartServer(&s, {"--workers", "1", "--data-dir", data}, scratch_, "server"));
  r = RunServerBinary({"--migrate-only", "--data-dir", data}, scratch_, "locked");
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("stop the server to migrate it alone"));
  Terminate(&s);
}

}  // namespace
}  // namespace kls::e2e
