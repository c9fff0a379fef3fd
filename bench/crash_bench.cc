// kls-bench crash: the crash soak (bench/crash_soak.h) as a command. Starts
// the real kls-server on a fresh data directory, runs several clients'
// uploads, imports, kernel deletes, alias changes, job submits, cancels and
// queries, SIGKILLs the server at random moments --kills times, restarts it
// and checks what every client was told. Exits 1 if anything acknowledged was
// lost, an artifact is corrupt, a job is stuck, a query answers differently,
// a job result was stored twice or the final `kls-server --check` is not
// clean; 2 if the soak could not run.
//
//   kls-bench crash --kills 100 --seed 1 --json
//
// kls-server is looked for next to kls-bench (build/server/kls-server for
// build/bench/kls-bench, or the same directory when installed); --server
// names another. All traffic goes to 127.0.0.1.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "bench/bench_util.h"
#include "bench/crash_soak.h"

namespace kls::bench {
namespace {

namespace fs = std::filesystem;

// kls-server next to this executable: ../server/kls-server (build tree) or
// ./kls-server (installed); empty if neither exists.
std::string DefaultServer() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& p : {self.parent_path().parent_path() / "server" / "kls-server",
                            self.parent_path() / "kls-server"}) {
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

Runner RegisterCrash(CLI::App& app, bool* json) {
  auto o = std::make_shared<CrashSoakOptions>();
  app.add_option("--kills", o->kills, "SIGKILLs of the server (each followed by a restart and the checks)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--seed", o->seed, "seed of the kill moments and of every client's choices");
  app.add_option("--clients", o->clients, "client threads, each with its own connection")->check(CLI::Range(1, 16));
  app.add_option("--server", o->server_binary, "kls-server binary (default: next to kls-bench)");
  app.add_option("--min-kill-ms", o->min_kill_ms, "shortest client traffic before a kill (ms)")->check(CLI::Range(0, 600000));
  app.add_option("--max-kill-ms", o->max_kill_ms, "longest client traffic before a kill (ms)")->check(CLI::Range(0, 600000));
  app.add_option("--final-wait", o->final_wait_seconds, "bound of the final wait for every job to end (s)")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--dir", o->work_dir, "work directory (must not hold data/ yet; default: a new one under $TMPDIR)");
  app.add_option("--store", o->store_uri,
                 "shared PostgreSQL store (postgresql://USER@HOST:PORT/DB, an empty database) instead of the embedded "
                 "one; the offline --check is then skipped");
  app.add_option("--lease-seconds", o->lease_seconds, "with --store: kls-server --lease-seconds")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_flag("--keep-dir", o->keep_dir, "keep the data directory and the server log afterwards");
  auto quiet = std::make_shared<bool>(false);
  app.add_flag("--quiet", *quiet, "no progress line per kill on stderr");
  return [o, json, quiet]() -> int {
    if (o->server_binary.empty()) o->server_binary = DefaultServer();
    if (o->server_binary.empty()) {
      std::cerr << "NOT_FOUND: no kls-server next to kls-bench; give its path with --server" << std::endl;
      return 2;
    }
    if (o->max_kill_ms < o->min_kill_ms) {
      std::cerr << "INVALID_ARGUMENT: --max-kill-ms = " << o->max_kill_ms << " is below --min-kill-ms = "
                << o->min_kill_ms << std::endl;
      return 2;
    }
    if (!*quiet) o->log = [](const std::string& line) { std::cerr << "crash: " << line << std::endl; };
    StatusOr<CrashSoakResult> r = RunCrashSoak(*o);
    if (!r.ok()) {
      std::cerr << r.status().ToString() << std::endl;
      return 2;
    }
    nlohmann::json out = r->ToJson();
    out["seed"] = o->seed;
    out["clients"] = o->clients;
    out["machine"] = MachineInfo();
    if (o->keep_dir || !r->Clean()) out["dir"] = r->work_dir;
    Emit(out, *json);
    return r->Clean() ? 0 : 1;
  };
}

}  // namespace

KLS_BENCH_SUBCOMMAND("crash", "crash soak: SIGKILL a real kls-server during mixed traffic, check every acknowledged write",
                     RegisterCrash);

}  // namespace kls::bench
