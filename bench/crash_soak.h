// Crash soak of the real kls-server: several client threads run a random mix
// of writes and queries (data-set uploads, kernel imports, kernel deletes,
// alias set / move, job submits, job cancels, Similarity / TopK queries) while
// the server is killed with SIGKILL at random moments and restarted on the
// same data directory. After every kill `kls-server --check` must be clean;
// after every restart every acknowledged write must be there (or, for a
// delete, gone) exactly as acknowledged, and every kernel must answer queries
// exactly as it did before. After the last restart (no more kills) every job
// must reach a terminal state within a bounded wait.
//
// Used by `kls-bench crash` (bench/crash_bench.cc) and by the e2e suite
// (tests/e2e/crash_test.cc). All traffic goes to 127.0.0.1; every wait is
// bounded.
//
// What counts (CrashSoakResult):
//   acknowledged  a write whose RPC returned OK (for a cancel: OK with the
//                 job CANCELLED, or OK with it RUNNING = cancellation
//                 requested, which must end CANCELLED too);
//   in doubt      a write whose RPC failed without a definite answer
//                 (UNAVAILABLE, DEADLINE_EXCEEDED, ... — the kill): after the
//                 restart the state must be exactly "applied" or exactly "not
//                 applied"; counted neither as acknowledged nor as lost;
//   lost write    an acknowledged write that is missing or undone after a
//                 restart (an upload, a kernel version, an alias, a job, a
//                 job's terminal state or an acknowledged cancel), a deleted
//                 kernel version that is back, or an in-doubt write that left
//                 a state that is neither;
//   corrupt       a kernel whose exported embedding differs from what was
//                 written, a DATA_LOSS answer, or a problem that
//                 `kls-server --check` reports;
//   query mismatch a Similarity / TopK answer (by version or by alias) that
//                 differs from the first answer that kernel version gave;
//   stuck job     a job that is neither terminal nor advancing when the final
//                 bounded wait ends;
//   jobs failed by kills  jobs that ended FAILED with their last attempt
//                 process_lost: the lost-process safety net (max_lost_attempts
//                 lost attempts in a row without checkpoint progress) took
//                 kills from outside for a job that crashes its process. Kills
//                 never count against max_attempts; this should stay 0.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace kls::bench {

struct CrashSoakOptions {
  std::string server_binary;  ///< path of kls-server
  int kills = 10;             ///< SIGKILLs (restarts); >= 1
  uint64_t seed = 1;          ///< kill moments and every client's choices
  int clients = 3;            ///< client threads, each with its own connection; 1..16
  /// Each kill comes after a random time in [min_kill_ms, max_kill_ms] of
  /// client traffic; about one kill in ten instead lands during the restart
  /// itself (recovery), within early_kill_max_ms of the spawn.
  int min_kill_ms = 100;
  int max_kill_ms = 1500;
  int early_kill_max_ms = 300;
  /// Bound of the final wait for every job to end (no more kills then).
  double final_wait_seconds = 120;
  int server_workers = 2;     ///< kls-server --workers
  int max_attempts = 2;       ///< kls-server --max-attempts
  /// Empty: the embedded store in the data directory. Else the shared
  /// PostgreSQL store (`kls-server --store URI`, an empty database): the
  /// server also gets --lease-seconds lease_seconds (a restarted server is a
  /// new replica and takes over its predecessor's jobs when their leases
  /// expire), and the offline `kls-server --check` — a check of the embedded
  /// store's files — is not run (final_check_clean is then true; every artifact
  /// is still read back and compared by the queries after each restart).
  std::string store_uri;
  double lease_seconds = 2.0;  ///< with store_uri
  std::string work_dir;       ///< empty: a fresh directory under $TMPDIR (or /tmp)
  bool keep_dir = false;      ///< keep the data directory and logs afterwards
  /// Progress lines (one per kill); empty = quiet.
  std::function<void(const std::string&)> log;
};

struct CrashSoakResult {
  int kills = 0;
  int kills_during_restart = 0;     ///< kills within early_kill_max_ms of a restart's spawn (startup, recovery)
  int kills_during_writes = 0;      ///< kills with a write RPC in flight
  int kills_during_jobs = 0;        ///< kills with a job running
  int64_t acknowledged_writes = 0;
  int64_t in_doubt_writes = 0;
  int64_t lost_writes = 0;
  int64_t corrupt_artifacts = 0;
  int64_t stuck_jobs = 0;
  int64_t jobs_failed_by_kills = 0;
  int64_t query_mismatches = 0;
  int64_t duplicate_job_kernels = 0;  ///< a job's result stored more than once, or a version claimed by two jobs
  /// Versions of the kernel name every client's jobs share (kls-crash-shared)
  /// that succeeded jobs reported, each checked to belong to one job.
  int64_t shared_name_versions = 0;
  /// Solve time redone after resumes / solve time done, over every attempt
  /// (from the server log's attempt starts, checkpoints and ends and the kill
  /// times): a killed attempt redoes the time since its last checkpoint (all
  /// of it without one). -1 when no attempt ran.
  double redone_fraction = -1;
  double solve_seconds = 0, redone_seconds = 0;
  int64_t long_jobs_submitted = 0;  ///< of jobs_submitted: long ones (8 s deadline, checkpointed)
  int64_t queries = 0;                ///< queries compared (clients and checks)
  int64_t jobs_submitted = 0, jobs_succeeded = 0, jobs_cancelled = 0, jobs_failed = 0;
  int64_t cancels_requested = 0;      ///< acknowledged cancels of running jobs
  int64_t leftovers_after_kills = 0;  ///< crash leftovers `--check` listed (harmless)
  bool final_check_clean = false;     ///< `--check` after a clean SIGTERM: 0 problems, 0 leftovers
  std::string store = "embedded";     ///< "embedded" or "postgresql" (CrashSoakOptions::store_uri)
  double seconds = 0;
  std::string work_dir;               ///< data directory and logs (removed unless keep_dir)
  std::vector<std::string> problems;  ///< the first problems found, in words

  /// True when nothing was lost, corrupt, stuck or mismatched, no job result
  /// was stored twice and the final check was clean.
  bool Clean() const;
  nlohmann::json ToJson() const;
};

/// Runs the soak. A non-OK status means the soak itself could not run (the
/// server binary is missing, the server did not start within 30 s, ...);
/// what the soak found is in the result.
StatusOr<CrashSoakResult> RunCrashSoak(const CrashSoakOptions& options);

}  // namespace kls::bench
