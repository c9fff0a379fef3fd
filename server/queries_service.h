// kls.v1.Queries: Similarity, TopK, Embed — the hot path of ranking backends —
// and the model queries: ReRank (any kernel), SocialStrength /
// RecommendFriends / RecommendGroups (kernels with the social_graph
// attachment) and Classify (kernels with the classifier attachment). A model
// query on a kernel without the model it needs is FAILED_PRECONDITION naming
// the kernel, its method and the families that store that model.
//
// Each handler: validate the request shape → KernelCache::Get (a shared,
// immutable LearnedKernel; no lock is held while computing) → check every
// index against the kernel, resolve item keys → the KernelServable call,
// under the call's deadline and cancellation (CallControl) → reply. The checks
// and key lookups live in query_requests.h; handlers convert a kls::Status
// once, with grpc_macros.h (docs/ADDING_A_QUERY.md).
//
// Bounds (queries.proto): at most kMaxBatch pairs or rows per request
// (INVALID_ARGUMENT beyond), k in [1, kMaxK]. Index errors name the field,
// position and value: "i[3] = 999 is out of range for a kernel over 150 points".
// Unknown kernel, version or alias → NOT_FOUND; corrupted artifact → DATA_LOSS.
//
// Similarity — the cheapest and most frequent query — uses gRPC's callback
// API: answered on the thread that received it when the kernel is in the
// cache (KernelCache::GetCached), without the hand-over to a sync-server
// thread that the other handlers pay (two context switches per call, ~15 % of
// the throughput of a one-pair call; docs/BENCHMARKS.md). A call that needs
// the store (a cold or changed kernel) is answered on a thread of its own, so
// the callback thread never blocks on I/O.
//
// Thread safety: handlers run concurrently; the service holds no mutable state.
#pragma once

#include <memory>
#include <string>

#include "core/common/solve_control.h"
#include "core/serving/item_selection.h"
#include "kls/v1/queries.grpc.pb.h"
#include "server/kernel_cache.h"

namespace kls::server {

class QueriesService final : public kls::v1::Queries::WithCallbackMethod_Similarity<kls::v1::Queries::Service> {
 public:
  static constexpr int kMaxBatch = 100'000;  ///< pairs (Similarity) or rows (Embed) per request
  static constexpr int kMaxK = 10'000;       ///< TopK.k upper bound
  static constexpr int kMaxCandidates = 4'096;  ///< ReRank candidates (the c × c walk matrix)
  static constexpr int kMaxHarmonicUsers = 5'000;
  static constexpr int kMaxExtensionRows = 1'000;  ///< Embed feature rows (harmonic extension) per request
  static constexpr int kMaxTopKBatch = 1'000;   ///< TopK queries per request (TopKRequest.queries)
  static constexpr int kMaxTopKDepth = 100'000; ///< TopK offset + k
  static constexpr int kMaxTopKBatchThreads = 4; ///< cores one TopK batch may use

  /// `cache` must outlive the grpc::Server the service is registered on.
  explicit QueriesService(KernelCache* cache) : cache_(cache) {}

  grpc::ServerUnaryReactor* Similarity(grpc::CallbackServerContext* context, const kls::v1::SimilarityRequest* request,
                                       kls::v1::SimilarityResponse* response) override;
  /// The Similarity answer, blocking on the store if it must (what the
  /// callback handler runs off-thread on a cache miss; also for tests).
  grpc::Status AnswerSimilarity(const kls::v1::SimilarityRequest& request, kls::v1::SimilarityResponse* response);
  grpc::Status TopK(grpc::ServerContext* context, const kls::v1::TopKRequest* request,
                    kls::v1::TopKResponse* response) override;
  /// The TopK answer under `control` (the call's deadline and cancellation).
  Status AnswerTopK(const kls::v1::TopKRequest& request, const SolveControl& control, kls::v1::TopKResponse* response);
  grpc::Status Embed(grpc::ServerContext* context, const kls::v1::EmbedRequest* request,
                     kls::v1::EmbedResponse* response) override;
  grpc::Status ReRank(grpc::ServerContext* context, const kls::v1::ReRankRequest* request,
                      kls::v1::ReRankResponse* response) override;
  grpc::Status SocialStrength(grpc::ServerContext* context, const kls::v1::SocialStrengthRequest* request,
                              kls::v1::SimilarityResponse* response) override;
  grpc::Status RecommendFriends(grpc::ServerContext* context, const kls::v1::RecommendRequest* request,
                                kls::v1::TopKResponse* response) override;
  grpc::Status RecommendGroups(grpc::ServerContext* context, const kls::v1::RecommendRequest* request,
                               kls::v1::TopKResponse* response) override;
  grpc::Status Classify(grpc::ServerContext* context, const kls::v1::ClassifyRequest* request,
                        kls::v1::ClassifyResponse* response) override;
  grpc::Status ClassifyUsers(grpc::ServerContext* context, const kls::v1::ClassifyUsersRequest* request,
                             kls::v1::ClassifyUsersResponse* response) override;

 private:
  grpc::Status Recommend(const kls::v1::RecommendRequest* request, kls::v1::TopKResponse* response, bool groups,
                         const SolveControl& control);

  // Similarity on a resolved kernel; the request's shape checked already.
  static grpc::Status SimilarityOn(const KernelCache::Handle& handle, const kls::v1::SimilarityRequest& request,
                                   kls::v1::SimilarityResponse* response);
  // Similarity through KernelCache::Get (may block on the store); the shape checked already.
  grpc::Status SimilarityFromStore(const kls::v1::SimilarityRequest& request, kls::v1::SimilarityResponse* response);

  KernelCache* const cache_;
};

}  // namespace kls::server
