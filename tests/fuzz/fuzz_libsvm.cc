// Fuzz target: the LIBSVM reader (core/data/csv_reader.h) on arbitrary bytes,
// with the dimension inferred and with a declared dimension.
//
// The dense-size bound is lowered to 64 MiB here: a few bytes of LIBSVM can
// name feature 313313 on a thousand rows, which the reader (rightly) turns into
// a dense 1000 × 313313 request — refused above ReadOptions::max_dense_bytes
// (8 GiB by default), but far above what a fuzzing process may allocate. The
// bound itself is what is exercised (corpus/libsvm/oom-wide-index).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/data/csv_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  kls::ReadOptions options;
  options.max_dense_bytes = std::size_t{64} << 20;
  for (int num_features : {0, 7}) {
    std::istringstream in(text);
    auto d = kls::ParseLibsvm(in, "fuzz.libsvm", num_features, options);
    if (d.ok()) (void)d->Validate();
  }
  return 0;
}
