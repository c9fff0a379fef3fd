// Status and StatusOr<T>: how core reports *errors* (bad input, bad settings,
// I/O failures). Numerical *outcomes* (converged, iteration cap, time limit,
// cancelled) are not errors and travel in SolveReport::termination instead.
//
// The codes mirror gRPC's canonical codes one-to-one so that server/ maps them
// with a single switch (see server/status_mapping.h), but core/ never includes
// a gRPC header.
#pragma once

#include <cassert>
#include <exception>
#include <new>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace kls {

enum class StatusCode {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

/// Upper-case canonical name, e.g. "INVALID_ARGUMENT".
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "INVALID_ARGUMENT: constraint 17 refers to point 2040 ..." or "OK".
  std::string ToString() const;

  /// Prefixes the message with context ("reading iris.csv: ...") keeping the code.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhaustedError(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status DeadlineExceededError(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }

std::ostream& operator<<(std::ostream& os, const Status& s);

/// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : value_(value) {}             // NOLINT(runtime/explicit)
  StatusOr(T&& value) : value_(std::move(value)) {}       // NOLINT(runtime/explicit)
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(runtime/explicit)
    assert(!status_.ok() && "StatusOr built from an OK status without a value");
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  const T& value() const& { assert(ok()); return *value_; }
  T& value() & { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

/// Shortest round-trip text of a double for error messages ("0.5", "-1e-09", "nan").
std::string FormatNumber(double v);

/// OK when `v` is finite and > 0; otherwise INVALID_ARGUMENT
/// "<path>.<field> = <v> must be finite and > 0" (the options checks of every solver).
Status CheckPositiveOption(const char* field, double v, std::string_view path = "options");
/// The same for "must be finite and >= 0".
Status CheckNonNegativeOption(const char* field, double v, std::string_view path = "options");
/// The same for a probability: "must be in [0, 1]".
Status CheckProbabilityOption(const char* field, double v, std::string_view path = "options");
/// The same for an integer bound: "<path>.<field> = <v> must be >= <lo>".
Status CheckAtLeastOption(const char* field, int v, int lo, std::string_view path = "options");

/// Runs `body` (returning StatusOr<T> or Status) and turns exceptions from
/// Eigen, Spectra or allocation into RESOURCE_EXHAUSTED / INTERNAL statuses
/// prefixed with `what` — the guard every core public entry point uses
/// (errors as Status; outcomes in Result.termination).
template <typename F>
auto GuardExceptions(const char* what, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return InternalError(std::string(what) + ": " + e.what());
  } catch (...) {
    return InternalError(std::string(what) + ": unknown exception");
  }
}

}  // namespace kls

#define KLS_CONCAT_INNER_(a, b) a##b
#define KLS_CONCAT_(a, b) KLS_CONCAT_INNER_(a, b)

/// Returns the Status from the enclosing function if `expr` is not OK.
#define KLS_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::kls::Status kls_status_ = (expr);        \
    if (!kls_status_.ok()) return kls_status_; \
  } while (0)

/// `KLS_ASSIGN_OR_RETURN(auto x, MakeX());`
#define KLS_ASSIGN_OR_RETURN(lhs, expr) \
  KLS_ASSIGN_OR_RETURN_IMPL_(KLS_CONCAT_(kls_statusor_, __LINE__), lhs, expr)
#define KLS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
