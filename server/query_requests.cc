#include "server/query_requests.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/common/parallel.h"
#include "server/jobs/solver_dispatch.h"
#include "server/queries_service.h"

namespace kls::server {
namespace {

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

// The key's index in `keys`: NOT_FOUND naming `field` when it is not one.
StatusOr<int> FindKey(const ItemKeys& keys, const std::string& key, const std::string& field,
                      const store::KernelRecord& record) {
  auto it = keys.index.find(key);
  if (it == keys.index.end()) {
    return NotFoundError(field + " = '" + key + "' is not a key of data set " + record.dataset_id);
  }
  return it->second;
}

// The keys of `names` appended to `out` as indices; "field[t]" in errors.
Status AppendKeys(const ItemKeys* keys, const google::protobuf::RepeatedPtrField<std::string>& names,
                  const std::string& field, const store::KernelRecord& record, std::vector<int>* out) {
  for (int t = 0; t < names.size(); ++t) {
    KLS_ASSIGN_OR_RETURN(int i, ResolveKey(keys, names.Get(t), field + "[" + std::to_string(t) + "]", record));
    out->push_back(i);
  }
  return OkStatus();
}

bool UsesKeys(const kls::v1::ItemSelector& s) { return s.exclude_keys_size() > 0 || s.allow_keys_size() > 0; }
bool IsEmpty(const kls::v1::ItemSelector& s) {
  return s.filter().empty() && s.exclude_size() == 0 && s.exclude_keys_size() == 0 && s.allow_size() == 0 &&
         s.allow_keys_size() == 0;
}

// A proto ItemSelector in core terms, keys resolved.
StatusOr<ItemSelection> SelectionFromProto(const kls::v1::ItemSelector& s, const ItemKeys* keys,
                                           const store::KernelRecord& record, const std::string& field) {
  ItemSelection out;
  out.filter = s.filter();
  out.exclude.assign(s.exclude().begin(), s.exclude().end());
  out.allow.assign(s.allow().begin(), s.allow().end());
  out.has_allow = s.allow_size() > 0 || s.allow_keys_size() > 0;
  KLS_RETURN_IF_ERROR(AppendKeys(keys, s.exclude_keys(), field + ".exclude_keys", record, &out.exclude));
  KLS_RETURN_IF_ERROR(AppendKeys(keys, s.allow_keys(), field + ".allow_keys", record, &out.allow));
  return out;
}

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

std::vector<QueryView> ViewsOf(const kls::v1::TopKRequest& request) {
  std::vector<QueryView> views;
  if (request.queries_size() == 0) {
    views.push_back(ViewOf(request));
    return views;
  }
  for (const kls::v1::TopKQuery& q : request.queries()) {
    views.push_back(ViewOf(q));
    views.back().select = &q.select();
  }
  return views;
}

// A vector query's values: the kernel's rank of them, all finite.
Status CheckVector(const kls::v1::VectorQuery& vector, int r, const std::string& field) {
  const auto& values = vector.values();
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
  return OkStatus();
}

// One query of the batch in core terms: q.item or q.vector (into `vector`).
Status ResolveQuery(KernelCache* cache, const KernelCache::Handle& handle, const Selector& selector,
                    const QueryView& v, const std::string& field, const SolveControl& control, TopKQuery* q,
                    std::vector<double>* vector) {
  const LearnedKernel& kernel = *handle.kernel;
  switch (v.kind) {
    case QueryView::Kind::kItem:
      KLS_RETURN_IF_ERROR(kernel.CheckIndex(v.item, (field + "item").c_str()));
      q->item = v.item;
      break;
    case QueryView::Kind::kKey: {
      KLS_ASSIGN_OR_RETURN(q->item, ResolveKey(selector.keys.get(), *v.key, field + "item_key", handle.record));
      break;
    }
    case QueryView::Kind::kVector:
      KLS_RETURN_IF_ERROR(CheckVector(*v.vector, kernel.rank(), field));
      vector->assign(v.vector->values().begin(), v.vector->values().end());
      q->vector = vector->data();
      break;
    case QueryView::Kind::kFeatures: {
      const kls::v1::FeatureQuery& f = *v.features;
      KLS_ASSIGN_OR_RETURN(const LearnedKernel::Embedding row,
                           ExtendToFeatures(cache, handle, f, f.values(), f.values_size(), field + "features.values",
                                            control));
      vector->assign(row.data(), row.data() + kernel.rank());
      q->vector = vector->data();
      break;
    }
    case QueryView::Kind::kNone:
      break;  // rejected by CheckTopK
  }
  return OkStatus();
}

// One query's selection: the request's (`batch->shared`), restricted by the
// query's own `select` when it has one.
Status SelectQuery(const Selector& selector, const QueryView& v, const store::KernelRecord& record,
                   const std::string& field, TopKBatch* batch, TopKQuery* q) {
  const SelectedItems& shared = batch->shared;
  const SelectedItems* selected = &shared;
  if (v.select && !IsEmpty(*v.select)) {
    KLS_ASSIGN_OR_RETURN(SelectedItems mine, Select(selector, *v.select, record, field + "select"));
    if (!mine.allowed) {  // only exclusions: keep sharing the request's bitmap
      mine.exclude.insert(mine.exclude.end(), shared.exclude.begin(), shared.exclude.end());
      batch->own.push_back(std::move(mine));
      q->exclude = &batch->own.back().exclude;
      if (shared.allowed) q->allowed = &*shared.allowed;
      return OkStatus();
    }
    batch->own.push_back(Intersect(shared, std::move(mine)));  // a bitmap of its own
    selected = &batch->own.back();
  }
  if (selected->allowed) q->allowed = &*selected->allowed;
  if (!selected->exclude.empty()) q->exclude = &selected->exclude;
  return OkStatus();
}

}  // namespace

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

Status CheckPairs(int a_size, int b_size, const char* a, const char* b) {
  if (a_size == b_size) return OkStatus();
  return InvalidArgumentError(std::string(a) + " has " + std::to_string(a_size) + " entries but " + b + " has " +
                              std::to_string(b_size) + "; they are pairs");
}

Status CheckSimilarity(const kls::v1::SimilarityRequest& request) {
  if (request.i_keys_size() > 0 || request.j_keys_size() > 0) {
    if (request.i_size() > 0 || request.j_size() > 0) {
      return InvalidArgumentError("set the pairs by index (i, j) or by key (i_keys, j_keys), not both");
    }
    KLS_RETURN_IF_ERROR(CheckPairs(request.i_keys_size(), request.j_keys_size(), "i_keys", "j_keys"));
    return CheckBatch(request.i_keys_size(), "i_keys");
  }
  KLS_RETURN_IF_ERROR(CheckPairs(request.i_size(), request.j_size(), "i", "j"));
  return CheckBatch(request.i_size(), "i");
}

StatusOr<TopKSearchOptions> CheckTopK(const kls::v1::TopKRequest& request) {
  KLS_RETURN_IF_ERROR(CheckK(request.k()));
  const bool batch = request.queries_size() > 0;
  if (batch && request.query_case() != kls::v1::TopKRequest::QUERY_NOT_SET) {
    return InvalidArgumentError("set one query (item, item_key, vector or features) or a batch in queries, not both");
  }
  if (!batch && request.query_case() == kls::v1::TopKRequest::QUERY_NOT_SET) {
    return InvalidArgumentError("the query is missing: set one of item, item_key, vector or features (or queries)");
  }
  if (request.queries_size() > QueriesService::kMaxTopKBatch) {
    return InvalidArgumentError("queries has " + std::to_string(request.queries_size()) + " entries; at most " +
                                std::to_string(QueriesService::kMaxTopKBatch) + " are allowed per request");
  }
  if (request.offset() < 0 || int64_t{request.offset()} + request.k() > QueriesService::kMaxTopKDepth) {
    return InvalidArgumentError("offset = " + std::to_string(request.offset()) + " must be >= 0 with offset + k <= " +
                                std::to_string(QueriesService::kMaxTopKDepth));
  }
  TopKSearchOptions options;
  options.k = request.k();
  options.offset = request.offset();
  // A batch splits its queries over up to kMaxTopKBatchThreads cores (one
  // pass each); a single query stays on the handler's thread.
  options.threads = batch ? std::min(QueriesService::kMaxTopKBatchThreads, ResolveThreadCount(0)) : 1;
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
  const std::vector<QueryView> views = ViewsOf(request);
  for (size_t t = 0; t < views.size(); ++t) {
    if (views[t].kind == QueryView::Kind::kNone) {
      return InvalidArgumentError("queries[" + std::to_string(t) + "] is empty: set item, item_key, vector or features");
    }
  }
  return options;
}

StatusOr<ReRankArgs> CheckReRank(const kls::v1::ReRankRequest& request) {
  ReRankArgs args;
  args.by_key = request.candidate_keys_size() > 0;
  if (args.by_key && request.candidates_size() > 0) {
    return InvalidArgumentError("set candidates or candidate_keys, not both");
  }
  const int c = args.by_key ? request.candidate_keys_size() : request.candidates_size();
  if (c < 1 || c > QueriesService::kMaxCandidates) {
    return InvalidArgumentError("candidates has " + std::to_string(c) + " entries; 1 to " +
                                std::to_string(QueriesService::kMaxCandidates) + " are allowed");
  }
  if (request.prior_size() != 0 && request.prior_size() != c) {
    return InvalidArgumentError("prior has " + std::to_string(request.prior_size()) + " values for " +
                                std::to_string(c) + " candidates (one each, or none)");
  }
  args.prior.resize(request.prior_size());
  for (int t = 0; t < request.prior_size(); ++t) {
    if (!(std::isfinite(request.prior(t)) && request.prior(t) >= 0)) {
      return InvalidArgumentError("prior[" + std::to_string(t) + "] = " + FormatNumber(request.prior(t)) +
                                  " must be finite and >= 0");
    }
    args.prior[t] = request.prior(t);
  }
  if (request.k() < 0) {
    return InvalidArgumentError("k = " + std::to_string(request.k()) + " must be >= 0 (0 = all)");
  }
  if (request.has_damping()) args.options.damping = request.damping();
  KLS_RETURN_IF_ERROR(args.options.Validate());
  return args;
}

StatusOr<int> CheckClassify(const kls::v1::ClassifyRequest& request) {
  if (request.dim() < 1) {
    return InvalidArgumentError("dim = " + std::to_string(request.dim()) + " must be >= 1");
  }
  if (request.features_size() % request.dim() != 0) {
    return InvalidArgumentError("features has " + std::to_string(request.features_size()) +
                                " values, not a multiple of dim = " + std::to_string(request.dim()));
  }
  const int rows = request.features_size() / request.dim();
  if (rows < 1) return InvalidArgumentError("features is empty");
  KLS_RETURN_IF_ERROR(CheckBatch(rows, "features rows"));
  return rows;
}

Status CheckClassifyUsers(const kls::v1::ClassifyUsersRequest& request) {
  KLS_RETURN_IF_ERROR(CheckPairs(request.labelled_users_size(), request.labels_size(), "labelled_users", "labels"));
  if (request.labelled_users_size() < 2) {
    return InvalidArgumentError("labelled_users has " + std::to_string(request.labelled_users_size()) +
                                " entries; give at least one user of each of >= 2 classes");
  }
  return CheckBatch(request.users_size(), "users");
}

Status CheckIndices(const LearnedKernel& kernel, const google::protobuf::RepeatedField<int32_t>& indices,
                    const char* field) {
  for (int t = 0; t < indices.size(); ++t) {
    const int i = indices.Get(t);
    if (i < 0 || i >= kernel.num_points()) {
      const std::string name = std::string(field) + "[" + std::to_string(t) + "]";
      return kernel.CheckIndex(i, name.c_str());
    }
  }
  return OkStatus();
}

Status RequireModel(const KernelCache::Handle& handle, bool present, const char* query, const char* needs,
                    const char* what) {
  if (present) return OkStatus();
  const store::KernelRecord& r = handle.record;
  return FailedPreconditionError(std::string(query) + ": kernel " + r.name + " v" + std::to_string(r.version) +
                                 " (method " + r.method + ") has no " + what + "; it needs a kernel learned by a job of " +
                                 FamilyRegistry::Global().NamesStoring(needs));
}

StatusOr<Eigen::MatrixXd> ClassifyRows(const KernelServable& servable, const kls::v1::ClassifyRequest& request,
                                       int rows) {
  const int width = static_cast<int>(servable.attachments().classifier->support_vectors.cols());
  if (request.dim() != width) {
    return InvalidArgumentError("dim = " + std::to_string(request.dim()) + " but the model takes " +
                                std::to_string(width) + " features");
  }
  return FeatureRows(request.features(), rows, request.dim(), "features");
}

Status CheckClassifyUsersOn(const KernelCache::Handle& handle, const kls::v1::ClassifyUsersRequest& request) {
  const LearnedKernel& kernel = *handle.kernel;
  const int n = kernel.num_points();
  if (n > QueriesService::kMaxHarmonicUsers) {
    return FailedPreconditionError("ClassifyUsers: kernel " + handle.record.name + " has " + std::to_string(n) +
                                   " users; the dense harmonic solve allows at most " +
                                   std::to_string(QueriesService::kMaxHarmonicUsers));
  }
  KLS_RETURN_IF_ERROR(CheckIndices(kernel, request.labelled_users(), "labelled_users"));
  return CheckIndices(kernel, request.users(), "users");
}

StatusOr<std::shared_ptr<const ItemKeys>> KeysOf(KernelCache* cache, const KernelCache::Handle& handle,
                                                 bool required) {
  StatusOr<std::shared_ptr<const ItemKeys>> loaded = cache->GetItemKeys(handle.record);
  if (!loaded.ok() && !required && loaded.status().code() == StatusCode::kNotFound) {
    return std::shared_ptr<const ItemKeys>();
  }
  return loaded;
}

StatusOr<int> ResolveKey(const ItemKeys* keys, const std::string& key, const std::string& field,
                         const store::KernelRecord& record) {
  if (!keys || keys->empty()) {
    return FailedPreconditionError(field + " = '" + key + "': data set " + record.dataset_id + " of kernel " +
                                   record.name + " has no item keys; use item indices instead");
  }
  return FindKey(*keys, key, field, record);
}

StatusOr<kls::v1::SimilarityRequest> SimilarityByIndex(KernelCache* cache, const KernelCache::Handle& handle,
                                                      const kls::v1::SimilarityRequest& request) {
  KLS_ASSIGN_OR_RETURN(const std::shared_ptr<const ItemKeys> keys, KeysOf(cache, handle, true));
  kls::v1::SimilarityRequest by_index;
  for (int t = 0; t < request.i_keys_size(); ++t) {
    const std::string at = "[" + std::to_string(t) + "]";
    KLS_ASSIGN_OR_RETURN(const int i, ResolveKey(keys.get(), request.i_keys(t), "i_keys" + at, handle.record));
    KLS_ASSIGN_OR_RETURN(const int j, ResolveKey(keys.get(), request.j_keys(t), "j_keys" + at, handle.record));
    by_index.add_i(i);
    by_index.add_j(j);
  }
  return by_index;
}

StatusOr<std::vector<int>> CandidatesOf(const kls::v1::ReRankRequest& request, const ItemKeys* keys,
                                        const store::KernelRecord& record) {
  if (request.candidate_keys_size() == 0) return std::vector<int>(request.candidates().begin(), request.candidates().end());
  std::vector<int> candidates(request.candidate_keys_size());
  for (int t = 0; t < request.candidate_keys_size(); ++t) {
    KLS_ASSIGN_OR_RETURN(candidates[t], FindKey(*keys, request.candidate_keys(t),
                                                "candidate_keys[" + std::to_string(t) + "]", record));
  }
  return candidates;
}

StatusOr<Selector> LoadSelector(KernelCache* cache, const KernelCache::Handle& handle, int64_t num_items,
                                bool needs_keys, bool needs_attributes) {
  Selector out;
  KLS_ASSIGN_OR_RETURN(out.keys, KeysOf(cache, handle, needs_keys));
  if (needs_attributes) {
    StatusOr<std::shared_ptr<const ItemAttributes>> attributes = cache->GetAttributes(handle.record.dataset_id);
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

StatusOr<SelectedItems> Select(const Selector& selector, const kls::v1::ItemSelector& select,
                               const store::KernelRecord& record, const std::string& field) {
  KLS_ASSIGN_OR_RETURN(ItemSelection selection, SelectionFromProto(select, selector.keys.get(), record, field));
  return SelectItems(selection, selector.context, field);
}

StatusOr<std::optional<SelectedItems>> SelectionOf(KernelCache* cache, const KernelCache::Handle& handle,
                                                   const kls::v1::ItemSelector& select, int64_t num_items,
                                                   bool data_set_items) {
  if (IsEmpty(select)) return std::optional<SelectedItems>();
  Selector selector;
  if (data_set_items) {
    KLS_ASSIGN_OR_RETURN(selector, LoadSelector(cache, handle, num_items, UsesKeys(select), !select.filter().empty()));
  }
  selector.context.num_items = num_items;
  KLS_ASSIGN_OR_RETURN(SelectedItems selected, Select(selector, select, handle.record, "select"));
  return std::optional<SelectedItems>(std::move(selected));
}

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
  const store::KernelRecord& record = handle.record;
  if (handle.servable().has_linear_map()) {
    // Exact (x ↦ scale(x) · L): no training features needed.
    const int width = static_cast<int>(handle.servable().attachments().linear_map->rows());
    if (dim != width) {
      return InvalidArgumentError(field + ": " + std::to_string(dim) + " features per row but kernel " + record.name +
                                  " v" + std::to_string(record.version) + " (method " + record.method + ") maps " +
                                  std::to_string(width));
    }
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd x, FeatureRows(values, rows, dim, field));
    return handle.servable().ExtendToFeatures(Eigen::MatrixXd(), x, options, field, control);
  }
  KLS_ASSIGN_OR_RETURN(std::shared_ptr<const Eigen::MatrixXd> train, cache->GetTrainingFeatures(handle));
  const LearnedKernel& kernel = *handle.kernel;
  if (train->rows() != kernel.num_points()) {
    return FailedPreconditionError("kernel " + record.name + " v" + std::to_string(record.version) + " (method " +
                                   record.method + ") has " + std::to_string(kernel.num_points()) +
                                   " items but its data set " + record.dataset_id + " has " +
                                   std::to_string(train->rows()) +
                                   " feature rows; only a kernel over the data set's rows extends to new points");
  }
  if (dim != train->cols()) {
    return InvalidArgumentError(field + ": " + std::to_string(dim) + " features per row but data set " +
                                record.dataset_id + " has " + std::to_string(train->cols()));
  }
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd x, FeatureRows(values, rows, dim, field));
  return handle.servable().ExtendToFeatures(*train, x, options, field, control);
}

