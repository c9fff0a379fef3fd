// Which store the in-process server suites run on. By default the embedded
// SQLite store in the test's temporary directory; with KLS_TEST_STORE=postgres
// (tests/server/CMakeLists.txt registers each service suite a second time so,
// label `postgres`) the shared PostgreSQL store: one throwaway server per test
// process (tests/test_util/postgres_server.h) and one fresh database per
// temporary directory, so a test that restarts its server on the same
// directory finds its data again. Test-only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "server/store/store.h"
#include "temp_dir.h"
#include "tests/test_util/postgres_server.h"

namespace kls::testing {

/// True when this process runs its server tests on PostgreSQL.
inline bool TestOnPostgres() {
  const char* v = std::getenv("KLS_TEST_STORE");
  return v != nullptr && std::string(v) == "postgres";
}

/// The process's PostgreSQL server, started on first use; nullptr (and a test
/// failure naming why) when it cannot start.
inline PostgresServer* TestPostgresServer() {
  static std::mutex mu;
  static std::unique_ptr<PostgresServer> server;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mu);
  if (!server && failure.empty()) {
    auto s = std::make_unique<PostgresServer>();
    if (s->Init()) {
      server = std::move(s);
    } else {
      failure = s->error();
    }
  }
  if (!server) ADD_FAILURE() << "cannot start PostgreSQL: " << failure;
  return server.get();
}

/// A new, empty database on the process's server; its URI, or "" (and a test
/// failure) when it cannot be created.
inline std::string FreshTestDatabase() {
  static std::mutex mu;
  static int counter = 0;
  PostgresServer* server = TestPostgresServer();
  if (server == nullptr) return "";
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu);
    name = "t" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  }
  if (!server->CreateDatabase(name)) {
    ADD_FAILURE() << "createdb " << name << ": " << server->error();
    return "";
  }
  return server->uri(name);
}

/// The PostgreSQL URI standing for the temporary directory `dir`: the same
/// database every time it is asked for the same directory.
inline std::string TestDatabaseFor(const TempDir& dir) {
  static std::mutex mu;
  static std::map<std::string, std::string> by_dir;
  std::lock_guard<std::mutex> lock(mu);
  auto it = by_dir.find(dir.path().string());
  if (it != by_dir.end()) return it->second;
  std::string uri = FreshTestDatabase();
  if (!uri.empty()) by_dir[dir.path().string()] = uri;
  return uri;
}

/// The database name of TestDatabaseFor(dir) (the URI's last path segment).
inline std::string TestDatabaseNameFor(const TempDir& dir) {
  const std::string uri = TestDatabaseFor(dir);
  return uri.substr(uri.rfind('/') + 1);
}

/// Runs `sql` on the directory's PostgreSQL database; false (and a test
/// failure naming the server's error) when a statement fails.
inline bool PsqlOn(const TempDir& dir, const std::string& sql) {
  PostgresServer* server = TestPostgresServer();
  if (server == nullptr) return false;
  return server->Psql(TestDatabaseNameFor(dir), sql);
}

/// Opens the store a suite's JobManager or service works on: SQLite in
/// dir/data, or the directory's PostgreSQL database (its artifact cache in
/// dir/cache).
inline StatusOr<std::unique_ptr<store::Store>> OpenTestStore(const TempDir& dir) {
  if (!TestOnPostgres()) return store::OpenSqliteStore(dir.Sub("data"));
  store::PostgresStoreOptions o;
  o.uri = TestDatabaseFor(dir);
  o.cache_dir = dir.Sub("cache");
  return store::OpenPostgresStore(o);
}

}  // namespace kls::testing
