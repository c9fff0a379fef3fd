// Fuzz target: the artifact reader's checks (server/store/artifact.h,
// VerifyArtifactBytes) on arbitrary bytes — header, section table, offsets,
// CRCs — as a damaged or hostile artifact would present them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/store/artifact.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kls::store::VerifyArtifactBytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz artifact");
  return 0;
}
