// Fuzz target: the CSV reader (core/data/csv_reader.h) on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/data/csv_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  auto d = kls::ParseCsv(in, "fuzz.csv");
  if (d.ok()) (void)d->Validate();
  return 0;
}
