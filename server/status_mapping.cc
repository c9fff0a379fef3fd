#include "server/status_mapping.h"

#include <chrono>

namespace kls::server {

grpc::StatusCode ToGrpcCode(kls::StatusCode code) {
  // Spelled out rather than cast: a code added to one enum and not the other
  // then fails here (-Wswitch) instead of silently meaning something else.
  switch (code) {
    case StatusCode::kOk: return grpc::StatusCode::OK;
    case StatusCode::kCancelled: return grpc::StatusCode::CANCELLED;
    case StatusCode::kUnknown: return grpc::StatusCode::UNKNOWN;
    case StatusCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case StatusCode::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case StatusCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kAborted: return grpc::StatusCode::ABORTED;
    case StatusCode::kOutOfRange: return grpc::StatusCode::OUT_OF_RANGE;
    case StatusCode::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kInternal: return grpc::StatusCode::INTERNAL;
    case StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kDataLoss: return grpc::StatusCode::DATA_LOSS;
    case StatusCode::kUnauthenticated: return grpc::StatusCode::UNAUTHENTICATED;
  }
  return grpc::StatusCode::UNKNOWN;
}

grpc::Status ToGrpcStatus(const kls::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(status.code()), status.message());
}

SolveControl CallControl(grpc::ServerContext* context) {
  SolveControl control;
  const auto deadline = context->deadline();
  const auto remaining = deadline - std::chrono::system_clock::now();
  if (remaining < std::chrono::hours(24 * 365)) {  // gRPC's "no deadline" is the far future
    control.deadline = SolveControl::Clock::now() +
                       std::chrono::duration_cast<SolveControl::Clock::duration>(remaining);
  }
  control.stop_requested = [context] { return context->IsCancelled(); };
  return control;
}

}  // namespace kls::server