Status BuildTopKBatch(KernelCache* cache, const KernelCache::Handle& handle, const kls::v1::TopKRequest& request,
                      const SolveControl& control, TopKBatch* batch) {
  const std::vector<QueryView> views = ViewsOf(request);
  bool needs_keys = UsesKeys(request.select()), needs_attributes = !request.select().filter().empty();
  for (const QueryView& v : views) {
    needs_keys = needs_keys || v.kind == QueryView::Kind::kKey || (v.select && UsesKeys(*v.select));
    needs_attributes = needs_attributes || (v.select && !v.select->filter().empty());
  }
  KLS_ASSIGN_OR_RETURN(const Selector selector,
                       LoadSelector(cache, handle, handle.kernel->num_points(), needs_keys, needs_attributes));
  batch->keys = selector.keys;
  KLS_ASSIGN_OR_RETURN(batch->shared, Select(selector, request.select(), handle.record, "select"));
  // Per query: the core query, and its own selection when it has one (kept
  // in a deque so the pointers the search borrows stay put).
  batch->queries.resize(views.size());
  batch->vectors.resize(views.size());
  for (size_t t = 0; t < views.size(); ++t) {
    const std::string field = request.queries_size() > 0 ? "queries[" + std::to_string(t) + "]." : std::string();
    TopKQuery& q = batch->queries[t];
    q.exclude_self = request.exclude_self();
    KLS_RETURN_IF_ERROR(ResolveQuery(cache, handle, selector, views[t], field, control, &q, &batch->vectors[t]));
    KLS_RETURN_IF_ERROR(SelectQuery(selector, views[t], handle.record, field, batch, &q));
  }
  return OkStatus();
}

void AddItems(const std::vector<ScoredItem>& top, const ItemKeys* keys,
              google::protobuf::RepeatedPtrField<kls::v1::ScoredItem>* items) {
  items->Reserve(static_cast<int>(top.size()));
  for (const ScoredItem& s : top) {
    kls::v1::ScoredItem* item = items->Add();
    item->set_index(s.index);
    item->set_score(s.score);
    if (keys && !keys->empty()) item->set_item_key(keys->keys[s.index]);
  }
}

}  // namespace kls::server
