#include "server/queries_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/serving/kernel_servable.h"
#include "server/jobs/solver_dispatch.h"
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

Status CheckK(int k) {
  if (k >= 1 && k <= QueriesService::kMaxK) return OkStatus();
  return InvalidArgumentError("k = " + std::to_string(k) + " must be in [1, " + std::to_string(QueriesService::kMaxK) +
                              "]");
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

// FAILED_PRECONDITION for a model query on a kernel that lacks the model
// (`needs`, described as `what`), naming the families that store it.
Status MissingModel(const store::KernelRecord& r, const char* query, const char* needs, const char* what) {
  return FailedPreconditionError(std::string(query) + ": kernel " + r.name + " v" + std::to_string(r.version) +
                                 " (method " + r.method + ") has no " + what + "; it needs a kernel learned by a job of " +
                                 FamilyRegistry::Global().NamesStoring(needs));
}

// The call's deadline and cancellation as a SolveControl for core: the
// deadline moved to the steady clock, and the call's IsCancelled() (client
// cancellation, or the deadline as gRPC sees it) polled by ShouldStop. The
// long computations behind queries check it every few milliseconds, so a
// call stops within 100 ms of its deadline or cancellation.
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

// `values` (rows × dim, row-major) as a matrix; INVALID_ARGUMENT naming
// "field[i][j]" for a non-finite value.
StatusOr<Eigen::MatrixXd> FeatureRows(const google::protobuf::RepeatedField<double>& values, int rows, int dim,
                                      const std::string& field) {
  Eigen::MatrixXd x(rows, dim);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < dim; ++j) {
      const double v = values.Get(i * dim + j);
      if (!std::isfinite(v)) {
        return InvalidArgumentError(field + "[" + std::to_string(i) + "][" + std::to_string(j) + "] = " +
                                    FormatNumber(v) + " is not finite");
      }
      x(i, j) = v;
    }
  }
  return x;
}

// The item keys of the kernel's data set: null when the data set is gone
// (NOT_FOUND) and `required` is false — such a kernel still answers index
// queries, just unnamed.
StatusOr<std::shared_ptr<const ItemKeys>> KeysOf(KernelCache* cache, const KernelCache::Handle& handle,
                                                 bool required) {
  StatusOr<std::shared_ptr<const ItemKeys>> loaded = cache->GetItemKeys(handle.record);
  if (!loaded.ok() && !required && loaded.status().code() == StatusCode::kNotFound) {
    return std::shared_ptr<const ItemKeys>();
  }
  return loaded;
}

// Embedding rows of points the kernel was not trained on (harmonic extension, thesis §6.3.3):
// `values` is rows × dim raw features; `field` names them in errors.
StatusOr<LearnedKernel::Embedding> ExtendToFeatures(KernelCache* cache, const KernelCache::Handle& handle,
                                                    const google::protobuf::RepeatedField<double>& values, int dim,
                                                    const std::optional<int>& neighbors,
                                                    const std::optional<double>& sigma, const std::string& field,
                                                    const SolveControl& control) {
  if (dim < 1 || values.size() == 0 || values.size() % dim != 0) {
    return InvalidArgumentError(field + " has " + std::to_string(values.size()) + " values for " +
                                std::to_string(dim) + " features per row; give whole rows");
  }
  const int rows = values.size() / dim;
  if (rows > QueriesService::kMaxExtensionRows) {
    return InvalidArgumentError(field + " has " + std::to_string(rows) + " rows; at most " +
                                std::to_string(QueriesService::kMaxExtensionRows) + " per request");
  }
  HarmonicExtensionOptions options;
  if (neighbors) options.neighbors = *neighbors;
  if (sigma) options.sigma = *sigma;
  if (options.neighbors < 1) {
    return InvalidArgumentError("neighbors = " + std::to_string(options.neighbors) + " must be >= 1");
  }
  if (sigma && !(std::isfinite(*sigma) && *sigma > 0)) {
    return InvalidArgumentError("sigma = " + FormatNumber(*sigma) + " must be finite and > 0 (or unset)");
  }
  KLS_ASSIGN_OR_RETURN(std::shared_ptr<const Eigen::MatrixXd> train, cache->GetTrainingFeatures(handle));
  const LearnedKernel& kernel = *handle.kernel;
  if (train->rows() != kernel.num_points()) {
    return FailedPreconditionError("kernel " + handle.record.name + " v" + std::to_string(handle.record.version) +
                                   " (method " + handle.record.method + ") has " +
                                   std::to_string(kernel.num_points()) + " items but its data set " +
                                   handle.record.dataset_id + " has " + std::to_string(train->rows()) +
                                   " feature rows; only a kernel over the data set's rows extends to new points");
  }
  if (dim != train->cols()) {
    return InvalidArgumentError(field + ": " + std::to_string(dim) + " features per row but data set " +
                                handle.record.dataset_id + " has " + std::to_string(train->cols()));
  }
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd x, FeatureRows(values, rows, dim, field));
  return handle.servable().ExtendToFeatures(*train, x, options, field, control);
}

