// End to end: the real kls-server and kls binaries as a user runs them.
// Starts kls-server on a free port (--listen 127.0.0.1:0; the chosen address
// is read from the data directory's lock file), waits for `kls health`, checks
// `kls --json info` and `kls --json echo`, then SIGTERM → exit status 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kls-e2e-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = fs::canonical(pattern);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Starts argv with stdout/stderr sent to files; returns the pid.
pid_t Spawn(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Exit status of `pid` if it ends within `timeout`; -1 if still running,
// 128+signal if killed by a signal.
int WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (Clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

class E2eTest : public ::testing::Test {
 protected:
  // Runs a command to completion (30 s cap).
  RunResult Run(const std::vector<std::string>& args) {
    const fs::path out = scratch_.path() / "cmd.out", err = scratch_.path() / "cmd.err";
    const pid_t pid = Spawn(args, out, err);
    EXPECT_GT(pid, 0) << "cannot start " << args[0];
    RunResult result;
    if (pid <= 0) return result;
    result.exit_code = WaitFor(pid, std::chrono::seconds(30));
    if (result.exit_code == -1) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    result.out = ReadFile(out);
    result.err = ReadFile(err);
    return result;
  }

  RunResult Kls(std::vector<std::string> args) {
    args.insert(args.begin(), {KLS_CLI_BINARY, "--target", target_, "--timeout-seconds", "5"});
    return Run(args);
  }

  // Starts kls-server on a free port and waits until `kls health` says SERVING.
  void StartServer() {
    server_pid_ = Spawn({KLS_SERVER_BINARY, "--listen", "127.0.0.1:0", "--data-dir", data_dir_.string(),
                         "--workers", "2"},
                        scratch_.path() / "server.out", server_log_);
    ASSERT_GT(server_pid_, 0);

    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (target_.empty() && Clock::now() < deadline) {
      std::istringstream lock(ReadFile(data_dir_ / "kls-server.lock"));
      for (std::string line; std::getline(lock, line);) {
        if (line.rfind("listen=", 0) == 0) target_ = line.substr(7);
      }
      ASSERT_EQ(WaitFor(server_pid_, std::chrono::milliseconds(0)), -1)
          << "kls-server exited early:\n" << ReadFile(server_log_);
      if (target_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_FALSE(target_.empty()) << "no listen address recorded:\n" << ReadFile(server_log_);

    RunResult health;
    while (Clock::now() < deadline) {
      health = Kls({"health"});
      if (health.exit_code == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(health.exit_code, 0) << health.err << "\nserver log:\n" << ReadFile(server_log_);
    EXPECT_EQ(health.out, "SERVING\n");
  }

  void TearDown() override {
    if (server_pid_ > 0 && WaitFor(server_pid_, std::chrono::milliseconds(0)) == -1) {
      kill(server_pid_, SIGKILL);
      waitpid(server_pid_, nullptr, 0);
    }
  }

  ScratchDir scratch_;
  fs::path data_dir_ = scratch_.path() / "data";
  fs::path server_log_ = scratch_.path() / "server.log";
  pid_t server_pid_ = -1;
  std::string target_;
};

TEST_F(E2eTest, ServesInfoEchoAndHealthThenShutsDownOnSigterm) {
  ASSERT_NO_FATAL_FAILURE(StartServer());

  const RunResult info = Kls({"--json", "info"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const nlohmann::json j = nlohmann::json::parse(info.out);  // exactly one JSON object
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("version"), KLS_EXPECTED_VERSION);
  EXPECT_EQ(j.at("data_dir"), data_dir_.string());
  EXPECT_EQ(j.at("worker_threads"), 2);
  EXPECT_GE(j.at("uptime_seconds").get<double>(), 0.0);
  EXPECT_EQ(j.at("max_message_bytes"), 64 * 1024 * 1024);

  const RunResult echo = Kls({"--json", "echo", "hello", "kernel"});
  ASSERT_EQ(echo.exit_code, 0) << echo.err;
  const nlohmann::json e = nlohmann::json::parse(echo.out);
  EXPECT_EQ(e.at("payload"), "hello kernel");
  EXPECT_EQ(e.at("bytes"), 12);

  const RunResult plain_echo = Kls({"echo", "hi"});
  EXPECT_EQ(plain_echo.exit_code, 0);
  EXPECT_EQ(plain_echo.out, "hi\n");

  const RunResult health_json = Kls({"--json", "health", "--service", "kls.v1.Admin"});
  EXPECT_EQ(health_json.exit_code, 0) << health_json.err;
  EXPECT_EQ(nlohmann::json::parse(health_json.out).at("status"), "SERVING");

  // A second server on the same data directory refuses to start, saying why.
  const RunResult second = Run({KLS_SERVER_BINARY, "--listen", "127.0.0.1:0", "--data-dir", data_dir_.string()});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(second.err, HasSubstr("in use by another kls-server (pid " + std::to_string(server_pid_)));

  ASSERT_EQ(kill(server_pid_, SIGTERM), 0);
  const int exit_code = WaitFor(server_pid_, std::chrono::seconds(20));
  server_pid_ = -1;
  EXPECT_EQ(exit_code, 0) << ReadFile(server_log_);
  EXPECT_THAT(ReadFile(server_log_), HasSubstr("shutting down"));

  // Nothing answers any more: non-zero exit, gRPC status name on stderr, one JSON object on stdout.
  const RunResult after = Kls({"--json", "health"});
  EXPECT_NE(after.exit_code, 0);
  EXPECT_THAT(after.err, ::testing::StartsWith("UNAVAILABLE: "));
  EXPECT_EQ(nlohmann::json::parse(after.out).at("error").at("code"), "UNAVAILABLE");
}

TEST_F(E2eTest, SigintAlsoShutsDownCleanly) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_EQ(kill(server_pid_, SIGINT), 0);
  const int exit_code = WaitFor(server_pid_, std::chrono::seconds(20));
  server_pid_ = -1;
  EXPECT_EQ(exit_code, 0) << ReadFile(server_log_);
}

TEST_F(E2eTest, BadConfigFileNamesTheKeyAndLine) {
  const fs::path config = scratch_.path() / "kls.conf";
  std::ofstream(config) << "# test\nlisten = 127.0.0.1:0\nworkrs = 2\n";
  const RunResult r = Run({KLS_SERVER_BINARY, "--config", config.string(), "--data-dir", data_dir_.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(config.string() + ":3: unknown key 'workrs'"));
  EXPECT_FALSE(fs::exists(data_dir_));
}

TEST_F(E2eTest, DataDirThatIsAFileIsRefused) {
  std::ofstream(data_dir_) << "not a directory";
  const RunResult r = Run({KLS_SERVER_BINARY, "--listen", "127.0.0.1:0", "--data-dir", data_dir_.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("exists but is not a directory"));
}

}  // namespace
