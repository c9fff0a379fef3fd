#include "server/auth.h"

#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include "server/status_mapping.h"

namespace kls::server {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr size_t kMaxTokenLength = 512;

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool ParseScope(const std::string& name, Scope* scope) {
  if (name == "read") *scope = Scope::kRead;
  else if (name == "write") *scope = Scope::kWrite;
  else if (name == "admin") *scope = Scope::kAdmin;
  else return false;
  return true;
}

StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFoundError("cannot read " + what + " '" + path + "'");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// ---- Transport -----------------------------------------------------------------

// gRPC's C++ API offers an auth metadata processor only on TLS credentials,
// yet tokens must also work on plain TCP (behind a TLS-terminating proxy, or
// on loopback). gRPC core supports a processor on every credential type, so
// this wraps a core credential object directly.
class CoreServerCredentials final : public grpc::ServerCredentials {
 public:
  explicit CoreServerCredentials(grpc_server_credentials* creds) : creds_(creds) {}
  ~CoreServerCredentials() override { grpc_server_credentials_release(creds_); }

  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    // Not used: the processor is installed on the core object (InstallTokenCheck).
  }

  void InstallTokenCheck(std::shared_ptr<LiveTokens> tokens) {
    auto* state = new std::shared_ptr<LiveTokens>(std::move(tokens));
    grpc_auth_metadata_processor processor{&Process, &Destroy, state};
    grpc_server_credentials_set_auth_metadata_processor(creds_, processor);
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  static std::string SliceString(const grpc_slice& s) {
    return std::string(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(s)), GRPC_SLICE_LENGTH(s));
  }

  // Runs in gRPC's server auth filter for every call, before the handler.
  // Non-blocking (one SHA-256 and a table scan), so `done` is called inline.
  static void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md, size_t num_md,
                      grpc_process_auth_metadata_done_cb done, void* user_data) {
    // The table current when the call arrives (a SIGHUP may replace it).
    const std::shared_ptr<const TokenTable> tokens = (*static_cast<std::shared_ptr<LiveTokens>*>(state))->Get();
    std::string method, authorization;
    const grpc_metadata* consumed = nullptr;
    int authorization_headers = 0;
    for (size_t k = 0; k < num_md; ++k) {
      const std::string key = SliceString(md[k].key);
      if (key == ":path") {
        method = SliceString(md[k].value);
      } else if (key == "authorization") {
        ++authorization_headers;
        authorization = SliceString(md[k].value);
        consumed = &md[k];
      }
    }
    Status verdict = authorization_headers > 1
                         ? Status(StatusCode::kUnauthenticated, "more than one authorization header was sent")
                         : Authorize(tokens.get(), method, authorization);
    const std::string message = verdict.message();
    if (verdict.ok()) {
      done(user_data, consumed, consumed ? 1 : 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
    } else {
      const auto code = static_cast<grpc_status_code>(ToGrpcCode(verdict.code()));
      done(user_data, nullptr, 0, nullptr, 0, code, message.c_str());
    }
  }

  static void Destroy(void* state) { delete static_cast<std::shared_ptr<LiveTokens>*>(state); }

  grpc_server_credentials* creds_;
};

// Checks that `pem` holds what `what` should hold, so a wrong file fails at
// start-up with its name instead of at the first handshake.
Status CheckPem(const std::string& pem, const std::string& path, const std::string& field, bool is_key) {
  if (pem.empty()) return InvalidArgumentError(field + " '" + path + "' is empty");
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return InternalError("out of memory reading " + field);
  bool ok = false;
  if (is_key) {
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    ok = key != nullptr;
    EVP_PKEY_free(key);
  } else {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    ok = cert != nullptr;
    X509_free(cert);
  }
  BIO_free(bio);
  if (!ok) {
    return InvalidArgumentError(field + " '" + path + "' does not hold a PEM " +
                                (is_key ? "private key (unencrypted)" : "certificate"));
  }
  return OkStatus();
}

Status CheckKeyMatchesCert(const std::string& cert_pem, const std::string& key_pem, const TransportSecurity& s) {
  BIO* cert_bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  BIO* key_bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  X509* cert = cert_bio ? PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr) : nullptr;
  EVP_PKEY* key = key_bio ? PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr) : nullptr;
  const bool match = cert != nullptr && key != nullptr && X509_check_private_key(cert, key) == 1;
  EVP_PKEY_free(key);
  X509_free(cert);
  BIO_free(key_bio);
  BIO_free(cert_bio);
  if (!match) {
    return InvalidArgumentError("tls_key_file '" + s.key_file + "' is not the private key of tls_cert_file '" +
                                s.cert_file + "'");
  }
  return OkStatus();
}

}  // namespace

