// gRPC → kls status conversion for the client side (the server's opposite
// direction lives in server/status_mapping.h; client/ does not depend on server/).
#pragma once

#include <grpcpp/support/status.h>

#include "core/common/status.h"

namespace kls {

/// Same code, same message; OK → OkStatus().
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace kls
