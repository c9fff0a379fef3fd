// HTTP ⇄ protobuf translation of the gateway, with no server and no network:
// route matching, request bodies and query strings → request messages,
// response messages → JSON, statuses → HTTP. The gateway (http_gateway.h)
// and the fuzz target (tests/fuzz/fuzz_http_request.cc) call exactly this.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>

#include "core/common/status.h"
#include "server/http/http_routes.h"

namespace kls::server::http {

/// The route answering `path` (NOT_FOUND naming the path otherwise). When the
/// path exists but not for `verb`, FAILED_PRECONDITION-free: UNIMPLEMENTED
/// whose message names the verbs it takes (the gateway answers 405).
StatusOr<const HttpRoute*> MatchRoute(const std::vector<HttpRoute>& routes, std::string_view verb,
                                      std::string_view path);

/// "POST" or "GET, POST": the verbs `route` answers.
std::string AllowedVerbs(const HttpRoute& route);

/// The request messages of one call:
///   GET   → one message from the query string (`route.allows_get`);
///   POST  → unary / server-streaming: one message from the JSON body (empty
///           body = all defaults); client-streaming: a JSON array of messages.
/// INVALID_ARGUMENT naming the parameter, field or array element:
///   "body: ..." / "body[2]: ..." / "query parameter 'k': ...".
StatusOr<std::vector<std::unique_ptr<google::protobuf::Message>>> RequestMessages(const HttpRoute& route,
                                                                                 std::string_view verb,
                                                                                 std::string_view query,
                                                                                 std::string_view body);

/// One JSON object: the canonical JSON mapping (lowerCamelCase names, int64
/// as strings, enums by name), fields at their default value included.
std::string MessageToJson(const google::protobuf::Message& message);

/// The HTTP status of a gRPC status code: 400, 401, 403, 404, 409, 412, 429,
/// 499, 500, 501, 503, 504.
int HttpStatusOf(StatusCode code);

/// {"code":"NOT_FOUND","message":"...","details":[]} (+ "request_id" when set).
std::string ErrorJson(const Status& status, const std::string& request_id = "");

/// Query-string pairs, percent-decoded ('+' is a space), in order.
std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query);

/// Sets the fields of `message` from the query parameters named
/// `prefix` + FIELD (e.g. prefix "protocol." and "protocol.fraction=0.5"),
/// by the same rules as a GET request; INVALID_ARGUMENT naming the parameter.
Status QueryToMessage(std::string_view query, const std::string& prefix, google::protobuf::Message* message);

/// The value of the first query parameter `name`, or "".
std::string QueryValue(std::string_view query, std::string_view name);

}  // namespace kls::server::http
