#include "bench/crash_soak.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/synthetic.h"
#include "core/model/learned_kernel.h"
#include "tests/e2e/process.h"

namespace kls::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Embedding = LearnedKernel::Embedding;
using kls::e2e::ReadFile;
using kls::e2e::Spawn;
using kls::e2e::WaitFor;

constexpr int kNamesPerClient = 3;     // imported kernel names each client owns
constexpr const char* kSharedKernelName = "kls-crash-shared";  // every second job of every client writes here
constexpr int kMaxVersionsPerName = 4; // above this an import turns into a delete
constexpr int kMaxOpenJobs = 2;        // per client; above this a submit turns into a poll
constexpr size_t kMaxProblems = 50;
const char* const kAliases[] = {"prod", "canary"};
const std::vector<std::pair<int, int>> kPairs = {{0, 1}, {2, 2}, {5, 9}, {7, 3}};

// The embedding of import `seed`: mostly 200 × 8; every fifth 3000 rows, every
// third 16 columns, so some artifacts take long enough to write that kills
// land inside them.
Embedding ImportEmbedding(uint64_t seed) {
  const int n = seed % 5 == 0 ? 3000 : 200;
  const int dim = seed % 3 == 0 ? 16 : 8;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Embedding v(n, dim);
  for (Eigen::Index t = 0; t < v.size(); ++t) v.data()[t] = normal(rng);
  return v;
}

bool SameBits(const Embedding& a, const Embedding& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.size())) == 0;
}

v1::KernelRef Ref(const std::string& name, int64_t version, const std::string& alias = "") {
  v1::KernelRef r;
  r.set_name(name);
  r.set_version(version);
  r.set_alias(alias);
  return r;
}

bool IsTerminal(v1::JobState s) { return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED; }

