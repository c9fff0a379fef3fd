// Config file parsing, validation and flag precedence.
#include "server/server_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "temp_dir.h"

namespace kls::server {
namespace {

using ::testing::HasSubstr;

TEST(ServerConfigTest, DefaultsAreValid) {
  const ServerConfig config;
  EXPECT_TRUE(config.Validate().ok());
  EXPECT_EQ(config.listen, "127.0.0.1:50051");
  EXPECT_EQ(config.data_dir, "./kls-data");
  EXPECT_GE(config.ResolvedWorkers(), 1);
  EXPECT_EQ(config.max_message_bytes(), 64 * 1024 * 1024);
}

TEST(ServerConfigTest, ParsesEveryKeyWithCommentsQuotesAndBlankLines) {
  ServerConfig config;
  const std::string text =
      "# KLS config\n"
      "\n"
      "listen = 0.0.0.0:6000\n"
      "  data_dir=\"/srv/kls # not a comment\"  \n"
      "workers = 3   # trailing comment\n"
      "log_level = debug\n"
      "max_message_mb = 16\n";
  ASSERT_TRUE(ApplyConfigText(text, "kls.conf", &config).ok());
  EXPECT_EQ(config.listen, "0.0.0.0:6000");
  EXPECT_EQ(config.data_dir, "/srv/kls # not a comment");
  EXPECT_EQ(config.workers, 3);
  EXPECT_EQ(config.ResolvedWorkers(), 3);
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(config.max_message_mb, 16);
  EXPECT_TRUE(config.Validate().ok());
}

TEST(ServerConfigTest, UnknownKeyNamesTheKeyAndTheLine) {
  ServerConfig config;
  const Status s = ApplyConfigText("listen = 127.0.0.1:1\n\nwrokers = 4\n", "kls.conf", &config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kls.conf:3:"));
  EXPECT_THAT(s.message(), HasSubstr("unknown key 'wrokers'"));
  EXPECT_THAT(s.message(), HasSubstr("known keys: listen, data_dir, workers"));
}

TEST(ServerConfigTest, MetricsListenAndLogFormat) {
  ServerConfig config;
  EXPECT_TRUE(config.metrics_listen.empty());  // off by default
  EXPECT_EQ(config.log_format, "text");
  ASSERT_TRUE(ApplyConfigText("metrics_listen = 0.0.0.0:9464\nlog_format = json\n", "kls.conf", &config).ok());
  EXPECT_EQ(config.metrics_listen, "0.0.0.0:9464");
  EXPECT_EQ(config.log_format, "json");
  EXPECT_TRUE(config.Validate().ok());

  ConfigOverrides bad_listen;
  bad_listen.metrics_listen = "localhost";
  const StatusOr<ServerConfig> a = LoadServerConfig("", bad_listen);
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("metrics_listen = 'localhost'"));
  bad_listen.metrics_listen = "127.0.0.1:70000";
  EXPECT_THAT(LoadServerConfig("", bad_listen).status().message(), HasSubstr("metrics_listen = '127.0.0.1:70000'"));

  ConfigOverrides bad_format;
  bad_format.log_format = "xml";
  const StatusOr<ServerConfig> b = LoadServerConfig("", bad_format);
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("log_format = 'xml' is not one of text, json"));
}

TEST(ServerConfigTest, LineWithoutEqualsIsAnError) {
  ServerConfig config;
  const Status s = ApplyConfigText("listen 127.0.0.1:1\n", "f", &config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("f:1:"));
  EXPECT_THAT(s.message(), HasSubstr("key = value"));
}

TEST(ServerConfigTest, NonIntegerValueNamesKeyAndLine) {
  ServerConfig config;
  const Status s = ApplyConfigText("# c\nworkers = many\n", "f", &config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("f:2:"));
  EXPECT_THAT(s.message(), HasSubstr("'workers' needs an integer"));
}

TEST(ServerConfigTest, RepeatedKeyIsAnError) {
  ServerConfig config;
  const Status s = ApplyConfigText("workers = 1\nworkers = 2\n", "f", &config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("f:2:"));
  EXPECT_THAT(s.message(), HasSubstr("first set on line 1"));
}

TEST(ServerConfigTest, ValidateRejectsBadValues) {
  const auto check = [](void (*mutate)(ServerConfig*), const std::string& expected) {
    ServerConfig config;
    mutate(&config);
    const Status s = config.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << expected;
    EXPECT_THAT(s.message(), HasSubstr(expected));
  };
  check([](ServerConfig* c) { c->listen = "localhost"; }, "HOST:PORT");
  check([](ServerConfig* c) { c->listen = "127.0.0.1:70000"; }, "0..65535");
  check([](ServerConfig* c) { c->listen = "127.0.0.1:http"; }, "0..65535");
  check([](ServerConfig* c) { c->data_dir = ""; }, "data_dir");
  check([](ServerConfig* c) { c->workers = -1; }, "workers");
  check([](ServerConfig* c) { c->log_level = "loud"; }, "log_level 'loud'");
  check([](ServerConfig* c) { c->max_message_mb = 0; }, "max_message_mb");
  check([](ServerConfig* c) { c->max_message_mb = 4096; }, "max_message_mb");
  check([](ServerConfig* c) { c->max_lost_attempts = 0; }, "max_lost_attempts must be in 1..10000");
}

TEST(ServerConfigTest, MaxLostAttemptsKey) {
  ServerConfig config;
  EXPECT_EQ(config.max_lost_attempts, 20);
  ASSERT_TRUE(ApplyConfigText("max_lost_attempts = 50\n", "kls.conf", &config).ok());
  EXPECT_EQ(config.max_lost_attempts, 50);
  EXPECT_TRUE(config.Validate().ok());
}

TEST(ServerConfigTest, AccessLogKeyIsABoolean) {
  ServerConfig config;
  EXPECT_TRUE(config.access_log);  // on by default
  ASSERT_TRUE(ApplyConfigText("access_log = false\n", "kls.conf", &config).ok());
  EXPECT_FALSE(config.access_log);
  ASSERT_TRUE(ApplyConfigText("access_log = on  # comment\n", "kls.conf", &config).ok());
  EXPECT_TRUE(config.access_log);
  const Status bad = ApplyConfigText("\naccess_log = maybe\n", "kls.conf", &config);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("kls.conf:2: access_log = 'maybe' is not a boolean (true or false)"));
  EXPECT_THAT(ParseBoolSetting("--access-log", "nope").status().message(),
              HasSubstr("--access-log = 'nope' is not a boolean"));
  ConfigOverrides overrides;
  overrides.access_log = false;
  const StatusOr<ServerConfig> loaded = LoadServerConfig("", overrides);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->access_log);
}

