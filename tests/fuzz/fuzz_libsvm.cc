// Fuzz target: the LIBSVM reader (core/data/csv_reader.h) on arbitrary bytes,
// with the dimension inferred and with a declared dimension.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/data/csv_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (int num_features : {0, 7}) {
    std::istringstream in(text);
    auto d = kls::ParseLibsvm(in, "fuzz.libsvm", num_features);
    if (d.ok()) (void)d->Validate();
  }
  return 0;
}