const char* ScopeName(Scope scope) {
  switch (scope) {
    case Scope::kNone: return "none";
    case Scope::kRead: return "read";
    case Scope::kWrite: return "write";
    case Scope::kAdmin: return "admin";
  }
  return "admin";
}

Scope RequiredScope(const std::string& method) {
  // Exact paths; anything not listed needs admin (fail closed), so an RPC
  // added later is admin-only until someone decides otherwise here.
  static const std::map<std::string, Scope> kScopes = {
      {"/grpc.health.v1.Health/Check", Scope::kNone},
      {"/grpc.health.v1.Health/Watch", Scope::kNone},
      {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", Scope::kRead},
      {"/kls.v1.Admin/Echo", Scope::kRead},
      {"/kls.v1.Admin/GetServerInfo", Scope::kRead},
      {"/kls.v1.Datasets/Get", Scope::kRead},
      {"/kls.v1.Datasets/List", Scope::kRead},
      {"/kls.v1.Datasets/Upload", Scope::kWrite},
      {"/kls.v1.Datasets/Delete", Scope::kWrite},
      {"/kls.v1.Datasets/SetAttributes", Scope::kWrite},
      {"/kls.v1.Jobs/Get", Scope::kRead},
      {"/kls.v1.Jobs/List", Scope::kRead},
      {"/kls.v1.Jobs/Watch", Scope::kRead},
      {"/kls.v1.Jobs/History", Scope::kRead},
      {"/kls.v1.Jobs/Submit", Scope::kWrite},
      {"/kls.v1.Jobs/Cancel", Scope::kWrite},
      {"/kls.v1.Kernels/Get", Scope::kRead},
      {"/kls.v1.Kernels/List", Scope::kRead},
      {"/kls.v1.Kernels/Export", Scope::kRead},
      {"/kls.v1.Kernels/Inspect", Scope::kRead},
      {"/kls.v1.Kernels/Delete", Scope::kWrite},
      {"/kls.v1.Kernels/SetAlias", Scope::kWrite},
      {"/kls.v1.Kernels/Import", Scope::kWrite},
      {"/kls.v1.Queries/Similarity", Scope::kRead},
      {"/kls.v1.Queries/TopK", Scope::kRead},
      {"/kls.v1.Queries/Embed", Scope::kRead},
      {"/kls.v1.Queries/ReRank", Scope::kRead},
      {"/kls.v1.Queries/SocialStrength", Scope::kRead},
      {"/kls.v1.Queries/RecommendFriends", Scope::kRead},
      {"/kls.v1.Queries/RecommendGroups", Scope::kRead},
      {"/kls.v1.Queries/Classify", Scope::kRead},
      {"/kls.v1.Queries/ClassifyUsers", Scope::kRead},
  };
  const auto it = kScopes.find(method);
  return it == kScopes.end() ? Scope::kAdmin : it->second;
}

TokenTable::Hash TokenTable::Sha256(const std::string& text) {
  Hash hash;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), hash.data());
  return hash;
}

