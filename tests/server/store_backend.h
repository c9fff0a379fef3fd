// StoreBackendTest: a value-parameterized fixture that runs a Store test
// against each backend — the embedded SQLite store in a temporary directory,
// and the PostgreSQL store on a throwaway server (one per test process,
// tests/test_util/postgres_server.h) with a fresh database per test.
// Test-only.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "server/store/store.h"
#include "temp_dir.h"
#include "test_store.h"
#include "tests/test_util/postgres_server.h"

namespace kls::store {

enum class Backend { kSqlite, kPostgres };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

class StoreBackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  /// The process's PostgreSQL server, started on first use (nullptr and a
  /// test failure when it cannot start).
  static kls::testing::PostgresServer* Server() { return kls::testing::TestPostgresServer(); }

  bool postgres() const { return GetParam() == Backend::kPostgres; }

  void SetUp() override {
    if (postgres()) {
      auto* server = Server();
      ASSERT_NE(server, nullptr);
      static std::atomic<int> counter{0};
      database_ = "t" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
      ASSERT_TRUE(server->CreateDatabase(database_)) << server->error();
    }
    auto s = Open("cache-a");
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
  }

  void TearDown() override { store_.reset(); }

  /// Another store instance on the same data: a second replica for
  /// PostgreSQL (its own pool, listener and cache directory `cache`); for
  /// SQLite, a second open of the same directory.
  StatusOr<std::unique_ptr<Store>> Open(const std::string& cache, int pool_size = 4) {
    if (!postgres()) return OpenSqliteStore(dir_.Sub("data"));
    PostgresStoreOptions o;
    o.uri = Server()->uri(database_);
    o.cache_dir = dir_.Sub(cache);
    o.pool_size = pool_size;
    return OpenPostgresStore(o);
  }

  std::string cache_dir(const std::string& cache = "cache-a") const { return dir_.Sub(cache); }

  kls::testing::TempDir dir_;
  std::string database_;
  std::unique_ptr<Store> store_;
};

}  // namespace kls::store
