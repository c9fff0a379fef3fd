// ServerConfig: everything kls-server needs to start, from defaults, an
// optional `key = value` file and command-line flags (flags win).
//
// Config file format, one setting per line:
//
//   # comment            blank lines and lines starting with '#' are ignored
//   listen = 127.0.0.1:50051
//   data_dir = /var/lib/kls
//   workers = 8          # trailing comments are allowed too
//   log_level = info
//   max_message_mb = 64
//   kernel_cache_mb = 1024
//   tls_cert_file = /etc/kls/server.crt      # TLS (see server/auth.h, README "Security")
//   tls_key_file = /etc/kls/server.key
//   tls_client_ca_file = /etc/kls/clients-ca.crt   # mutual TLS: clients need a cert from this CA
//   tokens_file = /etc/kls/tokens             # bearer tokens with scopes; unset = auth off
//   store = postgresql://kls@db:5432/kls      # shared store for several replicas; unset = embedded
//   role = all                                # all | api | worker | query
//   cache_dir = /var/cache/kls                # replica's verified artifact cache (shared store)
//   cache_disk_mb = 0                         # its disk budget; 0 = unbounded
//   lease_seconds = 10                        # job lease; a dead replica's jobs move after it
//   checkpoint_seconds = 30                   # solve time between checkpoints of resumable solvers
//   max_attempts = 5                          # counted failed attempts before a job fails
//   max_lost_attempts = 20                    # lost processes in a row without progress before it fails
//   metrics_listen = 127.0.0.1:9464           # Prometheus endpoint (GET /metrics); unset = off
//   log_format = text                         # text | json (one JSON object a line)
//   access_log = true                         # one info line per gRPC/HTTP call; false = debug level
//   http_listen = 127.0.0.1:8080              # HTTP/JSON API + web console; unset = off
//   http_cors_origins = https://app.example   # other origins the HTTP API answers (comma-separated, * = any)
//   http_threads = 16                         # HTTP worker threads (an open SSE watch holds one)
//   backup_dir = /var/backups/kls             # where Admin.Backup (kls backup) writes snapshots; unset = off
//
// Values may be wrapped in double quotes (to keep a '#' or surrounding
// spaces). Unknown keys, repeated keys and malformed lines are errors that name
// the file, the line number and the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/common/status.h"

namespace kls::server {

struct ServerConfig {
  /// HOST:PORT to listen on; "[::1]:50051" for IPv6. Port 0 picks a free port
  /// (KlsServer::port() reports it).
  std::string listen = "127.0.0.1:50051";
  /// Directory owned by this server (created if missing, locked while running).
  std::string data_dir = "./kls-data";
  /// Learning-job worker threads; 0 means one per hardware core.
  int workers = 0;
  /// spdlog level: trace, debug, info, warn, error, critical or off.
  std::string log_level = "info";
  /// Largest message, in MiB, the server receives or sends (1..2047).
  int max_message_mb = 64;
  /// Memory budget, in MiB, of the cache of loaded kernels that queries read
  /// (least recently used kernels are dropped beyond it); 1..1048576.
  int kernel_cache_mb = 1024;
  /// Server certificate chain (PEM); empty = plain TCP. Needs tls_key_file.
  std::string tls_cert_file;
  /// Private key (PEM, unencrypted) of tls_cert_file.
  std::string tls_key_file;
  /// CA (PEM) that signs client certificates; when set, every client must
  /// present a certificate it signed (mutual TLS). Needs tls_cert_file.
  std::string tls_client_ca_file;
  /// File of "TOKEN SCOPES" lines (server/auth.h); empty = every call allowed.
  std::string tokens_file;
  /// libpq URI of the shared PostgreSQL store ("postgresql://USER@HOST:PORT/DB");
  /// empty = the embedded SQLite store in data_dir (one server per directory).
  std::string store;
  /// What this replica does: "all" (default), "api" (data sets, jobs,
  /// kernels, queries; no workers), "worker" (runs jobs; serves health and
  /// admin only) or "query" (kernels and queries only, read-only).
  std::string role = "all";
  /// Local artifact cache of a replica on the shared store; empty = a private
  /// temporary directory. Unused by the embedded store.
  std::string cache_dir;
  /// Disk budget of cache_dir in MiB; 0 = unbounded.
  int cache_disk_mb = 0;
  /// Lease of a claimed job, seconds (0.5..3600): after a replica dies its
  /// jobs move to another replica this long after its last heartbeat.
  double lease_seconds = 10.0;
  /// Solve time between checkpoints of resumable solvers, seconds (> 0).
  double checkpoint_seconds = 30.0;
  /// Counted failed attempts (the job's own faults: out of memory inside the
  /// server, solver errors) after which a job fails; 1..100.
  int max_attempts = 5;
  /// Attempts in a row whose process was lost (kill, node loss, OOM kill)
  /// before the job wrote a checkpoint, after which it fails; never counted
  /// in max_attempts (server/jobs/job_manager.h); 1..10000.
  int max_lost_attempts = 20;
  /// HOST:PORT of the Prometheus metrics endpoint (HTTP, path /metrics);
  /// empty = no endpoint. Port 0 picks a free port (KlsServer::metrics_port()).
  std::string metrics_listen;
  /// Log line format: "text" (default) or "json" (one JSON object a line with
  /// time, level, message and, when known, request_id, method, peer, job_id).
  std::string log_format = "text";
  /// Access log: one line per finished gRPC call and HTTP request (method,
  /// status, milliseconds, request id, peer) at info level; false = those
  /// lines at debug level (server/rpc_observer.h).
  bool access_log = true;
  /// HOST:PORT of the HTTP/JSON API, OpenAPI document and web console
  /// (server/http/http_gateway.h); empty = off. Port 0 picks a free port
  /// (KlsServer::http_port()). TLS and tokens are the gRPC port's.
  std::string http_listen;
  /// Origins (scheme://host[:port]) other than the server itself whose
  /// browser requests the HTTP API answers; "*" = any. Comma-separated in the
  /// config file.
  std::string http_cors_origins;
  /// HTTP worker threads, 2..1024.
  int http_threads = 16;
  /// Directory under which Admin.Backup (`kls backup`) writes snapshots of
  /// the embedded store, one new subdirectory each (created if missing);
  /// empty = the RPC is refused. Unused by the PostgreSQL store (pg_dump).
  std::string backup_dir;

