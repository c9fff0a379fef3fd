#include "server/queries_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/common/parallel.h"
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

// Embedding rows of points the kernel was not trained on (harmonic extension, thesis §6.3.3;
// exact rows · L for a kernel with a linear map, which reads no training features):
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
  if (handle.servable().has_linear_map()) {
    // Exact (x ↦ scale(x) · L): no training features needed.
    const int width = static_cast<int>(handle.servable().attachments().linear_map->rows());
    if (dim != width) {
      return InvalidArgumentError(field + ": " + std::to_string(dim) + " features per row but kernel " +
                                  handle.record.name + " v" + std::to_string(handle.record.version) + " (method " +
                                  handle.record.method + ") maps " + std::to_string(width));
    }
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd x, FeatureRows(values, rows, dim, field));
    return handle.servable().ExtendToFeatures(Eigen::MatrixXd(), x, options, field, control);
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

namespace {

// What one TopK query asks, whichever message carries it (the request's
// oneof, or a TopKQuery of a batch).
struct QueryView {
  enum class Kind { kNone, kItem, kKey, kVector, kFeatures } kind = Kind::kNone;
  int item = 0;
  const std::string* key = nullptr;
  const kls::v1::VectorQuery* vector = nullptr;
  const kls::v1::FeatureQuery* features = nullptr;
  const kls::v1::ItemSelector* select = nullptr;  // a batch query's own
};

template <typename Message>
QueryView ViewOf(const Message& m) {
  QueryView v;
  switch (m.query_case()) {
    case Message::kItem: v.kind = QueryView::Kind::kItem; v.item = m.item(); break;
    case Message::kItemKey: v.kind = QueryView::Kind::kKey; v.key = &m.item_key(); break;
    case Message::kVector: v.kind = QueryView::Kind::kVector; v.vector = &m.vector(); break;
    case Message::kFeatures: v.kind = QueryView::Kind::kFeatures; v.features = &m.features(); break;
    default: break;
  }
  return v;
}

bool UsesKeys(const kls::v1::ItemSelector& s) { return s.exclude_keys_size() > 0 || s.allow_keys_size() > 0; }
bool IsEmpty(const kls::v1::ItemSelector& s) {
  return s.filter().empty() && s.exclude_size() == 0 && s.exclude_keys_size() == 0 && s.allow_size() == 0 &&
         s.allow_keys_size() == 0;
}

// The key's item index: NOT_FOUND naming `field` for an unknown key,
// FAILED_PRECONDITION when the data set has no keys.
StatusOr<int> ResolveKey(const ItemKeys* keys, const std::string& key, const std::string& field,
                         const store::KernelRecord& record) {
  if (!keys || keys->empty()) {
    return FailedPreconditionError(field + " = '" + key + "': data set " + record.dataset_id + " of kernel " +
                                   record.name + " has no item keys; use item indices instead");
  }
  auto it = keys->index.find(key);
  if (it == keys->index.end()) {
    return NotFoundError(field + " = '" + key + "' is not a key of data set " + record.dataset_id);
  }
  return it->second;
}

// A proto ItemSelector in core terms, keys resolved.
StatusOr<ItemSelection> SelectionFromProto(const kls::v1::ItemSelector& s, const ItemKeys* keys,
                                  const store::KernelRecord& record, const std::string& field) {
  ItemSelection out;
  out.filter = s.filter();
  out.exclude.assign(s.exclude().begin(), s.exclude().end());
  out.allow.assign(s.allow().begin(), s.allow().end());
  out.has_allow = s.allow_size() > 0 || s.allow_keys_size() > 0;
  for (int t = 0; t < s.exclude_keys_size(); ++t) {
    KLS_ASSIGN_OR_RETURN(int i, ResolveKey(keys, s.exclude_keys(t), field + ".exclude_keys[" + std::to_string(t) + "]",
                                           record));
    out.exclude.push_back(i);
  }
  for (int t = 0; t < s.allow_keys_size(); ++t) {
    KLS_ASSIGN_OR_RETURN(int i, ResolveKey(keys, s.allow_keys(t), field + ".allow_keys[" + std::to_string(t) + "]",
                                           record));
    out.allow.push_back(i);
  }
  return out;
}

}  // namespace

