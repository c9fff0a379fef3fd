// The one place where kls::Status becomes grpc::Status. Handlers call
// ToGrpcStatus on whatever core or the store returned; they never build
// grpc::Status from kls codes by hand. Also the other direction: a call's
// deadline and cancellation as core's SolveControl (CallControl).
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "core/common/solve_control.h"
#include "core/common/status.h"

namespace kls::server {

/// Same code (the enums mirror each other), same message. OK maps to OK with an
/// empty message.
grpc::Status ToGrpcStatus(const kls::Status& status);

/// The gRPC code for a kls code.
grpc::StatusCode ToGrpcCode(kls::StatusCode code);

/// The call's deadline and cancellation as a SolveControl for core: the
/// deadline moved to the steady clock, and the call's IsCancelled() (client
/// cancellation, or the deadline as gRPC sees it) polled by ShouldStop. The
/// long computations behind queries check it every few milliseconds, so a
/// call stops within 100 ms of its deadline or cancellation. `context` must
/// outlive the control.
SolveControl CallControl(grpc::ServerContext* context);

}  // namespace kls::server
