// kls-server: parse flags and config, start KlsServer, wait for SIGTERM or
// SIGINT, shut down gracefully. Exit status: 0 after a clean shutdown, 1 when
// the server cannot start, 2 for bad flags or config.
//
// `kls-server --check --data-dir DIR` checks a data directory offline instead
// of serving (store::CheckDataDirectory: SQLite integrity_check, every
// artifact's CRC-32 and shape) and exits 0 when healthy, 1 when it found
// damage, 2 when it cannot check (no such directory, or a running server owns
// it). Crash leftovers are listed but are not damage.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "server/data_dir.h"
#include "server/kls_server.h"
#include "server/server_config.h"
#include "server/store/store.h"

namespace {

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("kls-server");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::from_str(level));  // validated by ServerConfig
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
  const kls::StatusOr<kls::store::IntegrityReport> report = kls::store::CheckDataDirectory((*lock)->path());
  if (!report.ok()) {
    std::cerr << "kls-server --check: " << report.status() << "\n";
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

}  // namespace

int main(int argc, char** argv) {
  using kls::server::ServerConfig;
  ServerConfig defaults;
  CLI::App app{"kls-server — the kernel learning service (gRPC)"};
  app.set_version_flag("--version", kls::server::KlsVersion());
  std::string config_file, listen, data_dir, log_level;
  int workers = 0, max_message_mb = 0, kernel_cache_mb = 0;
  app.add_option("--config", config_file,
                 "File of 'key = value' lines (listen, data_dir, workers, log_level, max_message_mb, "
                 "kernel_cache_mb, tls_cert_file, tls_key_file, tls_client_ca_file, tokens_file); flags override it");
  auto* listen_opt = app.add_option("--listen", listen, "HOST:PORT to serve on; port 0 picks a free port")
                         ->default_str(defaults.listen);
  auto* data_dir_opt = app.add_option("--data-dir", data_dir, "Data directory (created if missing, locked)")
                           ->default_str(defaults.data_dir);
  auto* workers_opt = app.add_option("--workers", workers, "Learning-job worker threads (0 = one per core)")
                          ->default_str("0");
  auto* log_level_opt =
      app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
          ->default_str(defaults.log_level);
  auto* max_message_opt =
      app.add_option("--max-message-mb", max_message_mb, "Largest message received or sent, in MiB")
          ->default_str(std::to_string(defaults.max_message_mb));
  auto* kernel_cache_opt =
      app.add_option("--kernel-cache-mb", kernel_cache_mb, "Memory budget of the loaded-kernel cache, in MiB")
          ->default_str(std::to_string(defaults.kernel_cache_mb));
  std::string tls_cert, tls_key, tls_client_ca, tokens_file;
  auto* tls_cert_opt = app.add_option("--tls-cert", tls_cert, "Server certificate chain (PEM); enables TLS");
  auto* tls_key_opt = app.add_option("--tls-key", tls_key, "Private key (PEM) of --tls-cert");
  auto* tls_client_ca_opt =
      app.add_option("--tls-client-ca", tls_client_ca, "CA (PEM) of client certificates; enables mutual TLS");
  auto* tokens_opt = app.add_option("--tokens-file", tokens_file,
                                    "File of 'TOKEN SCOPES' lines (scopes: read,write,admin); unset = auth off");
  bool check = false;
  app.add_flag("--check", check, "Check the data directory's integrity and exit (0 healthy, 1 damaged, 2 cannot check)");
  CLI11_PARSE(app, argc, argv);

  kls::server::ConfigOverrides overrides;
  if (listen_opt->count() > 0) overrides.listen = listen;
  if (data_dir_opt->count() > 0) overrides.data_dir = data_dir;
  if (workers_opt->count() > 0) overrides.workers = workers;
  if (log_level_opt->count() > 0) overrides.log_level = log_level;
  if (max_message_opt->count() > 0) overrides.max_message_mb = max_message_mb;
  if (kernel_cache_opt->count() > 0) overrides.kernel_cache_mb = kernel_cache_mb;
  if (tls_cert_opt->count() > 0) overrides.tls_cert_file = tls_cert;
  if (tls_key_opt->count() > 0) overrides.tls_key_file = tls_key;
  if (tls_client_ca_opt->count() > 0) overrides.tls_client_ca_file = tls_client_ca;
  if (tokens_opt->count() > 0) overrides.tokens_file = tokens_file;
  const kls::StatusOr<ServerConfig> loaded = kls::server::LoadServerConfig(config_file, overrides);
  if (!loaded.ok()) {
    std::cerr << "kls-server: " << loaded.status() << "\n";
    return 2;
  }
  const ServerConfig& config = *loaded;
  if (check) return CheckDataDir(config.data_dir);
  SetUpLogging(config.log_level);

  // Block the shutdown signals before gRPC starts its threads (they inherit
  // the mask), so only the sigwait below ever receives them.
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGTERM);
  sigaddset(&shutdown_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);

  kls::server::KlsServer server(config);
  if (const kls::Status s = server.Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }

  int signal_number = 0;
  sigwait(&shutdown_signals, &signal_number);
  spdlog::info("received {}, shutting down (grace {} ms)", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
               kls::server::KlsServer::kDefaultShutdownGrace.count());
  server.Stop();
  return 0;
}