StatusOr<TokenTable> TokenTable::Parse(const std::string& text, const std::string& source_name) {
  TokenTable table;
  std::map<Hash, int> line_of;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string where = source_name + ":" + std::to_string(line_no) + ": ";
    std::string line = raw;
    // A '#' starts a comment only at the start or after whitespace: tokens may contain '#'.
    for (size_t k = 0; k < line.size(); ++k) {
      if (line[k] == '#' && (k == 0 || std::isspace(static_cast<unsigned char>(line[k - 1])))) {
        line.resize(k);
        break;
      }
    }
    line = Trim(line);
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string token, scopes, extra;
    fields >> token >> scopes;
    if (scopes.empty()) {
      return InvalidArgumentError(where + "expected 'TOKEN SCOPES' (scopes: read, write, admin, comma-separated)");
    }
    if (fields >> extra) {
      return InvalidArgumentError(where + "unexpected text '" + extra + "' after the scopes (use commas: read,write)");
    }
    if (token.size() < kMinTokenLength || token.size() > kMaxTokenLength) {
      return InvalidArgumentError(where + "the token is " + std::to_string(token.size()) + " characters; " +
                                  std::to_string(kMinTokenLength) + ".." + std::to_string(kMaxTokenLength) +
                                  " are required");
    }
    if (!std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
      return InvalidArgumentError(where + "the token has a character outside printable ASCII");
    }
    Scope scope = Scope::kNone;
    size_t start = 0;
    while (start <= scopes.size()) {  // also sees the empty name after a trailing ','
      const size_t comma = std::min(scopes.find(',', start), scopes.size());
      const std::string name = scopes.substr(start, comma - start);
      start = comma + 1;
      Scope s = Scope::kNone;
      if (!ParseScope(name, &s)) {
        return InvalidArgumentError(where + "unknown scope '" + name + "' (scopes are read, write, admin)");
      }
      scope = std::max(scope, s);
    }
    if (scope == Scope::kNone) return InvalidArgumentError(where + "no scope given (read, write, admin)");
    const Hash hash = Sha256(token);
    const auto [it, inserted] = line_of.emplace(hash, line_no);
    if (!inserted) {
      return InvalidArgumentError(where + "the token repeats the one on line " + std::to_string(it->second));
    }
    table.entries_.push_back(Entry{hash, scope});
  }
  if (table.entries_.empty()) {
    return InvalidArgumentError(source_name + ": no tokens (remove tokens_file to turn authorization off)");
  }
  return table;
}

StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  KLS_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path, "tokens_file"));
  return Parse(text, path);
}

Scope TokenTable::Lookup(const std::string& token) const {
  const Hash presented = Sha256(token);
  // Every entry is compared (no early exit) with a constant-time compare, so
  // timing reveals neither which entry matched nor how much of a hash did.
  int best = 0;
  for (const Entry& e : entries_) {
    const int equal = CRYPTO_memcmp(presented.data(), e.hash.data(), presented.size()) == 0;
    best = std::max(best, equal * static_cast<int>(e.scope));
  }
  return static_cast<Scope>(best);
}

Status Authorize(const TokenTable* tokens, const std::string& method, const std::string& authorization) {
  const Scope needed = RequiredScope(method);
  if (tokens == nullptr || needed == Scope::kNone) return OkStatus();
  const std::string needs = method + " needs a token with scope '" + ScopeName(needed) + "'";
  if (authorization.empty()) {
    return Status(StatusCode::kUnauthenticated, "missing bearer token: " + needs +
                                                     " (send the header 'authorization: Bearer TOKEN')");
  }
  static const std::string kBearer = "bearer ";
  if (authorization.size() <= kBearer.size() ||
      !std::equal(kBearer.begin(), kBearer.end(), authorization.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    return Status(StatusCode::kUnauthenticated,
                  "the authorization header is not 'Bearer TOKEN': " + needs);
  }
  const Scope held = tokens->Lookup(authorization.substr(kBearer.size()));
  if (held == Scope::kNone) {
    return Status(StatusCode::kUnauthenticated, "invalid bearer token (not in the server's tokens file): " + needs);
  }
  if (held < needed) {
    return Status(StatusCode::kPermissionDenied,
                  "permission denied: " + needs + "; the token has scope '" + ScopeName(held) + "'");
  }
  return OkStatus();
}

std::shared_ptr<const TokenTable> LiveTokens::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_;
}

StatusOr<size_t> LiveTokens::Reload() {
  StatusOr<TokenTable> loaded = TokenTable::Load(path_);
  if (!loaded.ok()) return loaded.status();
  auto table = std::make_shared<const TokenTable>(std::move(loaded).value());
  const size_t n = table->size();
  std::lock_guard<std::mutex> lock(mu_);
  table_ = std::move(table);
  return n;
}

// ---- LiveIdentity ----------------------------------------------------------------

struct LiveIdentity::Material {
  std::string cert_pem, key_pem, client_ca_pem;  // as read; client_ca_pem empty = no mutual TLS
  X509* cert = nullptr;                           // the leaf certificate
  STACK_OF(X509)* chain = nullptr;                // the certificates after it in cert_file
  EVP_PKEY* key = nullptr;
  X509_STORE* ca_store = nullptr;                 // client CA certificates (mutual TLS)
  STACK_OF(X509_NAME)* ca_names = nullptr;        // their subjects, sent in the certificate request
  uint64_t generation = 0;
  std::string summary;