void AddItems(const std::vector<ScoredItem>& top, const ItemKeys* keys, kls::v1::TopKResponse* response) {
  auto* items = response->mutable_items();
  items->Reserve(static_cast<int>(top.size()));
  for (const ScoredItem& s : top) {
    kls::v1::ScoredItem* item = items->Add();
    item->set_index(s.index);
    item->set_score(s.score);
    if (keys && !keys->empty()) item->set_item_key(keys->keys[s.index]);
  }
}

}  // namespace

Status QueriesService::CheckSimilarityShape(const kls::v1::SimilarityRequest& request) {
  if (request.i_size() != request.j_size()) {
    return InvalidArgumentError("i has " + std::to_string(request.i_size()) + " entries but j has " +
                                std::to_string(request.j_size()) + "; they are pairs");
  }
  return CheckBatch(request.i_size(), "i");
}

grpc::Status QueriesService::SimilarityOn(const KernelCache::Handle& handle, const kls::v1::SimilarityRequest& request,
                                          kls::v1::SimilarityResponse* response) {
  const LearnedKernel& kernel = *handle.kernel;
  if (const Status s = CheckIndices(kernel, request.i(), "i"); !s.ok()) return ToGrpcStatus(s);
  if (const Status s = CheckIndices(kernel, request.j(), "j"); !s.ok()) return ToGrpcStatus(s);
  auto* values = response->mutable_values();
  values->Reserve(request.i_size());
  for (int t = 0; t < request.i_size(); ++t) values->Add(kernel.value(request.i(t), request.j(t)));
  return grpc::Status::OK;
}

grpc::Status QueriesService::AnswerSimilarity(const kls::v1::SimilarityRequest& request,
                                              kls::v1::SimilarityResponse* response) {
  if (const Status s = CheckSimilarityShape(request); !s.ok()) return ToGrpcStatus(s);
  return SimilarityFromStore(request, response);
}

grpc::Status QueriesService::SimilarityFromStore(const kls::v1::SimilarityRequest& request,
                                                 kls::v1::SimilarityResponse* response) {
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request.kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  return SimilarityOn(*handle, request, response);
}

grpc::ServerUnaryReactor* QueriesService::Similarity(grpc::CallbackServerContext* context,
                                                     const kls::v1::SimilarityRequest* request,
                                                     kls::v1::SimilarityResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (const Status s = CheckSimilarityShape(*request); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
  } else if (std::optional<KernelCache::Handle> handle = cache_->GetCached(FromProto(request->kernel()))) {
    reactor->Finish(SimilarityOn(*handle, *request, response));
  } else {
    // Needs the store: off the callback thread. The request and response
    // live until Finish, which is the thread's last use of them and of this.
    std::thread([this, reactor, request, response] { reactor->Finish(SimilarityFromStore(*request, response)); })
        .detach();
  }
  return reactor;
}