Status QueriesService::CheckSimilarityShape(const kls::v1::SimilarityRequest& request) {
  if (request.i_keys_size() > 0 || request.j_keys_size() > 0) {
    if (request.i_size() > 0 || request.j_size() > 0) {
      return InvalidArgumentError("set the pairs by index (i, j) or by key (i_keys, j_keys), not both");
    }
    if (request.i_keys_size() != request.j_keys_size()) {
      return InvalidArgumentError("i_keys has " + std::to_string(request.i_keys_size()) + " entries but j_keys has " +
                                  std::to_string(request.j_keys_size()) + "; they are pairs");
    }
    return CheckBatch(request.i_keys_size(), "i_keys");
  }
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
  if (request.i_keys_size() == 0) return SimilarityOn(*handle, request, response);
  // By key: resolved to indices, then the same answer.
  const StatusOr<std::shared_ptr<const ItemKeys>> keys = KeysOf(cache_, *handle, true);
  if (!keys.ok()) return ToGrpcStatus(keys.status());
  kls::v1::SimilarityRequest by_index;
  for (int t = 0; t < request.i_keys_size(); ++t) {
    const StatusOr<int> i = ResolveKey(keys->get(), request.i_keys(t), "i_keys[" + std::to_string(t) + "]", handle->record);
    if (!i.ok()) return ToGrpcStatus(i.status());
    const StatusOr<int> j = ResolveKey(keys->get(), request.j_keys(t), "j_keys[" + std::to_string(t) + "]", handle->record);
    if (!j.ok()) return ToGrpcStatus(j.status());
    by_index.add_i(*i);
    by_index.add_j(*j);
  }
  return SimilarityOn(*handle, by_index, response);
}

grpc::ServerUnaryReactor* QueriesService::Similarity(grpc::CallbackServerContext* context,
                                                     const kls::v1::SimilarityRequest* request,
                                                     kls::v1::SimilarityResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (const Status s = CheckSimilarityShape(*request); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
  } else if (std::optional<KernelCache::Handle> handle =
                 request->i_keys_size() == 0 ? cache_->GetCached(FromProto(request->kernel())) : std::nullopt) {
    reactor->Finish(SimilarityOn(*handle, *request, response));
  } else {
    // Needs the store: off the callback thread. The request and response
    // live until Finish, which is the thread's last use of them and of this.
    std::thread([this, reactor, request, response] { reactor->Finish(SimilarityFromStore(*request, response)); })
        .detach();
  }
  return reactor;
}


StatusOr<QueriesService::Selector> QueriesService::LoadSelector(const KernelCache::Handle& handle, int64_t num_items,
                                                                bool needs_keys, bool needs_attributes) {
  Selector out;
  KLS_ASSIGN_OR_RETURN(out.keys, KeysOf(cache_, handle, needs_keys));
  if (needs_attributes) {
    StatusOr<std::shared_ptr<const ItemAttributes>> attributes = cache_->GetAttributes(handle.record.dataset_id);
    if (!attributes.ok() && attributes.status().code() != StatusCode::kNotFound) return attributes.status();
    if (attributes.ok()) out.attributes = *attributes;
  }
  out.context.num_items = num_items;
  // Attributes and keys describe the data set's rows: they apply when those
  // are the items queried (a social kernel's users are not its photos).
  if (out.attributes && out.attributes->num_items() == num_items) out.context.attributes = out.attributes.get();
  if (out.keys && static_cast<int64_t>(out.keys->keys.size()) == num_items) out.context.keys = &out.keys->keys;
  return out;
}

StatusOr<SelectedItems> QueriesService::Select(const Selector& selector, const kls::v1::ItemSelector& select,
                                               const store::KernelRecord& record, const std::string& field) {
  KLS_ASSIGN_OR_RETURN(ItemSelection selection, SelectionFromProto(select, selector.keys.get(), record, field));
  return SelectItems(selection, selector.context, field);
}

grpc::Status QueriesService::TopK(grpc::ServerContext* context, const kls::v1::TopKRequest* request,
                                  kls::v1::TopKResponse* response) {
  return ToGrpcStatus(AnswerTopK(*request, CallControl(context), response));
}

