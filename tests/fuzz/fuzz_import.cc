// Fuzz target: the kernel import assembler (server/import_assembler.h). The
// input is a sequence of length-delimited ImportKernelChunk messages — one
// Import call's stream — fed until the first error, then Finish and the
// conversion to a LearnedKernel the handler stores.
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <cstddef>
#include <cstdint>

#include "server/import_assembler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Invalid UTF-8 in a string field is a rejected parse; protobuf would log each one.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  kls::server::ImportLimits limits;
  limits.max_points = 4096;
  limits.max_dim = 256;
  limits.max_values = 1 << 18;
  kls::server::ImportAssembler assembler(limits);
  google::protobuf::io::ArrayInputStream in(data, static_cast<int>(size));
  kls::v1::ImportKernelChunk chunk;
  bool clean_eof = false;
  for (int k = 0; k < 4096; ++k) {
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&chunk, &in, &clean_eof)) break;
    if (!assembler.Add(chunk).ok()) return 0;
  }
  if (assembler.Finish().ok()) (void)kls::LearnedKernel::FromEmbedding(assembler.TakeEmbedding());
  return 0;
}