grpc::Status QueriesService::TopK(grpc::ServerContext* context, const kls::v1::TopKRequest* request,
                                  kls::v1::TopKResponse* response) {
  if (const Status s = CheckK(request->k()); !s.ok()) return ToGrpcStatus(s);
  if (request->query_case() == kls::v1::TopKRequest::QUERY_NOT_SET) {
    return ToGrpcStatus(InvalidArgumentError("the query is missing: set one of item, item_key, vector or features"));
  }
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const LearnedKernel& kernel = *handle->kernel;

  // Keys name the results and resolve item_key queries.
  const StatusOr<std::shared_ptr<const ItemKeys>> loaded_keys =
      KeysOf(cache_, *handle, request->query_case() == kls::v1::TopKRequest::kItemKey);
  if (!loaded_keys.ok()) return ToGrpcStatus(loaded_keys.status());
  const std::shared_ptr<const ItemKeys>& keys = *loaded_keys;

  const KernelServable servable = handle->servable();
  StatusOr<std::vector<ScoredItem>> top = InvalidArgumentError("the query is missing");
  switch (request->query_case()) {
    case kls::v1::TopKRequest::kItem:
      top = servable.TopKOfItem(request->item(), request->k(), request->exclude_self(), "item");
      break;
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
      top = servable.TopKOfItem(it->second, request->k(), request->exclude_self(), "item");
      break;
    }
    case kls::v1::TopKRequest::kVector: {
      const auto& v = request->vector().values();
      const Eigen::VectorXd query = Eigen::Map<const Eigen::VectorXd>(v.data(), v.size());
      for (int t = 0; t < v.size() && v.size() == kernel.rank(); ++t) {
        if (!std::isfinite(v.Get(t))) {
          return ToGrpcStatus(InvalidArgumentError("vector[" + std::to_string(t) + "] = " + std::to_string(v.Get(t)) +
                                                   " is not finite"));
        }
      }
      top = servable.TopKOfVector(query, request->k());  // checks the length
      break;
    }
    case kls::v1::TopKRequest::kFeatures: {
      const kls::v1::FeatureQuery& f = request->features();
      const StatusOr<LearnedKernel::Embedding> row = ExtendToFeatures(
          cache_, *handle, f.values(), f.values_size(),
          f.has_neighbors() ? std::optional<int>(f.neighbors()) : std::nullopt,
          f.has_sigma() ? std::optional<double>(f.sigma()) : std::nullopt, "features.values", CallControl(context));
      if (!row.ok()) return ToGrpcStatus(row.status());
      top = servable.TopKOfVector(row->row(0).transpose(), request->k());
      break;
    }
    case kls::v1::TopKRequest::QUERY_NOT_SET:
      break;  // rejected above
  }
  if (!top.ok()) return ToGrpcStatus(top.status());
  AddItems(*top, keys.get(), response);
  return grpc::Status::OK;
}

