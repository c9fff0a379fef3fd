// The in-process server most tests/server suites start: a KlsServer on
// 127.0.0.1:0 with one worker and its data under a TempDir (or, with
// KLS_TEST_STORE=postgres, in that directory's PostgreSQL database:
// test_store.h), plus a client. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "client/client.h"
#include "core/data/csv_reader.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "test_store.h"

namespace kls::testing {

/// A KernelRef by name, optionally pinned to a version or an alias.
inline kls::v1::KernelRef Ref(const std::string& name, int64_t version = 0, const std::string& alias = "") {
  kls::v1::KernelRef r;
  r.set_name(name);
  r.set_version(version);
  r.set_alias(alias);
  return r;
}

/// A CSV data set of tests/data (e.g. "wine.csv"), read as the server reads
/// uploads; a read error fails the test and gives an empty data set.
inline Dataset TestCsv(const std::string& file) {
  auto d = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/" + file);
  EXPECT_TRUE(d.ok()) << file << ": " << d.status();
  return d.ok() ? *d : Dataset();
}

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

/// A test with a started in-process server and a client, plus the upload /
/// submit-and-wait steps the job suites share.
class ServerJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<kls::server::KlsServer>(TestServerConfig(dir_));
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = ClientFor(*server_);
  }

  /// Uploads `data` (named "t"); returns its id, "" after a failed expectation.
  std::string Upload(const Dataset& data, const PairwiseConstraints& constraints = {},
                     const Community* social = nullptr) {
    UploadOptions o;
    o.name = "t";
    auto info = client_->UploadDataset(data, constraints, o, social);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->id() : "";
  }

  /// Submits and waits until the job ends, in whatever state.
  kls::v1::Job Finish(kls::v1::SubmitJobRequest r, const std::string& kernel_name) {
    r.set_kernel_name(kernel_name);
    auto job = client_->SubmitJob(r);
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return {};
    auto done = client_->WatchJob(job->id(), [](const kls::v1::Job&) {}, 300);
    EXPECT_TRUE(done.ok()) << done.status();
    return done.ok() ? *done : kls::v1::Job();
  }

  /// Submits, waits and expects SUCCEEDED; returns the finished job.
  kls::v1::Job Run(const kls::v1::SubmitJobRequest& r, const std::string& kernel_name) {
    kls::v1::Job job = Finish(r, kernel_name);
    EXPECT_EQ(job.state(), kls::v1::SUCCEEDED) << job.error();
    return job;
  }

  TempDir dir_;
  std::unique_ptr<kls::server::KlsServer> server_;
  std::unique_ptr<Client> client_;
};

}  // namespace kls::testing
