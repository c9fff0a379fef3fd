// kls.testing.ToyQueries (test builds only, KLS_TEST_FAMILIES): the toy query
// of docs/ADDING_A_QUERY.md, added to kls-server without touching server/ —
// its proto method (tests/families/proto/kls/testing/toy_queries.proto), its
// servable method (diagonal.h) and this handler, registered with
// server/service_registry.h and linked whole into kls-server
// (server/CMakeLists.txt). The handler is request → core → status: the
// shared checks and key lookup of server/query_requests.h, the kernel from
// the server's KernelCache, the servable method under the call's control.
// Scale reads an attachment of a kind core does not know — the toy family's
// "fixed_rank_scale" (tests/families/fixed_rank_scale.h), parsed with the
// kernel because fixed_rank_family.cc registered it — through
// KernelServable::attachments().Extra<T>(name).
#include <memory>
#include <string>
#include <vector>

#include "kls/testing/toy_queries.grpc.pb.h"
#include "server/grpc_macros.h"
#include "server/kernel_cache.h"
#include "server/kernels_service.h"
#include "server/query_requests.h"
#include "server/service_registry.h"
#include "server/status_mapping.h"
#include "tests/families/fixed_rank_scale.h"
#include "tests/families/queries/diagonal.h"

namespace kls::server {
namespace {

// The request's keys as item indices: NOT_FOUND naming keys[t] for an unknown
// key, FAILED_PRECONDITION when the kernel's data set has no keys.
StatusOr<std::vector<int>> ItemsOf(KernelCache* cache, const KernelCache::Handle& handle,
                                   const kls::testing::DiagonalRequest& request) {
  KLS_ASSIGN_OR_RETURN(const std::shared_ptr<const ItemKeys> keys, KeysOf(cache, handle, true));
  std::vector<int> items;
  for (int t = 0; t < request.keys_size(); ++t) {
    KLS_ASSIGN_OR_RETURN(const int i,
                         ResolveKey(keys.get(), request.keys(t), "keys[" + std::to_string(t) + "]", handle.record));
    items.push_back(i);
  }
  return items;
}

class ToyQueriesService final : public kls::testing::ToyQueries::Service {
 public:
  explicit ToyQueriesService(const ServiceDeps& deps) : cache_(deps.cache) {}

  grpc::Status Diagonal(grpc::ServerContext* context, const kls::testing::DiagonalRequest* request,
                        kls::testing::DiagonalResponse* response) override {
    KLS_GRPC_RETURN_IF_ERROR(CheckBatch(request->keys_size(), "keys"));
    KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
    KLS_GRPC_ASSIGN_OR_RETURN(const std::vector<int> items, ItemsOf(cache_, handle, *request));
    KLS_GRPC_ASSIGN_OR_RETURN(const std::vector<double> values,
                              toy::Diagonal(handle.servable(), items, CallControl(context)));
    response->mutable_values()->Add(values.begin(), values.end());
    return grpc::Status::OK;
  }

  grpc::Status Scale(grpc::ServerContext* context, const kls::testing::ScaleRequest* request,
                     kls::testing::ScaleResponse* response) override {
    KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
    const KernelServable servable = handle.servable();
    const auto* stored = servable.attachments().Extra<toy::FixedRankScale>(toy::kFixedRankScaleAttachment);
    KLS_GRPC_RETURN_IF_ERROR(
        RequireModel(handle, stored != nullptr, "Scale", toy::kFixedRankScaleAttachment, "fixed_rank scale"));
    KLS_GRPC_RETURN_IF_ERROR(CallControl(context).CheckStop("Scale"));
    response->set_scale(stored->scale);
    return grpc::Status::OK;
  }

 private:
  KernelCache* cache_;
};

KLS_REGISTER_GRPC_SERVICE(ToyQueriesService, kls::testing::ToyQueries::service_full_name());

}  // namespace
}  // namespace kls::server
