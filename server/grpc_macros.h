// KLS_RETURN_IF_ERROR / KLS_ASSIGN_OR_RETURN (core/common/status.h) for
// functions that return grpc::Status: a non-OK kls::Status or StatusOr leaves
// the handler through ToGrpcStatus (status_mapping.h), the one conversion.
//
//   KLS_GRPC_RETURN_IF_ERROR(CheckK(request->k()));
//   KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
//
// As with the core macros, `lhs` must not contain an unparenthesized comma.
#pragma once

#include <utility>

#include "core/common/status.h"
#include "server/status_mapping.h"

/// Returns ToGrpcStatus(status) from the enclosing grpc::Status function if
/// `expr` (a kls::Status) is not OK.
#define KLS_GRPC_RETURN_IF_ERROR(expr)                                             \
  do {                                                                             \
    ::kls::Status kls_grpc_status_ = (expr);                                       \
    if (!kls_grpc_status_.ok()) return ::kls::server::ToGrpcStatus(kls_grpc_status_); \
  } while (0)

/// `KLS_GRPC_ASSIGN_OR_RETURN(auto x, MakeX());` where MakeX returns a
/// kls::StatusOr: its value moved into `lhs`, or ToGrpcStatus(its status)
/// returned from the enclosing grpc::Status function.
#define KLS_GRPC_ASSIGN_OR_RETURN(lhs, expr) \
  KLS_GRPC_ASSIGN_OR_RETURN_IMPL_(KLS_CONCAT_(kls_grpc_statusor_, __LINE__), lhs, expr)
#define KLS_GRPC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)                   \
  auto tmp = (expr);                                                      \
  if (!tmp.ok()) return ::kls::server::ToGrpcStatus(tmp.status());        \
  lhs = std::move(tmp).value()
