#include "server/http/openapi.h"

#include <cctype>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "server/http/http_translate.h"

namespace kls::server::http {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::SourceLocation;
using json = nlohmann::json;

// A comment as protoc keeps it (" line one\n line two\n"): the space after
// "//" and trailing blanks removed, blank lines at both ends dropped.
std::string CleanComment(const std::string& comment) {
  std::vector<std::string> lines;
  std::istringstream in(comment);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == ' ') line.erase(0, 1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    lines.push_back(line);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  size_t first = 0;
  while (first < lines.size() && lines[first].empty()) ++first;
  std::string out;
  for (size_t i = first; i < lines.size(); ++i) out += (i > first ? "\n" : "") + lines[i];
  return out;
}

// The leading and trailing comments of a descriptor (empty without source info).
template <typename D>
std::string Comments(const D* d) {
  SourceLocation loc;
  if (d == nullptr || !d->GetSourceLocation(&loc)) return "";
  std::string out;
  for (const std::string* c : {&loc.leading_comments, &loc.trailing_comments}) {
    const std::string text = CleanComment(*c);
    if (!text.empty()) out += (out.empty() ? "" : "\n\n") + text;
  }
  return out;
}

std::string Join(const std::string& a, const std::string& b) {
  return a.empty() ? b : b.empty() ? a : a + "\n\n" + b;
}

// kls.v1 types go by their short name ("TopKRequest", "GraphSpec.Weight"),
// others (google.protobuf.Any) by their full name.
std::string SchemaName(const std::string& full_name) {
  const std::string package = "kls.v1.";
  return full_name.rfind(package, 0) == 0 ? full_name.substr(package.size()) : full_name;
}

json Ref(const std::string& section, const std::string& name) {
  return {{"$ref", "#/components/" + section + "/" + name}};
}

// A schema with a description: a $ref takes no siblings in OpenAPI 3.0, so it
// is wrapped in allOf.
json Described(json schema, const std::string& description) {
  if (description.empty()) return schema;
  if (schema.contains("$ref")) return {{"allOf", json::array({schema})}, {"description", description}};
  schema["description"] = description;
  return schema;
}

// The well-known types, which the canonical JSON mapping writes specially.
std::optional<json> WellKnownSchema(const std::string& full_name) {
  const auto wrapper = [](json value) {
    value["nullable"] = true;
    return value;
  };
  static const std::map<std::string, json> known = {
      {"google.protobuf.Any",
       {{"type", "object"},
        {"description", "Any message: `@type` (\"type.googleapis.com/\" + its full name) and that message's "
                        "fields in its JSON mapping."},
        {"properties", {{"@type", {{"type", "string"}}}}},
        {"required", {"@type"}},
        {"additionalProperties", true}}},
      {"google.protobuf.Struct", {{"type", "object"}, {"additionalProperties", true}}},
      {"google.protobuf.Value", {{"description", "Any JSON value."}}},
      {"google.protobuf.ListValue", {{"type", "array"}, {"items", json::object()}}},
      {"google.protobuf.Timestamp", {{"type", "string"}, {"format", "date-time"}}},
      {"google.protobuf.Duration",
       {{"type", "string"}, {"pattern", "^-?[0-9]+(\\.[0-9]{1,9})?s$"}, {"example", "1.5s"}}},
      {"google.protobuf.FieldMask", {{"type", "string"}, {"description", "Comma-separated lowerCamelCase paths."}}},
      {"google.protobuf.Empty", {{"type", "object"}, {"additionalProperties", false}}},
      {"google.protobuf.DoubleValue", wrapper({{"type", "number"}, {"format", "double"}})},
      {"google.protobuf.FloatValue", wrapper({{"type", "number"}, {"format", "float"}})},
      {"google.protobuf.Int64Value", wrapper({{"type", "string"}, {"format", "int64"}})},
      {"google.protobuf.UInt64Value", wrapper({{"type", "string"}, {"format", "int64"}})},
      {"google.protobuf.Int32Value", wrapper({{"type", "integer"}, {"format", "int32"}})},
      {"google.protobuf.UInt32Value", wrapper({{"type", "integer"}, {"minimum", 0}})},
      {"google.protobuf.BoolValue", wrapper({{"type", "boolean"}})},
      {"google.protobuf.StringValue", wrapper({{"type", "string"}})},
      {"google.protobuf.BytesValue", wrapper({{"type", "string"}, {"format", "byte"}})},
  };
  const auto it = known.find(full_name);
  if (it == known.end()) return std::nullopt;
  return it->second;
}

// Schemas of the canonical JSON mapping, collected into components/schemas
// as they are reached.
class Schemas {
 public:
  json& all() { return schemas_; }

