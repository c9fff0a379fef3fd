// Fuzz target: the tokens file (server/auth.h, TokenTable::Parse), then an
// authorization check against what it parsed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto table = kls::server::TokenTable::Parse(text, "fuzz-tokens");
  if (table.ok()) {
    const std::string first = text.substr(0, text.find_first_of(" \t\n"));
    (void)kls::server::Authorize(&*table, "/kls.v1.Queries/TopK", "Bearer " + first);
  }
  return 0;
}
