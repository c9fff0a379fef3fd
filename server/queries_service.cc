#include "server/queries_service.h"

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/serving/kernel_servable.h"
#include "server/grpc_macros.h"
#include "server/kernels_service.h"
#include "server/query_requests.h"
#include "server/status_mapping.h"

// Each handler: request checks → KernelCache::Get → checks against the kernel
// and key lookups → one KernelServable call under the call's control → reply.
// The checks and lookups are in query_requests.h; errors leave through
// KLS_GRPC_RETURN_IF_ERROR / KLS_GRPC_ASSIGN_OR_RETURN (grpc_macros.h).

namespace kls::server {

grpc::Status QueriesService::SimilarityOn(const KernelCache::Handle& handle, const kls::v1::SimilarityRequest& request,
                                          kls::v1::SimilarityResponse* response) {
  const LearnedKernel& kernel = *handle.kernel;
  KLS_GRPC_RETURN_IF_ERROR(CheckIndices(kernel, request.i(), "i"));
  KLS_GRPC_RETURN_IF_ERROR(CheckIndices(kernel, request.j(), "j"));
  auto* values = response->mutable_values();
  values->Reserve(request.i_size());
  for (int t = 0; t < request.i_size(); ++t) values->Add(kernel.value(request.i(t), request.j(t)));
  return grpc::Status::OK;
}

grpc::Status QueriesService::AnswerSimilarity(const kls::v1::SimilarityRequest& request,
                                              kls::v1::SimilarityResponse* response) {
  KLS_GRPC_RETURN_IF_ERROR(CheckSimilarity(request));
  return SimilarityFromStore(request, response);
}

grpc::Status QueriesService::SimilarityFromStore(const kls::v1::SimilarityRequest& request,
                                                 kls::v1::SimilarityResponse* response) {
  KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request.kernel())));
  if (request.i_keys_size() == 0) return SimilarityOn(handle, request, response);
  // By key: resolved to indices, then the same answer.
  KLS_GRPC_ASSIGN_OR_RETURN(const kls::v1::SimilarityRequest by_index, SimilarityByIndex(cache_, handle, request));
  return SimilarityOn(handle, by_index, response);
}

grpc::ServerUnaryReactor* QueriesService::Similarity(grpc::CallbackServerContext* context,
                                                     const kls::v1::SimilarityRequest* request,
                                                     kls::v1::SimilarityResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (const Status s = CheckSimilarity(*request); !s.ok()) {
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

grpc::Status QueriesService::TopK(grpc::ServerContext* context, const kls::v1::TopKRequest* request,
                                  kls::v1::TopKResponse* response) {
  return ToGrpcStatus(AnswerTopK(*request, CallControl(context), response));
}

Status QueriesService::AnswerTopK(const kls::v1::TopKRequest& request, const SolveControl& control,
                                  kls::v1::TopKResponse* response) {
  KLS_ASSIGN_OR_RETURN(const TopKSearchOptions options, CheckTopK(request));
  KLS_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request.kernel())));
  TopKBatch batch;  // the queries borrow pointers into it: built in place
  KLS_RETURN_IF_ERROR(BuildTopKBatch(cache_, handle, request, control, &batch));
  KLS_ASSIGN_OR_RETURN(const std::vector<std::vector<ScoredItem>> answers,
                       handle.servable().Search(batch.queries, options, control));
  if (request.queries_size() == 0) {
    AddItems(answers[0], batch.keys.get(), response->mutable_items());
    return OkStatus();
  }
  for (const std::vector<ScoredItem>& answer : answers) {
    AddItems(answer, batch.keys.get(), response->add_results()->mutable_items());
  }
  return OkStatus();
}

grpc::Status QueriesService::Embed(grpc::ServerContext* context, const kls::v1::EmbedRequest* request,
                                   kls::v1::EmbedResponse* response) {
  KLS_GRPC_RETURN_IF_ERROR(CheckBatch(request->rows_size(), "rows"));
  KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
  const LearnedKernel& kernel = *handle.kernel;
  const int r = kernel.rank();
  if (request->features_size() > 0) {
    if (request->rows_size() > 0) return ToGrpcStatus(InvalidArgumentError("set rows or features, not both"));
    KLS_GRPC_ASSIGN_OR_RETURN(const LearnedKernel::Embedding rows,
                              ExtendToFeatures(cache_, handle, *request, request->features(), request->dim(),
                                               "features", CallControl(context)));
    response->set_rank(r);
    response->mutable_values()->Add(rows.data(), rows.data() + rows.size());  // row-major
    return grpc::Status::OK;
  }
  KLS_GRPC_RETURN_IF_ERROR(CheckIndices(kernel, request->rows(), "rows"));
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
  KLS_GRPC_ASSIGN_OR_RETURN(const ReRankArgs args, CheckReRank(*request));
  KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
  KLS_GRPC_ASSIGN_OR_RETURN(const std::shared_ptr<const ItemKeys> keys, KeysOf(cache_, handle, args.by_key));
  KLS_GRPC_ASSIGN_OR_RETURN(const std::vector<int> candidates, CandidatesOf(*request, keys.get(), handle.record));
  KLS_GRPC_ASSIGN_OR_RETURN(const std::optional<SelectedItems> selected,
                            SelectionOf(cache_, handle, request->select(), handle.kernel->num_points(), true));
  int iterations = 0;
  KLS_GRPC_ASSIGN_OR_RETURN(const std::vector<ScoredItem> ranked,
                            handle.servable().ReRank(candidates, args.prior, args.options, request->k(), &iterations,
                                                     CallControl(context), selected ? &*selected : nullptr));
  AddItems(ranked, keys.get(), response->mutable_items());
  response->set_iterations(iterations);
  return grpc::Status::OK;
}