  // One field's value: an array for repeated fields, an object for maps.
  json Field(const FieldDescriptor* f) {
    if (f->is_map()) {
      return {{"type", "object"}, {"additionalProperties", Single(f->message_type()->map_value())}};
    }
    if (f->is_repeated()) return {{"type", "array"}, {"items", Single(f)}};
    return Single(f);
  }

  // One element of a field.
  json Single(const FieldDescriptor* f) {
    switch (f->type()) {
      case FieldDescriptor::TYPE_MESSAGE:
      case FieldDescriptor::TYPE_GROUP: return Message(f->message_type());
      case FieldDescriptor::TYPE_ENUM: return Enum(f->enum_type());
      case FieldDescriptor::TYPE_DOUBLE: return {{"type", "number"}, {"format", "double"}};
      case FieldDescriptor::TYPE_FLOAT: return {{"type", "number"}, {"format", "float"}};
      case FieldDescriptor::TYPE_INT64:
      case FieldDescriptor::TYPE_SINT64:
      case FieldDescriptor::TYPE_SFIXED64:
      case FieldDescriptor::TYPE_UINT64:
      case FieldDescriptor::TYPE_FIXED64: return {{"type", "string"}, {"format", "int64"}};
      case FieldDescriptor::TYPE_UINT32:
      case FieldDescriptor::TYPE_FIXED32: return {{"type", "integer"}, {"minimum", 0}, {"maximum", 4294967295LL}};
      case FieldDescriptor::TYPE_BOOL: return {{"type", "boolean"}};
      case FieldDescriptor::TYPE_STRING: return {{"type", "string"}};
      case FieldDescriptor::TYPE_BYTES: return {{"type", "string"}, {"format", "byte"}};
      default: return {{"type", "integer"}, {"format", "int32"}};  // int32, sint32, sfixed32
    }
  }

  // A reference to the message's schema, which is added with every message it reaches.
  json Message(const Descriptor* m) {
    const std::string name = SchemaName(m->full_name());
    if (!schemas_.contains(name)) {
      if (std::optional<json> known = WellKnownSchema(m->full_name())) {
        schemas_[name] = *known;
      } else {
        schemas_[name] = json::object();  // taken: a recursive type refers to it
        schemas_[name] = MessageSchema(m);
      }
    }
    return Ref("schemas", name);
  }

  json Enum(const EnumDescriptor* e) {
    const std::string name = SchemaName(e->full_name());
    if (!schemas_.contains(name)) {
      json names = json::array();
      std::string values;
      for (int i = 0; i < e->value_count(); ++i) {
        names.push_back(e->value(i)->name());
        const std::string c = Comments(e->value(i));
        if (!c.empty()) values += "\n- `" + e->value(i)->name() + "`: " + c;
      }
      std::string description = Comments(e);
      if (!values.empty()) description = Join(description, "Values:" + values);
      schemas_[name] = Described({{"type", "string"}, {"enum", names}}, description);
    }
    return Ref("schemas", name);
  }

