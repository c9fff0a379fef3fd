#include "server/auth.h"

#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <algorithm>
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

  void InstallTokenCheck(std::shared_ptr<const TokenTable> tokens) {
    auto* state = new std::shared_ptr<const TokenTable>(std::move(tokens));
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
    const auto& tokens = *static_cast<std::shared_ptr<const TokenTable>*>(state);
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

  static void Destroy(void* state) { delete static_cast<std::shared_ptr<const TokenTable>*>(state); }

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

StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TransportSecurity& security,
                                                                       std::shared_ptr<const TokenTable> tokens) {
  grpc_server_credentials* core = nullptr;
  if (security.cert_file.empty()) {
    if (!security.key_file.empty() || !security.client_ca_file.empty()) {
      return InvalidArgumentError("tls_key_file and tls_client_ca_file need tls_cert_file");
    }
    core = grpc_insecure_server_credentials_create();
  } else {
    if (security.key_file.empty()) return InvalidArgumentError("tls_cert_file needs tls_key_file");
    KLS_ASSIGN_OR_RETURN(const std::string cert, ReadWholeFile(security.cert_file, "tls_cert_file"));
    KLS_ASSIGN_OR_RETURN(const std::string key, ReadWholeFile(security.key_file, "tls_key_file"));
    KLS_RETURN_IF_ERROR(CheckPem(cert, security.cert_file, "tls_cert_file", false));
    KLS_RETURN_IF_ERROR(CheckPem(key, security.key_file, "tls_key_file", true));
    KLS_RETURN_IF_ERROR(CheckKeyMatchesCert(cert, key, security));
    std::string client_ca;
    if (!security.client_ca_file.empty()) {
      KLS_ASSIGN_OR_RETURN(client_ca, ReadWholeFile(security.client_ca_file, "tls_client_ca_file"));
      KLS_RETURN_IF_ERROR(CheckPem(client_ca, security.client_ca_file, "tls_client_ca_file", false));
    }
    grpc_ssl_pem_key_cert_pair pair{key.c_str(), cert.c_str()};
    core = grpc_ssl_server_credentials_create_ex(
        client_ca.empty() ? nullptr : client_ca.c_str(), &pair, 1,
        client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
        nullptr);
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
