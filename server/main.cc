// kls-server: parse flags and config, start KlsServer, wait for SIGTERM or
// SIGINT, shut down gracefully. Exit status: 0 after a clean shutdown, 1 when
// the server cannot start, 2 for bad flags or config.
//
// `kls-server --check --data-dir DIR` checks a data directory offline instead
// of serving (store::CheckDataDirectory: SQLite integrity_check, every
// artifact's CRC-32 and shape) and exits 0 when healthy, 1 when it found
// damage, 2 when it cannot check (no such directory, or a running server owns
// it). Crash leftovers are listed but are not damage. `--check --store URI`
// checks a PostgreSQL store instead (CheckStore).
//
// `kls-server --backup DIR --data-dir D` snapshots D's embedded store into DIR
// (server/store/backup.h) while a server may be running on D;
// `kls-server --restore DIR --data-dir NEW` verifies DIR's manifest, copies it
// into the empty NEW and runs the --check integrity check on it.
//
// `kls-server --migrate-only` brings the store's schema up to this build's
// and exits 0 (MigrateOnly): on PostgreSQL under the schema's advisory lock,
// so migrators started together migrate once; the embedded store with its
// data directory's lock (refused while a server runs on it).
//
// While serving, SIGHUP reloads tokens_file and the TLS certificate, key and
// client CA (KlsServer::ReloadSecurity); SIGTERM and SIGINT shut down.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <spdlog/spdlog.h>

#include "server/data_dir.h"
#include "server/kls_server.h"
#include "server/logging.h"
#include "server/server_config.h"
#include "server/store/backup.h"
#include "server/store/store.h"

namespace {

// The integrity check of --check and --restore on a data directory whose
// lock the caller holds; prints the report and returns the exit status.
int ReportIntegrity(const std::string& path, const char* mode) {
  const kls::StatusOr<kls::store::IntegrityReport> report = kls::store::CheckDataDirectory(path);
  if (!report.ok()) {
    std::cerr << "kls-server " << mode << ": " << report.status() << "\n";
    return report.status().code() == kls::StatusCode::kNotFound ? 2 : 1;
  }
  for (const std::string& f : report->leftovers) {
    std::cout << "leftover (harmless, removed at the next start): " << f << "\n";
  }
  for (const std::string& p : report->problems) std::cout << "PROBLEM: " << p << "\n";
  std::cout << (report->problems.empty() ? "ok" : "damaged") << ": " << report->datasets << " data sets, "
            << report->kernels << " kernels, " << report->jobs << " jobs, " << report->artifact_bytes
            << " artifact bytes checksummed, " << report->problems.size() << " problems, "
            << report->leftovers.size() << " leftovers\n";
  return report->problems.empty() ? 0 : 1;
}

// --check: see the file comment.
int CheckDataDir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    std::cerr << "kls-server --check: \"" << dir << "\" is not a directory\n";
    return 2;
  }
  // Holding the lock keeps a server from starting (and writing) meanwhile,
  // and refuses to check a directory a running server is writing to.
  const kls::StatusOr<std::unique_ptr<kls::server::DataDir>> lock = kls::server::DataDir::Open(dir);
  if (!lock.ok()) {
    std::cerr << "kls-server --check: " << lock.status() << "\n";
    return 2;
  }
  return ReportIntegrity((*lock)->path(), "--check");
}