// A failure that says nothing about whether the write happened: the server
// died (or stalled) under the call.
bool InDoubt(const Status& s) {
  switch (s.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
    case StatusCode::kUnknown:
    case StatusCode::kInternal:
    case StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

// What a kernel answers: Similarity on kPairs and TopK(item 3, k 5).
struct Answer {
  std::vector<double> similarity;
  std::vector<int> topk_index;
  std::vector<double> topk_score;
  bool operator==(const Answer& o) const {
    return similarity == o.similarity && topk_index == o.topk_index && topk_score == o.topk_score;
  }
};

StatusOr<Answer> Ask(Client& client, const v1::KernelRef& ref) {
  Answer a;
  KLS_ASSIGN_OR_RETURN(a.similarity, client.Similarity(ref, kPairs));
  v1::TopKRequest topk;
  *topk.mutable_kernel() = ref;
  topk.set_item(3);
  topk.set_k(5);
  topk.set_exclude_self(true);
  KLS_ASSIGN_OR_RETURN(v1::TopKResponse response, client.TopK(topk));
  for (const auto& item : response.items()) {
    a.topk_index.push_back(item.index());
    a.topk_score.push_back(item.score());
  }
  return a;
}

std::string VersionName(const std::string& name, int64_t version) { return name + " v" + std::to_string(version); }

// ---- What each client was told ---------------------------------------------

// One imported kernel name (owned by one client: its writes are sequential).
struct NameState {
  std::map<int64_t, uint64_t> versions;   // version → seed of its embedding
  std::map<std::string, int64_t> aliases; // alias → version
  bool operator==(const NameState& o) const { return versions == o.versions && aliases == o.aliases; }
};

struct JobModel {
  std::string id, kernel_name;
  v1::JobState terminal = v1::JOB_STATE_UNSPECIFIED;  // terminal state once seen
  bool cancel_acked = false;      // Cancel returned it CANCELLED
  bool cancel_requested = false;  // Cancel returned OK while it ran
  bool cancel_in_doubt = false;
  bool reported = false;          // a lost cancel or state is reported once
  int64_t kernel_version = 0;     // once seen SUCCEEDED
  bool kernel_deleted = false;    // acknowledged delete of its kernel
  bool kernel_delete_in_doubt = false;
  bool duplicate_reported = false;
  std::optional<Embedding> embedding;  // the kernel as first exported
};

// The one write of a client whose answer the kill took (the client stops at it).
struct Pending {
  enum Kind { kNone, kImport, kDelete, kAlias } kind = kNone;
  int name = 0;
  uint64_t seed = 0;
  int64_t version = 0;
  std::string alias;
};

struct ClientModel {
  int index = 0;
  std::string base_dataset;
  std::vector<std::string> names;
  std::vector<NameState> states;
  std::vector<bool> retired;  // a name whose state no longer matches the model: not used again
  Pending pending;
  std::map<std::string, int64_t> datasets;  // acknowledged uploads: id → rows
  std::vector<JobModel> jobs;
  std::map<std::pair<std::string, int64_t>, Answer> answers;  // first answer of each kernel version
  uint64_t next_seed = 0;
  int next_job = 0, next_upload = 0;
};

// ---- The soak ----------------------------------------------------------------

class Soak {
 public:
  Soak(const CrashSoakOptions& options, CrashSoakResult* result)
      : options_(options), result_(*result), rng_(options.seed) {}

  ~Soak() {
    if (server_pid_ > 0) {
      kill(server_pid_, SIGKILL);
      WaitFor(server_pid_, std::chrono::seconds(10));
    }
  }

  Status Run();

 private:
  // Server process.
  Status SpawnServer();
  Status WaitServing();
  Status StartServer() {
    KLS_RETURN_IF_ERROR(SpawnServer());
    return WaitServing();
  }
  Status KillServer();
  Status RunCheck(bool final_check);
  std::string LogTail() const;

  // Problems.
  void Problem(int64_t CrashSoakResult::*counter, const std::string& what);

  // Client traffic.
  void ClientLoop(ClientModel& m, uint64_t seed, const std::atomic<bool>& stop);
  bool DoImport(Client& c, ClientModel& m, std::mt19937_64& rng);
  bool DoDelete(Client& c, ClientModel& m, std::mt19937_64& rng);
  bool DoAlias(Client& c, ClientModel& m, std::mt19937_64& rng);
  bool DoUpload(Client& c, ClientModel& m, std::mt19937_64& rng);
  bool DoSubmit(Client& c, ClientModel& m);
  bool DoCancel(Client& c, ClientModel& m, std::mt19937_64& rng);
  bool DoQuery(Client& c, ClientModel& m, std::mt19937_64& rng);
  bool DoPoll(Client& c, ClientModel& m);
  // Runs one write RPC, counted in writes_in_flight_ while it runs.
  template <typename Call>
  auto Write(Call call) {
    ++writes_in_flight_;
    auto r = call();
    --writes_in_flight_;
    return r;
  }
  // A write's failure: false (stop this client) when in doubt.
  bool WriteFailed(ClientModel& m, const Status& s, const std::string& what, Pending pending);
  // Compares `ref`'s answer with the first answer of (name, version); records it if none.
  Status CompareAnswer(Client& c, ClientModel& m, const v1::KernelRef& ref, const std::string& name, int64_t version);
  // A job seen in `job`'s state: checks it against the model, snapshots a new result.
  void SeeJob(Client& c, ClientModel& m, JobModel& jm, const v1::Job& job, bool after_restart);

  // Checks after a restart.
  Status Verify();
  void VerifyName(ClientModel& m, int i);
  void VerifyJobKernel(ClientModel& m, JobModel& jm);
  void VerifySharedName();
  StatusOr<std::vector<v1::Job>> AllJobs();

  const CrashSoakOptions& options_;
  CrashSoakResult& result_;
  std::mt19937_64 rng_;
  fs::path dir_, data_dir_, log_path_;
  size_t log_size_at_spawn_ = 0;  // where this server's lines start in the (appended) log
  std::vector<int64_t> kill_times_ms_;  // unix ms of each SIGKILL
  // redone_fraction from the server log and kill_times_ms_.
  void ComputeRedone();
  pid_t server_pid_ = -1;
  std::string target_;
  std::unique_ptr<Client> client_;  // the checker's
  std::vector<ClientModel> models_;
  std::mutex mu_;  // result_ counters and problems, from client threads
  std::atomic<int> writes_in_flight_{0};
};

void Soak::Problem(int64_t CrashSoakResult::*counter, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  ++(result_.*counter);
  if (result_.problems.size() < kMaxProblems) result_.problems.push_back(what);
  if (options_.log) options_.log("problem: " + what);
}

std::string Soak::LogTail() const {
  const std::string log = ReadFile(log_path_);
  return log.size() > 4000 ? "..." + log.substr(log.size() - 4000) : log;
}

Status Soak::SpawnServer() {
  std::error_code ignored;
  fs::remove(data_dir_ / "kls-server.lock", ignored);  // the new address must not be confused with the old
  target_.clear();
  client_.reset();
  std::vector<std::string> args = {
      options_.server_binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir_.string(),
      "--workers", std::to_string(options_.server_workers), "--log-level", "info",
      // checkpoint_seconds 86400: only the early checkpoints (the first after
      // 0.1 s of solve time, then each after 10 % of the solve time so far,
      // at least 20 x a checkpoint's cost apart). A 0.3 s job checkpoints once
      // or twice; one killed before its first is a lost attempt without
      // progress, the worst case for the lost-process safety net
      // (max_lost_attempts of those in a row fail a job: jobs_failed_by_kills).
      "--max-attempts", std::to_string(options_.max_attempts), "--checkpoint-seconds", "86400"};
  if (!options_.store_uri.empty()) {
    args.insert(args.end(), {"--store", options_.store_uri, "--lease-seconds", std::to_string(options_.lease_seconds),
                             "--cache-dir", (dir_ / "cache").string()});
  }
  log_size_at_spawn_ = ReadFile(log_path_).size();
  server_pid_ = Spawn(args, dir_ / "server.out", log_path_, /*append_err=*/true);
  if (server_pid_ <= 0) return InternalError("cannot start " + options_.server_binary);
  return OkStatus();
}

Status Soak::WaitServing() {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (target_.empty() && Clock::now() < deadline) {
    std::istringstream lock(ReadFile(data_dir_ / "kls-server.lock"));
    for (std::string line; std::getline(lock, line);) {
      if (line.rfind("listen=", 0) == 0) target_ = line.substr(7);
    }
    if (target_.empty() && !options_.store_uri.empty()) {
      // With the shared store the data directory holds no lock file: the
      // address is in this server's "serving on 127.0.0.1:PORT" log line.
      const std::string log = ReadFile(log_path_);
      const size_t at = log.find("serving on ", std::min(log_size_at_spawn_, log.size()));
      if (at != std::string::npos) {
        const size_t start = at + 11, end = log.find_first_of(" \n", start);
        target_ = log.substr(start, end == std::string::npos ? std::string::npos : end - start);
      }
    }
    if (WaitFor(server_pid_, std::chrono::milliseconds(0)) != -1) {
      server_pid_ = -1;
      return InternalError("kls-server exited while starting:\n" + LogTail());
    }
    if (target_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (target_.rfind("127.0.0.1:", 0) != 0) {
    return InternalError("kls-server did not report a 127.0.0.1 address within 30 s (got '" + target_ + "'):\n" +
                         LogTail());
  }
  ClientOptions o;
  o.target = target_;
  o.timeout_seconds = 10;
  client_ = std::make_unique<Client>(o);
  while (Clock::now() < deadline) {
    auto health = client_->CheckHealth();
    if (health.ok() && *health == ServingStatus::kServing) return OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return InternalError("kls-server not SERVING within 30 s:\n" + LogTail());
}

Status Soak::KillServer() {
  kill_times_ms_.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count());
  if (kill(server_pid_, SIGKILL) != 0) return InternalError(std::string("kill: ") + std::strerror(errno));
  const int code = WaitFor(server_pid_, std::chrono::seconds(10));
  server_pid_ = -1;
  if (code == -1) return InternalError("kls-server did not die within 10 s of SIGKILL");
  ++result_.kills;
  return OkStatus();
}

Status Soak::RunCheck(bool final_check) {
  if (!options_.store_uri.empty()) {  // --check reads the embedded store's files only: not run
    if (final_check) result_.final_check_clean = true;
    return OkStatus();
  }
  const fs::path out = dir_ / "check.out", err = dir_ / "check.err";
  const pid_t pid = Spawn({options_.server_binary, "--check", "--data-dir", data_dir_.string()}, out, err, false);
  if (pid <= 0) return InternalError("cannot start " + options_.server_binary + " --check");
  const int code = WaitFor(pid, std::chrono::seconds(60));
  if (code == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return InternalError("kls-server --check did not end within 60 s");
  }
  const std::string report = ReadFile(out) + ReadFile(err);
  int64_t leftovers = 0;
  for (size_t at = report.find("leftover ("); at != std::string::npos; at = report.find("leftover (", at + 1)) {
    ++leftovers;
  }
  if (final_check) {
    result_.final_check_clean = code == 0 && report.find(" 0 problems, 0 leftovers") != std::string::npos;
    if (!result_.final_check_clean) {
      result_.problems.push_back("kls-server --check after the clean stop (exit " + std::to_string(code) +
                                 "): " + report.substr(0, 2000));
    }
    return OkStatus();
  }
  result_.leftovers_after_kills += leftovers;
  if (code != 0) {
    // "..., N problems, M leftovers" on the last line.
    int64_t problems = 1;
    const size_t at = report.rfind(" problems,");
    if (at != std::string::npos) {
      size_t start = report.rfind(' ', at - 1);
      problems = std::max<int64_t>(1, std::atoll(report.c_str() + (start == std::string::npos ? 0 : start + 1)));
    }
    Problem(&CrashSoakResult::corrupt_artifacts, "kls-server --check after kill " + std::to_string(result_.kills) +
                                                     " (exit " + std::to_string(code) + "): " + report.substr(0, 2000));
    std::lock_guard<std::mutex> lock(mu_);
    result_.corrupt_artifacts += problems - 1;
  }
  return OkStatus();
}

// ---- Client traffic ------------------------------------------------------------

bool Soak::WriteFailed(ClientModel& m, const Status& s, const std::string& what, Pending pending) {
  if (s.code() == StatusCode::kDataLoss) {
    Problem(&CrashSoakResult::corrupt_artifacts, what + ": " + s.ToString());
    return true;
  }
  if (InDoubt(s)) {
    std::lock_guard<std::mutex> lock(mu_);
    ++result_.in_doubt_writes;
    m.pending = pending;
    return false;
  }
  Problem(&CrashSoakResult::lost_writes, what + " failed unexpectedly: " + s.ToString());
  return true;
}

bool Soak::DoImport(Client& c, ClientModel& m, std::mt19937_64& rng) {
  const int i = static_cast<int>(rng() % kNamesPerClient);
  if (m.retired[i]) return true;
  if (static_cast<int>(m.states[i].versions.size()) >= kMaxVersionsPerName) return DoDelete(c, m, rng);
  const uint64_t seed = m.next_seed++;
  auto info = Write([&] { return c.ImportKernel(m.names[i], ImportEmbedding(seed)); });
  if (!info.ok()) return WriteFailed(m, info.status(), "import of " + m.names[i], {Pending::kImport, i, seed, 0, ""});
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++result_.acknowledged_writes;
  }
  if (m.states[i].versions.count(info->version())) {
    Problem(&CrashSoakResult::lost_writes, "import of " + m.names[i] + " returned version " +
                                               std::to_string(info->version()) + ", which already held an import");
    m.retired[i] = true;
    return true;
  }
  m.states[i].versions[info->version()] = seed;
  return true;
}

bool Soak::DoDelete(Client& c, ClientModel& m, std::mt19937_64& rng) {
  // Candidates: (client name index, version) for imports, (-1 - job index) for job kernels.
  std::vector<std::pair<int, int64_t>> candidates;
  for (int i = 0; i < kNamesPerClient; ++i) {
    if (m.retired[i]) continue;
    for (const auto& [v, seed] : m.states[i].versions) candidates.emplace_back(i, v);
  }
  for (size_t j = 0; j < m.jobs.size(); ++j) {
    const JobModel& jm = m.jobs[j];
    if (jm.kernel_version > 0 && !jm.kernel_deleted && !jm.kernel_delete_in_doubt && jm.embedding) {
      candidates.emplace_back(-1 - static_cast<int>(j), jm.kernel_version);
    }
  }
  if (candidates.empty()) return true;
  const auto [which, version] = candidates[rng() % candidates.size()];
  JobModel* jm = which < 0 ? &m.jobs[static_cast<size_t>(-1 - which)] : nullptr;
  const std::string name = jm ? jm->kernel_name : m.names[which];
  const Status s = Write([&] { return c.DeleteKernel(name, version); });
  if (!s.ok()) {
    if (jm && InDoubt(s)) {
      jm->kernel_delete_in_doubt = true;
      std::lock_guard<std::mutex> lock(mu_);
      ++result_.in_doubt_writes;
      return false;
    }
    if (s.code() == StatusCode::kNotFound) {
      Problem(&CrashSoakResult::lost_writes, "delete of " + VersionName(name, version) + ": " + s.ToString() +
                                                 " (the version was acknowledged)");
      if (jm) jm->kernel_deleted = true;
      else m.retired[which] = true;
      return true;
    }
    return WriteFailed(m, s, "delete of " + VersionName(name, version), {Pending::kDelete, which, 0, version, ""});
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++result_.acknowledged_writes;
  }
  m.answers.erase({name, version});
  if (jm) {
    jm->kernel_deleted = true;
    return true;
  }
  NameState& st = m.states[which];
  st.versions.erase(version);
  for (auto it = st.aliases.begin(); it != st.aliases.end();) {
    it = it->second == version ? st.aliases.erase(it) : std::next(it);
  }
  return true;
}

bool Soak::DoAlias(Client& c, ClientModel& m, std::mt19937_64& rng) {
  const int i = static_cast<int>(rng() % kNamesPerClient);
  NameState& st = m.states[i];
  if (m.retired[i] || st.versions.empty()) return true;
  const std::string alias = kAliases[rng() % 2];
  auto it = st.versions.begin();
  std::advance(it, static_cast<long>(rng() % st.versions.size()));
  const int64_t version = it->first;  // a move when the alias named another version
  auto info = Write([&] { return c.SetAlias(m.names[i], alias, version); });
  if (!info.ok()) {
    return WriteFailed(m, info.status(), "alias " + m.names[i] + "@" + alias + " → v" + std::to_string(version),
                       {Pending::kAlias, i, 0, version, alias});
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++result_.acknowledged_writes;
  }
  if (info->version() != version) {
    Problem(&CrashSoakResult::lost_writes, "SetAlias " + m.names[i] + "@" + alias + " → v" + std::to_string(version) +
                                               " answered v" + std::to_string(info->version()));
  }
  st.aliases[alias] = version;
  return true;
}

bool Soak::DoUpload(Client& c, ClientModel& m, std::mt19937_64& rng) {
  const int n = 100 + static_cast<int>(rng() % 400);
  auto data = MakeTwoMoons(n, 0.1, rng());
  if (!data.ok()) return true;
  UploadOptions o;
  o.name = "c" + std::to_string(m.index) + "-upload-" + std::to_string(m.next_upload++);
  auto info = Write([&] { return c.UploadDataset(*data, PairwiseConstraints{}, o); });
  if (!info.ok()) return WriteFailed(m, info.status(), "upload " + o.name, Pending{});
  std::lock_guard<std::mutex> lock(mu_);
  ++result_.acknowledged_writes;
  m.datasets[info->id()] = n;
  return true;
}

bool Soak::DoSubmit(Client& c, ClientModel& m) {
  int open = 0;
  for (const JobModel& jm : m.jobs) open += jm.terminal == v1::JOB_STATE_UNSPECIFIED;
  if (open >= kMaxOpenJobs) return DoPoll(c, m);
  // KL-ADMM that stops at its 0.3 s deadline (tolerance 0): kills land inside
  // solvers and inside the commit of their results.
  v1::SubmitJobRequest submit;
  submit.set_dataset_id(m.base_dataset);
  // Every second job of every client writes to one kernel name all clients
  // share: concurrent commits to a name must each get a version of their
  // own, never one given before (deletes of those versions are in the mix).
  const int n = m.next_job++;
  submit.set_kernel_name(n % 2 == 1 ? std::string(kSharedKernelName)
                                    : "c" + std::to_string(m.index) + "-job-" + std::to_string(n));
  // One job in four is long (8 s of solve time per attempt: checkpointed,
  // killed mid-solve and resumed); the others stop at 0.3 s.
  const bool long_job = n % 4 == 3;
  submit.set_deadline_seconds(long_job ? 8.0 : 0.3);
  submit.mutable_kl_admm()->set_max_iterations(1000000);
  submit.mutable_kl_admm()->set_tolerance(0);
  submit.mutable_kl_admm()->set_num_threads(1);
  auto job = Write([&] { return c.SubmitJob(submit); });
  if (!job.ok()) {
    if (job.status().code() == StatusCode::kResourceExhausted) return true;  // queue full: not a write
    return WriteFailed(m, job.status(), "submit " + submit.kernel_name(), Pending{});
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++result_.acknowledged_writes;
  ++result_.jobs_submitted;
  if (long_job) ++result_.long_jobs_submitted;
  JobModel jm;
  jm.id = job->id();
  jm.kernel_name = submit.kernel_name();
  m.jobs.push_back(std::move(jm));
  return true;
}

bool Soak::DoCancel(Client& c, ClientModel& m, std::mt19937_64& rng) {
  std::vector<JobModel*> open;
  for (JobModel& jm : m.jobs) {
    if (jm.terminal == v1::JOB_STATE_UNSPECIFIED && !jm.cancel_acked && !jm.cancel_requested && !jm.cancel_in_doubt) {
      open.push_back(&jm);
    }
  }
  if (open.empty()) return true;
  JobModel& jm = *open[rng() % open.size()];
  auto job = Write([&] { return c.CancelJob(jm.id); });
  if (!job.ok()) {
    if (job.status().code() == StatusCode::kFailedPrecondition) return true;  // it had ended: not a write
    if (InDoubt(job.status())) {
      jm.cancel_in_doubt = true;
      std::lock_guard<std::mutex> lock(mu_);
      ++result_.in_doubt_writes;
      return false;
    }
    return WriteFailed(m, job.status(), "cancel " + jm.id, Pending{});
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++result_.acknowledged_writes;
  if (job->state() == v1::CANCELLED) {
    jm.cancel_acked = true;
  } else {
    jm.cancel_requested = true;
    ++result_.cancels_requested;
  }
  return true;
}

Status Soak::CompareAnswer(Client& c, ClientModel& m, const v1::KernelRef& ref, const std::string& name,
                           int64_t version) {
  KLS_ASSIGN_OR_RETURN(Answer a, Ask(c, ref));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++result_.queries;
  }
  auto [it, inserted] = m.answers.emplace(std::make_pair(name, version), a);
  if (!inserted && !(it->second == a)) {
    Problem(&CrashSoakResult::query_mismatches,
            "kernel " + VersionName(name, version) + (ref.alias().empty() ? "" : " (as " + name + "@" + ref.alias() + ")") +
                " answers Similarity/TopK differently than before");
  }
  return OkStatus();
}

bool Soak::DoQuery(Client& c, ClientModel& m, std::mt19937_64& rng) {
  // Candidates: every acknowledged kernel version, by version or by alias.
  struct Target {
    std::string name;
    int64_t version;
    std::string alias;
  };
  std::vector<Target> targets;
  for (int i = 0; i < kNamesPerClient; ++i) {
    if (m.retired[i]) continue;
    for (const auto& [v, seed] : m.states[i].versions) targets.push_back({m.names[i], v, ""});
    for (const auto& [alias, v] : m.states[i].aliases) targets.push_back({m.names[i], v, alias});
  }
  for (const JobModel& jm : m.jobs) {
    if (jm.embedding && !jm.kernel_deleted && !jm.kernel_delete_in_doubt) {
      targets.push_back({jm.kernel_name, jm.kernel_version, ""});
    }
  }
  if (targets.empty()) return true;
  const Target& t = targets[rng() % targets.size()];
  const Status s = CompareAnswer(c, m, Ref(t.name, t.alias.empty() ? t.version : 0, t.alias), t.name, t.version);
  if (s.ok()) return true;
  if (s.code() == StatusCode::kDataLoss) {
    Problem(&CrashSoakResult::corrupt_artifacts, "query of " + VersionName(t.name, t.version) + ": " + s.ToString());
    return true;
  }
  if (s.code() == StatusCode::kNotFound) {
    Problem(&CrashSoakResult::query_mismatches, "query of acknowledged " + VersionName(t.name, t.version) +
                                                    (t.alias.empty() ? "" : " as @" + t.alias) + ": " + s.ToString());
    return true;
  }
  return !InDoubt(s);
}

void Soak::SeeJob(Client& c, ClientModel& m, JobModel& jm, const v1::Job& job, bool after_restart) {
  const std::string where = after_restart ? " after kill " + std::to_string(result_.kills) : "";
  if (jm.terminal != v1::JOB_STATE_UNSPECIFIED && job.state() != jm.terminal) {
    if (!jm.reported) {
      Problem(&CrashSoakResult::lost_writes, "job " + jm.id + " was " + v1::JobState_Name(jm.terminal) + ", now " +
                                                 v1::JobState_Name(job.state()) + where);
    }
    jm.reported = true;
    return;
  }
  if (!jm.reported && (jm.cancel_acked || (jm.cancel_requested && IsTerminal(job.state()))) &&
      job.state() != v1::CANCELLED) {
    Problem(&CrashSoakResult::lost_writes,
            "job " + jm.id + ": cancel acknowledged (" + (jm.cancel_acked ? "CANCELLED" : "while RUNNING") +
                ") but the job is " + v1::JobState_Name(job.state()) + where);
    jm.reported = true;
  }
  if (!IsTerminal(job.state()) || jm.terminal != v1::JOB_STATE_UNSPECIFIED) return;
  if (job.state() == v1::SUCCEEDED && !jm.embedding) {
    // Remember the result as first seen; compared after every restart.
    auto exported = c.ExportKernel(Ref(job.kernel_name(), job.kernel_version()));
    if (!exported.ok()) {
      if (exported.status().code() == StatusCode::kDataLoss) {
        Problem(&CrashSoakResult::corrupt_artifacts, "export of job " + jm.id + "'s kernel: " + exported.status().ToString());
      }
      return;  // the kill may interrupt it: seen again later
    }
    if (!CompareAnswer(c, m, Ref(job.kernel_name(), job.kernel_version()), job.kernel_name(), job.kernel_version()).ok()) {
      return;
    }
    jm.embedding = std::move(exported->embedding);
    jm.kernel_version = job.kernel_version();
  }
  jm.terminal = job.state();
  std::lock_guard<std::mutex> lock(mu_);
  if (job.state() == v1::SUCCEEDED) ++result_.jobs_succeeded;
  if (job.state() == v1::CANCELLED) ++result_.jobs_cancelled;
  if (job.state() == v1::FAILED) ++result_.jobs_failed;
}

bool Soak::DoPoll(Client& c, ClientModel& m) {
  for (JobModel& jm : m.jobs) {
    if (jm.terminal != v1::JOB_STATE_UNSPECIFIED) continue;
    auto job = c.GetJob(jm.id);
    if (!job.ok()) {
      if (InDoubt(job.status())) return false;
      Problem(&CrashSoakResult::lost_writes, "job " + jm.id + ": " + job.status().ToString());
      jm.terminal = v1::FAILED;  // not looked at again
      continue;
    }
    SeeJob(c, m, jm, *job, false);
  }
  return true;
}

void Soak::ClientLoop(ClientModel& m, uint64_t seed, const std::atomic<bool>& stop) {
  ClientOptions o;
  o.target = target_;
  o.timeout_seconds = 10;
  Client c(o);
  std::mt19937_64 rng(seed);
  // Weights: import 18, delete 10, alias 12, upload 8, submit 12, cancel 4, query 26, poll 10.
  const std::vector<int> cumulative = {18, 28, 40, 48, 60, 64, 90, 100};
  for (int op = 0; !stop && op < 100000; ++op) {
    const int draw = static_cast<int>(rng() % 100);
    const int kind = static_cast<int>(std::upper_bound(cumulative.begin(), cumulative.end(), draw) - cumulative.begin());
    bool go_on = true;
    switch (kind) {
      case 0: go_on = DoImport(c, m, rng); break;
      case 1: go_on = DoDelete(c, m, rng); break;
      case 2: go_on = DoAlias(c, m, rng); break;
      case 3: go_on = DoUpload(c, m, rng); break;
      case 4: go_on = DoSubmit(c, m); break;
      case 5: go_on = DoCancel(c, m, rng); break;
      case 6: go_on = DoQuery(c, m, rng); break;
      default: go_on = DoPoll(c, m); break;
    }
    if (!go_on) return;  // the server is gone (or a write is in doubt): wait for the restart
  }
}

// ---- Checks after a restart ----------------------------------------------------

StatusOr<std::vector<v1::Job>> Soak::AllJobs() {
  std::vector<v1::Job> all;
  v1::ListJobsRequest list;
  list.set_page_size(1000);
  for (int page = 0; page < 10000; ++page) {
    KLS_ASSIGN_OR_RETURN(v1::ListJobsResponse r, client_->ListJobs(list));
    all.insert(all.end(), r.jobs().begin(), r.jobs().end());
    if (r.next_page_token().empty()) break;
    list.set_page_token(r.next_page_token());
  }
  return all;
}

// An imported name: the server's versions, their embeddings and the aliases
// must be exactly the acknowledged state, or — with a write in doubt —
// exactly that state with the write applied.
void Soak::VerifyName(ClientModel& m, int i) {
  const std::string& name = m.names[i];
  const NameState& expected = m.states[i];
  const Pending pending = m.pending.kind != Pending::kNone && m.pending.name == i ? m.pending : Pending{};
  auto listed = client_->ListKernels(name);
  if (!listed.ok()) {
    Problem(&CrashSoakResult::lost_writes, "ListKernels(" + name + "): " + listed.status().ToString());
    m.retired[i] = true;
    return;
  }
  // What the server has: version → seed (0 = matches no known embedding).
  std::map<int64_t, Embedding> exported;
  for (const auto& k : *listed) {
    auto e = client_->ExportKernel(Ref(name, k.version()));
    if (!e.ok()) {
      Problem(e.status().code() == StatusCode::kDataLoss ? &CrashSoakResult::corrupt_artifacts
                                                         : &CrashSoakResult::lost_writes,
              "export of " + VersionName(name, k.version()) + " after kill " + std::to_string(result_.kills) + ": " +
                  e.status().ToString());
      m.retired[i] = true;
      return;
    }
    exported[k.version()] = std::move(e->embedding);
  }
  std::map<std::string, int64_t> aliases;
  for (const char* alias : kAliases) {
    auto info = client_->GetKernel(Ref(name, 0, alias));
    if (info.ok()) aliases[alias] = info->version();
    else if (info.status().code() != StatusCode::kNotFound) {
      Problem(&CrashSoakResult::lost_writes, "GetKernel(" + name + "@" + alias + "): " + info.status().ToString());
    }
  }
  auto matches = [&](const NameState& s) {
    if (s.aliases != aliases || s.versions.size() != exported.size()) return false;
    for (const auto& [v, seed] : s.versions) {
      auto it = exported.find(v);
      if (it == exported.end() || !SameBits(it->second, ImportEmbedding(seed))) return false;
    }
    return true;
  };
  std::vector<NameState> candidates = {expected};
  if (pending.kind == Pending::kImport) {
    for (const auto& [v, e] : exported) {
      if (expected.versions.count(v)) continue;
      NameState s = expected;
      s.versions[v] = pending.seed;
      candidates.push_back(s);
    }
  } else if (pending.kind == Pending::kDelete) {
    NameState s = expected;
    s.versions.erase(pending.version);
    for (auto it = s.aliases.begin(); it != s.aliases.end();) {
      it = it->second == pending.version ? s.aliases.erase(it) : std::next(it);
    }
    candidates.push_back(s);
  } else if (pending.kind == Pending::kAlias) {
    NameState s = expected;
    s.aliases[pending.alias] = pending.version;
    candidates.push_back(s);
  }
  for (const NameState& s : candidates) {
    if (!matches(s)) continue;
    if (!(s == expected)) {
      // The in-doubt write took effect: it is the state from now on.
      for (const auto& [v, seed] : expected.versions) {
        if (!s.versions.count(v)) m.answers.erase({name, v});
      }
      m.states[i] = s;
    }
    // Every version (and alias) answers as before the kill.
    for (const auto& [v, seed] : m.states[i].versions) {
      const Status q = CompareAnswer(*client_, m, Ref(name, v), name, v);
      if (!q.ok()) Problem(&CrashSoakResult::query_mismatches, "query of " + VersionName(name, v) + ": " + q.ToString());
    }
    for (const auto& [alias, v] : m.states[i].aliases) {
      const Status q = CompareAnswer(*client_, m, Ref(name, 0, alias), name, v);
      if (!q.ok()) Problem(&CrashSoakResult::query_mismatches, "query of " + name + "@" + alias + ": " + q.ToString());
    }
    return;
  }
  // Neither: say what differs, then stop using the name.
  const std::string after = " after kill " + std::to_string(result_.kills) +
                            (pending.kind == Pending::kNone ? "" : " (one write in doubt)");
  for (const auto& [v, seed] : expected.versions) {
    auto it = exported.find(v);
    if (it == exported.end()) {
      Problem(&CrashSoakResult::lost_writes, "acknowledged import " + VersionName(name, v) + " is gone" + after);
    } else if (!SameBits(it->second, ImportEmbedding(seed))) {
      Problem(&CrashSoakResult::corrupt_artifacts, VersionName(name, v) + " exports a different embedding" + after);
    }
  }
  for (const auto& [v, e] : exported) {
    if (!expected.versions.count(v) && !(pending.kind == Pending::kImport && SameBits(e, ImportEmbedding(pending.seed)))) {
      Problem(&CrashSoakResult::lost_writes, VersionName(name, v) + " exists but was deleted (or never acknowledged)" + after);
    }
  }
  for (const char* alias : kAliases) {
    auto want = expected.aliases.find(alias);
    auto got = aliases.find(alias);
    const int64_t w = want == expected.aliases.end() ? 0 : want->second;
    const int64_t g = got == aliases.end() ? 0 : got->second;
    const bool pending_explains = pending.kind == Pending::kAlias && pending.alias == alias && g == pending.version;
    const bool delete_explains = pending.kind == Pending::kDelete && w == pending.version && g == 0;
    if (w != g && !pending_explains && !delete_explains) {
      Problem(&CrashSoakResult::lost_writes, "alias " + name + "@" + alias + " names v" + std::to_string(g) +
                                                 ", acknowledged v" + std::to_string(w) + " (0 = none)" + after);
    }
  }
  m.retired[i] = true;
}

void Soak::VerifyJobKernel(ClientModel& m, JobModel& jm) {
  if (jm.kernel_version == 0 || !jm.embedding) return;
  const std::string after = " after kill " + std::to_string(result_.kills);
  auto e = client_->ExportKernel(Ref(jm.kernel_name, jm.kernel_version));
  if (jm.kernel_deleted) {
    if (e.ok()) {
      Problem(&CrashSoakResult::lost_writes,
              "deleted kernel " + VersionName(jm.kernel_name, jm.kernel_version) + " is back" + after);
    }
    return;
  }
  if (!e.ok()) {
    if (jm.kernel_delete_in_doubt && e.status().code() == StatusCode::kNotFound) {
      jm.kernel_deleted = true;  // the in-doubt delete took effect
      m.answers.erase({jm.kernel_name, jm.kernel_version});
      return;
    }
    Problem(e.status().code() == StatusCode::kDataLoss ? &CrashSoakResult::corrupt_artifacts
                                                       : &CrashSoakResult::lost_writes,
            "job " + jm.id + "'s kernel " + VersionName(jm.kernel_name, jm.kernel_version) + after + ": " +
                e.status().ToString());
    jm.kernel_deleted = true;  // reported once
    return;
  }
  jm.kernel_delete_in_doubt = false;  // it did not take effect
  if (!SameBits(e->embedding, *jm.embedding)) {
    Problem(&CrashSoakResult::corrupt_artifacts,
            "job " + jm.id + "'s kernel exports a different embedding" + after);
  }
  const Status q = CompareAnswer(*client_, m, Ref(jm.kernel_name, jm.kernel_version), jm.kernel_name, jm.kernel_version);
  if (!q.ok()) Problem(&CrashSoakResult::query_mismatches, "query of job " + jm.id + "'s kernel: " + q.ToString());
  // A job's result is stored once, however often the job was interrupted.
  auto versions = client_->ListKernels(jm.kernel_name);
  if (versions.ok() && !jm.duplicate_reported) {
    int mine = 0;
    for (const auto& k : *versions) mine += k.job_id() == jm.id;
    if (mine != 1) {
      Problem(&CrashSoakResult::duplicate_job_kernels,
              "job " + jm.id + " has " + std::to_string(mine) + " stored kernels" + after);
      jm.duplicate_reported = true;
    }
  }
}

Status Soak::Verify() {
  KLS_ASSIGN_OR_RETURN(std::vector<v1::DatasetInfo> datasets, client_->ListDatasets());
  std::map<std::string, int64_t> have;
  for (const auto& d : datasets) have[d.id()] = d.num_points();
  KLS_ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, AllJobs());
  std::map<std::string, const v1::Job*> by_id;
  for (const auto& j : jobs) by_id[j.id()] = &j;
  const std::string after = " after kill " + std::to_string(result_.kills);
  for (ClientModel& m : models_) {
    for (auto it = m.datasets.begin(); it != m.datasets.end();) {
      auto h = have.find(it->first);
      if (h == have.end() || h->second != it->second) {
        Problem(&CrashSoakResult::lost_writes, "acknowledged upload " + it->first + " is " +
                                                   (h == have.end() ? "gone" : "changed") + after);
        it = m.datasets.erase(it);  // reported once
      } else {
        ++it;
      }
    }
    for (JobModel& jm : m.jobs) {
      auto j = by_id.find(jm.id);
      if (j == by_id.end()) {
        if (!jm.reported) Problem(&CrashSoakResult::lost_writes, "acknowledged job " + jm.id + " is gone" + after);
        jm.reported = true;
        continue;
      }
      SeeJob(*client_, m, jm, *j->second, true);
      VerifyJobKernel(m, jm);
    }
    for (int i = 0; i < kNamesPerClient; ++i) {
      if (!m.retired[i]) VerifyName(m, i);
    }
    m.pending = Pending{};
  }
  VerifySharedName();
  return OkStatus();
}

void Soak::VerifySharedName() {
  // Each version of the shared name belongs to one job, and each succeeded
  // job's version is there under its own job id.
  std::map<int64_t, std::string> owner;
  for (const ClientModel& m : models_) {
    for (const JobModel& jm : m.jobs) {
      if (jm.kernel_name != kSharedKernelName || jm.kernel_version == 0) continue;
      auto [it, inserted] = owner.emplace(jm.kernel_version, jm.id);
      if (!inserted && it->second != jm.id && !jm.duplicate_reported) {
        Problem(&CrashSoakResult::duplicate_job_kernels, std::string(kSharedKernelName) + " v" +
                                                             std::to_string(jm.kernel_version) + " was reported to jobs " +
                                                             it->second + " and " + jm.id);
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_.shared_name_versions = static_cast<int64_t>(owner.size());
  }
  auto listed = client_->ListKernels(kSharedKernelName);
  if (!listed.ok()) return;
  for (const auto& k : *listed) {
    auto it = owner.find(k.version());
    if (it != owner.end() && it->second != k.job_id()) {
      Problem(&CrashSoakResult::duplicate_job_kernels, std::string(kSharedKernelName) + " v" +
                                                           std::to_string(k.version()) + " belongs to job " +
                                                           k.job_id() + ", not " + it->second);
    }
  }
}

// ---- The run -------------------------------------------------------------------

Status Soak::Run() {
  if (options_.kills < 1) return InvalidArgumentError("kills = " + std::to_string(options_.kills) + " must be >= 1");
  if (options_.clients < 1 || options_.clients > 16) {
    return InvalidArgumentError("clients = " + std::to_string(options_.clients) + " must be in [1, 16]");
  }
  if (options_.min_kill_ms < 0 || options_.max_kill_ms < options_.min_kill_ms || options_.early_kill_max_ms < 0) {
    return InvalidArgumentError("kill window [" + std::to_string(options_.min_kill_ms) + ", " +
                                std::to_string(options_.max_kill_ms) + "] ms is not a valid range");
  }
  if (!(options_.final_wait_seconds > 0)) return InvalidArgumentError("final_wait_seconds must be > 0");
  std::error_code ec;
  if (!fs::is_regular_file(options_.server_binary, ec) || access(options_.server_binary.c_str(), X_OK) != 0) {
    return NotFoundError("kls-server binary '" + options_.server_binary + "' is not an executable file");
  }
  if (options_.work_dir.empty()) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kls-crash-soak-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return InternalError("mkdtemp " + pattern + ": " + std::strerror(errno));
    dir_ = pattern;
  } else {
    dir_ = options_.work_dir;
    if (fs::exists(dir_ / "data", ec)) {
      return FailedPreconditionError("work dir '" + dir_.string() + "' already has a data/ directory; the soak needs a fresh one");
    }
    fs::create_directories(dir_, ec);
    if (ec) return InternalError("creating '" + dir_.string() + "': " + ec.message());
  }
  dir_ = fs::canonical(dir_);
  data_dir_ = dir_ / "data";
  log_path_ = dir_ / "server.log";
  result_.work_dir = dir_.string();
  const auto start = Clock::now();

  // Every client: its kernel names and the data set its jobs learn on.
  KLS_RETURN_IF_ERROR(StartServer());
  KLS_ASSIGN_OR_RETURN(Dataset moons, MakeTwoMoons(200, 0.05, 1));
  KLS_ASSIGN_OR_RETURN(PairwiseConstraints constraints, GenerateAdmmProtocol(moons.labels, 1));
  models_.resize(static_cast<size_t>(options_.clients));
  for (int c = 0; c < options_.clients; ++c) {
    ClientModel& m = models_[static_cast<size_t>(c)];
    m.index = c;
    m.next_seed = options_.seed * 1000003 + static_cast<uint64_t>(c) * 100000000 + 1;
    for (int i = 0; i < kNamesPerClient; ++i) m.names.push_back("c" + std::to_string(c) + "-kernel-" + std::to_string(i));
    m.states.resize(kNamesPerClient);
    m.retired.assign(kNamesPerClient, false);
    UploadOptions o;
    o.name = "c" + std::to_string(c) + "-moons";
    auto base = client_->UploadDataset(moons, constraints, o);
    if (!base.ok()) return base.status().WithContext("uploading the jobs' data set");
    m.base_dataset = base->id();
    m.datasets[base->id()] = moons.num_points();
    ++result_.acknowledged_writes;
  }

  auto log_kill = [&](Clock::time_point round_start, const char* when) {
    if (!options_.log) return;
    std::ostringstream line;
    line << "kill " << result_.kills << "/" << options_.kills << " " << when << " ("
         << std::chrono::duration<double>(Clock::now() - round_start).count() << " s): "
         << result_.acknowledged_writes << " acknowledged writes, " << result_.in_doubt_writes << " in doubt, "
         << result_.problems.size() << " problems";
    options_.log(line.str());
  };
  bool serving = true;
  for (int round = 0; round < options_.kills; ++round) {
    const auto round_start = Clock::now();
    if (!serving) {
      KLS_RETURN_IF_ERROR(SpawnServer());
      // About one kill in ten lands during the restart (recovery re-queues
      // jobs, removes leftovers) instead of during client traffic.
      if (std::uniform_int_distribution<int>(0, 9)(rng_) == 0) {
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::uniform_int_distribution<int>(0, options_.early_kill_max_ms)(rng_)));
        KLS_RETURN_IF_ERROR(KillServer());
        ++result_.kills_during_restart;
        KLS_RETURN_IF_ERROR(RunCheck(false));
        log_kill(round_start, "during the restart");
        continue;
      }
      KLS_RETURN_IF_ERROR(WaitServing());
      KLS_RETURN_IF_ERROR(Verify().WithContext("checking after kill " + std::to_string(result_.kills)));
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (ClientModel& m : models_) {
      const uint64_t seed = options_.seed * 7919 + static_cast<uint64_t>(round) * 131 + static_cast<uint64_t>(m.index);
      threads.emplace_back([this, &m, seed, &stop] { ClientLoop(m, seed, stop); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::uniform_int_distribution<int>(options_.min_kill_ms, options_.max_kill_ms)(rng_)));
    result_.kills_during_writes += writes_in_flight_.load() > 0;
    {
      v1::ListJobsRequest list;
      list.set_state(v1::RUNNING);
      auto r = client_->ListJobs(list);
      result_.kills_during_jobs += r.ok() && r->jobs_size() > 0;
    }
    const Status killed = KillServer();
    stop = true;
    for (std::thread& t : threads) t.join();
    KLS_RETURN_IF_ERROR(killed);
    serving = false;
    KLS_RETURN_IF_ERROR(RunCheck(false));
    log_kill(round_start, "during traffic");
  }

  // No more kills: every job must end within the bounded wait.
  KLS_RETURN_IF_ERROR(StartServer());
  KLS_RETURN_IF_ERROR(Verify().WithContext("checking after the last kill"));
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.final_wait_seconds * 1000));
  std::vector<v1::Job> jobs;
  std::map<std::string, int> last_iteration, advancing;
  while (true) {
    KLS_ASSIGN_OR_RETURN(jobs, AllJobs());
    bool done = true;
    for (const v1::Job& j : jobs) {
      if (IsTerminal(j.state())) continue;
      done = false;
      const int it = j.progress().iteration();
      advancing[j.id()] = j.state() == v1::RUNNING && last_iteration.count(j.id()) && it > last_iteration[j.id()];
      last_iteration[j.id()] = it;
    }
    if (done || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (const v1::Job& j : jobs) {
    if (IsTerminal(j.state())) {
      if (j.state() == v1::FAILED && j.last_attempt_end() == "process_lost") {
        ++result_.jobs_failed_by_kills;
      }
      continue;
    }
    if (advancing[j.id()]) continue;  // running and making progress: not stuck
    Problem(&CrashSoakResult::stuck_jobs, "job " + j.id() + " still " + v1::JobState_Name(j.state()) + " after " +
                                              std::to_string(options_.final_wait_seconds) + " s without kills");
  }
  KLS_RETURN_IF_ERROR(Verify().WithContext("checking after the final wait"));

  // A clean stop leaves nothing behind.
  if (kill(server_pid_, SIGTERM) != 0) return InternalError("SIGTERM failed");
  const int code = WaitFor(server_pid_, std::chrono::seconds(60));
  if (code != 0) result_.problems.push_back("kls-server exited " + std::to_string(code) + " after SIGTERM");
  if (code == -1) {
    kill(server_pid_, SIGKILL);
    WaitFor(server_pid_, std::chrono::seconds(10));
  }
  server_pid_ = -1;
  KLS_RETURN_IF_ERROR(RunCheck(true));
  if (code != 0) result_.final_check_clean = false;
  ComputeRedone();
  result_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return OkStatus();
}

void Soak::ComputeRedone() {
  // "[2026-11-28 01:02:03.456] [info] job J: running (attempt A, ..." and
  // "... job J: checkpoint at iteration I (attempt A)", "... job J:
  // succeeded|failed|cancelled ..." (the server logs local time, ms).
  const auto stamp = [](const std::string& line, int64_t* ms) {
    std::tm tm{};
    int millis = 0;
    if (line.size() < 25 || line[0] != '[') return false;
    if (std::sscanf(line.c_str(), "[%d-%d-%d %d:%d:%d.%d]", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                    &tm.tm_min, &tm.tm_sec, &millis) != 7) {
      return false;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    *ms = static_cast<int64_t>(std::mktime(&tm)) * 1000 + millis;
    return true;
  };
  struct Attempt {
    int64_t start = 0, last_checkpoint = 0, end = 0;
  };
  std::map<std::pair<std::string, int>, Attempt> attempts;
  std::map<std::string, int> current;  // job → its latest attempt seen
  std::istringstream log(ReadFile(log_path_));
  std::string line;
  while (std::getline(log, line)) {
    const size_t at = line.find("] job ");
    int64_t t = 0;
    if (at == std::string::npos || !stamp(line, &t)) continue;
    const size_t colon = line.find(": ", at + 6);
    if (colon == std::string::npos) continue;
    const std::string job = line.substr(at + 6, colon - at - 6);
    const std::string what = line.substr(colon + 2);
    int attempt = 0;
    long long iteration = 0;
    if (std::sscanf(what.c_str(), "running (attempt %d", &attempt) == 1) {
      attempts[{job, attempt}].start = t;
      current[job] = attempt;
    } else if (std::sscanf(what.c_str(), "checkpoint at iteration %lld (attempt %d)", &iteration, &attempt) == 2) {
      attempts[{job, attempt}].last_checkpoint = t;
    } else if (what.rfind("succeeded", 0) == 0 || what.rfind("failed", 0) == 0 || what.rfind("cancelled", 0) == 0) {
      auto it = current.find(job);
      if (it != current.end()) {
        Attempt& a = attempts[{job, it->second}];
        if (a.end == 0) a.end = t;
      }
    }
  }
  std::vector<int64_t> kills = kill_times_ms_;
  std::sort(kills.begin(), kills.end());
  double done = 0, redone = 0;
  for (const auto& [key, a] : attempts) {
    if (a.start == 0) continue;
    const auto next_kill = std::upper_bound(kills.begin(), kills.end(), a.start);
    const bool killed = next_kill != kills.end() && (a.end == 0 || *next_kill < a.end);
    if (killed) {
      done += (*next_kill - a.start) / 1000.0;
      redone += (*next_kill - std::max(a.start, a.last_checkpoint)) / 1000.0;
    } else if (a.end > a.start) {
      done += (a.end - a.start) / 1000.0;
    }
  }
  result_.solve_seconds = done;
  result_.redone_seconds = redone;
  result_.redone_fraction = done > 0 ? redone / done : -1;
}

}  // namespace

bool CrashSoakResult::Clean() const {
  return lost_writes == 0 && corrupt_artifacts == 0 && stuck_jobs == 0 && query_mismatches == 0 &&
         duplicate_job_kernels == 0 && final_check_clean;
}

nlohmann::json CrashSoakResult::ToJson() const {
  return {{"kills", kills},
          {"kills_during_restart", kills_during_restart},
          {"kills_during_writes", kills_during_writes},
          {"kills_during_jobs", kills_during_jobs},
          {"acknowledged_writes", acknowledged_writes},
          {"in_doubt_writes", in_doubt_writes},
          {"lost_writes", lost_writes},
          {"corrupt_artifacts", corrupt_artifacts},
          {"stuck_jobs", stuck_jobs},
          {"jobs_failed_by_kills", jobs_failed_by_kills},
          {"query_mismatches", query_mismatches},
          {"duplicate_job_kernels", duplicate_job_kernels},
          {"shared_name_versions", shared_name_versions},
          {"redone_fraction", redone_fraction},
          {"solve_seconds", solve_seconds},
          {"redone_seconds", redone_seconds},
          {"long_jobs_submitted", long_jobs_submitted},
          {"queries", queries},
          {"jobs_submitted", jobs_submitted},
          {"jobs_succeeded", jobs_succeeded},
          {"jobs_cancelled", jobs_cancelled},
          {"jobs_failed", jobs_failed},
          {"cancels_requested", cancels_requested},
          {"leftovers_after_kills", leftovers_after_kills},
          {"final_check_clean", final_check_clean},
          {"store", store},
          {"seconds", seconds},
          {"problems", problems}};
}

StatusOr<CrashSoakResult> RunCrashSoak(const CrashSoakOptions& options) {
  CrashSoakResult result;
  result.store = options.store_uri.empty() ? "embedded" : "postgresql";
  Status s;
  {
    Soak soak(options, &result);
    s = soak.Run();
  }
  if (!result.work_dir.empty() && !options.keep_dir && s.ok() && result.Clean()) {
    std::error_code ignored;
    fs::remove_all(result.work_dir, ignored);
  }
  if (!s.ok()) {
    return Status(s.code(), s.message() + (result.work_dir.empty() ? "" : " (logs in " + result.work_dir + ")"));
  }
  return result;
}

}  // namespace kls::bench
