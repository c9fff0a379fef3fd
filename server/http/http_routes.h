// The HTTP/JSON routes of kls.v1, derived from the service descriptors — one
// rule for every method, no per-RPC code (README "HTTP/JSON API"):
//
//   /v1/<service>/<method>      both in kebab case: Queries.TopK → /v1/queries/top-k,
//                               Admin.GetServerInfo → /v1/admin/get-server-info
//   POST                        every method; the body is the request message in
//                               protobuf's canonical JSON mapping ({} or empty = defaults)
//   GET                         also, for methods that need only the read scope:
//                               the request's fields as query parameters
//                               (?kernel.name=iris&k=5&items=1&items=2)
//   client-streaming methods    the body is a JSON array of request messages
//                               (Datasets.Upload also takes a CSV / LIBSVM body)
//   server-streaming methods    a JSON array of response messages, or
//                               Server-Sent Events with Accept: text/event-stream
//                               (Kernels.Export also as CSV with Accept: text/csv)
//
// The gateway (http_gateway.h) answers exactly these routes, and the OpenAPI
// document (openapi.h) describes exactly these routes: both read this table.
#pragma once

#include <string>
#include <vector>

#include "server/auth.h"

namespace google::protobuf {
class DescriptorPool;
class MethodDescriptor;
}  // namespace google::protobuf

namespace kls::server::http {

struct HttpRoute {
  std::string path;         ///< "/v1/queries/top-k"
  std::string grpc_method;  ///< "/kls.v1.Queries/TopK"
  std::string service;      ///< "Queries"
  const google::protobuf::MethodDescriptor* method = nullptr;
  Scope scope = Scope::kAdmin;  ///< RequiredScope(grpc_method)
  bool allows_get = false;      ///< unary and needs at most the read scope
  bool client_streaming = false;
  bool server_streaming = false;
};

/// "TopK" → "top-k", "GetServerInfo" → "get-server-info", "ReRank" → "re-rank".
std::string KebabCase(const std::string& camel);

/// The routes of every service of package kls.v1 in `pool` (in file and
/// declaration order).
std::vector<HttpRoute> BuildHttpRoutes(const google::protobuf::DescriptorPool& pool);

/// The routes of the services compiled into this binary (the generated pool).
const std::vector<HttpRoute>& KlsHttpRoutes();

}  // namespace kls::server::http
