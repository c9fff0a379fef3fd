// The toy family's own attachment kind (test builds only, KLS_TEST_FAMILIES):
// a fixed_rank job stores its `scale` option beside the kernel as
// "fixed_rank_scale", 8 bytes (one little-endian double). Core code with no
// gRPC and no protobuf, like the solver; fixed_rank_family.cc registers the
// parser (KLS_REGISTER_ATTACHMENT_KIND, core/serving/attachment_kinds.h), so
// the server parses it with the kernel and the toy query reads it through
// KernelServable::attachments().Extra<FixedRankScale>(kFixedRankScaleAttachment).
// Nothing in core/ or server/ names it.
#pragma once

#include <cmath>
#include <string>

#include "core/common/byte_io.h"
#include "core/common/status.h"

namespace kls::toy {

inline constexpr const char* kFixedRankScaleAttachment = "fixed_rank_scale";

/// The parsed attachment: the job's scale option.
struct FixedRankScale {
  double scale = 1.0;
};

inline std::string SerializeFixedRankScale(double scale) {
  ByteWriter w;
  w.Put<double>(scale);
  return w.Take();
}

/// The inverse of SerializeFixedRankScale: an error for anything but 8 bytes
/// holding a finite scale > 0 (ParseAttachments reports it as DATA_LOSS
/// naming the attachment).
inline StatusOr<FixedRankScale> ParseFixedRankScale(const std::string& bytes) {
  if (bytes.size() != sizeof(double)) {
    return DataLossError(std::to_string(bytes.size()) + " bytes; expected " + std::to_string(sizeof(double)));
  }
  FixedRankScale s;
  ByteReader r(bytes, "scale");
  KLS_RETURN_IF_ERROR(r.Get(&s.scale));
  if (!(std::isfinite(s.scale) && s.scale > 0)) {
    return DataLossError("scale = " + FormatNumber(s.scale) + " must be finite and > 0");
  }
  return s;
}

}  // namespace kls::toy
