// Fuzz target: the kls-server config file (server/server_config.h), applied
// and then validated as the server does at start.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/server_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kls::server::ServerConfig config;
  const kls::Status s =
      kls::server::ApplyConfigText(std::string(reinterpret_cast<const char*>(data), size), "fuzz.conf", &config);
  if (s.ok()) (void)config.Validate();
  return 0;
}