grpc::Status QueriesService::SocialStrength(grpc::ServerContext* context, const kls::v1::SocialStrengthRequest* request,
                                            kls::v1::SimilarityResponse* response) {
  KLS_GRPC_RETURN_IF_ERROR(CheckPairs(request->u_size(), request->v_size(), "u", "v"));
  KLS_GRPC_RETURN_IF_ERROR(CheckBatch(request->u_size(), "u"));
  KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
  const KernelServable servable = handle.servable();
  KLS_GRPC_RETURN_IF_ERROR(
      RequireModel(handle, servable.has_social_graph(), "SocialStrength", kSocialGraphAttachment, "social graph"));
  KLS_GRPC_RETURN_IF_ERROR(CheckIndices(servable.kernel(), request->u(), "u"));
  KLS_GRPC_RETURN_IF_ERROR(CheckIndices(servable.kernel(), request->v(), "v"));
  KLS_GRPC_ASSIGN_OR_RETURN(const std::vector<double> strength,
                            servable.SocialStrength({request->u().begin(), request->u().end()},
                                                    {request->v().begin(), request->v().end()}, CallControl(context)));
  response->mutable_values()->Add(strength.begin(), strength.end());
  return grpc::Status::OK;
}

grpc::Status QueriesService::Recommend(const kls::v1::RecommendRequest* request, kls::v1::TopKResponse* response,
                                       bool groups, const SolveControl& control) {
  KLS_GRPC_RETURN_IF_ERROR(CheckK(request->k()));
  KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
  const KernelServable servable = handle.servable();
  KLS_GRPC_RETURN_IF_ERROR(RequireModel(handle, servable.has_social_graph(),
                                        groups ? "RecommendGroups" : "RecommendFriends", kSocialGraphAttachment,
                                        "social graph"));
  // Friends: the kernel's items (users); groups: group ids, `index` only.
  const int64_t items = groups ? servable.num_groups() : handle.kernel->num_points();
  KLS_GRPC_ASSIGN_OR_RETURN(const std::optional<SelectedItems> selected,
                            SelectionOf(cache_, handle, request->select(), items, !groups));
  KLS_GRPC_ASSIGN_OR_RETURN(const std::vector<ScoredItem> top,
                            servable.Recommend(request->user(), request->k(), groups, control,
                                               selected ? &*selected : nullptr));
  AddItems(top, nullptr, response->mutable_items());
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
  KLS_GRPC_ASSIGN_OR_RETURN(const int rows, CheckClassify(*request));
  KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
  const KernelServable servable = handle.servable();
  KLS_GRPC_RETURN_IF_ERROR(
      RequireModel(handle, servable.has_classifier(), "Classify", kClassifierAttachment, "classifier"));
  KLS_GRPC_ASSIGN_OR_RETURN(const Eigen::MatrixXd x, ClassifyRows(servable, *request, rows));
  KLS_GRPC_ASSIGN_OR_RETURN(const Classification c, servable.Classify(x, CallControl(context)));
  response->mutable_decision_values()->Add(c.decision_values.data(), c.decision_values.data() + rows);
  response->mutable_labels()->Add(c.labels.begin(), c.labels.end());
  return grpc::Status::OK;
}

grpc::Status QueriesService::ClassifyUsers(grpc::ServerContext* context, const kls::v1::ClassifyUsersRequest* request,
                                           kls::v1::ClassifyUsersResponse* response) {
  KLS_GRPC_RETURN_IF_ERROR(CheckClassifyUsers(*request));
  KLS_GRPC_ASSIGN_OR_RETURN(const KernelCache::Handle handle, cache_->Get(FromProto(request->kernel())));
  const KernelServable servable = handle.servable();
  KLS_GRPC_RETURN_IF_ERROR(
      RequireModel(handle, servable.has_social_graph(), "ClassifyUsers", kSocialGraphAttachment, "social graph"));
  KLS_GRPC_RETURN_IF_ERROR(CheckClassifyUsersOn(handle, *request));
  KLS_GRPC_ASSIGN_OR_RETURN(const HarmonicResult r,
                            servable.ClassifyUsers({request->labelled_users().begin(), request->labelled_users().end()},
                                                   {request->labels().begin(), request->labels().end()},
                                                   request->class_mass_normalization(), CallControl(context)));
  const auto answer = [&](int u) {
    response->add_users(u);
    response->add_labels(r.labels[u]);
    response->add_scores(r.scores(u, r.labels[u]));
  };
  if (request->users_size() == 0) {
    for (int u = 0; u < handle.kernel->num_points(); ++u) answer(u);
  } else {
    for (int u : request->users()) answer(u);
  }
  return grpc::Status::OK;
}

}  // namespace kls::server
