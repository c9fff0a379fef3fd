// Security of kls-server: bearer-token authorization and transport
// credentials (plain TCP, TLS, mutual TLS).
//
// Tokens file, one token per line:
//
//   # comment lines and blank lines are ignored
//   3f9c1e...  read              # dashboards, ranking backends
//   a77b02...  read,write        # pipelines that upload and submit
//   c0ffee...  admin
//
// A token is 16..512 printable ASCII characters without spaces; scopes are a
// comma-separated list of read, write, admin. Scopes are cumulative: write
// includes read, admin includes write and read. Only SHA-256 hashes of the
// tokens are kept in memory, and a presented token is compared with every
// stored hash in constant time.
//
// Every RPC needs one scope (RequiredScope): queries, Get/List, Export,
// Watch, Echo and GetServerInfo need read; Upload, Submit, Cancel, Delete,
// SetAlias and Import need write; any other kls method (present or future)
// needs admin, so a new RPC is never open by accident. grpc.health.v1 needs
// nothing (load balancers probe without tokens).
//
// The check runs in gRPC's server auth filter (an auth metadata processor),
// before any handler sees the call:
//   no "authorization: Bearer T" header        → UNAUTHENTICATED
//   T is not in the tokens file                → UNAUTHENTICATED
//   T lacks the scope                          → PERMISSION_DENIED
// Messages name the method and the scope it needs, never the token. The
// authorization header is consumed: handlers never see it.
// With no tokens file, authorization is off (every call is allowed).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace grpc {
class ServerCredentials;
}

namespace kls::server {

/// What a call needs, weakest first; a token holding scope s may make every
/// call that needs s or a weaker one.
enum class Scope { kNone = 0, kRead = 1, kWrite = 2, kAdmin = 3 };

/// "none", "read", "write" or "admin".
const char* ScopeName(Scope scope);

/// The scope the method needs; `method` is the gRPC path
/// "/package.Service/Method". Unknown kls methods need kAdmin.
Scope RequiredScope(const std::string& method);

/// The tokens a server accepts: SHA-256 hashes and the scope of each.
class TokenTable {
 public:
  using Hash = std::array<uint8_t, 32>;

  /// Parses the tokens-file format above. `source_name` prefixes errors
  /// ("tokens.txt:3: unknown scope 'wirte'"); errors never quote a token.
  static StatusOr<TokenTable> Parse(const std::string& text, const std::string& source_name);
  /// Reads and parses `path`. NOT_FOUND if unreadable; INVALID_ARGUMENT if
  /// malformed or empty (a tokens file without tokens is a mistake, not "auth off").
  static StatusOr<TokenTable> Load(const std::string& path);

  /// The strongest scope of `token`, or kNone when it is not in the table.
  /// Hashes `token` and compares it with every entry in constant time.
  Scope Lookup(const std::string& token) const;

  size_t size() const { return entries_.size(); }

  static Hash Sha256(const std::string& text);

 private:
  struct Entry {
    Hash hash;
    Scope scope;
  };
  std::vector<Entry> entries_;
};

/// Decides one call from its method and its "authorization" header value
/// (empty when absent). OK, UNAUTHENTICATED or PERMISSION_DENIED. With a null
/// `tokens`, every call is allowed.
Status Authorize(const TokenTable* tokens, const std::string& method, const std::string& authorization);

/// The token table a running server checks, replaceable while it serves
/// (SIGHUP: KlsServer::ReloadSecurity). Calls already authorized are not
/// affected; every call after Set() is checked against the new table.
class LiveTokens {
 public:
  LiveTokens(std::shared_ptr<const TokenTable> table, std::string path)
      : table_(std::move(table)), path_(std::move(path)) {}

  /// The current table (never null).
  std::shared_ptr<const TokenTable> Get() const;
  /// Re-reads the tokens file. On any error (unreadable, malformed, empty)
  /// the current table is kept and the error returned; on success returns
  /// the new table's size.
  StatusOr<size_t> Reload();
  const std::string& path() const { return path_; }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const TokenTable> table_;
  const std::string path_;
};

/// Transport security of a listening port.
struct TransportSecurity {
  std::string cert_file;       ///< server certificate chain (PEM); empty = plain TCP
  std::string key_file;        ///< its private key (PEM)
  std::string client_ca_file;  ///< when set: mutual TLS, clients must present a cert signed by this CA
};

/// The TLS material of a running server — certificate chain, private key
/// and (mutual TLS) client CA — read from the TransportSecurity files and
/// replaceable while it serves (SIGHUP). The gRPC port (through gRPC's
/// certificate-config fetcher, asked at every new connection) and the HTTPS
/// gateway (through an OpenSSL certificate callback) use the current material
/// for every new connection; open connections keep theirs.
class LiveIdentity {
 public:
  /// One version of the material: the PEM text and its parsed form.
  struct Material;

  /// Reads and checks the files (each PEM parses, the key is the
  /// certificate's). NOT_FOUND if one is unreadable, INVALID_ARGUMENT if one
  /// is empty, not PEM, or the key does not match.
  static StatusOr<std::shared_ptr<LiveIdentity>> Load(const TransportSecurity& files);
  ~LiveIdentity();

  /// Re-reads the files with the checks of Load(). On error the current
  /// material is kept and the error returned; on success returns a summary
  /// of the new certificate ("subject CN=..., expires ...").
  StatusOr<std::string> Reload();

  std::shared_ptr<const Material> Get() const;
  /// Incremented by every successful Reload(); 1 after Load().
  uint64_t generation() const;
  const TransportSecurity& files() const { return files_; }
  /// A summary of the current certificate (subject, expiry).
  std::string Summary() const;

  /// Installs the certificate callback on an OpenSSL server context (an
  /// SSL_CTX*): each handshake then takes the current certificate, key and
  /// client CA. `this` must outlive every connection of that context.
  void InstallOn(void* ssl_ctx);

 private:
  explicit LiveIdentity(TransportSecurity files) : files_(std::move(files)) {}
  static StatusOr<std::shared_ptr<const Material>> Read(const TransportSecurity& files);

  const TransportSecurity files_;
  mutable std::mutex mu_;
  std::shared_ptr<const Material> material_;
  uint64_t generation_ = 0;
};

/// Server credentials for `identity` (null: plain TCP) with `tokens` (null:
/// auth off) checked on every call. The credentials read `identity` at every
/// new connection; `identity` must outlive the gRPC server they serve.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(std::shared_ptr<LiveIdentity> identity,
                                                                       std::shared_ptr<LiveTokens> tokens);

/// True for 127.0.0.0/8, [::1] and "localhost" listen hosts.
bool IsLoopbackHost(const std::string& host);

}  // namespace kls::server
