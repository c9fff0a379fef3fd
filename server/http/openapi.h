// The OpenAPI 3.0 document of the HTTP/JSON API, generated from the proto
// descriptors and their comments: one path per route of http_routes.h (the
// same rule the gateway answers by), request and response bodies as schemas of
// the messages in protobuf's canonical JSON mapping. kls-openapi writes it at
// build time; the server serves it at /openapi.json.
#pragma once

#include <string>
#include <vector>

#include "server/http/http_routes.h"

namespace google::protobuf {
class DescriptorPool;
}

namespace kls::server::http {

/// The document for `routes` (built from `pool`, which should carry source
/// info for the descriptions), as pretty-printed JSON.
std::string BuildOpenApi(const google::protobuf::DescriptorPool& pool, const std::vector<HttpRoute>& routes,
                         const std::string& version);

}  // namespace kls::server::http