  Material() = default;
  Material(const Material&) = delete;
  Material& operator=(const Material&) = delete;
  ~Material() {
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    X509_STORE_free(ca_store);
    sk_X509_NAME_pop_free(ca_names, X509_NAME_free);
  }
};

namespace {

// Every certificate in `pem`, in order; empty when there is none.
std::vector<X509*> ReadCertificates(const std::string& pem) {
  std::vector<X509*> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return out;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.push_back(cert);
  ERR_clear_error();  // the read past the last certificate
  BIO_free(bio);
  return out;
}

std::string CertificateSummary(X509* cert) {
  std::string out;
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return out;
  BIO_puts(bio, "subject ");
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  BIO_puts(bio, ", expires ");
  ASN1_TIME_print(bio, X509_get0_notAfter(cert));
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  out.assign(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

}  // namespace

StatusOr<std::shared_ptr<const LiveIdentity::Material>> LiveIdentity::Read(const TransportSecurity& files) {
  if (files.key_file.empty()) return InvalidArgumentError("tls_cert_file needs tls_key_file");
  auto m = std::make_shared<Material>();
  KLS_ASSIGN_OR_RETURN(m->cert_pem, ReadWholeFile(files.cert_file, "tls_cert_file"));
  KLS_ASSIGN_OR_RETURN(m->key_pem, ReadWholeFile(files.key_file, "tls_key_file"));
  KLS_RETURN_IF_ERROR(CheckPem(m->cert_pem, files.cert_file, "tls_cert_file", false));
  KLS_RETURN_IF_ERROR(CheckPem(m->key_pem, files.key_file, "tls_key_file", true));
  KLS_RETURN_IF_ERROR(CheckKeyMatchesCert(m->cert_pem, m->key_pem, files));
  if (!files.client_ca_file.empty()) {
    KLS_ASSIGN_OR_RETURN(m->client_ca_pem, ReadWholeFile(files.client_ca_file, "tls_client_ca_file"));
    KLS_RETURN_IF_ERROR(CheckPem(m->client_ca_pem, files.client_ca_file, "tls_client_ca_file", false));
  }
  // The parsed form, for the HTTPS gateway's handshakes.
  std::vector<X509*> certs = ReadCertificates(m->cert_pem);
  m->chain = sk_X509_new_null();
  for (size_t k = 0; k < certs.size(); ++k) {
    if (k == 0) m->cert = certs[0];
    else sk_X509_push(m->chain, certs[k]);
  }
  BIO* key_bio = BIO_new_mem_buf(m->key_pem.data(), static_cast<int>(m->key_pem.size()));
  m->key = key_bio ? PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(key_bio);
  if (m->cert == nullptr || m->key == nullptr || m->chain == nullptr) {
    return InternalError("cannot parse tls_cert_file '" + files.cert_file + "' and tls_key_file '" + files.key_file +
                         "' a second time");
  }
  if (!m->client_ca_pem.empty()) {
    m->ca_store = X509_STORE_new();
    m->ca_names = sk_X509_NAME_new_null();
    for (X509* ca : ReadCertificates(m->client_ca_pem)) {
      X509_STORE_add_cert(m->ca_store, ca);
      sk_X509_NAME_push(m->ca_names, X509_NAME_dup(X509_get_subject_name(ca)));
      X509_free(ca);
    }
  }
  m->summary = CertificateSummary(m->cert);
  return std::shared_ptr<const Material>(std::move(m));
}

StatusOr<std::shared_ptr<LiveIdentity>> LiveIdentity::Load(const TransportSecurity& files) {
  if (files.cert_file.empty()) return InvalidArgumentError("TLS needs tls_cert_file");
  KLS_ASSIGN_OR_RETURN(std::shared_ptr<const Material> material, Read(files));
  std::shared_ptr<LiveIdentity> identity(new LiveIdentity(files));
  const_cast<Material&>(*material).generation = 1;
  identity->material_ = std::move(material);
  identity->generation_ = 1;
  return identity;
}

LiveIdentity::~LiveIdentity() = default;

StatusOr<std::string> LiveIdentity::Reload() {
  StatusOr<std::shared_ptr<const Material>> read = Read(files_);
  if (!read.ok()) return read.status();
  std::shared_ptr<const Material> material = std::move(read).value();
  std::lock_guard<std::mutex> lock(mu_);
  const_cast<Material&>(*material).generation = ++generation_;  // not yet shared
  material_ = std::move(material);
  return material_->summary;
}

std::shared_ptr<const LiveIdentity::Material> LiveIdentity::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return material_;
}

uint64_t LiveIdentity::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

std::string LiveIdentity::Summary() const { return Get()->summary; }

namespace {

// OpenSSL's certificate callback (SSL_CTX_set_cert_cb): runs in each
// handshake before the server's certificate is chosen, on the connection's
// thread. Gives the SSL object the current certificate, chain and key, and
// for mutual TLS the current client CA.
int UseCurrentIdentity(SSL* ssl, void* arg) {
  const std::shared_ptr<const LiveIdentity::Material> m = static_cast<LiveIdentity*>(arg)->Get();
  if (SSL_use_cert_and_key(ssl, m->cert, m->key, m->chain, /*override=*/1) != 1) return 0;
  if (m->ca_store != nullptr) {
    if (SSL_set1_verify_cert_store(ssl, m->ca_store) != 1) return 0;
    STACK_OF(X509_NAME)* names = SSL_dup_CA_list(m->ca_names);
    if (names == nullptr) return 0;
    SSL_set_client_CA_list(ssl, names);  // takes ownership
  }
  return 1;
}

}  // namespace

void LiveIdentity::InstallOn(void* ssl_ctx) {
  SSL_CTX_set_cert_cb(static_cast<SSL_CTX*>(ssl_ctx), &UseCurrentIdentity, this);
}

namespace {

// gRPC's certificate-config fetcher (asked at server start and before every
// new connection's handshake): a new config only when the identity changed
// since the last one handed over, so unchanged material costs one lock.
// One fetcher per listening port: the server has one.
struct GrpcFetcher {
  LiveIdentity* identity;
  std::atomic<uint64_t> delivered{0};

