// TLS and mutual TLS (server/auth.h, config keys tls_*_file) with certificates
// made at test time by the `openssl` command: a test CA signs the server's and
// a client's certificate; a second, unrelated CA signs a rogue client's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "client/client.h"
#include "server/kls_server.h"
#include "temp_dir.h"

namespace kls::server {
namespace {

using ::testing::HasSubstr;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("openssl version > /dev/null 2>&1") != 0) return;  // each test then skips
    dir_ = new kls::testing::TempDir();
    const std::string d = dir_->path().string();
    // EC keys: fast to generate. SANs cover both ways a test dials the server.
    const std::string script =
        "set -e; cd '" + d + "'\n"
        "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out \"$1\" 2>/dev/null; }\n"
        "key ca.key; openssl req -x509 -new -key ca.key -subj /CN=kls-test-ca -days 2 -out ca.crt\n"
        "key other-ca.key; openssl req -x509 -new -key other-ca.key -subj /CN=other-ca -days 2 -out other-ca.crt\n"
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > server.ext\n"
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n"
        "key server.key; openssl req -new -key server.key -subj /CN=localhost -out server.csr\n"
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext "
        "-out server.crt 2>/dev/null\n"
        "key client.key; openssl req -new -key client.key -subj /CN=kls-client -out client.csr\n"
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile client.ext "
        "-out client.crt 2>/dev/null\n"
        "key rogue.key; openssl req -new -key rogue.key -subj /CN=rogue -out rogue.csr\n"
        "openssl x509 -req -in rogue.csr -CA other-ca.crt -CAkey other-ca.key -CAcreateserial -days 2 "
        "-extfile client.ext -out rogue.crt 2>/dev/null\n";
    std::ofstream(d + "/make-certs.sh") << script;
    certs_ok_ = std::system(("sh '" + d + "/make-certs.sh' > '" + d + "/make-certs.log' 2>&1").c_str()) == 0;
  }

  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << "the openssl command is not installed; TLS tests need it to make certificates";
    ASSERT_TRUE(certs_ok_) << "making test certificates failed; see " << File("make-certs.log");
  }

  static std::string File(const std::string& name) { return dir_->Sub(name); }

  std::unique_ptr<KlsServer> StartServer(bool mutual, const std::string& tokens_file = "") {
    ServerConfig config;
    config.listen = "127.0.0.1:0";
    config.data_dir = data_.Sub("data-" + std::to_string(servers_++));
    config.workers = 1;
    config.log_level = "warn";
    config.tls_cert_file = File("server.crt");
    config.tls_key_file = File("server.key");
    if (mutual) config.tls_client_ca_file = File("ca.crt");
    config.tokens_file = tokens_file;
    auto server = std::make_unique<KlsServer>(config);
    const Status started = server->Start();
    EXPECT_TRUE(started.ok()) << started;
    return started.ok() ? std::move(server) : nullptr;
  }

  // A client of `server`; `ca` empty = system CAs; `cert` "client", "rogue" or "" (none).
  static StatusOr<std::string> EchoThrough(const KlsServer& server, const std::string& ca, const std::string& cert,
                                           bool tls = true, const std::string& token = "") {
    ClientOptions options;
    options.target = server.target();
    options.timeout_seconds = 5;
    options.token = token;
    if (tls) {
      const Status loaded = LoadTlsFiles(ca.empty() ? "" : File(ca), cert.empty() ? "" : File(cert + ".crt"),
                                         cert.empty() ? "" : File(cert + ".key"), &options);
      if (!loaded.ok()) return loaded;
    }
    Client client(options);
    return client.Echo("over tls");
  }

  static kls::testing::TempDir* dir_;
  static bool certs_ok_;
  kls::testing::TempDir data_;
  int servers_ = 0;
};

kls::testing::TempDir* TlsTest::dir_ = nullptr;
bool TlsTest::certs_ok_ = false;

