#include "server/jobs/families/family_util.h"

#include <sstream>

namespace kls::server::families {

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

Status CheckEnum(bool valid, const std::string& field, int value, const char* allowed) {
  if (valid) return OkStatus();
  return InvalidArgumentError(field + " = " + std::to_string(value) + " is not one of " + allowed);
}

Status Prefixed(const Status& s, const std::string& family) {
  if (s.ok()) return s;
  std::string msg = s.message();
  for (const std::string prefix : {"options.", "onk.onk ", "onk ", "onk."}) {
    if (msg.compare(0, prefix.size(), prefix) == 0) {
      msg = msg.substr(prefix.size());
      break;
    }
  }
  return Status(s.code(), family + "." + msg);
}

Status RenameOptionsField(const Status& s, const std::string& family) {
  if (s.ok()) return s;
  std::string msg = s.message();
  const std::string prefix = "options.";
  if (msg.compare(0, prefix.size(), prefix) == 0) msg = family + "." + msg.substr(prefix.size());
  return Status(s.code(), msg);
}

NpklLoss LossToCore(kls::v1::Loss loss, NpklLoss fallback) {
  switch (loss) {
    case kls::v1::LINEAR: return NpklLoss::kLinear;
    case kls::v1::HINGE: return NpklLoss::kHinge;
    case kls::v1::SQUARE_HINGE: return NpklLoss::kSquareHinge;
    case kls::v1::SQUARE: return NpklLoss::kSquare;
    default: return fallback;  // LOSS_UNSPECIFIED (or an unknown future value): core default
  }
}

kls::v1::Loss LossToProto(NpklLoss loss) {
  switch (loss) {
    case NpklLoss::kLinear: return kls::v1::LINEAR;
    case NpklLoss::kHinge: return kls::v1::HINGE;
    case NpklLoss::kSquareHinge: return kls::v1::SQUARE_HINGE;
    case NpklLoss::kSquare: return kls::v1::SQUARE;
  }
  return kls::v1::LOSS_UNSPECIFIED;
}

Status ValidateLossEnum(const std::string& family, kls::v1::Loss loss) {
  if (!kls::v1::Loss_IsValid(loss)) {
    return InvalidArgumentError(family + ".loss = " + std::to_string(static_cast<int>(loss)) +
                                " is not a known loss (linear, hinge, square_hinge, square)");
  }
  return OkStatus();
}

Status CheckAtMostPoints(const std::string& field, int value, int64_t n, const char* phrase) {
  if (value <= n) return OkStatus();
  return InvalidArgumentError(field + " = " + std::to_string(value) + " exceeds " + phrase + " " +
                              std::to_string(n) + " points");
}

}  // namespace kls::server::families