 private:
  json MessageSchema(const Descriptor* m) {
    json properties = json::object();
    for (int i = 0; i < m->field_count(); ++i) {
      const FieldDescriptor* f = m->field(i);
      std::string description = Comments(f);
      if (const auto* oneof = f->real_containing_oneof()) {
        description = Join(description, "Part of oneof `" + oneof->name() + "`: set at most one of its fields.");
      }
      properties[f->json_name()] = Described(Field(f), description);
    }
    std::string description = Comments(m);
    for (int i = 0; i < m->real_oneof_decl_count(); ++i) {
      const auto* oneof = m->oneof_decl(i);
      std::string fields;
      for (int j = 0; j < oneof->field_count(); ++j) {
        fields += (j > 0 ? ", `" : "`") + oneof->field(j)->json_name() + "`";
      }
      description = Join(description, "Oneof `" + oneof->name() + "`: at most one of " + fields + ".");
    }
    // The gateway rejects unknown fields (JsonParseOptions.ignore_unknown_fields = false).
    return Described({{"type", "object"}, {"properties", properties}, {"additionalProperties", false}},
                     description);
  }

  json schemas_ = json::object();
};

// GET: the request's fields as query parameters — scalars, enums and
// repeated scalars (?items=1&items=2), fields of single nested messages
// dotted (kernel.name), down to `max_depth` levels.
void QueryParameters(Schemas& schemas, const Descriptor* m, const std::string& prefix,
                     const std::string& proto_prefix, int depth, json* out) {
  constexpr int kMaxDepth = 3;
  for (int i = 0; i < m->field_count(); ++i) {
    const FieldDescriptor* f = m->field(i);
    const std::string name = prefix + f->json_name();
    const std::string proto_name = proto_prefix + f->name();
    if (f->is_map()) continue;
    if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (!f->is_repeated() && depth < kMaxDepth && !WellKnownSchema(f->message_type()->full_name())) {
        QueryParameters(schemas, f->message_type(), name + ".", proto_name + ".", depth + 1, out);
      }
      continue;
    }
    std::string description = Comments(f);
    if (proto_name != name) description = Join(description, "Also as `" + proto_name + "`.");
    json p = {{"name", name}, {"in", "query"}, {"required", false}, {"schema", schemas.Field(f)}};
    if (!description.empty()) p["description"] = description;
    if (f->is_repeated()) {
      p["style"] = "form";
      p["explode"] = true;
    }
    out->push_back(std::move(p));
  }
}

json QueryParameter(const std::string& name, json schema, const std::string& description) {
  return {{"name", name}, {"in", "query"}, {"required", false}, {"schema", std::move(schema)},
          {"description", description}};
}

// What the error answers of a call look like, by HTTP status: the gRPC codes
// HttpStatusOf maps to each (the gateway's own mapping), plus 413.
json ErrorResponses() {
  std::map<int, std::string> codes;
  for (int c = 1; c <= static_cast<int>(StatusCode::kUnauthenticated); ++c) {
    const auto code = static_cast<StatusCode>(c);
    std::string& names = codes[HttpStatusOf(code)];
    names += (names.empty() ? "" : ", ") + std::string(StatusCodeName(code));
  }
  json responses = json::object();
  const auto add = [&](int status, const std::string& description) {
    json r = {{"description", description},
              {"headers", {{"X-Request-Id", Ref("headers", "X-Request-Id")}}},
              {"content", {{"application/json", {{"schema", Ref("schemas", "Error")}}}}}};
    if (status == 401) r["headers"]["WWW-Authenticate"] = {{"schema", {{"type", "string"}}}, {"description", "Bearer"}};
    responses["Error" + std::to_string(status)] = std::move(r);
  };
  for (const auto& [status, names] : codes) add(status, "gRPC status " + names);
  add(413, "The request body is over the server's limit (RESOURCE_EXHAUSTED)");
  return responses;
}

