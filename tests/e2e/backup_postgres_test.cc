// End to end: the documented PostgreSQL backup procedure (docs/RELIABILITY.md,
// Backups) with the real binaries: pg_dump -Fc of the database while a
// replica serves it, pg_restore into a new database, `kls-server --check
// --store` on it, and a replica on the restored database answers Datasets.List,
// Kernels.List, Jobs.List, an Export of every kernel and TopK exactly as the
// original.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "tests/e2e/server_process.h"
#include "tests/test_util/postgres_server.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using kls::e2e::AdmmJob;
using kls::e2e::Everything;
using kls::e2e::ReadFile;
using kls::e2e::RunResult;
using kls::e2e::RunServerBinary;
using kls::e2e::Scaled;
using kls::e2e::Server;
using kls::e2e::Spawn;
using kls::e2e::StartServer;
using kls::e2e::UploadMoons;
using kls::e2e::WaitFor;

void Stop(Server* s) { kls::e2e::Terminate(s, SIGTERM); }

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
      StartServer(&original, {"--workers", "1", "--store", pg.uri(), "--cache-dir", (scratch / "cache1").string()}, scratch, "original"));
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
      &copy, {"--workers", "1", "--store", pg.uri("kls_restored"), "--cache-dir", (scratch / "cache2").string()}, scratch, "restored"));
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
