// End to end: the real kls-server and kls binaries as a user runs them.
// Starts kls-server on a free port (--listen 127.0.0.1:0; the chosen address
// is read from the data directory's lock file), waits for `kls health`, checks
// `kls --json info` and `kls --json echo`, then SIGTERM → exit status 0.
// The learning workflow (upload → submit --watch → similarity / topk /
// export) is checked against core called directly on the same data, options
// and seed, and again after a SIGTERM + restart on the same data directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/common/solve_control.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/data/synthetic.h"
#include "core/social/community.h"
#include "core/social/community_csv.h"
#include "core/graph/laplacian.h"
#include "core/model/learned_kernel.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/npkl_problem.h"
#include "tests/e2e/process.h"
#include "tests/test_util/time_scale.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using kls::e2e::ReadFile;
using kls::e2e::Spawn;
using kls::e2e::WaitFor;

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

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

class E2eTest : public ::testing::Test {
 protected:
  // Runs a command to completion (30 s cap unless given).
  RunResult Run(const std::vector<std::string>& args, std::chrono::seconds cap = std::chrono::seconds(30)) {
    const fs::path out = scratch_.path() / "cmd.out", err = scratch_.path() / "cmd.err";
    const pid_t pid = Spawn(args, out, err);
    EXPECT_GT(pid, 0) << "cannot start " << args[0];
    RunResult result;
    if (pid <= 0) return result;
    result.exit_code = WaitFor(pid, std::chrono::milliseconds(static_cast<int64_t>(1000.0 * cap.count() * kls::testing::TimeScale())));
    if (result.exit_code == -1) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    result.out = ReadFile(out);
    result.err = ReadFile(err);
    return result;
  }

  // Runs `kls --json ...`, expects exit 0 and exactly one JSON object.
  nlohmann::json KlsJson(std::vector<std::string> args, std::chrono::seconds cap = std::chrono::seconds(30)) {
    args.insert(args.begin(), "--json");
    const RunResult r = Kls(args, cap);
    EXPECT_EQ(r.exit_code, 0) << args[1] << ": " << r.err << "\nserver log:\n" << ReadFile(server_log_);
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << r.out;
    return j;
  }

  RunResult Kls(std::vector<std::string> args, std::chrono::seconds cap = std::chrono::seconds(30)) {
    args.insert(args.begin(), {KLS_CLI_BINARY, "--target", target_, "--timeout-seconds", "5"});
    return Run(args, cap);
  }

