// The in-process server most tests/server suites start: a KlsServer on
// 127.0.0.1:0 with one worker and its data under a TempDir (or, with
// KLS_TEST_STORE=postgres, in that directory's PostgreSQL database:
// test_store.h), plus a client. Test-only.
#pragma once

#include <memory>
#include <string>

#include "client/client.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "test_store.h"

namespace kls::testing {

/// Points `config` at the suite's store: unchanged (embedded, data_dir) by
/// default; the directory's PostgreSQL database and a cache in dir/cache when
/// the suite runs on PostgreSQL.
inline void UseTestStore(const TempDir& dir, kls::server::ServerConfig* config) {
  if (!TestOnPostgres()) return;
  config->store = TestDatabaseFor(dir);
  config->cache_dir = dir.Sub("cache");
}

inline kls::server::ServerConfig TestServerConfig(const TempDir& dir, const std::string& log_level = "warn") {
  kls::server::ServerConfig config;
  config.listen = "127.0.0.1:0";
  config.data_dir = dir.Sub("data");
  config.workers = 1;
  config.log_level = log_level;
  UseTestStore(dir, &config);
  return config;
}

inline std::unique_ptr<kls::Client> ClientFor(const kls::server::KlsServer& server) {
  kls::ClientOptions options;
  options.target = server.target();
  return std::make_unique<kls::Client>(options);
}

}  // namespace kls::testing