  static grpc_ssl_certificate_config_reload_status Fetch(void* user_data,
                                                         grpc_ssl_server_certificate_config** config);
};

}  // namespace

// Accessor for the fetcher (Material is private to this file's users).
static grpc_ssl_server_certificate_config* ConfigOf(const LiveIdentity::Material& m) {
  grpc_ssl_pem_key_cert_pair pair{m.key_pem.c_str(), m.cert_pem.c_str()};
  // gRPC's fetcher path insists on root certificates even when client
  // certificates are not requested; without mutual TLS the server's own
  // certificate stands in, unused (no certificate request is ever sent).
  return grpc_ssl_server_certificate_config_create(
      m.client_ca_pem.empty() ? m.cert_pem.c_str() : m.client_ca_pem.c_str(), &pair, 1);
}

grpc_ssl_certificate_config_reload_status GrpcFetcher::Fetch(void* user_data,
                                                             grpc_ssl_server_certificate_config** config) {
  auto* self = static_cast<GrpcFetcher*>(user_data);
  const std::shared_ptr<const LiveIdentity::Material> m = self->identity->Get();
  if (self->delivered.load() == m->generation) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
  *config = ConfigOf(*m);
  if (*config == nullptr) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_FAIL;
  self->delivered.store(m->generation);
  return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(std::shared_ptr<LiveIdentity> identity,
                                                                       std::shared_ptr<LiveTokens> tokens) {
  grpc_server_credentials* core = nullptr;
  if (!identity) {
    core = grpc_insecure_server_credentials_create();
  } else {
    // The fetcher's state lives as long as the process: gRPC offers no
    // destroy hook for it and may ask it until the port's last connection
    // is gone. One small object per started server.
    auto* fetcher = new GrpcFetcher{identity.get()};
    const bool mutual = !identity->files().client_ca_file.empty();
    grpc_ssl_server_credentials_options* options = grpc_ssl_server_credentials_create_options_using_config_fetcher(
        mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        &GrpcFetcher::Fetch, fetcher);
    core = options ? grpc_ssl_server_credentials_create_with_options(options) : nullptr;
    if (core == nullptr) return InvalidArgumentError("gRPC rejected the TLS certificate or key");
  }
  auto creds = std::make_shared<CoreServerCredentials>(core);
  if (tokens) creds->InstallTokenCheck(std::move(tokens));
  return std::shared_ptr<grpc::ServerCredentials>(std::move(creds));
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "[::1]" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace kls::server
