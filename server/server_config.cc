#include "server/server_config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace kls::server {
namespace {

constexpr const char* kKnownKeys =
    "listen, data_dir, workers, log_level, max_message_mb, kernel_cache_mb, tls_cert_file, tls_key_file, "
    "tls_client_ca_file, tokens_file, store, role, cache_dir, cache_disk_mb, lease_seconds, checkpoint_seconds, "
    "max_attempts, max_lost_attempts, metrics_listen, log_format, http_listen, http_cors_origins, http_threads, "
    "access_log, backup_dir";
constexpr int kMaxMessageMbLimit = 2047;  // gRPC sizes are int: < 2 GiB.
constexpr int kMaxKernelCacheMb = 1 << 20;  // 1 TiB: anything above is a typo.

std::string Trim(const std::string& s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  auto begin = std::find_if(s.begin(), s.end(), not_space);
  auto end = std::find_if(s.rbegin(), s.rend(), not_space).base();
  return begin < end ? std::string(begin, end) : std::string();
}

// Strips a trailing "# comment" unless the '#' sits inside double quotes.
std::string StripComment(const std::string& line) {
  bool in_quotes = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') in_quotes = !in_quotes;
    if (line[i] == '#' && !in_quotes) return line.substr(0, i);
  }
  return line;
}

bool ParseInt(const std::string& text, int* out) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, *out);
  return ec == std::errc() && ptr == last && !text.empty();
}

bool ParseDouble(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*out);
}

bool IsLogLevel(const std::string& level) {
  static const char* const kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  return std::any_of(std::begin(kLevels), std::end(kLevels), [&](const char* l) { return level == l; });
}

}  // namespace

StatusOr<bool> ParseBoolSetting(const std::string& name, const std::string& value) {
  std::string v;
  for (char c : value) v.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (v == "true" || v == "on" || v == "yes" || v == "1") return true;
  if (v == "false" || v == "off" || v == "no" || v == "0") return false;
  return InvalidArgumentError(name + " = '" + value + "' is not a boolean (true or false)");
}

int ServerConfig::ResolvedWorkers() const {
  if (workers > 0) return workers;
  return std::max(1u, std::thread::hardware_concurrency());
}

Status ValidateListenAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError("listen address '" + listen + "' is not HOST:PORT (e.g. 127.0.0.1:50051)");
  }
  const std::string host = listen.substr(0, colon);
  if (host.front() == '[' && host.back() != ']') {
    return InvalidArgumentError("listen address '" + listen + "': IPv6 host must be in brackets, e.g. [::1]:50051");
  }
  int port = -1;
  if (!ParseInt(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return InvalidArgumentError("listen address '" + listen + "': port must be a number in 0..65535");
  }
  return OkStatus();
}

