// kls-server: parse flags and config, start KlsServer, wait for SIGTERM or
// SIGINT, shut down gracefully. Exit status: 0 after a clean shutdown, 1 when
// the server cannot start, 2 for bad flags or config.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "server/kls_server.h"
#include "server/server_config.h"

namespace {

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("kls-server");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::from_str(level));  // validated by ServerConfig
}

}  // namespace

int main(int argc, char** argv) {
  using kls::server::ServerConfig;
  ServerConfig defaults;
  CLI::App app{"kls-server — the kernel learning service (gRPC)"};
  app.set_version_flag("--version", kls::server::KlsVersion());
  std::string config_file, listen, data_dir, log_level;
  int workers = 0, max_message_mb = 0, kernel_cache_mb = 0;
  app.add_option("--config", config_file, "File of 'key = value' lines (listen, data_dir, workers, log_level, "
                                          "max_message_mb, kernel_cache_mb); flags override it");
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
  CLI11_PARSE(app, argc, argv);

  kls::server::ConfigOverrides overrides;
  if (listen_opt->count() > 0) overrides.listen = listen;
  if (data_dir_opt->count() > 0) overrides.data_dir = data_dir;
  if (workers_opt->count() > 0) overrides.workers = workers;
  if (log_level_opt->count() > 0) overrides.log_level = log_level;
  if (max_message_opt->count() > 0) overrides.max_message_mb = max_message_mb;
  if (kernel_cache_opt->count() > 0) overrides.kernel_cache_mb = kernel_cache_mb;
  const kls::StatusOr<ServerConfig> loaded = kls::server::LoadServerConfig(config_file, overrides);
  if (!loaded.ok()) {
    std::cerr << "kls-server: " << loaded.status() << "\n";
    return 2;
  }
  const ServerConfig& config = *loaded;
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