TEST(ServerConfigTest, AcceptsIpv6AndPortZero) {
  EXPECT_TRUE(ValidateListenAddress("[::1]:50051").ok());
  EXPECT_TRUE(ValidateListenAddress("0.0.0.0:0").ok());
  EXPECT_FALSE(ValidateListenAddress("[::1:50051").ok());
}

TEST(ServerConfigTest, FlagsOverrideTheFile) {
  kls::testing::TempDir dir;
  const std::string path = dir.Sub("kls.conf");
  std::ofstream(path) << "listen = 127.0.0.1:7000\ndata_dir = /from/file\nworkers = 2\n";

  ConfigOverrides overrides;
  overrides.listen = "127.0.0.1:8000";
  const StatusOr<ServerConfig> config = LoadServerConfig(path, overrides);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "127.0.0.1:8000");  // flag
  EXPECT_EQ(config->data_dir, "/from/file");    // file
  EXPECT_EQ(config->workers, 2);                // file
  EXPECT_EQ(config->log_level, "info");         // default
}

TEST(ServerConfigTest, LoadReportsFileErrorsAndValidation) {
  kls::testing::TempDir dir;
  EXPECT_EQ(LoadServerConfig(dir.Sub("missing.conf"), {}).status().code(), StatusCode::kNotFound);

  const std::string path = dir.Sub("bad.conf");
  std::ofstream(path) << "max_message_mb = 0\n";
  const Status s = LoadServerConfig(path, {}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_message_mb"));

  ConfigOverrides fix;
  fix.max_message_mb = 8;
  EXPECT_TRUE(LoadServerConfig(path, fix).ok());
}

TEST(ServerConfigTest, SecurityKeysFromFileAndFlags) {
  kls::testing::TempDir dir;
  const std::string path = dir.Sub("kls.conf");
  std::ofstream(path) << "tls_cert_file = /etc/kls/server.crt\n"
                         "tls_key_file = /etc/kls/server.key\n"
                         "tls_client_ca_file = \"/etc/kls/clients ca.crt\"\n"
                         "tokens_file = /etc/kls/tokens\n";
  ConfigOverrides overrides;
  overrides.tokens_file = "/run/kls/tokens";
  const StatusOr<ServerConfig> config = LoadServerConfig(path, overrides);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tls_cert_file, "/etc/kls/server.crt");
  EXPECT_EQ(config->tls_key_file, "/etc/kls/server.key");
  EXPECT_EQ(config->tls_client_ca_file, "/etc/kls/clients ca.crt");
  EXPECT_EQ(config->tokens_file, "/run/kls/tokens");  // the flag wins
  // Defaults: plain TCP, no tokens (files are read by KlsServer::Start, not here).
  const ServerConfig defaults;
  EXPECT_TRUE(defaults.tls_cert_file.empty());
  EXPECT_TRUE(defaults.tokens_file.empty());
}

TEST(ServerConfigTest, TlsKeysMustComeTogether) {
  ServerConfig config;
  config.tls_cert_file = "server.crt";
  Status s = config.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tls_cert_file = 'server.crt' is set but tls_key_file is not"));
  config = ServerConfig();
  config.tls_key_file = "server.key";
  s = config.Validate();
  EXPECT_THAT(s.message(), HasSubstr("tls_key_file = 'server.key' is set but tls_cert_file is not"));
  config = ServerConfig();
  config.tls_client_ca_file = "ca.crt";
  s = config.Validate();
  EXPECT_THAT(s.message(), HasSubstr("tls_client_ca_file = 'ca.crt' (mutual TLS) needs tls_cert_file"));
  config.tls_cert_file = "server.crt";
  config.tls_key_file = "server.key";
  EXPECT_TRUE(config.Validate().ok());
}

}  // namespace
}  // namespace kls::server
