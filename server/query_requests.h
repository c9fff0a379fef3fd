// kls.v1.Queries requests in the terms of KernelServable
// (core/serving/kernel_servable.h): every request check, item-key lookup and
// selection the query handlers need, written once. The handlers
// (queries_service.cc) only chain these, the servable call and the reply:
//
//   request checks (shape only)  →  KernelCache::Get  →  checks against the
//   kernel, keys resolved  →  KernelServable method (the call's control)  →  reply
//
// Errors are kls::Status naming the request field, position and value
// ("i[3] = 999 is out of range ...", "candidate_keys[2] = 'x' is not a key of
// data set d"); the handlers convert them once, with grpc_macros.h. The
// bounds are QueriesService's (queries_service.h). Protobuf lives here, not
// in core/ (tests/core/layering_test.cc).
//
// Thread safety: free functions over immutable inputs; KernelCache is
// thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/topk_index.h"
#include "core/ranking/visual_rank.h"
#include "core/serving/item_selection.h"
#include "core/serving/kernel_servable.h"
#include "kls/v1/queries.pb.h"
#include "server/kernel_cache.h"

namespace kls::server {

// ---- Request shape, before the kernel is loaded ----

/// INVALID_ARGUMENT when a repeated field `what` has more than kMaxBatch entries.
Status CheckBatch(int size, const char* what);
/// k in [1, kMaxK].
Status CheckK(int k);
/// Two repeated fields that are pairs: "`a` has 3 entries but `b` has 2; they are pairs".
Status CheckPairs(int a_size, int b_size, const char* a, const char* b);
/// Similarity: pairs by index or by key (not both), at most kMaxBatch.
Status CheckSimilarity(const kls::v1::SimilarityRequest& request);
/// TopK: one query or a batch, k, offset, metric, min_score, no empty batch
/// query; the search options they ask for.
StatusOr<TopKSearchOptions> CheckTopK(const kls::v1::TopKRequest& request);

/// ReRank's request in core terms, before the candidates are resolved.
struct ReRankArgs {
  bool by_key = false;  ///< candidates named by candidate_keys
  Eigen::VectorXd prior;
  VisualRankOptions options;
};
StatusOr<ReRankArgs> CheckReRank(const kls::v1::ReRankRequest& request);
/// Classify: whole rows of `dim` features, 1 to kMaxBatch of them; the row count.
StatusOr<int> CheckClassify(const kls::v1::ClassifyRequest& request);
/// ClassifyUsers: labelled users and labels are pairs, at least two; users at most kMaxBatch.
Status CheckClassifyUsers(const kls::v1::ClassifyUsersRequest& request);

// ---- Against the kernel ----

/// Every index of a repeated field in range: "i[3] = 999 is out of range ...".
Status CheckIndices(const LearnedKernel& kernel, const google::protobuf::RepeatedField<int32_t>& indices,
                    const char* field);
/// FAILED_PRECONDITION for model query `query` on a kernel without the model
/// (`needs`, described as `what`), naming the families that store it; OK when
/// `present`.
Status RequireModel(const KernelCache::Handle& handle, bool present, const char* query, const char* needs,
                    const char* what);
/// Classify's rows as a matrix: the model's width, finite values.
StatusOr<Eigen::MatrixXd> ClassifyRows(const KernelServable& servable, const kls::v1::ClassifyRequest& request,
                                       int rows);
/// ClassifyUsers on this kernel: at most kMaxHarmonicUsers users, every index in range.
Status CheckClassifyUsersOn(const KernelCache::Handle& handle, const kls::v1::ClassifyUsersRequest& request);

// ---- Item keys ----

/// The item keys of the kernel's data set: null when the data set is gone
/// (NOT_FOUND) and `required` is false — such a kernel still answers index
/// queries, just unnamed.
StatusOr<std::shared_ptr<const ItemKeys>> KeysOf(KernelCache* cache, const KernelCache::Handle& handle, bool required);
/// The key's item index: NOT_FOUND naming `field` for an unknown key,
/// FAILED_PRECONDITION when the data set has no keys (`keys` null or empty).
StatusOr<int> ResolveKey(const ItemKeys* keys, const std::string& key, const std::string& field,
                         const store::KernelRecord& record);
/// A by-key Similarity request (i_keys, j_keys) as the same request by index.
StatusOr<kls::v1::SimilarityRequest> SimilarityByIndex(KernelCache* cache, const KernelCache::Handle& handle,
                                                      const kls::v1::SimilarityRequest& request);
/// ReRank's candidates as indices (`keys` non-null when they are named by key).
StatusOr<std::vector<int>> CandidatesOf(const kls::v1::ReRankRequest& request, const ItemKeys* keys,
                                        const store::KernelRecord& record);

// ---- Selections (ItemSelector) ----

/// What ItemSelectors of one request are evaluated against: the data set's
/// keys and attributes, when they describe the `num_items` items queried.
struct Selector {
  std::shared_ptr<const ItemKeys> keys;              ///< null: none loaded
  std::shared_ptr<const ItemAttributes> attributes;  ///< null: none
  FilterContext context;                             ///< points into the two above
};
StatusOr<Selector> LoadSelector(KernelCache* cache, const KernelCache::Handle& handle, int64_t num_items,
                                bool needs_keys, bool needs_attributes);
/// One proto ItemSelector evaluated (keys resolved); errors prefixed with `field`.
StatusOr<SelectedItems> Select(const Selector& selector, const kls::v1::ItemSelector& select,
                               const store::KernelRecord& record, const std::string& field);
/// The request's `select` over `num_items` items, nullopt when it is empty.
/// `data_set_items`: the items are the data set's rows, so its keys and
/// attributes apply (false: plain indices, e.g. group ids).
StatusOr<std::optional<SelectedItems>> SelectionOf(KernelCache* cache, const KernelCache::Handle& handle,
                                                   const kls::v1::ItemSelector& select, int64_t num_items,
                                                   bool data_set_items);

// ---- Feature rows ----

/// Embedding rows of points the kernel was not trained on (harmonic
/// extension, thesis §6.3.3; exact rows · L for a kernel with a linear map,
/// which reads no training features): `values` is rows × dim raw features,
/// `message` the request part carrying the optional neighbors and sigma
/// (EmbedRequest, FeatureQuery); `field` names the values in errors.
StatusOr<LearnedKernel::Embedding> ExtendToFeatures(KernelCache* cache, const KernelCache::Handle& handle,
                                                    const google::protobuf::RepeatedField<double>& values, int dim,
                                                    const std::optional<int>& neighbors,
                                                    const std::optional<double>& sigma, const std::string& field,
                                                    const SolveControl& control);
template <typename Message>
StatusOr<LearnedKernel::Embedding> ExtendToFeatures(KernelCache* cache, const KernelCache::Handle& handle,
                                                    const Message& message,
                                                    const google::protobuf::RepeatedField<double>& values, int dim,
                                                    const std::string& field, const SolveControl& control) {
  return ExtendToFeatures(cache, handle, values, dim,
                          message.has_neighbors() ? std::optional<int>(message.neighbors()) : std::nullopt,
                          message.has_sigma() ? std::optional<double>(message.sigma()) : std::nullopt, field, control);
}

// ---- TopK ----

/// A TopK request's queries in core terms. Built in place (BuildTopKBatch):
/// the queries borrow pointers into the other members, so it is never moved.
struct TopKBatch {
  TopKBatch() = default;
  TopKBatch(const TopKBatch&) = delete;
  TopKBatch& operator=(const TopKBatch&) = delete;

  std::vector<TopKQuery> queries;
  std::shared_ptr<const ItemKeys> keys;  ///< names the answers' items; null: unnamed
  SelectedItems shared;                  ///< the request's own select
  std::vector<std::vector<double>> vectors;
  std::deque<SelectedItems> own;         ///< batch queries' own selections
};
/// Resolves every query of a TopK request (checked by CheckTopK) on the
/// kernel: items, keys, vectors, feature rows (extended under `control`),
/// the shared and per-query selections.
Status BuildTopKBatch(KernelCache* cache, const KernelCache::Handle& handle, const kls::v1::TopKRequest& request,
                      const SolveControl& control, TopKBatch* batch);

// ---- Replies ----

/// Scored items as proto items, named by `keys` when it is non-null and non-empty.
void AddItems(const std::vector<ScoredItem>& top, const ItemKeys* keys,
              google::protobuf::RepeatedPtrField<kls::v1::ScoredItem>* items);

}  // namespace kls::server
