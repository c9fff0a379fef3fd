// PostgresServer: a throwaway PostgreSQL server for tests (no gRPC, no libpq).
// Finds initdb / pg_ctl under /usr/lib/postgresql/<version>/bin, creates a
// cluster in a fresh temporary directory (`initdb -A trust -U kls`), starts
// it on a free loopback port with fsync off and its socket in that
// directory, and creates the database `kls`. Stop() and Start() keep the
// data and the port (outage tests); the destructor stops the server and
// removes everything.
//
// Running as root (CI containers): initdb refuses root, so the directory is
// handed to the `postgres` user and every binary runs under
// `runuser -u postgres --`.
//
// Thread safety: one thread drives an instance.
#pragma once

#include <string>

namespace kls::testing {

class PostgresServer {
 public:
  PostgresServer() = default;
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  /// initdb + Start + createdb. Returns false with error() set on failure
  /// (no PostgreSQL installed, initdb failed, ...).
  bool Init();
  /// Starts the server (waits until it accepts connections); false on failure.
  bool Start();
  /// Stops the server (fast shutdown: open sessions are ended); false on failure.
  bool Stop();

  /// createdb `name` (owned by kls); false with error() set on failure.
  bool CreateDatabase(const std::string& name);
  /// Runs `sql` with psql against database `db` (stop at the first error).
  bool Psql(const std::string& db, const std::string& sql);

  /// "postgresql://kls@127.0.0.1:<port>/kls".
  std::string uri() const { return uri("kls"); }
  /// The URI of database `db` on this server.
  std::string uri(const std::string& db) const;
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  /// Why the last call failed (command, exit status, log tail).
  const std::string& error() const { return error_; }

 private:
  /// Runs `bin_dir_/tool args...` (as postgres when root); its output goes to
  /// dir_/<tool>.log. Returns the exit status.
  int Run(const std::string& tool, const std::string& args);
  std::string LogTail(const std::string& file) const;

  std::string bin_dir_, dir_, data_dir_;
  int port_ = 0;
  bool running_ = false;
  std::string error_;
};

}  // namespace kls::testing