grpc::Status QueriesService::Embed(grpc::ServerContext* context, const kls::v1::EmbedRequest* request,
                                   kls::v1::EmbedResponse* response) {
  if (const Status s = CheckBatch(request->rows_size(), "rows"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const LearnedKernel& kernel = *handle->kernel;
  const int r = kernel.rank();
  if (request->features_size() > 0) {
    if (request->rows_size() > 0) return ToGrpcStatus(InvalidArgumentError("set rows or features, not both"));
    const StatusOr<LearnedKernel::Embedding> rows = ExtendToFeatures(
        cache_, *handle, request->features(), request->dim(),
        request->has_neighbors() ? std::optional<int>(request->neighbors()) : std::nullopt,
        request->has_sigma() ? std::optional<double>(request->sigma()) : std::nullopt, "features",
        CallControl(context));
    if (!rows.ok()) return ToGrpcStatus(rows.status());
    response->set_rank(r);
    response->mutable_values()->Add(rows->data(), rows->data() + rows->size());  // row-major
    return grpc::Status::OK;
  }
  if (const Status s = CheckIndices(kernel, request->rows(), "rows"); !s.ok()) return ToGrpcStatus(s);

  response->set_rank(r);
  auto* values = response->mutable_values();
  values->Reserve(request->rows_size() * r);
  for (const int row : request->rows()) {
    const double* begin = kernel.embedding().data() + int64_t{row} * r;
    values->Add(begin, begin + r);
  }
  return grpc::Status::OK;
}

grpc::Status QueriesService::ReRank(grpc::ServerContext* context, const kls::v1::ReRankRequest* request,
                                    kls::v1::ReRankResponse* response) {
  const bool by_key = request->candidate_keys_size() > 0;
  if (by_key && request->candidates_size() > 0) {
    return ToGrpcStatus(InvalidArgumentError("set candidates or candidate_keys, not both"));
  }
  const int c = by_key ? request->candidate_keys_size() : request->candidates_size();
  if (c < 1 || c > kMaxCandidates) {
    return ToGrpcStatus(InvalidArgumentError("candidates has " + std::to_string(c) + " entries; 1 to " +
                                             std::to_string(kMaxCandidates) + " are allowed"));
  }
  if (request->prior_size() != 0 && request->prior_size() != c) {
    return ToGrpcStatus(InvalidArgumentError("prior has " + std::to_string(request->prior_size()) + " values for " +
                                             std::to_string(c) + " candidates (one each, or none)"));
  }
  for (int t = 0; t < request->prior_size(); ++t) {
    if (!(std::isfinite(request->prior(t)) && request->prior(t) >= 0)) {
      return ToGrpcStatus(InvalidArgumentError("prior[" + std::to_string(t) + "] = " +
                                               FormatNumber(request->prior(t)) + " must be finite and >= 0"));
    }
  }
  if (request->k() < 0) {
    return ToGrpcStatus(InvalidArgumentError("k = " + std::to_string(request->k()) + " must be >= 0 (0 = all)"));
  }
  VisualRankOptions options;
  if (request->has_damping()) options.damping = request->damping();
  if (const Status s = options.Validate(); !s.ok()) return ToGrpcStatus(s);

  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const StatusOr<std::shared_ptr<const ItemKeys>> loaded_keys = KeysOf(cache_, *handle, by_key);
  if (!loaded_keys.ok()) return ToGrpcStatus(loaded_keys.status());
  const std::shared_ptr<const ItemKeys>& keys = *loaded_keys;
  std::vector<int> candidates(c);
  for (int t = 0; t < c; ++t) {
    if (!by_key) {
      candidates[t] = request->candidates(t);
      continue;
    }
    const std::string& key = request->candidate_keys(t);
    auto it = keys->index.find(key);
    if (it == keys->index.end()) {
      return ToGrpcStatus(NotFoundError("candidate_keys[" + std::to_string(t) + "] = '" + key +
                                        "' is not a key of data set " + handle->record.dataset_id));
    }
    candidates[t] = it->second;
  }
  Eigen::VectorXd prior(request->prior_size());
  for (int t = 0; t < request->prior_size(); ++t) prior[t] = request->prior(t);
  int iterations = 0;
  const StatusOr<std::vector<ScoredItem>> ranked =
      handle->servable().ReRank(candidates, prior, options, request->k(), &iterations, CallControl(context));
  if (!ranked.ok()) return ToGrpcStatus(ranked.status());
  kls::v1::TopKResponse items;
  AddItems(*ranked, keys.get(), &items);
  *response->mutable_items() = std::move(*items.mutable_items());
  response->set_iterations(iterations);
  return grpc::Status::OK;
}

grpc::Status QueriesService::SocialStrength(grpc::ServerContext*, const kls::v1::SocialStrengthRequest* request,
                                            kls::v1::SimilarityResponse* response) {
  if (request->u_size() != request->v_size()) {
    return ToGrpcStatus(InvalidArgumentError("u has " + std::to_string(request->u_size()) + " entries but v has " +
                                             std::to_string(request->v_size()) + "; they are pairs"));
  }
  if (const Status s = CheckBatch(request->u_size(), "u"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const KernelServable servable = handle->servable();
  if (!servable.has_social_graph()) {
    return ToGrpcStatus(MissingModel(handle->record, "SocialStrength", kSocialGraphAttachment, "social graph"));
  }
  if (const Status s = CheckIndices(servable.kernel(), request->u(), "u"); !s.ok()) return ToGrpcStatus(s);
  if (const Status s = CheckIndices(servable.kernel(), request->v(), "v"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<std::vector<double>> strength =
      servable.SocialStrength({request->u().begin(), request->u().end()}, {request->v().begin(), request->v().end()});
  if (!strength.ok()) return ToGrpcStatus(strength.status());
  response->mutable_values()->Add(strength->begin(), strength->end());
  return grpc::Status::OK;
}

grpc::Status QueriesService::Recommend(const kls::v1::RecommendRequest* request, kls::v1::TopKResponse* response,
                                       bool groups) {
  if (const Status s = CheckK(request->k()); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const char* query = groups ? "RecommendGroups" : "RecommendFriends";
  const KernelServable servable = handle->servable();
  if (!servable.has_social_graph()) {
    return ToGrpcStatus(MissingModel(handle->record, query, kSocialGraphAttachment, "social graph"));
  }
  const StatusOr<std::vector<ScoredItem>> top = servable.Recommend(request->user(), request->k(), groups);
  if (!top.ok()) return ToGrpcStatus(top.status());
  AddItems(*top, nullptr, response);
  return grpc::Status::OK;
}

grpc::Status QueriesService::RecommendFriends(grpc::ServerContext*, const kls::v1::RecommendRequest* request,
                                              kls::v1::TopKResponse* response) {
  return Recommend(request, response, false);
}

grpc::Status QueriesService::RecommendGroups(grpc::ServerContext*, const kls::v1::RecommendRequest* request,
                                             kls::v1::TopKResponse* response) {
  return Recommend(request, response, true);
}

grpc::Status QueriesService::Classify(grpc::ServerContext*, const kls::v1::ClassifyRequest* request,
                                      kls::v1::ClassifyResponse* response) {
  if (request->dim() < 1) {
    return ToGrpcStatus(InvalidArgumentError("dim = " + std::to_string(request->dim()) + " must be >= 1"));
  }
  if (request->features_size() % request->dim() != 0) {
    return ToGrpcStatus(InvalidArgumentError("features has " + std::to_string(request->features_size()) +
                                             " values, not a multiple of dim = " + std::to_string(request->dim())));
  }
  const int rows = request->features_size() / request->dim();
  if (rows < 1) return ToGrpcStatus(InvalidArgumentError("features is empty"));
  if (const Status s = CheckBatch(rows, "features rows"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const KernelServable servable = handle->servable();
  if (!servable.has_classifier()) {
    return ToGrpcStatus(MissingModel(handle->record, "Classify", kClassifierAttachment, "classifier"));
  }
  const int width = static_cast<int>(servable.attachments().classifier->support_vectors.cols());
  if (request->dim() != width) {
    return ToGrpcStatus(InvalidArgumentError("dim = " + std::to_string(request->dim()) + " but the model takes " +
                                             std::to_string(width) + " features"));
  }
  const StatusOr<Eigen::MatrixXd> x = FeatureRows(request->features(), rows, request->dim(), "features");
  if (!x.ok()) return ToGrpcStatus(x.status());
  const StatusOr<Classification> c = servable.Classify(*x);
  if (!c.ok()) return ToGrpcStatus(c.status());
  response->mutable_decision_values()->Add(c->decision_values.data(), c->decision_values.data() + rows);
  response->mutable_labels()->Add(c->labels.begin(), c->labels.end());
  return grpc::Status::OK;
}

grpc::Status QueriesService::ClassifyUsers(grpc::ServerContext* context, const kls::v1::ClassifyUsersRequest* request,
                                           kls::v1::ClassifyUsersResponse* response) {
  if (request->labelled_users_size() != request->labels_size()) {
    return ToGrpcStatus(InvalidArgumentError("labelled_users has " + std::to_string(request->labelled_users_size()) +
                                             " entries but labels has " + std::to_string(request->labels_size()) +
                                             "; they are pairs"));
  }
  if (request->labelled_users_size() < 2) {
    return ToGrpcStatus(InvalidArgumentError("labelled_users has " + std::to_string(request->labelled_users_size()) +
                                             " entries; give at least one user of each of >= 2 classes"));
  }
  if (const Status s = CheckBatch(request->users_size(), "users"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const KernelServable servable = handle->servable();
  if (!servable.has_social_graph()) {
    return ToGrpcStatus(MissingModel(handle->record, "ClassifyUsers", kSocialGraphAttachment, "social graph"));
  }
  const LearnedKernel& kernel = servable.kernel();
  const int n = kernel.num_points();
  if (n > kMaxHarmonicUsers) {
    return ToGrpcStatus(FailedPreconditionError("ClassifyUsers: kernel " + handle->record.name + " has " +
                                                std::to_string(n) + " users; the dense harmonic solve allows at most " +
                                                std::to_string(kMaxHarmonicUsers)));
  }
  if (const Status s = CheckIndices(kernel, request->labelled_users(), "labelled_users"); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (const Status s = CheckIndices(kernel, request->users(), "users"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<HarmonicResult> r = servable.ClassifyUsers(
      {request->labelled_users().begin(), request->labelled_users().end()},
      {request->labels().begin(), request->labels().end()}, request->class_mass_normalization(), CallControl(context));
  if (!r.ok()) return ToGrpcStatus(r.status());
  const auto answer = [&](int u) {
    response->add_users(u);
    response->add_labels(r->labels[u]);
    response->add_scores(r->scores(u, r->labels[u]));
  };
  if (request->users_size() == 0) {
    for (int u = 0; u < n; ++u) answer(u);
  } else {
    for (int u : request->users()) answer(u);
  }
  return grpc::Status::OK;
}

}  // namespace kls::server
