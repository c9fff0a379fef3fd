// Files the HTTP gateway serves as they are: the web console (server/http/
// console/) and the OpenAPI document (generated at build time, openapi.h),
// compiled into the binary (http_assets.cmake) so that the console works on a
// machine without internet and with no files beside the binary.
#pragma once

#include <string_view>
#include <vector>

namespace kls::server::http {

struct HttpAsset {
  std::string_view path;          ///< "/", "/console.js", "/openapi.json"
  std::string_view content_type;  ///< "text/html; charset=utf-8", ...
  std::string_view body;
};

/// The asset served at `path`, or null.
const HttpAsset* FindHttpAsset(std::string_view path);

/// Every asset (for tests).
const std::vector<HttpAsset>& HttpAssets();

}  // namespace kls::server::http