TEST_F(TlsTest, ServerTlsAcceptsClientsThatTrustItsCa) {
  auto server = StartServer(/*mutual=*/false);
  ASSERT_NE(server, nullptr);
  const auto echoed = EchoThrough(*server, "ca.crt", "");
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, "over tls");
  // A client certificate is not needed but does no harm.
  EXPECT_TRUE(EchoThrough(*server, "ca.crt", "client").ok());

  // Plain TCP against a TLS port fails; so does TLS that does not trust the CA.
  EXPECT_EQ(EchoThrough(*server, "", "", /*tls=*/false).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(EchoThrough(*server, "other-ca.crt", "").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(EchoThrough(*server, "", "").status().code(), StatusCode::kUnavailable) << "system CAs do not know it";
}

TEST_F(TlsTest, ServerNameOverrideIsWhatTheCertificateIsCheckedAgainst) {
  auto server = StartServer(/*mutual=*/false);
  ASSERT_NE(server, nullptr);
  for (const auto& [name, ok] : {std::pair<std::string, bool>{"localhost", true}, {"kls.example.org", false}}) {
    ClientOptions options;
    options.target = server->target();  // 127.0.0.1:PORT
    options.timeout_seconds = 5;
    options.tls_server_name = name;
    ASSERT_TRUE(LoadTlsFiles(File("ca.crt"), "", "", &options).ok());
    Client client(options);
    const auto echoed = client.Echo("x");
    EXPECT_EQ(echoed.ok(), ok) << name << ": " << echoed.status();
  }
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificateFromTheClientCa) {
  auto server = StartServer(/*mutual=*/true);
  ASSERT_NE(server, nullptr);
  const auto echoed = EchoThrough(*server, "ca.crt", "client");
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(*echoed, "over tls");

  const auto no_cert = EchoThrough(*server, "ca.crt", "");
  EXPECT_EQ(no_cert.status().code(), StatusCode::kUnavailable) << no_cert.status();
  const auto rogue = EchoThrough(*server, "ca.crt", "rogue");
  EXPECT_EQ(rogue.status().code(), StatusCode::kUnavailable) << rogue.status();
  EXPECT_EQ(EchoThrough(*server, "", "", /*tls=*/false).status().code(), StatusCode::kUnavailable);
  // The server is still fine after the rejected handshakes.
  EXPECT_TRUE(EchoThrough(*server, "ca.crt", "client").ok());
}

TEST_F(TlsTest, TokensAreCheckedOverMutualTls) {
  const std::string token = "tls-test-token-0123456789abcdef";
  std::ofstream(data_.Sub("tokens")) << token << " read\n";
  auto server = StartServer(/*mutual=*/true, data_.Sub("tokens"));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(EchoThrough(*server, "ca.crt", "client").status().code(), StatusCode::kUnauthenticated);
  const auto echoed = EchoThrough(*server, "ca.crt", "client", true, token);
  EXPECT_TRUE(echoed.ok()) << echoed.status();
}

TEST_F(TlsTest, BadCertificateFilesFailTheStart) {
  struct Case {
    std::string cert, key, client_ca;
    StatusCode code;
    std::string message;
  };
  std::ofstream(data_.Sub("not-pem.txt")) << "hello\n";
  const std::vector<Case> cases = {
      {File("server.crt"), File("client.key"), "", StatusCode::kInvalidArgument,
       "is not the private key of tls_cert_file"},
      {data_.Sub("missing.crt"), File("server.key"), "", StatusCode::kNotFound, "cannot read tls_cert_file"},
      {data_.Sub("not-pem.txt"), File("server.key"), "", StatusCode::kInvalidArgument,
       "does not hold a PEM certificate"},
      {File("server.crt"), File("server.crt"), "", StatusCode::kInvalidArgument, "does not hold a PEM private key"},
      {File("server.crt"), File("server.key"), data_.Sub("not-pem.txt"), StatusCode::kInvalidArgument,
       "tls_client_ca_file"},
      {File("server.crt"), "", "", StatusCode::kInvalidArgument, "tls_key_file is not"},
      {"", "", File("ca.crt"), StatusCode::kInvalidArgument, "needs tls_cert_file"},
  };
  for (const Case& c : cases) {
    ServerConfig config;
    config.listen = "127.0.0.1:0";
    config.data_dir = data_.Sub("bad");
    config.log_level = "off";
    config.tls_cert_file = c.cert;
    config.tls_key_file = c.key;
    config.tls_client_ca_file = c.client_ca;
    KlsServer server(config);
    const Status s = server.Start();
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << s;
  }
}

TEST_F(TlsTest, ClientTlsFileErrors) {
  ClientOptions options;
  EXPECT_EQ(LoadTlsFiles(File("ca.crt"), File("client.crt"), "", &options).code(), StatusCode::kInvalidArgument);
  const Status missing = LoadTlsFiles(data_.Sub("nope.crt"), "", "", &options);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("nope.crt"));
  std::ofstream(data_.Sub("not-pem.txt")) << "hello\n";
  EXPECT_EQ(LoadTlsFiles(data_.Sub("not-pem.txt"), "", "", &options).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(LoadTlsFiles(File("ca.crt"), File("client.crt"), File("client.key"), &options).ok());
  EXPECT_TRUE(options.tls);
  EXPECT_THAT(options.tls_root_certs_pem, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_THAT(options.tls_private_key_pem, HasSubstr("PRIVATE KEY"));
}

}  // namespace
}  // namespace kls::server
