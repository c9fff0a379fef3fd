// SIGHUP on the real kls-server (issue 38, item 5): the tokens file and the
// TLS certificate and key are re-read; new calls and new connections (gRPC
// and the HTTPS gateway) use them; a malformed file is logged and the old
// one kept. Certificates are made at test time with the `openssl` command:
// CA "one" signs the first server and client certificates, CA "two" the
// second ones; the client CA of mutual TLS is rotated the same way.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "tests/e2e/server_process.h"

namespace kls::e2e {
namespace {

namespace fs = std::filesystem;

const std::string kTokenOld = "old-token-0123456789abcdef";
const std::string kTokenNew = "new-token-fedcba9876543210";

class SighupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("openssl version > /dev/null 2>&1") != 0) GTEST_SKIP() << "the openssl command is not installed";
    scratch_ = fs::temp_directory_path() / ("kls-sighup-" + std::to_string(getpid()));
    fs::remove_all(scratch_);
    fs::create_directories(scratch_);
    const std::string d = scratch_.string();
    const std::string script =
        "set -e; cd '" + d + "'\n"
        "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out \"$1\" 2>/dev/null; }\n"
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > server.ext\n"
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n"
        "for n in one two; do\n"
        "  key ca-$n.key; openssl req -x509 -new -key ca-$n.key -subj /CN=kls-ca-$n -days 2 -out ca-$n.crt\n"
        "  key server-$n.key; openssl req -new -key server-$n.key -subj /CN=localhost -out server-$n.csr\n"
        "  openssl x509 -req -in server-$n.csr -CA ca-$n.crt -CAkey ca-$n.key -CAcreateserial -days 2 "
        "-extfile server.ext -out server-$n.crt 2>/dev/null\n"
        "  key client-$n.key; openssl req -new -key client-$n.key -subj /CN=client-$n -out client-$n.csr\n"
        "  openssl x509 -req -in client-$n.csr -CA ca-$n.crt -CAkey ca-$n.key -CAcreateserial -days 2 "
        "-extfile client.ext -out client-$n.crt 2>/dev/null\n"
        "done\n"
        "cp server-one.crt server.crt; cp server-one.key server.key; cp ca-one.crt client-ca.crt\n";
    std::ofstream(scratch_ / "make-certs.sh") << script;
    ASSERT_EQ(std::system(("sh '" + d + "/make-certs.sh' > '" + d + "/make-certs.log' 2>&1").c_str()), 0)
        << ReadFile(scratch_ / "make-certs.log");
  }

  void TearDown() override {
    Terminate(&server_);
    if (!HasFailure() && !scratch_.empty()) fs::remove_all(scratch_);
  }

  // Replaces `name` the way an operator (or a Kubernetes Secret update)
  // does: write beside it, then rename over it.
  void Replace(const std::string& name, const std::string& text) {
    std::ofstream(scratch_ / (name + ".next")) << text;
    fs::rename(scratch_ / (name + ".next"), scratch_ / name);
  }

  void Start(bool tls, bool mutual = false) {
    Replace("tokens", kTokenOld + " read\n");
    server_.target = "127.0.0.1:" + std::to_string(FreePort());
    http_port_ = FreePort();
    server_.log = scratch_ / "server.log";
    std::vector<std::string> args = {KLS_SERVER_BINARY, "--listen", server_.target, "--log-level", "info",
                                     "--data-dir", (scratch_ / "data").string(), "--workers", "1",
                                     "--tokens-file", (scratch_ / "tokens").string(),
                                     "--http-listen", "127.0.0.1:" + std::to_string(http_port_)};
    if (tls) {
      args.insert(args.end(), {"--tls-cert", (scratch_ / "server.crt").string(), "--tls-key",
                               (scratch_ / "server.key").string()});
    }
    if (mutual) args.insert(args.end(), {"--tls-client-ca", (scratch_ / "client-ca.crt").string()});
    client_cert_ = mutual ? "client-one" : "";
    server_.pid = Spawn(args, scratch_ / "server.out", server_.log, /*append_err=*/true);
    ASSERT_GT(server_.pid, 0);
    tls_ = tls;
    const auto deadline = std::chrono::steady_clock::now() + Scaled(30);
    while (std::chrono::steady_clock::now() < deadline) {
      ASSERT_EQ(WaitFor(server_.pid, std::chrono::milliseconds(0)), -1) << "exited:\n" << ReadFile(server_.log);
      if (ReadFile(server_.log).find("serving on") != std::string::npos && Echo(kTokenOld, "ca-one.crt").ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "not ready within 30 s:\n" << ReadFile(server_.log);
  }

  // Admin.Echo (scope read) on a new channel, trusting only `ca` with TLS.
  StatusOr<std::string> Echo(const std::string& token, const std::string& ca) {
    ClientOptions options;
    options.target = server_.target;
    options.timeout_seconds = 5;
    options.token = token;
    if (tls_) {
      const std::string cert = client_cert_.empty() ? "" : (scratch_ / (client_cert_ + ".crt")).string();
      const std::string key = client_cert_.empty() ? "" : (scratch_ / (client_cert_ + ".key")).string();
      const Status loaded = LoadTlsFiles((scratch_ / ca).string(), cert, key, &options);
      if (!loaded.ok()) return loaded;
    }
    Client client(options);
    return client.Echo("rotated");
  }

  // GET /v1/admin/get-server-info (scope read) over the HTTP gateway with curl; the HTTP status, or
  // 0 when the TLS handshake (or the connection) failed.
  int HttpEcho(const std::string& token, const std::string& ca) {
    const fs::path out = scratch_ / "curl.out";
    std::string command = "curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H 'Authorization: Bearer " + token +
                          "' ";
    if (!client_cert_.empty()) {
      command += "--cert '" + (scratch_ / (client_cert_ + ".crt")).string() + "' --key '" +
                 (scratch_ / (client_cert_ + ".key")).string() + "' ";
    }
    command += tls_ ? "--cacert '" + (scratch_ / ca).string() + "' https://127.0.0.1:" : "http://127.0.0.1:";
    command += std::to_string(http_port_) + "/v1/admin/get-server-info > '" + out.string() + "' 2>/dev/null";
    [[maybe_unused]] const int rc = std::system(command.c_str());
    const std::string code = ReadFile(out);
    return code.empty() ? 0 : std::atoi(code.c_str());
  }

  void Hangup() { ASSERT_EQ(kill(server_.pid, SIGHUP), 0); }

  // Polls `done` for up to 10 s (scaled).
  static bool Eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + Scaled(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  }

  // How often `text` appears in the server's log.
  int LogCount(const std::string& text) {
    const std::string log = ReadFile(server_.log);
    int n = 0;
    for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    return n;
  }

  fs::path scratch_;
  Server server_;
  int http_port_ = 0;
  bool tls_ = false;
  std::string client_cert_;  // "client-one", "client-two" or "" (none)
};

TEST_F(SighupTest, TokensAreReloadedAndAMalformedFileKeepsTheOldSet) {
  ASSERT_NO_FATAL_FAILURE(Start(/*tls=*/false));
  ASSERT_TRUE(Echo(kTokenOld, "").ok());
  EXPECT_EQ(Echo(kTokenNew, "").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(HttpEcho(kTokenOld, ""), 200);
  EXPECT_EQ(HttpEcho(kTokenNew, ""), 401);

  Replace("tokens", "# rotated\n" + kTokenNew + " read\n");
  Hangup();
  ASSERT_TRUE(Eventually([&] { return LogCount("reloaded tokens_file") == 1; })) << ReadFile(server_.log);
  EXPECT_TRUE(Echo(kTokenNew, "").ok());
  EXPECT_EQ(Echo(kTokenOld, "").status().code(), StatusCode::kUnauthenticated) << "the old token is refused";
  EXPECT_EQ(HttpEcho(kTokenNew, ""), 200) << "the HTTP gateway checks the same tokens";
  EXPECT_EQ(HttpEcho(kTokenOld, ""), 401);

  // A malformed file (an unknown scope): logged with the file and line, the
  // tokens loaded before stay in force.
  Replace("tokens", kTokenOld + " wirte\n");
  Hangup();
  ASSERT_TRUE(Eventually([&] { return LogCount("reloading tokens_file") == 1; })) << ReadFile(server_.log);
  const std::string log = ReadFile(server_.log);
  EXPECT_NE(log.find("unknown scope 'wirte'"), std::string::npos) << log;
  EXPECT_NE(log.find("keeping the 1 tokens loaded before"), std::string::npos) << log;
  EXPECT_EQ(log.find(kTokenOld), std::string::npos) << "the log never quotes a token";
  EXPECT_TRUE(Echo(kTokenNew, "").ok());
  EXPECT_EQ(Echo(kTokenOld, "").status().code(), StatusCode::kUnauthenticated);

  // A missing file is kept the same way; the server keeps serving.
  fs::remove(scratch_ / "tokens");
  Hangup();
  ASSERT_TRUE(Eventually([&] { return LogCount("reloading tokens_file") == 2; })) << ReadFile(server_.log);
  EXPECT_TRUE(Echo(kTokenNew, "").ok());

  // SIGTERM still shuts down cleanly after the SIGHUPs.
  kill(server_.pid, SIGTERM);
  EXPECT_EQ(WaitFor(server_.pid, Scaled(30)), 0) << ReadFile(server_.log);
  server_.pid = -1;
}

TEST_F(SighupTest, CertificateIsReloadedForNewConnectionsAndABadOneIsKept) {
  ASSERT_NO_FATAL_FAILURE(Start(/*tls=*/true));
  ASSERT_TRUE(Echo(kTokenOld, "ca-one.crt").ok());
  EXPECT_EQ(Echo(kTokenOld, "ca-two.crt").status().code(), StatusCode::kUnavailable) << "CA two signed nothing yet";
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-one.crt"), 200);
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-two.crt"), 0);

  // Rotate to the certificate of CA two: a client trusting only CA two
  // connects after the SIGHUP, one trusting only CA one no longer does.
  Replace("server.key", ReadFile(scratch_ / "server-two.key"));
  Replace("server.crt", ReadFile(scratch_ / "server-two.crt"));
  Hangup();
  ASSERT_TRUE(Eventually([&] { return LogCount("reloaded the TLS certificate") == 1; })) << ReadFile(server_.log);
  const auto after = Echo(kTokenOld, "ca-two.crt");
  EXPECT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(Echo(kTokenOld, "ca-one.crt").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-two.crt"), 200) << "the HTTPS gateway serves the new certificate";
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-one.crt"), 0);

  // A key that is not the certificate's (CA one's key with CA two's
  // certificate): logged, the current certificate stays.
  Replace("server.key", ReadFile(scratch_ / "server-one.key"));
  Hangup();
  ASSERT_TRUE(Eventually([&] { return LogCount("reloading the TLS certificate failed") == 1; }))
      << ReadFile(server_.log);
  EXPECT_NE(ReadFile(server_.log).find("is not the private key of tls_cert_file"), std::string::npos);
  EXPECT_TRUE(Echo(kTokenOld, "ca-two.crt").ok());
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-two.crt"), 200);

  // Not PEM at all: the same.
  Replace("server.crt", "not a certificate\n");
  Hangup();
  ASSERT_TRUE(Eventually([&] { return LogCount("reloading the TLS certificate failed") == 2; }))
      << ReadFile(server_.log);
  EXPECT_NE(ReadFile(server_.log).find("does not hold a PEM certificate"), std::string::npos);
  EXPECT_TRUE(Echo(kTokenOld, "ca-two.crt").ok());
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-two.crt"), 200);
}

TEST_F(SighupTest, ClientCaIsReloadedForMutualTls) {
  ASSERT_NO_FATAL_FAILURE(Start(/*tls=*/true, /*mutual=*/true));
  ASSERT_TRUE(Echo(kTokenOld, "ca-one.crt").ok());
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-one.crt"), 200);
  client_cert_ = "client-two";  // signed by CA two, which the server does not trust yet
  EXPECT_EQ(Echo(kTokenOld, "ca-one.crt").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-one.crt"), 0);

  Replace("client-ca.crt", ReadFile(scratch_ / "ca-two.crt"));
  Hangup();
  ASSERT_TRUE(Eventually([&] { return LogCount("reloaded the TLS certificate") == 1; })) << ReadFile(server_.log);
  EXPECT_THAT(ReadFile(server_.log), ::testing::HasSubstr("and client CA"));
  const auto after = Echo(kTokenOld, "ca-one.crt");
  EXPECT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-one.crt"), 200) << "the HTTPS gateway verifies against the new client CA";
  client_cert_ = "client-one";
  EXPECT_EQ(Echo(kTokenOld, "ca-one.crt").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(HttpEcho(kTokenOld, "ca-one.crt"), 0);
}

}  // namespace
}  // namespace kls::e2e
