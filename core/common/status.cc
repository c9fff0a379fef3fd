#include "core/common/status.h"

#include <cmath>
#include <sstream>

namespace kls {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

std::string FormatNumber(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

Status CheckPositiveOption(const char* field, double v, std::string_view path) {
  if (!(v > 0.0) || !std::isfinite(v)) {
    return InvalidArgumentError(std::string(path) + "." + field + " = " + FormatNumber(v) + " must be finite and > 0");
  }
  return OkStatus();
}

Status CheckNonNegativeOption(const char* field, double v, std::string_view path) {
  if (!(v >= 0.0) || !std::isfinite(v)) {
    return InvalidArgumentError(std::string(path) + "." + field + " = " + FormatNumber(v) + " must be finite and >= 0");
  }
  return OkStatus();
}

Status CheckProbabilityOption(const char* field, double v, std::string_view path) {
  if (!(v >= 0.0 && v <= 1.0)) {
    return InvalidArgumentError(std::string(path) + "." + field + " = " + FormatNumber(v) + " must be in [0, 1]");
  }
  return OkStatus();
}

Status CheckAtLeastOption(const char* field, int v, int lo, std::string_view path) {
  if (v < lo) {
    return InvalidArgumentError(std::string(path) + "." + field + " = " + std::to_string(v) + " must be >= " +
                                std::to_string(lo));
  }
  return OkStatus();
}

std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

}  // namespace kls
