// Fuzz target: the HTTP gateway's request → proto path (server/http/
// http_translate.h) on arbitrary requests. Input: the first line is
// "VERB PATH[?QUERY]", the rest is the body. Every route's request messages
// are built (JSON body, JSON array, or query string) and printed back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/http_translate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  const std::string_view line = input.substr(0, eol);
  const std::string_view body = eol == std::string_view::npos ? std::string_view() : input.substr(eol + 1);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return 0;
  const std::string_view verb = line.substr(0, space);
  std::string_view target = line.substr(space + 1);
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  (void)kls::server::http::ParseQuery(query);
  auto route = kls::server::http::MatchRoute(kls::server::http::KlsHttpRoutes(), verb, path);
  if (!route.ok()) {
    (void)kls::server::http::ErrorJson(route.status(), "fuzz");
    return 0;
  }
  auto messages = kls::server::http::RequestMessages(**route, verb, query, body);
  if (!messages.ok()) {
    (void)kls::server::http::HttpStatusOf(messages.status().code());
    (void)kls::server::http::ErrorJson(messages.status());
    return 0;
  }
  for (const auto& m : *messages) (void)kls::server::http::MessageToJson(*m);
  return 0;
}