Status ServerConfig::Validate() const {
  KLS_RETURN_IF_ERROR(ValidateListenAddress(listen));
  if (data_dir.empty()) return InvalidArgumentError("data_dir must not be empty");
  if (workers < 0) {
    return InvalidArgumentError("workers must be >= 0 (0 = one per core), got " + std::to_string(workers));
  }
  if (!IsLogLevel(log_level)) {
    return InvalidArgumentError("log_level '" + log_level +
                                "' is not one of trace, debug, info, warn, error, critical, off");
  }
  if (max_message_mb < 1 || max_message_mb > kMaxMessageMbLimit) {
    return InvalidArgumentError("max_message_mb must be in 1.." + std::to_string(kMaxMessageMbLimit) +
                                ", got " + std::to_string(max_message_mb));
  }
  if (kernel_cache_mb < 1 || kernel_cache_mb > kMaxKernelCacheMb) {
    return InvalidArgumentError("kernel_cache_mb must be in 1.." + std::to_string(kMaxKernelCacheMb) +
                                ", got " + std::to_string(kernel_cache_mb));
  }
  if (role != "all" && role != "api" && role != "worker" && role != "query") {
    return InvalidArgumentError("role = '" + role + "' is not one of all, api, worker, query");
  }
  if (!store.empty() && store.rfind("postgresql://", 0) != 0 && store.rfind("postgres://", 0) != 0 &&
      store.find('=') == std::string::npos) {
    return InvalidArgumentError("store = '" + store +
                                "' is not a PostgreSQL URI (postgresql://USER@HOST:PORT/DB) or libpq key=value string");
  }
  if (store.empty() && role != "all") {
    return InvalidArgumentError("role = '" + role + "' needs a shared store (store = postgresql://...); "
                                "the embedded store has one server doing everything");
  }
  if (cache_disk_mb < 0) return InvalidArgumentError("cache_disk_mb must be >= 0, got " + std::to_string(cache_disk_mb));
  if (!(lease_seconds >= 0.5 && lease_seconds <= 3600)) {
    return InvalidArgumentError("lease_seconds must be in 0.5..3600, got " + std::to_string(lease_seconds));
  }
  if (!(checkpoint_seconds > 0 && checkpoint_seconds <= 86400)) {
    return InvalidArgumentError("checkpoint_seconds must be in (0, 86400], got " + std::to_string(checkpoint_seconds));
  }
  if (max_attempts < 1 || max_attempts > 100) {
    return InvalidArgumentError("max_attempts must be in 1..100, got " + std::to_string(max_attempts));
  }
  if (max_lost_attempts < 1 || max_lost_attempts > 10000) {
    return InvalidArgumentError("max_lost_attempts must be in 1..10000, got " + std::to_string(max_lost_attempts));
  }
  if (!metrics_listen.empty()) {
    if (const Status s = ValidateListenAddress(metrics_listen); !s.ok()) {
      return InvalidArgumentError("metrics_listen = '" + metrics_listen + "' is not a valid address: " + s.message());
    }
  }
  if (!http_listen.empty()) {
    if (const Status s = ValidateListenAddress(http_listen); !s.ok()) {
      return InvalidArgumentError("http_listen = '" + http_listen + "' is not a valid address: " + s.message());
    }
  }
  if (http_threads < 2 || http_threads > 1024) {
    return InvalidArgumentError("http_threads must be in 2..1024, got " + std::to_string(http_threads));
  }
  if (log_format != "text" && log_format != "json") {
    return InvalidArgumentError("log_format = '" + log_format + "' is not one of text, json");
  }
  // The files themselves are read (and their contents checked) by Start().
  if (!tls_key_file.empty() && tls_cert_file.empty()) {
    return InvalidArgumentError("tls_key_file = '" + tls_key_file + "' is set but tls_cert_file is not");
  }
  if (!tls_cert_file.empty() && tls_key_file.empty()) {
    return InvalidArgumentError("tls_cert_file = '" + tls_cert_file + "' is set but tls_key_file is not");
  }
  if (!tls_client_ca_file.empty() && tls_cert_file.empty()) {
    return InvalidArgumentError("tls_client_ca_file = '" + tls_client_ca_file +
                                "' (mutual TLS) needs tls_cert_file and tls_key_file");
  }
  return OkStatus();
}

Status ApplyConfigText(const std::string& text, const std::string& source_name, ServerConfig* config) {
  std::map<std::string, int> seen_on_line;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string where = source_name + ":" + std::to_string(line_no) + ": ";
    const std::string line = Trim(StripComment(raw));
    if (line.empty()) continue;

    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return InvalidArgumentError(where + "expected 'key = value', got '" + line + "'");
    }
    const std::string key = Trim(line.substr(0, eq));
    std::string value = Trim(line.substr(eq + 1));
    if (key.empty()) return InvalidArgumentError(where + "missing key before '='");
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }

    auto [it, inserted] = seen_on_line.emplace(key, line_no);
    if (!inserted) {
      return InvalidArgumentError(where + "key '" + key + "' repeats (first set on line " +
                                  std::to_string(it->second) + ")");
    }

    auto int_value = [&](int* out) -> Status {
      if (!ParseInt(value, out)) {
        return InvalidArgumentError(where + "key '" + key + "' needs an integer, got '" + value + "'");
      }
      return OkStatus();
    };
    if (key == "listen") {
      config->listen = value;
    } else if (key == "data_dir") {
      config->data_dir = value;
    } else if (key == "workers") {
      KLS_RETURN_IF_ERROR(int_value(&config->workers));
    } else if (key == "log_level") {
      config->log_level = value;
    } else if (key == "max_message_mb") {
      KLS_RETURN_IF_ERROR(int_value(&config->max_message_mb));
    } else if (key == "kernel_cache_mb") {
      KLS_RETURN_IF_ERROR(int_value(&config->kernel_cache_mb));
    } else if (key == "tls_cert_file") {
      config->tls_cert_file = value;
    } else if (key == "tls_key_file") {
      config->tls_key_file = value;
    } else if (key == "tls_client_ca_file") {
      config->tls_client_ca_file = value;
    } else if (key == "tokens_file") {
      config->tokens_file = value;
    } else if (key == "store") {
      config->store = value;
    } else if (key == "role") {
      config->role = value;
    } else if (key == "cache_dir") {
      config->cache_dir = value;
    } else if (key == "backup_dir") {
      config->backup_dir = value;
    } else if (key == "cache_disk_mb") {
      KLS_RETURN_IF_ERROR(int_value(&config->cache_disk_mb));
    } else if (key == "metrics_listen") {
      config->metrics_listen = value;
    } else if (key == "log_format") {
      config->log_format = value;
    } else if (key == "access_log") {
      const StatusOr<bool> on = ParseBoolSetting(key, value);
      if (!on.ok()) return InvalidArgumentError(where + on.status().message());
      config->access_log = *on;
    } else if (key == "http_listen") {
      config->http_listen = value;
    } else if (key == "http_cors_origins") {
      config->http_cors_origins = value;
    } else if (key == "http_threads") {
      KLS_RETURN_IF_ERROR(int_value(&config->http_threads));
    } else if (key == "max_attempts") {
      KLS_RETURN_IF_ERROR(int_value(&config->max_attempts));
    } else if (key == "max_lost_attempts") {
      KLS_RETURN_IF_ERROR(int_value(&config->max_lost_attempts));
    } else if (key == "lease_seconds" || key == "checkpoint_seconds") {
      double* out = key == "lease_seconds" ? &config->lease_seconds : &config->checkpoint_seconds;
      if (!ParseDouble(value, out)) {
        return InvalidArgumentError(where + "key '" + key + "' needs a number, got '" + value + "'");
      }
    } else {
      return InvalidArgumentError(where + "unknown key '" + key + "' (known keys: " + kKnownKeys + ")");
    }
  }
  return OkStatus();
}

