// Issue 40, "resume after kill -9 between candidates without redoing the
// finished ones", on the real kls-server binary (embedded store): a `method
// auto` job is submitted through the client; once its checkpoint holds at
// least one finished candidate and the next candidate has started, the server
// is killed with SIGKILL and restarted on the same data directory. The job
// succeeds in its second attempt, and
//   - the server's log (both lives, one file) shows one "auto: candidate K
//     started" line for every candidate finished before the kill, and at most
//     two (the one running at the kill) for the others;
//   - the leaderboard marks "restored":true exactly the candidates of the last
//     checkpoint before the kill that the screening left out or scored on all
//     folds (the first, the budget's reference) (the leaders
//     among them got their other folds after the restart), with every
//     candidate scored — on all folds, or screened out on fold 0
//     (core/npkl/auto_select.h). The log's start lines are the screening's
//     (a leader's other folds log "auto: leader K continues …").
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "kls/v1/families/auto.pb.h"
#include "tests/e2e/server_process.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace kls::e2e;

// "auto: candidate K started" lines of the log, counted per candidate key.
std::map<std::string, int> Starts(const std::string& log) {
  std::map<std::string, int> starts;
  static const std::regex line("auto: candidate ([A-Za-z0-9_/]+@[a-z]+) started");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
    ++starts[(*it)[1].str()];
  }
  return starts;
}

// The highest iteration of the job's "checkpoint at iteration N" log lines
// (the number of finished candidates the store holds); 0 when none.
int LastCheckpoint(const std::string& log, const std::string& job) {
  const std::regex line("job " + job + ": checkpoint at iteration ([0-9]+)");
  int last = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
    last = std::max(last, std::stoi((*it)[1].str()));
  }
  return last;
}

TEST(AutoKillE2e, KillNineBetweenCandidatesThenRestartDoesNotRedoTheFinishedOnes) {
  const auto started = Clock::now();
  const fs::path scratch = fs::path(::testing::TempDir()) / ("kls-auto-kill-" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const std::vector<std::string> args = {"--data-dir", (scratch / "data").string(), "--workers", "1"};
  Server server;
  ASSERT_NO_FATAL_FAILURE(StartServer(&server, args, scratch, "server", 30));
  const std::string dataset = UploadMoons(*server.client, "moons", 300, 3);
  ASSERT_FALSE(dataset.empty());

  // Six candidates on raw features, no budget: every one is scored, each in
  // tenths of a second to seconds — the kill comes right after the first
  // checkpoint, so the job cannot have finished by then.
  kls::v1::AutoOptions o;
  for (const char* c : {"kl_admm", "linear", "bcd_npkl/square", "rbf", "diffusion", "simple_npkl/square"}) {
    o.add_candidates(c);
  }
  o.set_max_seconds(0);
  o.set_num_threads(1);
  kls::v1::SubmitJobRequest submit;
  submit.set_dataset_id(dataset);
  submit.set_kernel_name("auto-killed");
  submit.set_scaling(kls::v1::SubmitJobRequest::NONE);
  submit.mutable_family_options()->PackFrom(o);
  auto job = server.client->SubmitJob(submit);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = job->id();

  // Wait until a candidate's entry is in the store (its checkpoint line) and
  // the next candidate has started (its start line after it).
  int checkpointed = 0;
  const auto kill_by = Clock::now() + Scaled(60);
  while (true) {
    const std::string log = ReadFile(server.log);
    ASSERT_EQ(log.find("job " + id + ": succeeded"), std::string::npos) << "finished before the kill:\n" << log;
    checkpointed = LastCheckpoint(log, id);
    int started_candidates = 0;
    for (const auto& [key, n] : Starts(log)) started_candidates += n;
    if (checkpointed >= 1 && started_candidates > checkpointed) break;
    ASSERT_LT(Clock::now(), kill_by) << "no finished candidate within 60 s:\n" << log;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Terminate(&server, SIGKILL);
  const std::string before = ReadFile(server.log);
  ASSERT_EQ(before.find("job " + id + ": succeeded"), std::string::npos) << "finished before the kill";
  const std::map<std::string, int> starts_before = Starts(before);

  ASSERT_NO_FATAL_FAILURE(StartServer(&server, args, scratch, "server", 30));
  kls::v1::Job done;
  const auto finish_by = Clock::now() + Scaled(120);
  while (true) {
    auto j = server.client->GetJob(id);
    ASSERT_TRUE(j.ok()) << j.status();
    done = *j;
    if (done.state() != kls::v1::RUNNING && done.state() != kls::v1::QUEUED) break;
    ASSERT_LT(Clock::now(), finish_by) << "the resumed job did not end within 120 s:\n" << ReadFile(server.log);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string log = ReadFile(server.log);
  ASSERT_EQ(done.state(), kls::v1::SUCCEEDED) << done.error() << "\n" << log;
  EXPECT_EQ(done.attempts(), 2);
  // The checkpoint resumed from: the last one before the kill (one written
  // between the poll and the kill, or whose log line the kill cut off, counts).
  std::smatch resumed;
  ASSERT_TRUE(std::regex_search(log, resumed,
                                std::regex("job " + id + ": resuming from the checkpoint at iteration ([0-9]+)")))
      << log;
  EXPECT_GE(std::stoi(resumed[1].str()), std::max(checkpointed, LastCheckpoint(before, id)));
  checkpointed = std::stoi(resumed[1].str());
  ASSERT_LT(checkpointed, 6) << "every candidate was finished before the kill";

  // The leaderboard: every candidate scored or screened; the first
  // `checkpointed` ones (in evaluation order) screened before the kill, and
  // of those the screened-out ones restored whole, the others not.
  const nlohmann::json summary = nlohmann::json::parse(done.summary_json(), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << done.summary_json();
  const nlohmann::json& candidates = summary.at("auto").at("candidates");
  ASSERT_EQ(candidates.size(), 6u) << summary.dump();
  int restored = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const nlohmann::json& c = candidates[i];
    const std::string key = c.value("name", "") + "@" + c.value("scaling", "");
    const std::string status = c.value("status", "");
    EXPECT_TRUE(status == "scored" || status == "screened") << key << ": " << status;
    // The first candidate, the budget's reference, is scored on all folds in the screening.
    EXPECT_EQ(c.value("restored", false), static_cast<int>(i) < checkpointed && (i == 0 || status == "screened"))
        << key << ": " << summary.dump();
    restored += c.value("restored", false) ? 1 : 0;
  }
  EXPECT_LE(restored, checkpointed);

  // The log of both lives: a finished candidate started once, in the first
  // life; the one running at the kill twice; the rest once, in the second.
  const std::map<std::string, int> starts = Starts(log);
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string key = candidates[i].value("name", "") + "@" + candidates[i].value("scaling", "");
    const auto it = starts.find(key);
    const int total = it == starts.end() ? 0 : it->second;
    const auto b = starts_before.find(key);
    const int first_life = b == starts_before.end() ? 0 : b->second;
    if (static_cast<int>(i) < checkpointed) {
      EXPECT_EQ(total, 1) << key << " was finished before the kill and ran again:\n" << log;
      EXPECT_EQ(first_life, 1) << key;
    } else {
      EXPECT_EQ(total - first_life, 1) << key << " did not run exactly once after the restart:\n" << log;
      EXPECT_LE(first_life, 1) << key;
    }
  }
  Terminate(&server, SIGTERM);
  std::printf("killed after %d of 6 candidates; %.1f s in all\n", checkpointed,
              std::chrono::duration<double>(Clock::now() - started).count());
  fs::remove_all(scratch);
}

}  // namespace
