// Fuzz target: the CSV reader (core/data/csv_reader.h) on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/data/csv_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  kls::ReadOptions options;
  options.max_dense_bytes = std::size_t{64} << 20;  // as in fuzz_libsvm: the bound, not the allocation
  auto d = kls::ParseCsv(in, "fuzz.csv", options);
  if (d.ok()) (void)d->Validate();
  return 0;
}
