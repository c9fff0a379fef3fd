#include "server/queries_service.h"

#include <cmath>
#include <string>
#include <vector>

#include "server/kernels_service.h"
#include "server/status_mapping.h"

namespace kls::server {
namespace {

Status CheckBatch(int size, const char* what) {
  if (size > QueriesService::kMaxBatch) {
    return InvalidArgumentError(std::string(what) + " has " + std::to_string(size) + " entries; at most " +
                                std::to_string(QueriesService::kMaxBatch) + " are allowed per request");
  }
  return OkStatus();
}

// Checks every index of a repeated field: "i[3] = 999 is out of range ...".
template <typename Repeated>
Status CheckIndices(const LearnedKernel& kernel, const Repeated& indices, const char* field) {
  for (int t = 0; t < indices.size(); ++t) {
    const int i = indices.Get(t);
    if (i < 0 || i >= kernel.num_points()) {
      const std::string name = std::string(field) + "[" + std::to_string(t) + "]";
      return kernel.CheckIndex(i, name.c_str());
    }
  }
  return OkStatus();
}

}  // namespace

grpc::Status QueriesService::Similarity(grpc::ServerContext*, const kls::v1::SimilarityRequest* request,
                                        kls::v1::SimilarityResponse* response) {
  if (request->i_size() != request->j_size()) {
    return ToGrpcStatus(InvalidArgumentError("i has " + std::to_string(request->i_size()) + " entries but j has " +
                                             std::to_string(request->j_size()) + "; they are pairs"));
  }
  if (const Status s = CheckBatch(request->i_size(), "i"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const LearnedKernel& kernel = *handle->kernel;
  if (const Status s = CheckIndices(kernel, request->i(), "i"); !s.ok()) return ToGrpcStatus(s);
  if (const Status s = CheckIndices(kernel, request->j(), "j"); !s.ok()) return ToGrpcStatus(s);

  auto* values = response->mutable_values();
  values->Reserve(request->i_size());
  for (int t = 0; t < request->i_size(); ++t) values->Add(kernel.value(request->i(t), request->j(t)));
  return grpc::Status::OK;
}

grpc::Status QueriesService::TopK(grpc::ServerContext*, const kls::v1::TopKRequest* request,
                                  kls::v1::TopKResponse* response) {
  if (request->k() < 1 || request->k() > kMaxK) {
    return ToGrpcStatus(InvalidArgumentError("k = " + std::to_string(request->k()) + " must be in [1, " +
                                             std::to_string(kMaxK) + "]"));
  }
  if (request->query_case() == kls::v1::TopKRequest::QUERY_NOT_SET) {
    return ToGrpcStatus(InvalidArgumentError("the query is missing: set one of item, item_key or vector"));
  }
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const LearnedKernel& kernel = *handle->kernel;

  // Keys name the results and resolve item_key queries. A kernel whose data
  // set was deleted still answers index and vector queries, just unnamed.
  std::shared_ptr<const ItemKeys> keys;
  {
    StatusOr<std::shared_ptr<const ItemKeys>> loaded = cache_->GetItemKeys(handle->record);
    if (loaded.ok()) {
      keys = std::move(loaded).value();
    } else if (request->query_case() == kls::v1::TopKRequest::kItemKey ||
               loaded.status().code() != StatusCode::kNotFound) {
      return ToGrpcStatus(loaded.status());
    }
  }

  std::vector<ScoredItem> top;
  switch (request->query_case()) {
    case kls::v1::TopKRequest::kItem: {
      if (const Status s = kernel.CheckIndex(request->item(), "item"); !s.ok()) return ToGrpcStatus(s);
      top = kernel.TopK(request->item(), request->k(), request->exclude_self());
      break;
    }
    case kls::v1::TopKRequest::kItemKey: {
      if (keys->empty()) {
        return ToGrpcStatus(FailedPreconditionError("item_key = '" + request->item_key() + "': data set " +
                                                    handle->record.dataset_id + " of kernel " + handle->record.name +
                                                    " has no item keys; query by item index instead"));
      }
      auto it = keys->index.find(request->item_key());
      if (it == keys->index.end()) {
        return ToGrpcStatus(NotFoundError("item_key = '" + request->item_key() + "' is not a key of data set " +
                                          handle->record.dataset_id));
      }
      top = kernel.TopK(it->second, request->k(), request->exclude_self());
      break;
    }
    case kls::v1::TopKRequest::kVector: {
      const auto& v = request->vector().values();
      if (v.size() != kernel.rank()) {
        return ToGrpcStatus(InvalidArgumentError("vector has " + std::to_string(v.size()) +
                                                 " values but the kernel has rank " + std::to_string(kernel.rank())));
      }
      Eigen::VectorXd query(v.size());
      for (int t = 0; t < v.size(); ++t) {
        if (!std::isfinite(v.Get(t))) {
          return ToGrpcStatus(InvalidArgumentError("vector[" + std::to_string(t) + "] = " + std::to_string(v.Get(t)) +
                                                   " is not finite"));
        }
        query(t) = v.Get(t);
      }
      top = kernel.TopKByVector(query, request->k());
      break;
    }
    case kls::v1::TopKRequest::QUERY_NOT_SET:
      break;  // rejected above
  }

  auto* items = response->mutable_items();
  items->Reserve(static_cast<int>(top.size()));
  for (const ScoredItem& s : top) {
    kls::v1::ScoredItem* item = items->Add();
    item->set_index(s.index);
    item->set_score(s.score);
    if (keys && !keys->empty()) item->set_item_key(keys->keys[s.index]);
  }
  return grpc::Status::OK;
}

grpc::Status QueriesService::Embed(grpc::ServerContext*, const kls::v1::EmbedRequest* request,
                                   kls::v1::EmbedResponse* response) {
  if (const Status s = CheckBatch(request->rows_size(), "rows"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const LearnedKernel& kernel = *handle->kernel;
  if (const Status s = CheckIndices(kernel, request->rows(), "rows"); !s.ok()) return ToGrpcStatus(s);

  const int r = kernel.rank();
  response->set_rank(r);
  auto* values = response->mutable_values();
  values->Reserve(request->rows_size() * r);
  for (const int row : request->rows()) {
    const double* begin = kernel.embedding().data() + int64_t{row} * r;
    values->Add(begin, begin + r);
  }
  return grpc::Status::OK;
}

}  // namespace kls::server
