// Crash safety of the real kls-server: the crash soak of `kls-bench crash`
// (bench/crash_soak.h), shorter. Three clients upload data sets, import and
// delete kernels, set and move aliases, submit and cancel jobs and query,
// while the server is SIGKILLed at random moments (some during the restart's
// recovery) kKills times on one data directory. After every kill
// `kls-server --check` must be clean; after every restart every acknowledged
// write is there (a deleted kernel version stays gone), an in-doubt write is
// either fully applied or not at all, and every kernel answers Similarity /
// TopK exactly as before. At the end (no more kills) every job ends within a
// bounded wait, no job result is stored twice, and after a clean SIGTERM the
// check finds no problems and no leftovers.
//
// All traffic goes to 127.0.0.1; every wait and loop is bounded in time.
#include <gtest/gtest.h>

#include <iostream>

#include "bench/crash_soak.h"
#include "tests/test_util/postgres_server.h"

namespace {

constexpr int kKills = 20;

// Runs the soak with `store_uri` ("" = the embedded store) and checks it.
void RunAndCheck(const std::string& store_uri, int kills) {
  kls::bench::CrashSoakOptions options;
  options.server_binary = KLS_SERVER_BINARY;
  options.kills = kills;
  options.seed = 20261125;
  options.clients = 3;
  options.max_kill_ms = 1000;
  options.final_wait_seconds = 60;
  options.store_uri = store_uri;
  options.log = [](const std::string& line) { std::cout << "crash: " << line << std::endl; };
  auto result = kls::bench::RunCrashSoak(options);
  ASSERT_TRUE(result.ok()) << result.status();
  const kls::bench::CrashSoakResult& r = *result;
  std::cout << r.ToJson().dump() << std::endl;
  std::string problems;
  for (const std::string& p : r.problems) problems += "\n  " + p;
  EXPECT_EQ(r.kills, kills);
  EXPECT_EQ(r.lost_writes, 0) << problems;
  EXPECT_EQ(r.corrupt_artifacts, 0) << problems;
  EXPECT_EQ(r.stuck_jobs, 0) << problems;
  EXPECT_EQ(r.query_mismatches, 0) << problems;
  EXPECT_EQ(r.duplicate_job_kernels, 0) << problems;
  EXPECT_TRUE(r.final_check_clean) << problems;
  EXPECT_TRUE(r.Clean()) << "data directory kept: " << r.work_dir;
  // The soak did what it is for: writes acknowledged, kills inside writes and jobs.
  EXPECT_GT(r.acknowledged_writes, 100);
  EXPECT_GT(r.queries, 100);
  EXPECT_GT(r.jobs_submitted, 5);
  EXPECT_GT(r.kills_during_writes, 0);
  EXPECT_GT(r.kills_during_jobs, 0);
  EXPECT_LT(r.seconds, 180.0);
}

TEST(CrashTest, KillNineDuringMixedTrafficLosesNothing) { RunAndCheck("", kKills); }

// The same soak against the shared PostgreSQL store (a real PostgreSQL on a
// random loopback port): every restart is a new replica that takes over its
// predecessor's jobs when their 2 s leases expire.
TEST(CrashTest, KillNineDuringMixedTrafficLosesNothingOnPostgres) {
  kls::testing::PostgresServer pg;
  ASSERT_TRUE(pg.Init()) << pg.error();
  RunAndCheck(pg.uri(), 10);
}

}  // namespace