// --check --store URI: the shared store's integrity check (Store::CheckIntegrity:
// every artifact's CRC-32 read from the database, unreferenced artifacts,
// aliases naming missing versions), e.g. on a database restored with
// pg_restore. Opening the store migrates an older schema, as a replica would.
int CheckStore(const kls::server::ServerConfig& config) {
  kls::store::PostgresStoreOptions pg;
  pg.uri = config.store;
  pg.pool_size = 1;  // cache_dir left empty: a private temporary directory
  auto store = kls::store::OpenPostgresStore(pg);
  if (!store.ok()) {
    std::cerr << "kls-server --check: " << store.status() << "\n";
    return 2;
  }
  const kls::StatusOr<std::vector<std::string>> problems = (*store)->CheckIntegrity();
  if (!problems.ok()) {
    std::cerr << "kls-server --check: " << problems.status() << "\n";
    return problems.status().code() == kls::StatusCode::kUnavailable ? 2 : 1;
  }
  auto datasets = (*store)->ListDatasets();
  auto kernels = (*store)->ListKernels();
  int64_t jobs = 0;
  for (kls::store::JobState s : {kls::store::JobState::kQueued, kls::store::JobState::kRunning,
                                 kls::store::JobState::kSucceeded, kls::store::JobState::kFailed,
                                 kls::store::JobState::kCancelled}) {
    auto n = (*store)->CountJobs(s);
    if (n.ok()) jobs += *n;
  }
  for (const std::string& p : *problems) std::cout << "PROBLEM: " << p << "\n";
  std::cout << (problems->empty() ? "ok" : "damaged") << ": " << (datasets.ok() ? datasets->size() : 0)
            << " data sets, " << (kernels.ok() ? kernels->size() : 0) << " kernels, " << jobs << " jobs, "
            << problems->size() << " problems\n";
  return problems->empty() ? 0 : 1;
}