json Operation(Schemas& schemas, const HttpRoute& r, bool get, const json& error_statuses) {
  const auto* method = r.method;
  json input = schemas.Message(method->input_type());
  json output = schemas.Message(method->output_type());
  std::string description = Comments(method);
  description = Join(description, "gRPC: `" + r.grpc_method + "`. Needs a bearer token with the `" +
                                      ScopeName(r.scope) + "` scope when the server has a tokens file.");
  json op = {{"operationId", r.service + "_" + method->name() + (get ? "_get" : "")},
             {"summary", r.service + "." + method->name()},
             {"tags", {r.service}},
             {"parameters", json::array({Ref("parameters", "X-Request-Id")})}};
  if (r.scope != Scope::kNone) op["security"] = json::array({{{"bearer", json::array()}}});
  op["x-kls-scope"] = ScopeName(r.scope);  // the token scope the call needs (server/auth.h)

  if (get) {
    description = Join(description, "The request's fields are query parameters (nested ones dotted).");
    QueryParameters(schemas, method->input_type(), "", "", 0, &op["parameters"]);
  } else {
    json body = {{"required", r.client_streaming}};
    if (r.client_streaming) {
      body["description"] = "The stream of request messages as one JSON array.";
      body["content"]["application/json"]["schema"] = {{"type", "array"}, {"items", input}};
    } else {
      body["description"] = "The request message; an empty body is every field at its default.";
      body["content"]["application/json"]["schema"] = input;
    }
    if (r.grpc_method == "/kls.v1.Datasets/Upload") {
      body["description"] = "A JSON array of request messages (a DatasetHeader first), or the data set as a "
                            "CSV file (text/csv: a header row, then the features, the last column `label` when "
                            "labelled) or LIBSVM file (application/x-libsvm), described by the query parameters.";
      body["content"]["text/csv"]["schema"] = {{"type", "string"}};
      body["content"]["application/x-libsvm"]["schema"] = {{"type", "string"}};
      json& params = op["parameters"];
      params.push_back(QueryParameter("name", {{"type", "string"}}, "CSV / LIBSVM body: the data set's name."));
      params.push_back(QueryParameter("format", {{"type", "string"}, {"enum", {"csv", "libsvm"}}},
                                      "CSV / LIBSVM body: its format; default from the Content-Type."));
      params.push_back(QueryParameter("num_features", {{"type", "integer"}, {"minimum", 0}},
                                      "LIBSVM body: the number of features (0 = the largest index seen)."));
      params.push_back(QueryParameter("protocol", {{"type", "string"}, {"enum", {"admm", "bcd", "simplenpkl"}}},
                                      "CSV / LIBSVM body: pairs the server draws from the labels by this "
                                      "protocol (ConstraintProtocol.name)."));
      params.push_back(QueryParameter("seed", {{"type", "integer"}, {"minimum", 0}},
                                      "With `protocol`: the generator's seed (ConstraintProtocol.seed)."));
      // The protocol's own parameters as protocol.FIELD (name and seed have the short forms above).
      if (const Descriptor* protocol = method->file()->pool()->FindMessageTypeByName("kls.v1.ConstraintProtocol")) {
        json fields = json::array();
        QueryParameters(schemas, protocol, "protocol.", "protocol.", 1, &fields);
        for (json& p : fields) {
          if (p["name"] != "protocol.name" && p["name"] != "protocol.seed") params.push_back(std::move(p));
        }
      }
    } else if (r.grpc_method == "/kls.v1.Datasets/SetAttributes") {
      body["description"] = "A JSON array of request messages, or the attributes CSV itself (text/csv, "
                            "see AttributesChunk) with the data set in the `dataset_id` query parameter.";
      body["content"]["text/csv"]["schema"] = {{"type", "string"}};
      op["parameters"].push_back(QueryParameter("dataset_id", {{"type", "string"}},
                                                "CSV body (required then): the data set, by id or name."));
    }
    op["requestBody"] = std::move(body);
  }
  op["description"] = description;

  json ok = {{"headers", {{"X-Request-Id", Ref("headers", "X-Request-Id")}}}};
  if (r.server_streaming) {
    ok["description"] = "The stream's responses: a JSON array, or with `Accept: text/event-stream` Server-Sent "
                        "Events — one `message` event per response (data: its JSON), then `end`, or `error` "
                        "(data: an Error).";
    ok["content"]["application/json"]["schema"] = {{"type", "array"}, {"items", output}};
    ok["content"]["text/event-stream"]["schema"] = {{"type", "string"}};
    if (r.grpc_method == "/kls.v1.Kernels/Export") {
      ok["description"] = ok["description"].get<std::string>() +
                          " With `Accept: text/csv`: the embedding as CSV, a header `row,v0,...` then one line "
                          "per item.";
      ok["content"]["text/csv"]["schema"] = {{"type", "string"}};
    }
  } else {
    ok["description"] = "The response message.";
    ok["content"]["application/json"]["schema"] = output;
  }
  op["responses"]["200"] = std::move(ok);
  for (const auto& item : error_statuses.items()) {
    const std::string& name = item.key();
    if (get && name == "Error413") continue;
    op["responses"][name.substr(5)] = Ref("responses", name);
  }
  return op;
}

}  // namespace