  // Starts kls-server on a free port and waits until `kls health` says SERVING.
  void StartServer(const std::vector<std::string>& extra_flags = {}) {
    target_.clear();
    std::error_code ignored;
    fs::remove(data_dir_ / "kls-server.lock", ignored);  // a restart must not read the old address
    std::vector<std::string> args = {KLS_SERVER_BINARY, "--listen", "127.0.0.1:0", "--data-dir", data_dir_.string(),
                                     "--workers", "2"};
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    server_pid_ = Spawn(args, scratch_.path() / "server.out", server_log_);
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

// KL-ADMM on iris exactly as `kls upload --protocol admm --seed 1` and
// `kls submit --method kl_admm --gamma 10` ask for it, computed by core in
// this process: the server's defaults for KL-ADMM are a 5-NN Gaussian graph
// with automatic σ and δ = 0, one thread (deterministic for a seed).
kls::LearnedKernel SolveIrisWithCore() {
  auto iris = kls::ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(iris.ok()) << iris.status();
  auto constraints = kls::GenerateAdmmProtocol(iris->labels, /*seed=*/1);
  EXPECT_TRUE(constraints.ok());
  kls::GraphOptions graph;
  graph.k = 5;
  graph.weight = kls::EdgeWeight::kGaussian;
  graph.num_threads = 1;
  auto built = kls::BuildGraph(iris->features, graph);
  EXPECT_TRUE(built.ok()) << built.status();
  kls::NpklProblem problem;
  problem.laplacian = std::move(built->laplacian);
  problem.constraints = *constraints;
  kls::KlAdmmOptions options;
  options.gamma = 10;
  auto result = kls::SolveKlAdmm(problem, options, kls::SolveControl{});
  EXPECT_TRUE(result.ok()) << result.status();
  return result->kernel;
}

TEST_F(E2eTest, UploadLearnQueryAndRestart) {
  ASSERT_NO_FATAL_FAILURE(StartServer());

  const nlohmann::json dataset =
      KlsJson({"upload", std::string(KLS_TEST_DATA_DIR) + "/iris.csv", "--protocol", "admm", "--seed", "1"});
  ASSERT_TRUE(dataset.contains("id")) << dataset;
  EXPECT_EQ(dataset.at("num_points"), 150);
  EXPECT_EQ(dataset.at("dim"), 4);
  EXPECT_EQ(dataset.at("num_classes"), 3);
  const std::string dataset_id = dataset.at("id");

  const nlohmann::json job = KlsJson({"submit", "--dataset", dataset_id, "--kernel", "iris", "--method", "kl_admm",
                                      "--gamma", "10", "--watch"});
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job;
  EXPECT_EQ(job.at("kernel_name"), "iris");
  EXPECT_EQ(job.at("kernel_version"), 1);
  EXPECT_GT(job.at("progress").at("iteration").get<int>(), 0);
  const nlohmann::json got = KlsJson({"get", job.at("id")});
  EXPECT_EQ(got.at("state"), "SUCCEEDED");
  const nlohmann::json listed = KlsJson({"list", "--state", "succeeded", "--dataset", dataset_id});
  ASSERT_EQ(listed.at("jobs").size(), 1u);
  EXPECT_EQ(listed.at("jobs")[0].at("id"), job.at("id"));

  // The learned kernel, downloaded: core reads the CSV back bit for bit.
  const fs::path exported = scratch_.path() / "iris-v.csv";
  const nlohmann::json export_info = KlsJson({"export", "--kernel", "iris:1", "--out", exported.string()});
  EXPECT_EQ(export_info.at("num_points"), 150);
  auto v = kls::ReadCsvFile(exported.string());
  ASSERT_TRUE(v.ok()) << v.status();
  auto served = kls::LearnedKernel::FromEmbedding(v->features);
  ASSERT_TRUE(served.ok()) << served.status();

  // The same problem solved by core in this process.
  const kls::LearnedKernel direct = SolveIrisWithCore();
  ASSERT_EQ(direct.num_points(), 150);
  EXPECT_LT((direct.Dense() - served->Dense()).cwiseAbs().maxCoeff(), 1e-9 * (1 + direct.Dense().cwiseAbs().maxCoeff()));

  const std::vector<std::pair<int, int>> pairs = {{0, 1}, {0, 100}, {50, 51}, {149, 149}, {10, 140}};
  std::string pairs_text;
  for (const auto& [i, j] : pairs) pairs_text += std::to_string(i) + "," + std::to_string(j) + ";";

  // Similarity and top-k answers, checked against both.
  auto check_answers = [&](const std::string& kernel) {
    const nlohmann::json sim = KlsJson({"similarity", "--kernel", kernel, "--pairs", pairs_text});
    ASSERT_EQ(sim.at("pairs").size(), pairs.size()) << sim;
    for (size_t t = 0; t < pairs.size(); ++t) {
      const auto [i, j] = pairs[t];
      const double value = sim.at("pairs")[t].at("value");
      EXPECT_EQ(value, served->value(i, j)) << i << "," << j;
      EXPECT_NEAR(value, direct.value(i, j), 1e-9) << i << "," << j;
    }
    const nlohmann::json top = KlsJson({"topk", "--kernel", kernel, "--item", "7", "--k", "10", "--exclude-self"});
    const std::vector<kls::ScoredItem> expected = served->TopK(7, 10, true);
    const std::vector<kls::ScoredItem> expected_direct = direct.TopK(7, 10, true);
    ASSERT_EQ(top.at("items").size(), expected.size()) << top;
    for (size_t t = 0; t < expected.size(); ++t) {
      EXPECT_EQ(top.at("items")[t].at("index"), expected[t].index) << t;
      EXPECT_EQ(top.at("items")[t].at("score").get<double>(), expected[t].score) << t;
      EXPECT_NEAR(top.at("items")[t].at("score").get<double>(), expected_direct[t].score, 1e-9) << t;
    }
  };
  check_answers("iris");
  check_answers("iris:1");

  // An item by its raw features (§6.3.3 harmonic extension): a training item's own features give its
  // own row, so the ranking equals the item query's (without exclude-self).
  auto iris_rows = kls::ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(iris_rows.ok());
  std::string features;
  for (int j = 0; j < iris_rows->dim(); ++j) {
    std::ostringstream x;
    x << std::setprecision(17) << iris_rows->features(7, j);
    features += (j ? "," : "") + x.str();
  }
  const nlohmann::json by_features = KlsJson({"topk", "--kernel", "iris", "--features", features, "--k", "5"});
  const std::vector<kls::ScoredItem> expected_items = served->TopK(7, 5, false);
  ASSERT_EQ(by_features.at("items").size(), 5u) << by_features;
  for (size_t t = 0; t < 5; ++t) EXPECT_EQ(by_features.at("items")[t].at("index"), expected_items[t].index) << t;
  const RunResult wrong_width = Kls({"topk", "--kernel", "iris", "--features", "1,2"});
  EXPECT_EQ(wrong_width.exit_code, 1);
  EXPECT_THAT(wrong_width.err, HasSubstr("2 features per row but data set"));

  // Plain output is a table; errors are "<CODE>: message" on stderr.
  const RunResult table = Kls({"similarity", "--kernel", "iris", "--pairs", "0,1"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("VALUE"));
  const RunResult missing = Kls({"topk", "--kernel", "nope", "--item", "0"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, ::testing::StartsWith("NOT_FOUND: "));
  const RunResult out_of_range = Kls({"--json", "similarity", "--kernel", "iris", "--pairs", "0,1;3,999"});
  EXPECT_EQ(out_of_range.exit_code, 1);
  EXPECT_THAT(out_of_range.err, HasSubstr("INVALID_ARGUMENT: j[1] = 999 is out of range for a kernel over 150 points"));
  EXPECT_EQ(nlohmann::json::parse(out_of_range.out).at("error").at("code"), "INVALID_ARGUMENT");

  // Restart on the same data directory: the kernel answers identically.
  ASSERT_EQ(kill(server_pid_, SIGTERM), 0);
  ASSERT_EQ(WaitFor(server_pid_, std::chrono::seconds(20)), 0) << ReadFile(server_log_);
  server_pid_ = -1;
  ASSERT_NO_FATAL_FAILURE(StartServer());
  EXPECT_THAT(ReadFile(server_log_), HasSubstr("integrity check passed"));
  check_answers("iris");
  const nlohmann::json after = KlsJson({"get", job.at("id")});
  EXPECT_EQ(after.at("state"), "SUCCEEDED");
  EXPECT_EQ(after.at("kernel_version"), 1);
}

// The large-catalogue path at n = 20,000 (adult-like: 123 binary features,
// the LIBSVM adult stand-in): the CSV uploaded through the CLI, a KL-ADMM job
// that checkpoints, a kill -9 of the server in the middle of the solve, the
// job resumed from its checkpoint after the restart, then a clean restart
// that loads the stored kernel, and similarity / top-k answers equal to the
// exported embedding's before and after. Prints the timings. Under a
// sanitizer (KLS_TEST_TIME_SCALE > 1) the same path runs at n = 5,000: under
// ThreadSanitizer the 20,000-point solve did not finish in 22 minutes.
// The ranking-backend path through the CLI: attributes uploaded with the
// data set and replaced later, a batch of top-k queries with a filter,
// exclusions and the cosine, checked against the exported embedding.
TEST_F(E2eTest, RankingQueriesWithAttributesThroughTheCli) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const fs::path attrs = scratch_.path() / "attrs.csv";
  {
    std::ofstream out(attrs);
    out << "row,colour,petals:int,sold_out\n";
    for (int i = 0; i < 150; ++i) out << i << "," << (i % 3 == 0 ? "red" : "blue") << "," << i % 7 << "," << (i % 4 == 0 ? "true" : "false") << "\n";
  }
  const nlohmann::json dataset = KlsJson({"upload", std::string(KLS_TEST_DATA_DIR) + "/iris.csv", "--name", "shop",
                                          "--protocol", "admm", "--attributes", attrs.string()});
  EXPECT_EQ(dataset.at("attributes"), "colour:string, petals:int, sold_out:bool") << dataset;
  const nlohmann::json job = KlsJson(
      {"submit", "--dataset", "shop", "--kernel", "shop", "--method", "kl_admm", "--gamma", "10", "--watch"}, std::chrono::seconds(120));
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job;
  const fs::path exported = scratch_.path() / "shop-v.csv";
  KlsJson({"export", "--kernel", "shop", "--out", exported.string()});
  auto v = kls::ReadCsvFile(exported.string());
  ASSERT_TRUE(v.ok()) << v.status();
  const Eigen::MatrixXd k = v->features * v->features.transpose();

  const std::string filter = "colour = \"blue\" and petals >= 2 and not sold_out";
  const nlohmann::json batch = KlsJson({"topk", "--kernel", "shop", "--items", "3,40,120", "--k", "6", "--exclude-self",
                                        "--filter", filter, "--exclude", "5,8", "--metric", "cosine"});
  ASSERT_EQ(batch.at("results").size(), 3u) << batch;
  const int queries[] = {3, 40, 120};
  for (int q = 0; q < 3; ++q) {
    const int item = queries[q];
    std::vector<int> allowed;
    for (int j = 0; j < 150; ++j) {
      if (j != item && j != 5 && j != 8 && j % 3 != 0 && j % 7 >= 2 && j % 4 != 0) allowed.push_back(j);
    }
    std::sort(allowed.begin(), allowed.end(), [&](int a, int b) {
      const double ca = k(item, a) / std::sqrt(k(a, a)), cb = k(item, b) / std::sqrt(k(b, b));
      return ca > cb || (ca == cb && a < b);
    });
    const nlohmann::json& items = batch.at("results")[q].at("items");
    ASSERT_EQ(items.size(), 6u) << batch;
    // Scores equal the best six cosines over the passing items (indices may
    // differ only among exact ties: a learned kernel can map points to one direction).
    for (int t = 0; t < 6; ++t) {
      const int j = items[t].at("index");
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), j), allowed.end()) << "query " << item << " returned " << j;
      const double want = k(item, allowed[t]) / std::sqrt(k(item, item) * k(allowed[t], allowed[t]));
      EXPECT_NEAR(items[t].at("score").get<double>(), want, 1e-9) << "query " << item << " rank " << t;
    }
  }
  // A mistake in the filter names its column.
  const RunResult bad = Kls({"topk", "--kernel", "shop", "--item", "0", "--filter", "petals = 'x'"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("INVALID_ARGUMENT: select.filter: column 10"));
  // Replaced without re-learning; `datasets` lists the new columns.
  const fs::path attrs2 = scratch_.path() / "attrs2.csv";
  {
    std::ofstream out(attrs2);
    out << "row,in_stock:bool\n0,true\n1,true\n2,false\n";
  }
  const nlohmann::json replaced = KlsJson({"attributes", "shop", attrs2.string()});
  EXPECT_EQ(replaced.at("attributes_version"), 2) << replaced;
  const RunResult table = Kls({"datasets"});
  EXPECT_THAT(table.out, HasSubstr("in_stock:bool"));
  const nlohmann::json stocked = KlsJson({"topk", "--kernel", "shop", "--item", "9", "--k", "10", "--filter", "in_stock"});
  ASSERT_EQ(stocked.at("items").size(), 2u) << stocked;

  // The kernel and data-set commands a README walk-through needs: alias, embed, delete.
  KlsJson({"alias", "shop", "prod", "1"});
  const nlohmann::json via_alias = KlsJson({"topk", "--kernel", "shop@prod", "--item", "0", "--k", "3"});
  EXPECT_EQ(via_alias.at("items").size(), 3u) << via_alias;
  const nlohmann::json embedded = KlsJson({"embed", "--kernel", "shop", "--rows", "0,7"});
  ASSERT_EQ(embedded.at("rows").size(), 2u) << embedded;
  for (int c = 0; c < v->dim(); ++c) EXPECT_EQ(embedded.at("rows")[1][c].get<double>(), v->features(7, c)) << c;
  KlsJson({"delete-kernel", "shop"});
  EXPECT_TRUE(KlsJson({"kernels"}).at("kernels").empty());
  KlsJson({"delete-dataset", "shop"});
  EXPECT_TRUE(KlsJson({"datasets"}).at("datasets").empty());
  const RunResult gone = Kls({"delete-dataset", "shop"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("NOT_FOUND"));
}

TEST_F(E2eTest, TwentyThousandPointsUploadLearnKillRestartQuery) {
  const int kN = kls::testing::TimeScale() > 1.0 ? 5000 : 20000;
  auto data = kls::MakeAdultLike(kN, 7);
  ASSERT_TRUE(data.ok()) << data.status();
  const fs::path csv = scratch_.path() / "adult20k.csv";
  ASSERT_TRUE(kls::WriteCsvFile(*data, csv.string()).ok());
  const std::vector<std::string> flags = {"--checkpoint-seconds", "1"};
  ASSERT_NO_FATAL_FAILURE(StartServer(flags));

  auto clock = Clock::now();
  auto seconds_since = [&] { return std::chrono::duration<double>(Clock::now() - clock).count(); };
  const nlohmann::json dataset =
      KlsJson({"upload", csv.string(), "--protocol", "admm", "--seed", "1"}, std::chrono::seconds(120));
  const double upload_seconds = seconds_since();
  ASSERT_TRUE(dataset.contains("id")) << dataset;
  EXPECT_EQ(dataset.at("num_points"), kN);
  EXPECT_EQ(dataset.at("dim"), 123);
  const std::string dataset_id = dataset.at("id");

  clock = Clock::now();
  const nlohmann::json submitted =
      KlsJson({"submit", "--dataset", dataset_id, "--kernel", "adult20k", "--method", "kl_admm", "--gamma", "1"});
  const std::string job_id = submitted.at("id");
  // Kill -9 the server once the solve has run for a while (checkpoints every second).
  nlohmann::json running;
  const auto kill_deadline = Clock::now() + std::chrono::seconds(300);
  while (Clock::now() < kill_deadline) {
    running = KlsJson({"get", job_id});
    if (running.at("state") != "QUEUED" && running.at("state") != "RUNNING") break;
    if (running.at("progress").at("elapsed_seconds").get<double>() > 4.0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_EQ(running.at("state"), "RUNNING") << "the job must still be running to be interrupted: " << running;
  const int iteration_at_kill = running.at("progress").at("iteration");
  ASSERT_EQ(kill(server_pid_, SIGKILL), 0);
  ASSERT_EQ(waitpid(server_pid_, nullptr, 0), server_pid_);
  server_pid_ = -1;
  ASSERT_NO_FATAL_FAILURE(StartServer(flags));
  const nlohmann::json job = KlsJson({"watch", job_id}, std::chrono::seconds(600));
  const double job_seconds = seconds_since();
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job;
  EXPECT_GE(job.at("attempts").get<int>(), 2) << job;
  const int resumed_from = job.at("summary").value("resumed_from_iteration", 0);
  EXPECT_GT(resumed_from, 0) << "resumed from a checkpoint, not from the start: " << job;
  EXPECT_LE(resumed_from, iteration_at_kill + 1) << job;
  EXPECT_EQ(job.at("summary").value("termination", ""), "converged") << job;

  // The stored kernel, exported: the reference for every answer below.
  const fs::path exported = scratch_.path() / "adult20k-v.csv";
  const nlohmann::json export_info =
      KlsJson({"export", "--kernel", "adult20k", "--out", exported.string()}, std::chrono::seconds(120));
  EXPECT_EQ(export_info.at("num_points"), kN);
  auto v = kls::ReadCsvFile(exported.string());
  ASSERT_TRUE(v.ok()) << v.status();
  auto served = kls::LearnedKernel::FromEmbedding(v->features);
  ASSERT_TRUE(served.ok()) << served.status();

  const std::vector<std::pair<int, int>> pairs = {
      {0, 1}, {0, kN - 1}, {kN / 4, kN / 4 + 1}, {kN * 5 / 8, kN * 5 / 8}, {77, kN * 3 / 4}};
  std::string pairs_text;
  for (const auto& [i, j] : pairs) pairs_text += std::to_string(i) + "," + std::to_string(j) + ";";
  auto check_answers = [&] {
    const nlohmann::json sim = KlsJson({"similarity", "--kernel", "adult20k", "--pairs", pairs_text});
    ASSERT_EQ(sim.at("pairs").size(), pairs.size()) << sim;
    for (size_t t = 0; t < pairs.size(); ++t) {
      EXPECT_EQ(sim.at("pairs")[t].at("value").get<double>(), served->value(pairs[t].first, pairs[t].second)) << t;
    }
    for (int item : {7, kN * 19 / 20}) {
      const nlohmann::json top =
          KlsJson({"topk", "--kernel", "adult20k", "--item", std::to_string(item), "--k", "10", "--exclude-self"});
      const std::vector<kls::ScoredItem> expected = served->TopK(item, 10, true);
      ASSERT_EQ(top.at("items").size(), expected.size()) << top;
      for (size_t t = 0; t < expected.size(); ++t) {
        EXPECT_EQ(top.at("items")[t].at("index"), expected[t].index) << item << " #" << t;
        EXPECT_EQ(top.at("items")[t].at("score").get<double>(), expected[t].score) << item << " #" << t;
      }
    }
  };
  check_answers();

  // A clean restart: the stored kernel is verified and answers the same.
  ASSERT_EQ(kill(server_pid_, SIGTERM), 0);
  ASSERT_EQ(WaitFor(server_pid_, std::chrono::seconds(30)), 0) << ReadFile(server_log_);
  server_pid_ = -1;
  clock = Clock::now();
  ASSERT_NO_FATAL_FAILURE(StartServer(flags));
  const nlohmann::json first = KlsJson({"similarity", "--kernel", "adult20k", "--pairs", "0,1"});
  const double restart_to_answer_seconds = seconds_since();
  EXPECT_EQ(first.at("pairs")[0].at("value").get<double>(), served->value(0, 1));
  EXPECT_THAT(ReadFile(server_log_), HasSubstr("integrity check passed"));
  check_answers();
  std::printf("[ n=%d ] upload %.2f s, submit to SUCCEEDED (with a kill -9 at iteration %d, resumed from %d) "
              "%.2f s, rank %d, restart to first answer %.2f s\n",
              kN, upload_seconds, iteration_at_kill, resumed_from, job_seconds, static_cast<int>(v->dim()),
              restart_to_answer_seconds);
}

// The other solver families through the CLI: an MKL classifier (classify),
// a social data set uploaded from CSV files (strength, recommend) and a
// re-ranking query on the learned kernel.
TEST_F(E2eTest, ClassifierAndSocialModelsThroughTheCli) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::string iono = std::string(KLS_TEST_DATA_DIR) + "/ionosphere.csv";
  const nlohmann::json ds = KlsJson({"upload", iono});
  const nlohmann::json mkl = KlsJson({"submit", "--dataset", ds.at("id"), "--kernel", "iono", "--method", "mkl",
                                      "--algorithm", "kta", "--single-features", "false", "--watch"});
  ASSERT_EQ(mkl.value("state", ""), "SUCCEEDED") << mkl;
  const nlohmann::json classified = KlsJson({"classify", "--kernel", "iono", iono});
  ASSERT_EQ(classified.at("predictions").size(), 351u);
  EXPECT_GT(classified.at("accuracy").get<double>(), 0.9);  // training rows
  const RunResult wrong = Kls({"recommend", "--kernel", "iono", "--user", "0"});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("FAILED_PRECONDITION"), std::string::npos) << wrong.err;

  kls::CommunityOptions co;
  co.num_users = 60;
  co.num_groups = 15;
  co.mean_photos = 3;
  auto community = kls::GenerateCommunity(co);
  ASSERT_TRUE(community.ok());
  const fs::path dir = scratch_.path() / "community";
  ASSERT_TRUE(kls::WriteCommunityCsv(*community, dir.string()).ok());
  const nlohmann::json social = KlsJson({"upload", dir.string(), "--social", "--name", "community"});
  EXPECT_EQ(social.at("users"), 60);
  const nlohmann::json job = KlsJson({"submit", "--dataset", social.at("id"), "--kernel", "friends", "--method",
                                      "social_strength", "--watch"});
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job;
  const nlohmann::json friends = KlsJson({"recommend", "--kernel", "friends", "--user", "3", "--k", "5"});
  ASSERT_EQ(friends.at("items").size(), 5u);
  for (const auto& item : friends.at("items")) {
    const int v = item.at("index");
    EXPECT_NE(v, 3);
    EXPECT_FALSE(std::binary_search(community->contacts[3].begin(), community->contacts[3].end(), v));
  }
  const nlohmann::json groups = KlsJson({"recommend", "--kernel", "friends", "--user", "3", "--k", "2", "--groups"});
  EXPECT_EQ(groups.at("what"), "groups");
  const nlohmann::json strength = KlsJson({"strength", "--kernel", "friends", "--pairs", "3,4;5,6"});
  ASSERT_EQ(strength.at("pairs").size(), 2u);
  const nlohmann::json reranked =
      KlsJson({"rerank", "--kernel", "friends", "--candidates", "1,2,3,4", "--prior", "4,3,2,1", "--k", "3"});
  EXPECT_EQ(reranked.at("items").size(), 3u);

  // The pairwise KLR second stage (§7.4) and harmonic classification of users (§7.5.3).
  const RunResult klr_flag_without_klr = Kls({"submit", "--dataset", social.at("id"), "--method", "social_strength",
                                              "--klr-c", "0.01"});
  EXPECT_EQ(klr_flag_without_klr.exit_code, 1);
  EXPECT_THAT(klr_flag_without_klr.err, HasSubstr("--klr-c does not apply"));
  const nlohmann::json klr_job =
      KlsJson({"submit", "--dataset", social.at("id"), "--kernel", "klr", "--method", "social_strength", "--weighting",
               "klr", "--klr-import-vectors", "10", "--watch"});
  ASSERT_EQ(klr_job.value("state", ""), "SUCCEEDED") << klr_job;
  const nlohmann::json klr_strength = KlsJson({"strength", "--kernel", "klr", "--pairs", "3,4;4,3"});
  ASSERT_EQ(klr_strength.at("pairs").size(), 2u);
  const double s34 = klr_strength.at("pairs")[0].at("strength"), s43 = klr_strength.at("pairs")[1].at("strength");
  EXPECT_GT(s34, 0.0);  // σ(f): a probability
  EXPECT_LT(s34, 1.0);
  EXPECT_NEAR(s34, s43, 1e-12);  // the symmetric pair kernel
  const nlohmann::json klr_friends = KlsJson({"recommend", "--kernel", "klr", "--user", "3", "--k", "4"});
  ASSERT_EQ(klr_friends.at("items").size(), 4u);
  const nlohmann::json classes =
      KlsJson({"classify", "--kernel", "klr", "--labelled", "0,0;1,1;2,0;5,1", "--users", "7,8,9"});
  ASSERT_EQ(classes.at("predictions").size(), 3u);
  for (const auto& p : classes.at("predictions")) {
    const int label = p.at("label");
    EXPECT_TRUE(label == 0 || label == 1) << p;
  }
  const RunResult one_class = Kls({"classify", "--kernel", "klr", "--labelled", "0,1;1,1"});
  EXPECT_EQ(one_class.exit_code, 1);
  EXPECT_THAT(one_class.err, HasSubstr("INVALID_ARGUMENT"));
}

// `kls submit`'s solver flags come from the options messages' descriptors:
// the help lists every family's fields with their proto comments (the test
// build's toy family fixed_rank too), --print-request shows what would be
// sent, and bad flags are refused before any call. No server needed.
TEST_F(E2eTest, SubmitFlagsComeFromTheProtoDescriptors) {
  const auto kls = [&](std::vector<std::string> args) {
    args.insert(args.begin(), KLS_CLI_BINARY);
    return Run(args);
  };
  const RunResult help = kls({"submit", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  // SimpleNpklOptions.accelerated's comment in jobs.proto.
  EXPECT_THAT(help.out, HasSubstr("Accelerated projected gradient with restarts"));
  EXPECT_THAT(help.out, HasSubstr("--threads"));
#ifdef KLS_TEST_FAMILIES
  EXPECT_THAT(help.out, HasSubstr("--rank"));
  EXPECT_THAT(help.out, HasSubstr("--scale"));
  EXPECT_THAT(help.out, HasSubstr("fixed_rank: Rank of the learned kernel"));       // FixedRankOptions.rank
  EXPECT_THAT(help.out, HasSubstr("fixed_rank: Multiplies every kernel entry"));    // FixedRankOptions.scale
  const RunResult fixed = kls({"--json", "submit", "--dataset", "ds-1", "--method", "fixed_rank", "--rank", "3",
                               "--scale", "0.5", "--print-request"});
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  const nlohmann::json sent = nlohmann::json::parse(fixed.out);
  EXPECT_EQ(sent.at("dataset_id"), "ds-1");
  EXPECT_EQ(sent.at("family_options").at("@type"), "type.googleapis.com/kls.testing.FixedRankOptions");
  EXPECT_EQ(sent.at("family_options").at("rank"), 3);
  EXPECT_EQ(sent.at("family_options").at("scale"), 0.5);
#endif

  // A flag the method's options message does not have.
  const RunResult wrong = kls({"submit", "--dataset", "ds-1", "--method", "qsdp", "--gamma", "1", "--print-request"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("INVALID_ARGUMENT: --gamma does not apply to --method qsdp"));
  EXPECT_EQ(wrong.out, "");

  // Enums by value name, case-insensitively; a bad one names the flag and the names.
  const RunResult loss = kls({"--json", "submit", "--dataset", "ds-1", "--method", "simple_npkl", "--loss",
                              "SQUARE_HINGE", "--threads", "3", "--accelerated", "false", "--print-request"});
  ASSERT_EQ(loss.exit_code, 0) << loss.err;
  const nlohmann::json simple = nlohmann::json::parse(loss.out).at("simple_npkl");
  EXPECT_EQ(simple.at("loss"), "SQUARE_HINGE");
  EXPECT_EQ(simple.at("num_threads"), 3);  // --threads: the field's (kls.v1.cli_alias)
  EXPECT_EQ(simple.at("accelerated"), false);
  const RunResult problem = kls({"submit", "--dataset", "ds-1", "--method", "qsdp", "--problem", "regmvu",
                                 "--graph-connect", "grow_k", "--print-request"});
  ASSERT_EQ(problem.exit_code, 0) << problem.err;
  EXPECT_THAT(problem.out, HasSubstr("\"problem\": \"REGMVU\""));
  EXPECT_THAT(problem.out, HasSubstr("\"connect\": \"GROW_K\""));
  const RunResult bad_enum =
      kls({"submit", "--dataset", "ds-1", "--method", "embedding", "--algorithm", "tsne", "--print-request"});
  EXPECT_EQ(bad_enum.exit_code, 1);
  EXPECT_THAT(bad_enum.err, HasSubstr("--algorithm = 'tsne' is not one of cmvu, mve, spe, kpca"));

  // --threads on kl_admm too, sent as num_threads.
  const RunResult threads =
      kls({"--json", "submit", "--dataset", "ds-1", "--method", "kl_admm", "--threads", "2", "--print-request"});
  ASSERT_EQ(threads.exit_code, 0) << threads.err;
  EXPECT_EQ(nlohmann::json::parse(threads.out).at("kl_admm").at("num_threads"), 2);
}

TEST_F(E2eTest, UploadsLibsvmWithAConstraintsFileAndReportsErrors) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const fs::path svm = scratch_.path() / "tiny.svm";
  std::ofstream(svm) << "1 1:0.5 3:2\n-1 2:1.5\n1 1:1 2:1 3:1\n-1 3:-4\n";
  const fs::path pairs = scratch_.path() / "pairs.csv";
  std::ofstream(pairs) << "i,j,kind\n0,2,must\n1,3,1\n0,1,cannot\n# comment\n2,3,-1\n";
  const nlohmann::json d = KlsJson({"upload", svm.string(), "--constraints", pairs.string(), "--name", "tiny"});
  EXPECT_EQ(d.at("name"), "tiny");
  EXPECT_EQ(d.at("num_points"), 4);
  EXPECT_EQ(d.at("dim"), 3);
  EXPECT_EQ(d.at("num_classes"), 2);
  EXPECT_EQ(d.at("num_constraints"), 4);
  const nlohmann::json all = KlsJson({"datasets"});
  ASSERT_EQ(all.at("datasets").size(), 1u);

  // A constraint that names a point the file does not have: refused before sending.
  std::ofstream(pairs) << "0,9,1\n";
  const RunResult bad = Kls({"upload", svm.string(), "--constraints", pairs.string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("INVALID_ARGUMENT: "));
  EXPECT_THAT(bad.err, HasSubstr("j = 9 is out of range for 4 points"));

  // Solver flags that do not belong to the method, and unknown ids.
  const RunResult wrong_flag =
      Kls({"submit", "--dataset", d.at("id"), "--method", "kl_admm", "--c", "2"});
  EXPECT_EQ(wrong_flag.exit_code, 1);
  EXPECT_THAT(wrong_flag.err, HasSubstr("--c does not apply to --method kl_admm"));
  const RunResult no_dataset = Kls({"--json", "submit", "--dataset", "ds-nope", "--method", "kl_admm"});
  EXPECT_EQ(no_dataset.exit_code, 1);
  EXPECT_THAT(no_dataset.err, ::testing::StartsWith("NOT_FOUND: "));
  EXPECT_EQ(nlohmann::json::parse(no_dataset.out).at("error").at("code"), "NOT_FOUND");
  const RunResult no_job = Kls({"cancel", "job-nope"});
  EXPECT_EQ(no_job.exit_code, 1);
  EXPECT_THAT(no_job.err, ::testing::StartsWith("NOT_FOUND: "));
}


// `kls upload` streams the file (two passes, bounded memory) with a progress
// bar on stderr: forced by --progress, silent by default with --json when
// stderr is not a terminal (as here), and the LIBSVM data set is the one the
// whole-file reader gives.
TEST_F(E2eTest, UploadStreamsALibsvmFileWithAProgressBar) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto adult = kls::MakeAdultLike(3000, 9);
  ASSERT_TRUE(adult.ok());
  const fs::path svm = scratch_.path() / "adult.svm";
  {
    std::ofstream out(svm);
    for (int i = 0; i < adult->num_points(); ++i) {
      out << (adult->labels[i] == 1 ? "+1" : "-1");
      for (int j = 0; j < adult->dim(); ++j) {
        if (adult->features(i, j) != 0) out << ' ' << j + 1 << ':' << adult->features(i, j);
      }
      out << "\n";
    }
  }
  const auto whole = kls::ReadLibsvmFile(svm.string());
  ASSERT_TRUE(whole.ok()) << whole.status();
  const auto pairs = kls::GenerateAdmmProtocol(whole->labels, /*seed=*/4);
  ASSERT_TRUE(pairs.ok());

  const RunResult shown = Kls({"--json", "upload", svm.string(), "--protocol", "admm", "--seed", "4", "--progress"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.err, HasSubstr("scanning " + svm.string()));
  EXPECT_THAT(shown.err, HasSubstr("scanned " + svm.string() + ": 3000 rows × " + std::to_string(whole->dim()) +
                                   " features"));
  EXPECT_THAT(shown.err, HasSubstr("upload [########################] 3000/3000 rows"));
  // The protocol's pairs are drawn by the server (no pairs on the wire): the
  // same pairs as core draws here, reported in `generated`.
  EXPECT_THAT(shown.err, ::testing::Not(HasSubstr(" pairs")));
  EXPECT_THAT(shown.err, HasSubstr("MB/s"));
  EXPECT_EQ(shown.err.find('\r'), std::string::npos) << "not a terminal: whole lines, no redraws";
  const nlohmann::json d = nlohmann::json::parse(shown.out);  // stdout: exactly the JSON object
  EXPECT_EQ(d.at("num_points"), whole->num_points());
  EXPECT_EQ(d.at("dim"), whole->dim());
  EXPECT_EQ(d.at("num_classes"), whole->num_classes());
  EXPECT_EQ(d.at("num_constraints"), pairs->size());
  EXPECT_EQ(d.at("generated").at("protocol"), "admm");
  EXPECT_EQ(d.at("generated").at("seed"), 4);
  int64_t must = 0;
  for (const kls::Pair& p : pairs->pairs) must += p.kind == kls::PairKind::kMustLink;
  EXPECT_EQ(d.at("generated").at("must_link"), must);
  EXPECT_GT(d.at("upload").at("file_bytes").get<int64_t>(), 0);

  const RunResult quiet = Kls({"--json", "upload", svm.string(), "--protocol", "admm", "--seed", "4"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "") << "--json on a non-terminal: no progress unless asked";
  const nlohmann::json again = nlohmann::json::parse(quiet.out);
  for (const char* field : {"num_points", "dim", "num_classes", "num_constraints"}) {
    EXPECT_EQ(again.at(field), d.at(field)) << field;
  }
  const RunResult plain = Kls({"upload", svm.string(), "--no-progress"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err, "");
  EXPECT_THAT(plain.out, HasSubstr("3000 points × " + std::to_string(whole->dim()) + " features, 2 classes"));

  // --num-features fixes d (the adult layout has 123 columns; the file may use fewer).
  const nlohmann::json wide = KlsJson({"upload", svm.string(), "--num-features", "123"});
  EXPECT_EQ(wide.at("dim"), 123);
  EXPECT_EQ(wide.at("num_points"), 3000);

  // A parse error still names the file and line, and nothing is stored.
  std::ofstream(svm, std::ios::app) << "+1 3:1 2:1\n";
  const RunResult bad = Kls({"upload", svm.string(), "--progress"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("INVALID_ARGUMENT: " + svm.string() +
                                 " line 3001: feature index 2 is not greater than the previous index 3"));
  EXPECT_EQ(KlsJson({"datasets"}).at("datasets").size(), 4u);
}


// Issue 25, items 3–4 through the CLI: --c auto, --append-constraints, --warm-start.
TEST_F(E2eTest, CAutoAppendConstraintsAndWarmStartThroughTheCli) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const fs::path pairs = scratch_.path() / "pairs.csv";
  const fs::path more = scratch_.path() / "more.csv";
  {
    std::ofstream p(pairs), m(more);
    // iris rows 0–49 setosa, 50–99 versicolor, 100–149 virginica.
    for (int k = 0; k < 40; ++k) p << k << "," << k + 5 << ",1\n" << k << "," << k + 60 << ",-1\n";
    for (int k = 0; k < 40; ++k) p << 50 + k << "," << 55 + k << ",1\n" << 100 + k << "," << 104 + k << ",1\n";
    for (int k = 0; k < 8; ++k) m << 60 + k << "," << 110 + k << ",-1\n" << 101 + k << "," << 120 + k << ",1\n";
  }
  const nlohmann::json base = KlsJson({"upload", std::string(KLS_TEST_DATA_DIR) + "/iris.csv", "--constraints",
                                       pairs.string(), "--name", "iris"});
  const nlohmann::json cv = KlsJson({"submit", "--dataset", base.at("id"), "--kernel", "iris", "--method",
                                     "bcd_npkl", "--c", "auto", "--cv-folds", "4", "--cv-grid", "0.5,2", "--watch"});
  ASSERT_EQ(cv.value("state", ""), "SUCCEEDED") << cv;
  const nlohmann::json& folds = cv.at("summary").at("cross_validation");
  EXPECT_EQ(folds.at("folds"), 4);
  ASSERT_EQ(folds.at("candidates").size(), 2u);
  EXPECT_EQ(folds.at("candidates")[1].at("value"), 2);
  EXPECT_EQ(folds.at("candidates")[1].at("fold_scores").size(), 4u);

  const nlohmann::json appended =
      KlsJson({"upload", "--append-constraints", base.at("id"), more.string(), "--name", "iris-more"});
  EXPECT_EQ(appended.at("num_points"), 150);
  EXPECT_EQ(appended.at("num_constraints"), base.at("num_constraints").get<int>() + 16);
  EXPECT_EQ(appended.at("base_dataset_id"), base.at("id"));
  const nlohmann::json warm = KlsJson({"submit", "--dataset", appended.at("id"), "--kernel", "iris-more", "--method",
                                       "bcd_npkl", "--warm-start", "iris:1", "--watch"});
  ASSERT_EQ(warm.value("state", ""), "SUCCEEDED") << warm;
  EXPECT_EQ(warm.at("summary").at("warm_start").at("kernel_name"), "iris");

  const RunResult auto_elsewhere = Kls({"submit", "--dataset", base.at("id"), "--method", "mkl", "--c", "auto"});
  EXPECT_EQ(auto_elsewhere.exit_code, 1);
  EXPECT_THAT(auto_elsewhere.err, HasSubstr("--c auto applies to kl_admm (--gamma), bcd_npkl and simple_npkl"));
  const RunResult not_a_number = Kls({"submit", "--dataset", base.at("id"), "--method", "bcd_npkl", "--c", "x"});
  EXPECT_THAT(not_a_number.err, HasSubstr("--c = 'x' is not a number or auto"));
  const RunResult bad_grid = Kls({"submit", "--dataset", base.at("id"), "--method", "bcd_npkl", "--c", "auto",
                                  "--cv-grid", "1,0"});
  EXPECT_THAT(bad_grid.err, HasSubstr("INVALID_ARGUMENT: cross_validation.grid[1] = 0 must be finite and > 0"));
  const RunResult repeat = Kls({"upload", "--append-constraints", base.at("id"), pairs.string()});
  EXPECT_EQ(repeat.exit_code, 1);
  EXPECT_THAT(repeat.err, HasSubstr("header.base_dataset_id"));

  // A data set by name: the newest of that name, for --dataset and --append-constraints.
  const nlohmann::json by_name = KlsJson({"submit", "--dataset", "iris-more", "--kernel", "by-name", "--method",
                                          "bcd_npkl", "--watch"});
  ASSERT_EQ(by_name.value("state", ""), "SUCCEEDED") << by_name;
  EXPECT_EQ(by_name.at("dataset_id"), appended.at("id"));
  const fs::path third = scratch_.path() / "third.csv";
  std::ofstream(third) << "1,2,1\n51,52,1\n";
  const nlohmann::json again = KlsJson({"upload", "--append-constraints", "iris-more", third.string(), "--name",
                                        "iris-more"});  // a second 'iris-more', now the newest
  EXPECT_EQ(again.at("base_dataset_id"), appended.at("id"));
  const nlohmann::json newest = KlsJson({"submit", "--dataset", "iris-more", "--kernel", "newest", "--method",
                                         "bcd_npkl"});
  EXPECT_EQ(newest.at("dataset_id"), again.at("id"));
  const RunResult missing = Kls({"submit", "--dataset", "no-such-set", "--method", "bcd_npkl"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("--dataset = 'no-such-set': no data set has this id or name"));
}

}  // namespace
