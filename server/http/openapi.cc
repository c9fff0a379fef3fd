#include "server/http/openapi.h"

#include <google/protobuf/descriptor.h>
#include <nlohmann/json.hpp>

namespace kls::server::http {

std::string BuildOpenApi(const google::protobuf::DescriptorPool& pool, const std::vector<HttpRoute>& routes,
                         const std::string& version) {
  (void)pool;
  nlohmann::json doc = {{"openapi", "3.0.3"}, {"info", {{"title", "KLS HTTP/JSON API"}, {"version", version}}}};
  nlohmann::json paths = nlohmann::json::object();
  for (const HttpRoute& r : routes) {
    nlohmann::json op = {{"operationId", r.service + "_" + r.method->name()},
                         {"responses", {{"200", {{"description", "OK"}}}}}};
    paths[r.path]["post"] = op;
    if (r.allows_get) paths[r.path]["get"] = op;
  }
  doc["paths"] = paths;
  return doc.dump(2);
}

}  // namespace kls::server::http