Status QueriesService::AnswerTopK(const kls::v1::TopKRequest& request, const SolveControl& control,
                                  kls::v1::TopKResponse* response) {
  KLS_RETURN_IF_ERROR(CheckK(request.k()));
  const bool batch = request.queries_size() > 0;
  if (batch && request.query_case() != kls::v1::TopKRequest::QUERY_NOT_SET) {
    return InvalidArgumentError("set one query (item, item_key, vector or features) or a batch in queries, not both");
  }
  if (!batch && request.query_case() == kls::v1::TopKRequest::QUERY_NOT_SET) {
    return InvalidArgumentError("the query is missing: set one of item, item_key, vector or features (or queries)");
  }
  if (request.queries_size() > kMaxTopKBatch) {
    return InvalidArgumentError("queries has " + std::to_string(request.queries_size()) + " entries; at most " +
                                std::to_string(kMaxTopKBatch) + " are allowed per request");
  }
  if (request.offset() < 0 || int64_t{request.offset()} + request.k() > kMaxTopKDepth) {
    return InvalidArgumentError("offset = " + std::to_string(request.offset()) + " must be >= 0 with offset + k <= " +
                                std::to_string(kMaxTopKDepth));
  }
  TopKSearchOptions options;
  options.k = request.k();
  options.offset = request.offset();
  // A batch splits its queries over up to kMaxTopKBatchThreads cores (one
  // pass each); a single query stays on the handler's thread.
  options.threads = batch ? std::min(kMaxTopKBatchThreads, ResolveThreadCount(0)) : 1;
  switch (request.metric()) {
    case kls::v1::SCORE_METRIC_UNSPECIFIED:
    case kls::v1::INNER_PRODUCT: options.metric = ScoreMetric::kInnerProduct; break;
    case kls::v1::COSINE: options.metric = ScoreMetric::kCosine; break;
    default:
      return InvalidArgumentError("metric = " + std::to_string(request.metric()) +
                                  " is not a ScoreMetric (INNER_PRODUCT = 1, COSINE = 2)");
  }
  if (request.has_min_score()) {
    if (std::isnan(request.min_score())) return InvalidArgumentError("min_score is NaN");
    options.min_score = request.min_score();
  }

  std::vector<QueryView> views;
  if (batch) {
    for (const kls::v1::TopKQuery& q : request.queries()) {
      views.push_back(ViewOf(q));
      views.back().select = &q.select();
    }
  } else {
    views.push_back(ViewOf(request));
  }
  bool needs_keys = UsesKeys(request.select()), needs_attributes = !request.select().filter().empty();
  for (size_t t = 0; t < views.size(); ++t) {
    if (views[t].kind == QueryView::Kind::kNone) {
      return InvalidArgumentError("queries[" + std::to_string(t) + "] is empty: set item, item_key, vector or features");
    }
    needs_keys = needs_keys || views[t].kind == QueryView::Kind::kKey || (views[t].select && UsesKeys(*views[t].select));
    needs_attributes = needs_attributes || (views[t].select && !views[t].select->filter().empty());
  }

  KLS_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request.kernel())));
  const LearnedKernel& kernel = *handle.kernel;
  const KernelServable servable = handle.servable();
  KLS_ASSIGN_OR_RETURN(const Selector selector,
                       LoadSelector(handle, kernel.num_points(), needs_keys, needs_attributes));
  KLS_ASSIGN_OR_RETURN(const SelectedItems shared, Select(selector, request.select(), handle.record, "select"));

  // Per query: the core query, and its own selection when it has one (kept
  // in a deque so the pointers the search borrows stay put).
  const int r = kernel.rank();
  std::vector<TopKQuery> queries(views.size());
  std::vector<std::vector<double>> vectors(views.size());
  std::deque<SelectedItems> own;
  for (size_t t = 0; t < views.size(); ++t) {
    const QueryView& v = views[t];
    const std::string field = batch ? "queries[" + std::to_string(t) + "]." : std::string();
    TopKQuery& q = queries[t];
    q.exclude_self = request.exclude_self();
    switch (v.kind) {
      case QueryView::Kind::kItem:
        KLS_RETURN_IF_ERROR(kernel.CheckIndex(v.item, (field + "item").c_str()));
        q.item = v.item;
        break;
      case QueryView::Kind::kKey: {
        KLS_ASSIGN_OR_RETURN(q.item, ResolveKey(selector.keys.get(), *v.key, field + "item_key", handle.record));
        break;
      }
      case QueryView::Kind::kVector: {
        const auto& values = v.vector->values();
        if (values.size() != r) {
          return InvalidArgumentError(field + "vector has " + std::to_string(values.size()) +
                                      " values but the kernel has rank " + std::to_string(r));
        }
        for (int c = 0; c < r; ++c) {
          if (!std::isfinite(values.Get(c))) {
            return InvalidArgumentError(field + "vector[" + std::to_string(c) + "] = " + FormatNumber(values.Get(c)) +
                                        " is not finite");
          }
        }
        vectors[t].assign(values.begin(), values.end());
        q.vector = vectors[t].data();
        break;
      }
      case QueryView::Kind::kFeatures: {
        const kls::v1::FeatureQuery& f = *v.features;
        KLS_ASSIGN_OR_RETURN(const LearnedKernel::Embedding row,
                             ExtendToFeatures(cache_, handle, f.values(), f.values_size(),
                                              f.has_neighbors() ? std::optional<int>(f.neighbors()) : std::nullopt,
                                              f.has_sigma() ? std::optional<double>(f.sigma()) : std::nullopt,
                                              field + "features.values", control));
        vectors[t].assign(row.data(), row.data() + r);
        q.vector = vectors[t].data();
        break;
      }
      case QueryView::Kind::kNone:
        break;  // rejected above
    }
    const SelectedItems* selected = &shared;
    if (v.select && !IsEmpty(*v.select)) {
      KLS_ASSIGN_OR_RETURN(SelectedItems mine, Select(selector, *v.select, handle.record, field + "select"));
      if (mine.allowed) {  // a bitmap of its own
        own.push_back(Intersect(shared, std::move(mine)));
        selected = &own.back();
      } else {  // only exclusions: keep sharing the request's bitmap
        mine.exclude.insert(mine.exclude.end(), shared.exclude.begin(), shared.exclude.end());
        own.push_back(std::move(mine));
        q.exclude = &own.back().exclude;
        if (shared.allowed) q.allowed = &*shared.allowed;
        continue;
      }
    }
    if (selected->allowed) q.allowed = &*selected->allowed;
    if (!selected->exclude.empty()) q.exclude = &selected->exclude;
  }

  KLS_ASSIGN_OR_RETURN(const std::vector<std::vector<ScoredItem>> answers, servable.Search(queries, options, control));
  if (!batch) {
    AddItems(answers[0], selector.keys.get(), response);
    return OkStatus();
  }
  for (const std::vector<ScoredItem>& answer : answers) {
    kls::v1::TopKResponse one;
    AddItems(answer, selector.keys.get(), &one);
    *response->add_results()->mutable_items() = std::move(*one.mutable_items());
  }
  return OkStatus();
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
  std::optional<SelectedItems> selected;
  if (!IsEmpty(request->select())) {
    const StatusOr<Selector> selector = LoadSelector(*handle, handle->kernel->num_points(), UsesKeys(request->select()),
                                                     !request->select().filter().empty());
    if (!selector.ok()) return ToGrpcStatus(selector.status());
    StatusOr<SelectedItems> s = Select(*selector, request->select(), handle->record, "select");
    if (!s.ok()) return ToGrpcStatus(s.status());
    selected = std::move(s).value();
  }
  int iterations = 0;
  const StatusOr<std::vector<ScoredItem>> ranked =
      handle->servable().ReRank(candidates, prior, options, request->k(), &iterations, CallControl(context),
                                selected ? &*selected : nullptr);
  if (!ranked.ok()) return ToGrpcStatus(ranked.status());
  kls::v1::TopKResponse items;
  AddItems(*ranked, keys.get(), &items);
  *response->mutable_items() = std::move(*items.mutable_items());
  response->set_iterations(iterations);
  return grpc::Status::OK;
}

