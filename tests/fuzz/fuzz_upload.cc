// Fuzz target: the upload stream assembler (server/upload_assembler.h). The
// input is a sequence of length-delimited UploadDatasetRequest messages — one
// Upload call's stream — fed until the first error, then Finish; limits are
// small so that a declared size never asks for more than a few MiB.
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <cstddef>
#include <cstdint>

#include "server/upload_assembler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Invalid UTF-8 in a string field is a rejected parse; protobuf would log each one.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  kls::server::UploadLimits limits;
  limits.max_points = 4096;
  limits.max_dim = 4096;
  limits.max_values = 1 << 18;
  limits.max_constraints = 1 << 16;
  kls::server::UploadAssembler upload(limits);
  google::protobuf::io::ArrayInputStream in(data, static_cast<int>(size));
  kls::v1::UploadDatasetRequest message;
  bool clean_eof = false;
  for (int k = 0; k < 4096; ++k) {
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&message, &in, &clean_eof)) break;
    if (!upload.Add(message).ok()) return 0;
  }
  if (upload.Finish().ok()) (void)upload.data().constraints.Validate(upload.header().num_points());
  return 0;
}
