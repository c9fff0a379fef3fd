// Fuzz target: the pairwise-constraint file reader (core/data/constraints_file.h).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/data/constraints_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  auto c = kls::ParseConstraints(in, "fuzz-constraints.csv");
  if (c.ok()) (void)c->Validate(1000);
  return 0;
}
