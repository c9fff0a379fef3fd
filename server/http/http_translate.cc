#include "server/http/http_translate.h"

#include <cctype>
#include <cstdlib>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

namespace kls::server::http {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using json = nlohmann::json;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%' && i + 2 < in.size() && HexValue(in[i + 1]) >= 0 &&
               HexValue(in[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(in[i + 1]) * 16 + HexValue(in[i + 2]));
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

// A field of `type` by its proto name or its JSON name.
const FieldDescriptor* FindField(const Descriptor* type, const std::string& name) {
  if (const FieldDescriptor* f = type->FindFieldByName(name)) return f;
  for (int i = 0; i < type->field_count(); ++i) {
    if (type->field(i)->json_name() == name) return type->field(i);
  }
  return nullptr;
}

// A query value as the JSON value the canonical mapping expects for `field`.
StatusOr<json> ScalarJson(const FieldDescriptor* field, const std::string& value, const std::string& param) {
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      if (value == "true" || value == "1" || value.empty()) return json(true);
      if (value == "false" || value == "0") return json(false);
      return InvalidArgumentError("query parameter '" + param + "': '" + value + "' is not a bool (true or false)");
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      // The canonical mapping takes numbers as JSON strings too; its parser
      // then says what is wrong with a bad one, naming the field.
      return json(value);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return InvalidArgumentError("query parameter '" + param + "': field '" + field->name() +
                                  "' is a message; set its fields as '" + param + ".FIELD'");
    default:
      return json(value);  // string, bytes (base64), enum (by name)
  }
}

StatusOr<std::string> QueryToJson(const Descriptor* type,
                                  const std::vector<std::pair<std::string, std::string>>& params) {
  json root = json::object();
  for (const auto& [key, value] : params) {
    if (key.empty()) continue;
    const Descriptor* at = type;
    json* node = &root;
    size_t start = 0;
    while (true) {
      const size_t dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const FieldDescriptor* field = FindField(at, part);
      if (field == nullptr) {
        return InvalidArgumentError("query parameter '" + key + "': " + at->full_name() + " has no field '" + part +
                                    "'");
      }
      const std::string json_key = field->json_name();
      if (dot == std::string::npos) {
        KLS_ASSIGN_OR_RETURN(json scalar, ScalarJson(field, value, key));
        if (field->is_repeated()) {
          json& list = (*node)[json_key];
          if (!list.is_array()) list = json::array();
          list.push_back(std::move(scalar));
        } else {
          (*node)[json_key] = std::move(scalar);
        }
        break;
      }
      if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated()) {
        return InvalidArgumentError("query parameter '" + key + "': field '" + part +
                                    "' is not a single message; only message fields take '.'");
      }
      json& child = (*node)[json_key];
      if (!child.is_object()) child = json::object();
      node = &child;
      at = field->message_type();
      start = dot + 1;
    }
  }
  return root.dump();
}

Status ParseInto(std::string_view text, Message* message, const std::string& where) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(std::string(text), message, options);
  if (status.ok()) return OkStatus();
  std::string detail(status.message());
  return InvalidArgumentError(where + ": " + (detail.empty() ? "not a " + message->GetTypeName() : detail) +
                              " (expected " + message->GetDescriptor()->full_name() +
                              " in protobuf's JSON mapping)");
}

bool IsBlank(std::string_view text) {
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view pair = query.substr(start, end - start);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      if (eq == std::string_view::npos) {
        out.emplace_back(PercentDecode(pair), "");
      } else {
        out.emplace_back(PercentDecode(pair.substr(0, eq)), PercentDecode(pair.substr(eq + 1)));
      }
    }
    start = end + 1;
  }
  return out;
}

std::string QueryValue(std::string_view query, std::string_view name) {
  for (auto& [k, v] : ParseQuery(query)) {
    if (k == name) return v;
  }
  return "";
}

Status QueryToMessage(std::string_view query, const std::string& prefix, Message* message) {
  std::vector<std::pair<std::string, std::string>> params;
  for (auto& [k, v] : ParseQuery(query)) {
    if (k.size() > prefix.size() && k.compare(0, prefix.size(), prefix) == 0) params.emplace_back(k.substr(prefix.size()), v);
  }
  KLS_ASSIGN_OR_RETURN(std::string text, QueryToJson(message->GetDescriptor(), params));
  const Status s = ParseInto(text, message, "query");
  if (!s.ok()) return Status(s.code(), prefix + "*: " + s.message());
  return OkStatus();
}

std::string AllowedVerbs(const HttpRoute& route) { return route.allows_get ? "GET, POST" : "POST"; }

StatusOr<const HttpRoute*> MatchRoute(const std::vector<HttpRoute>& routes, std::string_view verb,
                                      std::string_view path) {
  for (const HttpRoute& r : routes) {
    if (r.path != path) continue;
    if (verb == "POST" || (verb == "GET" && r.allows_get)) return &r;
    return UnimplementedError("method " + std::string(verb) + " is not allowed on " + r.path + " (allowed: " +
                              AllowedVerbs(r) + ")");
  }
  return NotFoundError("no route " + std::string(verb) + " " + std::string(path) +
                       " (routes are /v1/<service>/<method>; the list is at /openapi.json)");
}

StatusOr<std::vector<std::unique_ptr<Message>>> RequestMessages(const HttpRoute& route, std::string_view verb,
                                                                std::string_view query, std::string_view body) {
  const Descriptor* type = route.method->input_type();
  const Message* prototype = google::protobuf::MessageFactory::generated_factory()->GetPrototype(type);
  if (prototype == nullptr) return InternalError("no message type " + type->full_name() + " in this build");
  std::vector<std::unique_ptr<Message>> messages;
  if (verb == "GET") {
    KLS_ASSIGN_OR_RETURN(std::string text, QueryToJson(type, ParseQuery(query)));
    std::unique_ptr<Message> m(prototype->New());
    KLS_RETURN_IF_ERROR(ParseInto(text, m.get(), "query"));
    messages.push_back(std::move(m));
    return messages;
  }
  if (!route.client_streaming) {
    std::unique_ptr<Message> m(prototype->New());
    if (!IsBlank(body)) KLS_RETURN_IF_ERROR(ParseInto(body, m.get(), "body"));
    messages.push_back(std::move(m));
    return messages;
  }
  json array = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!array.is_array()) {
    return InvalidArgumentError("body: " + route.path + " streams its requests: send a JSON array of " +
                                type->full_name() + " objects" +
                                (array.is_discarded() ? " (the body is not valid JSON)" : ""));
  }
  for (size_t i = 0; i < array.size(); ++i) {
    std::unique_ptr<Message> m(prototype->New());
    KLS_RETURN_IF_ERROR(ParseInto(array[i].dump(), m.get(), "body[" + std::to_string(i) + "]"));
    messages.push_back(std::move(m));
  }
  return messages;
}

std::string MessageToJson(const Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return "{}";
  return out;
}

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kCancelled: return 499;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted: return 409;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kFailedPrecondition: return 412;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kUnavailable: return 503;
    default: return 500;  // UNKNOWN, INTERNAL, DATA_LOSS
  }
}

std::string ErrorJson(const Status& status, const std::string& request_id) {
  json j = {{"code", StatusCodeName(status.code())}, {"message", status.message()}, {"details", json::array()}};
  if (!request_id.empty()) j["request_id"] = request_id;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kls::server::http