  /// INVALID_ARGUMENT naming the first bad field.
  Status Validate() const;

  /// max_message_mb in bytes.
  int64_t max_message_bytes() const { return int64_t{max_message_mb} * 1024 * 1024; }
  /// kernel_cache_mb in bytes.
  int64_t kernel_cache_bytes() const { return int64_t{kernel_cache_mb} * 1024 * 1024; }
  /// `workers`, with 0 resolved to the number of hardware cores (at least 1).
  int ResolvedWorkers() const;
  /// Whether this role runs the job workers / serves the Datasets and Jobs
  /// API / serves Kernels and Queries.
  bool RunsWorkers() const { return role == "all" || role == "worker"; }
  bool ServesApi() const { return role == "all" || role == "api"; }
  bool ServesQueries() const { return role != "worker"; }
};

/// Applies the settings in `text` on top of `config`. `source_name` (usually
/// the file path) prefixes every error: "kls.conf:7: unknown key 'wrokers'".
/// Does not call Validate(): flags may still override a value.
Status ApplyConfigText(const std::string& text, const std::string& source_name,
                       ServerConfig* config);

/// Reads `path` and applies it with ApplyConfigText. NOT_FOUND if unreadable.
Status ApplyConfigFile(const std::string& path, ServerConfig* config);

/// Settings given on the command line; unset ones keep the file's (or the
/// default) value.
struct ConfigOverrides {
  std::optional<std::string> listen;
  std::optional<std::string> data_dir;
  std::optional<int> workers;
  std::optional<std::string> log_level;
  std::optional<int> max_message_mb;
  std::optional<int> kernel_cache_mb;
  std::optional<std::string> tls_cert_file;
  std::optional<std::string> tls_key_file;
  std::optional<std::string> tls_client_ca_file;
  std::optional<std::string> tokens_file;
  std::optional<std::string> store;
  std::optional<std::string> role;
  std::optional<std::string> cache_dir;
  std::optional<int> cache_disk_mb;
  std::optional<double> lease_seconds;
  std::optional<double> checkpoint_seconds;
  std::optional<int> max_attempts;
  std::optional<std::string> metrics_listen;
  std::optional<std::string> log_format;
  std::optional<bool> access_log;
  std::optional<std::string> http_listen;
  std::optional<std::string> http_cors_origins;
  std::optional<int> http_threads;
  std::optional<std::string> backup_dir;
};

/// Defaults, then `config_file` (skipped when empty), then `overrides`; the
/// result is Validate()d. Errors name the file and line, or the bad field.
StatusOr<ServerConfig> LoadServerConfig(const std::string& config_file, const ConfigOverrides& overrides);

/// A boolean setting: "true"/"false" (also on/off, yes/no, 1/0); otherwise
/// INVALID_ARGUMENT naming `name` and the value.
StatusOr<bool> ParseBoolSetting(const std::string& name, const std::string& value);

/// Splits "HOST:PORT" (or "[V6]:PORT") and checks the port is 0..65535.
Status ValidateListenAddress(const std::string& listen);

}  // namespace kls::server
