// The one place where kls::Status becomes grpc::Status. Handlers call
// ToGrpcStatus on whatever core or the store returned; they never build
// grpc::Status from kls codes by hand.
#pragma once

#include <grpcpp/support/status.h>

#include "core/common/status.h"

namespace kls::server {

/// Same code (the enums mirror each other), same message. OK maps to OK with an
/// empty message.
grpc::Status ToGrpcStatus(const kls::Status& status);

/// The gRPC code for a kls code.
grpc::StatusCode ToGrpcCode(kls::StatusCode code);

}  // namespace kls::server