Status ApplyConfigFile(const std::string& path, ServerConfig* config) {
  std::ifstream file(path);
  if (!file) return NotFoundError("cannot read config file '" + path + "'");
  std::ostringstream text;
  text << file.rdbuf();
  return ApplyConfigText(text.str(), path, config);
}

StatusOr<ServerConfig> LoadServerConfig(const std::string& config_file, const ConfigOverrides& overrides) {
  ServerConfig config;
  if (!config_file.empty()) KLS_RETURN_IF_ERROR(ApplyConfigFile(config_file, &config));
  if (overrides.listen) config.listen = *overrides.listen;
  if (overrides.data_dir) config.data_dir = *overrides.data_dir;
  if (overrides.workers) config.workers = *overrides.workers;
  if (overrides.log_level) config.log_level = *overrides.log_level;
  if (overrides.max_message_mb) config.max_message_mb = *overrides.max_message_mb;
  if (overrides.kernel_cache_mb) config.kernel_cache_mb = *overrides.kernel_cache_mb;
  if (overrides.tls_cert_file) config.tls_cert_file = *overrides.tls_cert_file;
  if (overrides.tls_key_file) config.tls_key_file = *overrides.tls_key_file;
  if (overrides.tls_client_ca_file) config.tls_client_ca_file = *overrides.tls_client_ca_file;
  if (overrides.tokens_file) config.tokens_file = *overrides.tokens_file;
  if (overrides.store) config.store = *overrides.store;
  if (overrides.role) config.role = *overrides.role;
  if (overrides.cache_dir) config.cache_dir = *overrides.cache_dir;
  if (overrides.backup_dir) config.backup_dir = *overrides.backup_dir;
  if (overrides.cache_disk_mb) config.cache_disk_mb = *overrides.cache_disk_mb;
  if (overrides.lease_seconds) config.lease_seconds = *overrides.lease_seconds;
  if (overrides.checkpoint_seconds) config.checkpoint_seconds = *overrides.checkpoint_seconds;
  if (overrides.max_attempts) config.max_attempts = *overrides.max_attempts;
  if (overrides.metrics_listen) config.metrics_listen = *overrides.metrics_listen;
  if (overrides.log_format) config.log_format = *overrides.log_format;
  if (overrides.access_log) config.access_log = *overrides.access_log;
  if (overrides.http_listen) config.http_listen = *overrides.http_listen;
  if (overrides.http_cors_origins) config.http_cors_origins = *overrides.http_cors_origins;
  if (overrides.http_threads) config.http_threads = *overrides.http_threads;
  KLS_RETURN_IF_ERROR(config.Validate());
  return config;
}

}  // namespace kls::server
