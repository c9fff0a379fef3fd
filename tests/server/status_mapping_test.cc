// kls::Status ↔ grpc::Status: every code maps to the gRPC code with the same
// canonical name and number, both ways, and messages survive.
#include "server/status_mapping.h"

#include <gtest/gtest.h>

#include "client/grpc_status.h"

namespace kls::server {
namespace {

// Canonical gRPC names, indexed by code number.
const char* const kGrpcNames[] = {
    "OK",        "CANCELLED",          "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

TEST(StatusMappingTest, EveryCodeMapsToTheSameCanonicalCode) {
  for (int n = 0; n <= 16; ++n) {
    SCOPED_TRACE(kGrpcNames[n]);
    const auto code = static_cast<StatusCode>(n);
    EXPECT_STREQ(StatusCodeName(code), kGrpcNames[n]);
    EXPECT_EQ(static_cast<int>(ToGrpcCode(code)), n);
  }
}

TEST(StatusMappingTest, MessageIsKeptForEveryErrorCode) {
  for (int n = 1; n <= 16; ++n) {
    SCOPED_TRACE(kGrpcNames[n]);
    const Status status(static_cast<StatusCode>(n), "constraint 17 refers to point 2040");
    const grpc::Status grpc_status = ToGrpcStatus(status);
    EXPECT_FALSE(grpc_status.ok());
    EXPECT_EQ(static_cast<int>(grpc_status.error_code()), n);
    EXPECT_EQ(grpc_status.error_message(), "constraint 17 refers to point 2040");
  }
}

TEST(StatusMappingTest, OkMapsToOk) {
  EXPECT_TRUE(ToGrpcStatus(OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(StatusMappingTest, ClientConversionIsTheInverse) {
  for (int n = 0; n <= 16; ++n) {
    SCOPED_TRACE(kGrpcNames[n]);
    const Status original(static_cast<StatusCode>(n), n == 0 ? "" : "why it failed");
    const Status round_trip = FromGrpcStatus(ToGrpcStatus(original));
    EXPECT_EQ(round_trip.code(), original.code());
    EXPECT_EQ(round_trip.message(), original.message());
  }
}

TEST(StatusMappingTest, ClientToStringStartsWithTheGrpcName) {
  const Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect"));
  EXPECT_EQ(s.ToString(), "UNAVAILABLE: failed to connect");
}

}  // namespace
}  // namespace kls::server