std::string BuildOpenApi(const google::protobuf::DescriptorPool& pool, const std::vector<HttpRoute>& routes,
                         const std::string& version) {
  (void)pool;  // the routes' descriptors come from it
  Schemas schemas;
  const json errors = ErrorResponses();
  json paths = json::object();
  json tags = json::array();
  std::string last_service;
  for (const HttpRoute& r : routes) {
    if (r.service != last_service) {
      last_service = r.service;
      json tag = {{"name", r.service}};
      if (std::string c = Comments(r.method->service()); !c.empty()) tag["description"] = c;
      tags.push_back(std::move(tag));
    }
    paths[r.path]["post"] = Operation(schemas, r, false, errors);
    if (r.allows_get) paths[r.path]["get"] = Operation(schemas, r, true, errors);
  }
  json codes = json::array();
  for (int c = 1; c <= static_cast<int>(StatusCode::kUnauthenticated); ++c) {
    codes.push_back(StatusCodeName(static_cast<StatusCode>(c)));
  }
  schemas.all()["Error"] = {
      {"type", "object"},
      {"description", "Every error answer: the gRPC status code's name, its message and the request's id."},
      {"required", {"code", "message", "details"}},
      {"properties",
       {{"code", {{"type", "string"}, {"enum", codes}}},
        {"message", {{"type", "string"}}},
        {"details", {{"type", "array"}, {"items", {{"type", "object"}}}}},
        {"request_id", {{"type", "string"}}}}}};

  json doc = {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "KLS HTTP/JSON API"},
        {"version", version},
        {"description",
         "Every kls.v1 gRPC method at POST /v1/<service>/<method> (kebab case) with the request message as "
         "the body in protobuf's canonical JSON mapping (lowerCamelCase names, 64-bit integers as strings, "
         "enums by name); methods needing only the read scope also at GET with the request's fields as query "
         "parameters. Client streams take a JSON array of requests; server streams answer a JSON array or "
         "Server-Sent Events. Send X-Request-Id to name a request; every answer carries it."}}},
      {"servers", json::array({{{"url", "/"}}})},
      {"tags", tags},
      {"paths", paths},
      {"components",
       {{"schemas", schemas.all()},
        {"responses", errors},
        {"parameters",
         {{"X-Request-Id",
           {{"name", "X-Request-Id"},
            {"in", "header"},
            {"required", false},
            {"schema", {{"type", "string"}}},
            {"description", "The request's id in the server's logs (a new one when absent or unusable)."}}}}},
        {"headers",
         {{"X-Request-Id", {{"schema", {{"type", "string"}}}, {"description", "The request's id."}}}}},
        {"securitySchemes",
         {{"bearer",
           {{"type", "http"},
            {"scheme", "bearer"},
            {"description", "A token of the server's tokens file (--tokens-file) with its scopes: read < "
                            "write < admin. A server without a tokens file takes every request."}}}}}}}};
  return doc.dump(2) + "\n";
}

}  // namespace kls::server::http