// --backup DIR --data-dir D: a consistent snapshot of D's embedded store
// (server/store/backup.h) while a server may be running on D; D's lock is
// not taken. Exit 0 with a one-line summary; 1 when the backup failed, 2
// when it cannot start (D is not a data directory, DIR is not empty).
int BackupDataDir(const std::string& backup_dir, const kls::server::ServerConfig& config) {
  if (!config.store.empty()) {
    std::cerr << "kls-server --backup: backs up the embedded store of --data-dir; for --store postgresql://... "
                 "use pg_dump (docs/RELIABILITY.md, Backups)\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const kls::StatusOr<kls::store::BackupReport> r =
      kls::store::BackupDataDirectory(config.data_dir, backup_dir, kls::server::KlsVersion());
  if (!r.ok()) {
    std::cerr << "kls-server --backup: " << r.status() << "\n";
    const kls::StatusCode code = r.status().code();
    return code == kls::StatusCode::kNotFound || code == kls::StatusCode::kFailedPrecondition ? 2 : 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "backup of " << config.data_dir << " in " << backup_dir << ": " << r->datasets << " data sets, "
            << r->kernels << " kernels, " << r->jobs << " jobs; " << r->files << " files, " << r->bytes << " bytes ("
            << r->linked << " artifacts hard-linked), schema " << r->schema_version << ", " << r->attempts
            << (r->attempts == 1 ? " snapshot, " : " snapshots, ") << std::fixed << std::setprecision(2) << seconds
            << " s\n";
  return 0;
}

// --restore DIR --data-dir NEW: verify DIR's manifest, copy it into the empty
// NEW (locked meanwhile, so no server starts on it half-restored), then the
// --check integrity check. Exit 0 only when NEW is healthy.
int RestoreDataDir(const std::string& backup_dir, const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
    std::cerr << "kls-server --restore: the restore target \"" << dir
              << "\" is not empty; give a new or empty --data-dir\n";
    return 2;
  }
  const kls::StatusOr<std::unique_ptr<kls::server::DataDir>> lock = kls::server::DataDir::Open(dir);
  if (!lock.ok()) {
    std::cerr << "kls-server --restore: " << lock.status() << "\n";
    return 2;
  }
  const kls::StatusOr<kls::store::RestoreReport> r =
      kls::store::RestoreBackup(backup_dir, (*lock)->path(), kls::server::DataDir::kLockFileName);
  if (!r.ok()) {
    std::cerr << "kls-server --restore: " << r.status() << "\n";
    // Leave the target as empty as it was given (the lock file aside).
    for (const auto& entry : std::filesystem::directory_iterator((*lock)->path(), ec)) {
      if (entry.path().filename() != kls::server::DataDir::kLockFileName) std::filesystem::remove_all(entry.path(), ec);
    }
    return r.status().code() == kls::StatusCode::kNotFound ? 2 : 1;
  }
  std::cout << "restored " << r->files << " files, " << r->bytes << " bytes from " << backup_dir << " (taken by KLS "
            << r->kls_version << ") into " << (*lock)->path() << "\n";
  return ReportIntegrity((*lock)->path(), "--restore");
}

// --migrate-only: see the file comment. Exit 0 when the schema is current,
// 1 when the migration failed, 2 when the store cannot be reached or locked.
int MigrateOnly(const kls::server::ServerConfig& config) {
  if (!config.store.empty()) {
    kls::store::PostgresStoreOptions pg;
    pg.uri = config.store;
    pg.pool_size = 1;  // cache_dir left empty: a private temporary directory
    kls::store::PostgresStoreOptions::SchemaVersions versions;
    pg.schema_versions = &versions;
    auto store = kls::store::OpenPostgresStore(pg);
    if (!store.ok()) {
      std::cerr << "kls-server --migrate-only: " << store.status() << "\n";
      return store.status().code() == kls::StatusCode::kUnavailable ? 2 : 1;
    }
    if (versions.found == versions.now && versions.now > kls::store::kPostgresSchemaVersion) {
      std::cout << "schema already at version " << versions.now << ", one newer than this kls-server's "
                << kls::store::kPostgresSchemaVersion << " (which still serves on it): nothing to migrate\n";
    } else if (versions.found == versions.now) {
      std::cout << "schema already at version " << versions.now << ": nothing to migrate\n";
    } else if (versions.found == 0) {
      std::cout << "schema created at version " << versions.now << "\n";
    } else {
      std::cout << "schema migrated from version " << versions.found << " to " << versions.now << "\n";
    }
    return 0;
  }
  const kls::StatusOr<std::unique_ptr<kls::server::DataDir>> lock = kls::server::DataDir::Open(config.data_dir);
  if (!lock.ok()) {
    std::cerr << "kls-server --migrate-only: " << lock.status()
              << " (the embedded store migrates when its server starts; stop the server to migrate it alone)\n";
    return 2;
  }
  auto store = kls::store::OpenSqliteStore((*lock)->path());
  if (!store.ok()) {
    std::cerr << "kls-server --migrate-only: " << store.status() << "\n";
    return 1;
  }
  std::cout << "embedded store in " << (*lock)->path() << " is at this build's schema\n";
  return 0;
}

// --migrate-from DIR --store URI: see the flag's help.
int MigrateDataDir(const std::string& dir, const kls::server::ServerConfig& config) {
  if (config.store.empty()) {
    std::cerr << "kls-server --migrate-from needs --store postgresql://... (the destination)\n";
    return 2;
  }
  const kls::StatusOr<std::unique_ptr<kls::server::DataDir>> lock = kls::server::DataDir::Open(dir);
  if (!lock.ok()) {
    std::cerr << "kls-server --migrate-from: " << lock.status() << "\n";
    return 2;
  }
  auto from = kls::store::OpenSqliteStore((*lock)->path());
  if (!from.ok()) {
    std::cerr << "kls-server --migrate-from: " << from.status() << "\n";
    return 1;
  }
  kls::store::PostgresStoreOptions pg;
  pg.uri = config.store;
  pg.cache_dir = config.cache_dir;
  auto to = kls::store::OpenPostgresStore(pg);
  if (!to.ok()) {
    std::cerr << "kls-server --migrate-from: " << to.status() << "\n";
    return 1;
  }
  const kls::StatusOr<kls::store::MigrationReport> report = kls::store::CopyStore(**from, **to);
  if (!report.ok()) {
    std::cerr << "kls-server --migrate-from: " << report.status() << "\n";
    return 1;
  }
  std::cout << "migrated " << report->datasets << " data sets, " << report->kernels << " kernel versions, "
            << report->aliases << " aliases, " << report->jobs << " jobs (" << report->skipped_existing
            << " already in the destination, skipped)\n";
  return 0;
}

// The command line: values, and the options of the settings a config file
// also has (a flag given overrides the file).
struct Flags {
  std::string config_file, listen, data_dir, log_level;
  int workers = 0, max_message_mb = 0, kernel_cache_mb = 0;
  std::string tls_cert, tls_key, tls_client_ca, tokens_file;
  std::string store_uri, role, cache_dir;
  int cache_disk_mb = 0, max_attempts = 0;
  double lease_seconds = 0, checkpoint_seconds = 0;
  std::string metrics_listen, log_format;
  std::string access_log;
  std::string http_listen, http_cors_origins;
  int http_threads = 0;
  std::string migrate_from;
  std::string backup_dir, restore_dir, admin_backup_dir;
  bool migrate_only = false;
  bool check = false;
  // The options whose count() tells whether the flag was given.
  CLI::Option *listen_opt = nullptr, *data_dir_opt = nullptr, *workers_opt = nullptr, *log_level_opt = nullptr,
      *max_message_opt = nullptr, *kernel_cache_opt = nullptr, *tls_cert_opt = nullptr, *tls_key_opt = nullptr,
      *tls_client_ca_opt = nullptr, *tokens_opt = nullptr, *store_opt = nullptr, *role_opt = nullptr,
      *cache_dir_opt = nullptr, *cache_disk_opt = nullptr, *lease_opt = nullptr, *checkpoint_opt = nullptr,
      *attempts_opt = nullptr, *metrics_opt = nullptr, *log_format_opt = nullptr, *access_log_opt = nullptr,
      *http_opt = nullptr, *cors_opt = nullptr, *http_threads_opt = nullptr, *admin_backup_opt = nullptr;
};

// Every flag of kls-server, in --help order.
void AddFlags(CLI::App& app, const kls::server::ServerConfig& defaults, Flags& f) {
  app.add_option(
      "--config", f.config_file,
      "File of 'key = value' lines (listen, data_dir, workers, log_level, max_message_mb, "
      "kernel_cache_mb, tls_cert_file, tls_key_file, tls_client_ca_file, tokens_file, store, role, cache_dir, "
      "cache_disk_mb, lease_seconds, checkpoint_seconds, max_attempts, metrics_listen, log_format, http_listen, "
      "http_cors_origins, http_threads, access_log, backup_dir); "
      "flags override it");
  f.listen_opt = app.add_option("--listen", f.listen, "HOST:PORT to serve on; port 0 picks a free port")
                     ->default_str(defaults.listen);
  f.data_dir_opt = app.add_option("--data-dir", f.data_dir, "Data directory (created if missing, locked)")
                       ->default_str(defaults.data_dir);
  f.workers_opt =
      app.add_option("--workers", f.workers, "Learning-job worker threads (0 = one per core)")->default_str("0");
  f.log_level_opt = app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error, critical or off")
                        ->default_str(defaults.log_level);
  f.max_message_opt = app.add_option("--max-message-mb", f.max_message_mb, "Largest message received or sent, in MiB")
                          ->default_str(std::to_string(defaults.max_message_mb));
  f.kernel_cache_opt =
      app.add_option("--kernel-cache-mb", f.kernel_cache_mb, "Memory budget of the loaded-kernel cache, in MiB")
          ->default_str(std::to_string(defaults.kernel_cache_mb));
  f.tls_cert_opt = app.add_option("--tls-cert", f.tls_cert, "Server certificate chain (PEM); enables TLS");
  f.tls_key_opt = app.add_option("--tls-key", f.tls_key, "Private key (PEM) of --tls-cert");
  f.tls_client_ca_opt =
      app.add_option("--tls-client-ca", f.tls_client_ca, "CA (PEM) of client certificates; enables mutual TLS");
  f.tokens_opt = app.add_option("--tokens-file", f.tokens_file,
                                "File of 'TOKEN SCOPES' lines (scopes: read,write,admin); unset = auth off");
  f.store_opt = app.add_option("--store", f.store_uri,
                               "Shared PostgreSQL store for several replicas (postgresql://USER@HOST:PORT/DB); "
                               "unset = the embedded store in --data-dir");
  f.role_opt = app.add_option("--role", f.role, "all (default), api, worker or query (needs --store)");
  f.cache_dir_opt =
      app.add_option("--cache-dir", f.cache_dir, "Local verified artifact cache of this replica (with --store)");
  f.cache_disk_opt =
      app.add_option("--cache-disk-mb", f.cache_disk_mb, "Disk budget of --cache-dir, MiB (0 = unbounded)");
  f.lease_opt = app.add_option("--lease-seconds", f.lease_seconds,
                               "Job lease: a dead replica's jobs move to another after this long")
                    ->default_str(std::to_string(defaults.lease_seconds));
  f.checkpoint_opt = app.add_option("--checkpoint-seconds", f.checkpoint_seconds,
                                    "Solve time between checkpoints of resumable solvers")
                         ->default_str(std::to_string(defaults.checkpoint_seconds));
  f.attempts_opt = app.add_option("--max-attempts", f.max_attempts,
                                  "Counted failed attempts (out of memory, deaths without progress) before a job fails")
                       ->default_str(std::to_string(defaults.max_attempts));
  f.metrics_opt = app.add_option("--metrics-listen", f.metrics_listen,
                                 "HOST:PORT of the Prometheus metrics endpoint (GET /metrics); unset = off");
  f.log_format_opt =
      app.add_option("--log-format", f.log_format, "text, or json (one JSON object a line, with request ids)")
          ->default_str(defaults.log_format);
  f.access_log_opt = app.add_option("--access-log", f.access_log,
                                    "true: one info line per gRPC call and HTTP request (method, status, ms, "
                                    "request id, peer); false: those lines at debug level")
                         ->default_str(defaults.access_log ? "true" : "false");
  f.http_opt = app.add_option("--http-listen", f.http_listen,
                              "HOST:PORT of the HTTP/JSON API, /openapi.json and the web console; port 0 picks a "
                              "free port; unset = off");
  f.cors_opt = app.add_option("--http-cors-origins", f.http_cors_origins,
                              "Comma-separated origins (scheme://host[:port], * = any) whose browser requests the "
                              "HTTP API answers besides the server's own");
  f.http_threads_opt =
      app.add_option("--http-threads", f.http_threads, "HTTP worker threads (an open SSE watch holds one)")
          ->default_str(std::to_string(defaults.http_threads));
  app.add_option("--migrate-from", f.migrate_from,
                 "Copy every data set, job and kernel of this data directory into --store, then exit");
  f.admin_backup_opt =
      app.add_option("--backup-dir", f.admin_backup_dir,
                     "Directory where Admin.Backup (kls backup) writes snapshots of the running embedded store; "
                     "unset = that RPC is refused");
  app.add_option("--backup", f.backup_dir,
                 "Write a consistent snapshot of --data-dir (running server or not) into this new or empty "
                 "directory, then exit");
  app.add_option("--restore", f.restore_dir,
                 "Verify the backup in this directory, copy it into the new or empty --data-dir, check it, then exit");
  app.add_flag("--migrate-only", f.migrate_only,
               "Bring the store's schema up to this build's, then exit (PostgreSQL: under a lock, so migrators "
               "started together migrate once; e.g. a Kubernetes Job before a rollout)");
  app.add_flag("--check", f.check,
               "Check the data directory's (or with --store the database's) integrity and exit (0 healthy, 1 damaged, "
               "2 cannot check)");
}

// The settings given on the command line.
kls::StatusOr<kls::server::ConfigOverrides> OverridesFromFlags(const Flags& f) {
  kls::server::ConfigOverrides overrides;
  if (f.listen_opt->count() > 0) overrides.listen = f.listen;
  if (f.data_dir_opt->count() > 0) overrides.data_dir = f.data_dir;
  if (f.workers_opt->count() > 0) overrides.workers = f.workers;
  if (f.log_level_opt->count() > 0) overrides.log_level = f.log_level;
  if (f.max_message_opt->count() > 0) overrides.max_message_mb = f.max_message_mb;
  if (f.kernel_cache_opt->count() > 0) overrides.kernel_cache_mb = f.kernel_cache_mb;
  if (f.tls_cert_opt->count() > 0) overrides.tls_cert_file = f.tls_cert;
  if (f.tls_key_opt->count() > 0) overrides.tls_key_file = f.tls_key;
  if (f.tls_client_ca_opt->count() > 0) overrides.tls_client_ca_file = f.tls_client_ca;
  if (f.tokens_opt->count() > 0) overrides.tokens_file = f.tokens_file;
  if (f.store_opt->count() > 0) overrides.store = f.store_uri;
  if (f.role_opt->count() > 0) overrides.role = f.role;
  if (f.cache_dir_opt->count() > 0) overrides.cache_dir = f.cache_dir;
  if (f.cache_disk_opt->count() > 0) overrides.cache_disk_mb = f.cache_disk_mb;
  if (f.lease_opt->count() > 0) overrides.lease_seconds = f.lease_seconds;
  if (f.checkpoint_opt->count() > 0) overrides.checkpoint_seconds = f.checkpoint_seconds;
  if (f.attempts_opt->count() > 0) overrides.max_attempts = f.max_attempts;
  if (f.metrics_opt->count() > 0) overrides.metrics_listen = f.metrics_listen;
  if (f.log_format_opt->count() > 0) overrides.log_format = f.log_format;
  if (f.access_log_opt->count() > 0) {
    const kls::StatusOr<bool> on = kls::server::ParseBoolSetting("--access-log", f.access_log);
    if (!on.ok()) return on.status();
    overrides.access_log = *on;
  }
  if (f.http_opt->count() > 0) overrides.http_listen = f.http_listen;
  if (f.cors_opt->count() > 0) overrides.http_cors_origins = f.http_cors_origins;
  if (f.http_threads_opt->count() > 0) overrides.http_threads = f.http_threads;
  if (f.admin_backup_opt->count() > 0) overrides.backup_dir = f.admin_backup_dir;
  return overrides;
}

// Serves until SIGTERM or SIGINT (SIGHUP reloads); the exit status.
int Serve(const kls::server::ServerConfig& config) {
  // Block the shutdown signals and SIGHUP before gRPC starts its threads
  // (they inherit the mask), so only the sigwait below ever receives them:
  // no work runs in a signal handler.
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGTERM);
  sigaddset(&shutdown_signals, SIGINT);
  sigaddset(&shutdown_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);

  kls::server::KlsServer server(config);
  if (const kls::Status s = server.Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }

  // SIGHUP: reload tokens_file and the TLS certificate, key and client CA
  // (KlsServer::ReloadSecurity; a bad file is logged and the old one kept).
  int signal_number = 0;
  while (sigwait(&shutdown_signals, &signal_number) == 0 && signal_number == SIGHUP) {
    spdlog::info("received SIGHUP, reloading tokens and TLS certificate");
    server.ReloadSecurity();
  }
  spdlog::info("received {}, shutting down (grace {} ms)", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
               kls::server::KlsServer::kDefaultShutdownGrace.count());
  server.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using kls::server::ServerConfig;
  ServerConfig defaults;
  CLI::App app{"kls-server — the kernel learning service (gRPC)"};
  app.set_version_flag("--version", kls::server::KlsVersion());
  Flags f;
  AddFlags(app, defaults, f);
  CLI11_PARSE(app, argc, argv);

  const kls::StatusOr<kls::server::ConfigOverrides> overrides = OverridesFromFlags(f);
  if (!overrides.ok()) {
    std::cerr << "kls-server: " << overrides.status() << "\n";
    return 2;
  }
  const kls::StatusOr<ServerConfig> loaded = kls::server::LoadServerConfig(f.config_file, *overrides);
  if (!loaded.ok()) {
    std::cerr << "kls-server: " << loaded.status() << "\n";
    return 2;
  }
  const ServerConfig& config = *loaded;
  if (!f.backup_dir.empty() && !f.restore_dir.empty()) {
    std::cerr << "kls-server: --backup and --restore exclude each other\n";
    return 2;
  }
  if (!f.backup_dir.empty()) return BackupDataDir(f.backup_dir, config);
  if (!f.restore_dir.empty()) return RestoreDataDir(f.restore_dir, config.data_dir);
  if (f.check) return config.store.empty() ? CheckDataDir(config.data_dir) : CheckStore(config);
  if (f.migrate_only) return MigrateOnly(config);
  if (!f.migrate_from.empty()) return MigrateDataDir(f.migrate_from, config);
  kls::server::SetUpLogging(config.log_level, config.log_format);

  return Serve(config);
}