grpc::Status QueriesService::SocialStrength(grpc::ServerContext* context, const kls::v1::SocialStrengthRequest* request,
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
      servable.SocialStrength({request->u().begin(), request->u().end()}, {request->v().begin(), request->v().end()},
                              CallControl(context));
  if (!strength.ok()) return ToGrpcStatus(strength.status());
  response->mutable_values()->Add(strength->begin(), strength->end());
  return grpc::Status::OK;
}

grpc::Status QueriesService::Recommend(const kls::v1::RecommendRequest* request, kls::v1::TopKResponse* response,
                                       bool groups, const SolveControl& control) {
  if (const Status s = CheckK(request->k()); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const char* query = groups ? "RecommendGroups" : "RecommendFriends";
  const KernelServable servable = handle->servable();
  if (!servable.has_social_graph()) {
    return ToGrpcStatus(MissingModel(handle->record, query, kSocialGraphAttachment, "social graph"));
  }
  std::optional<SelectedItems> selected;
  if (!IsEmpty(request->select())) {
    // Friends: the kernel's items (users); groups: group ids, `index` only.
    const int64_t items = groups ? servable.num_groups() : handle->kernel->num_points();
    StatusOr<Selector> selector = groups ? StatusOr<Selector>(Selector{})
                                         : LoadSelector(*handle, items, UsesKeys(request->select()),
                                                        !request->select().filter().empty());
    if (!selector.ok()) return ToGrpcStatus(selector.status());
    selector->context.num_items = items;
    StatusOr<SelectedItems> s = Select(*selector, request->select(), handle->record, "select");
    if (!s.ok()) return ToGrpcStatus(s.status());
    selected = std::move(s).value();
  }
  const StatusOr<std::vector<ScoredItem>> top =
      servable.Recommend(request->user(), request->k(), groups, control, selected ? &*selected : nullptr);
  if (!top.ok()) return ToGrpcStatus(top.status());
  AddItems(*top, nullptr, response);
  return grpc::Status::OK;
}

grpc::Status QueriesService::RecommendFriends(grpc::ServerContext* context, const kls::v1::RecommendRequest* request,
                                              kls::v1::TopKResponse* response) {
  return Recommend(request, response, false, CallControl(context));
}

grpc::Status QueriesService::RecommendGroups(grpc::ServerContext* context, const kls::v1::RecommendRequest* request,
                                             kls::v1::TopKResponse* response) {
  return Recommend(request, response, true, CallControl(context));
}

grpc::Status QueriesService::Classify(grpc::ServerContext* context, const kls::v1::ClassifyRequest* request,
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
  const StatusOr<Classification> c = servable.Classify(*x, CallControl(context));
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
