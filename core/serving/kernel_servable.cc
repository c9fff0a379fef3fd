#include "core/serving/kernel_servable.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <new>
#include <utility>

#include "core/common/byte_io.h"
#include "core/mkl/classifier_training.h"
#include "core/ranking/rerank.h"
#include "core/social/pairwise_klr.h"
#include "core/social/recommendation.h"

namespace kls {

namespace {
constexpr uint32_t kLinearMapMagic = 0x4d4e494c;  // "LINM"
constexpr uint32_t kLinearMapVersion = 1;
}  // namespace

std::string SerializeLinearMap(const Eigen::MatrixXd& map) {
  ByteWriter w;
  w.PutHeader(kLinearMapMagic, kLinearMapVersion);
  w.PutMatrix(map);
  return w.Take();
}

StatusOr<Eigen::MatrixXd> ParseLinearMap(const std::string& bytes) {
  ByteReader r(bytes, "linear_map");
  KLS_RETURN_IF_ERROR(r.ReadHeader(kLinearMapMagic, kLinearMapVersion));
  Eigen::MatrixXd m;
  KLS_RETURN_IF_ERROR(r.GetMatrix(&m));
  KLS_RETURN_IF_ERROR(r.ExpectEnd());
  if (m.size() == 0) return DataLossError("linear_map: empty");
  if (!m.allFinite()) return DataLossError("linear_map: not finite");
  return m;
}

namespace {

// An attachment of a registered kind: DATA_LOSS "<name>: <why>" when its
// parser fails or throws (RESOURCE_EXHAUSTED when it runs out of memory).
StatusOr<ExtraAttachment> ParseExtra(const AttachmentKind& kind, const std::string& bytes,
                                     const LearnedKernel& kernel) {
  StatusOr<std::shared_ptr<const void>> value = [&]() -> StatusOr<std::shared_ptr<const void>> {
    try {
      return kind.parse(bytes, kernel);
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError(kind.name + ": out of memory");
    } catch (const std::exception& e) {
      return DataLossError(e.what());
    }
  }();
  if (!value.ok() && value.status().code() == StatusCode::kResourceExhausted) return value.status();
  if (!value.ok()) return DataLossError(kind.name + ": " + value.status().message());
  if (*value == nullptr) return DataLossError(kind.name + ": the parser returned no value");
  return ExtraAttachment{std::move(value).value(), kind.type};
}

}  // namespace

StatusOr<ModelAttachments> ParseAttachments(const LearnedKernel& kernel, const std::vector<AttachmentView>& stored,
                                            const AttachmentKinds& kinds) {
  ModelAttachments out;
  for (const AttachmentView& a : stored) {
    const std::string& bytes = *a.bytes;
    if (const AttachmentKind* kind = kinds.Find(a.name)) {  // never a built-in name (AttachmentKinds::Add)
      KLS_ASSIGN_OR_RETURN(ExtraAttachment extra, ParseExtra(*kind, bytes, kernel));
      out.bytes += kind->memory ? std::max<int64_t>(0, kind->memory(extra.value.get()))
                                : static_cast<int64_t>(bytes.size());
      out.extras.insert_or_assign(std::string(a.name), std::move(extra));
      continue;
    }
    out.bytes += static_cast<int64_t>(bytes.size());
    if (a.name == kClassifierAttachment) {
      StatusOr<KernelClassifier> c = ParseClassifier(bytes);
      if (!c.ok()) return DataLossError(c.status().message());
      out.classifier = std::move(c).value();
    } else if (a.name == kSocialGraphAttachment) {
      StatusOr<SocialGraph> g = ParseSocialGraph(bytes, kernel.num_points());
      if (!g.ok()) return DataLossError(g.status().message());
      out.social = std::move(g).value();
    } else if (a.name == kSocialKlrAttachment) {
      StatusOr<PairwiseKlrModel> m = ParsePairwiseKlrModel(bytes);
      if (!m.ok()) return DataLossError(m.status().message());
      StatusOr<KlrStrength> klr = KlrStrength::Create(kernel, std::move(m).value());
      if (!klr.ok()) return DataLossError("social_klr: " + klr.status().message());
      out.bytes += static_cast<int64_t>(klr->memory_bytes());
      out.social_klr = std::move(klr).value();
    } else if (a.name == kLinearMapAttachment) {
      StatusOr<Eigen::MatrixXd> m = ParseLinearMap(bytes);
      if (!m.ok()) return DataLossError(m.status().message());
      if (m->cols() != kernel.rank()) {
        return DataLossError("linear_map: " + std::to_string(m->rows()) + " x " + std::to_string(m->cols()) +
                             " for a kernel of rank " + std::to_string(kernel.rank()));
      }
      out.linear_map = std::move(m).value();
    } else if (a.name == kFeatureScalingAttachment) {
      StatusOr<FeatureScaler> f = ParseFeatureScaler(bytes);
      if (!f.ok()) return DataLossError(f.status().message());
      out.scaling = std::move(f).value();
    }
  }
  return out;
}

KernelServable::KernelServable(std::shared_ptr<const LearnedKernel> kernel, std::shared_ptr<const TopKIndex> index,
                               std::shared_ptr<const ModelAttachments> attachments)
    : kernel_(std::move(kernel)),
      index_(std::move(index)),
      attachments_(attachments ? std::move(attachments) : std::make_shared<const ModelAttachments>()) {}

StatusOr<std::vector<ScoredItem>> KernelServable::TopKOfItem(int item, int k, bool exclude_self, const char* field,
                                                             const SolveControl& control) const {
  KLS_RETURN_IF_ERROR(kernel_->CheckIndex(item, field));
  KLS_RETURN_IF_ERROR(control.CheckStop("top-k"));
  return index_ ? index_->TopK(item, k, exclude_self) : kernel_->TopK(item, k, exclude_self);
}

StatusOr<std::vector<ScoredItem>> KernelServable::TopKOfVector(const Eigen::VectorXd& query, int k,
                                                               const SolveControl& control) const {
  if (query.size() != kernel_->rank()) {
    return InvalidArgumentError("vector has " + std::to_string(query.size()) + " values but the kernel has rank " +
                                std::to_string(kernel_->rank()));
  }
  KLS_RETURN_IF_ERROR(control.CheckStop("top-k"));
  return index_ ? index_->TopKByVector(query, k) : kernel_->TopKByVector(query, k);
}

StatusOr<LearnedKernel::Embedding> KernelServable::ExtendToFeatures(const Eigen::MatrixXd& train,
                                                                    const Eigen::MatrixXd& rows,
                                                                    const HarmonicExtensionOptions& options,
                                                                    const std::string& field,
                                                                    const SolveControl& control) const {
  if (attachments_->linear_map) {
    const Eigen::MatrixXd& map = *attachments_->linear_map;
    if (rows.cols() != map.rows()) {
      return InvalidArgumentError(field + ": " + std::to_string(rows.cols()) +
                                  " features per row but the kernel's linear map takes " + std::to_string(map.rows()));
    }
    KLS_RETURN_IF_ERROR(control.CheckStop("feature extension"));
    if (!attachments_->scaling) return LearnedKernel::Embedding(rows * map);
    KLS_ASSIGN_OR_RETURN(const Eigen::MatrixXd x, attachments_->scaling->Apply(rows));
    return LearnedKernel::Embedding(x * map);
  }
  if (train.rows() != kernel_->num_points()) {
    return FailedPreconditionError("the kernel has " + std::to_string(kernel_->num_points()) +
                                   " items but its data set has " + std::to_string(train.rows()) +
                                   " feature rows; only a kernel over the data set's rows extends to new points");
  }
  if (rows.cols() != train.cols()) {
    return InvalidArgumentError(field + ": " + std::to_string(rows.cols()) + " features per row but the data set has " +
                                std::to_string(train.cols()));
  }
  if (!attachments_->scaling) return HarmonicExtension(*kernel_, train, rows, options, control);
  KLS_ASSIGN_OR_RETURN(const Eigen::MatrixXd x, attachments_->scaling->Apply(rows));
  return HarmonicExtension(*kernel_, train, x, options, control);
}

StatusOr<std::vector<ScoredItem>> KernelServable::ReRank(const std::vector<int>& candidates,
                                                         const Eigen::VectorXd& prior,
                                                         const VisualRankOptions& options, int k, int* iterations,
                                                         const SolveControl& control,
                                                         const SelectedItems* selection) const {
  if (selection) {
    std::vector<int> kept;
    std::vector<double> kept_prior;
    for (size_t t = 0; t < candidates.size(); ++t) {
      if (candidates[t] < 0 || candidates[t] >= kernel_->num_points() || !selection->Passes(candidates[t])) continue;
      kept.push_back(candidates[t]);
      if (prior.size() > 0) kept_prior.push_back(prior[static_cast<Eigen::Index>(t)]);
    }
    if (kept.empty()) {
      *iterations = 0;
      return std::vector<ScoredItem>();
    }
    const Eigen::VectorXd p = Eigen::Map<const Eigen::VectorXd>(kept_prior.data(), static_cast<Eigen::Index>(kept_prior.size()));
    return ReRank(kept, p, options, k, iterations, control, nullptr);
  }
  KLS_ASSIGN_OR_RETURN(std::vector<ScoredItem> ranked,
                       ReRankCandidates(*kernel_, candidates, prior, options, iterations, control));
  if (k > 0 && static_cast<int>(ranked.size()) > k) ranked.resize(k);
  return ranked;
}

StatusOr<std::vector<double>> KernelServable::SocialStrength(const std::vector<int>& u, const std::vector<int>& v,
                                                             const SolveControl& control) const {
  if (!has_social_graph()) return FailedPreconditionError("the kernel has no social graph");
  const KlrStrength* klr = attachments_->social_klr ? &*attachments_->social_klr : nullptr;
  std::vector<double> out(u.size());
  for (size_t t = 0; t < u.size(); ++t) {
    if (t % 4096 == 0) KLS_RETURN_IF_ERROR(control.CheckStop("social strength"));
    out[t] = klr ? klr->Score(*kernel_, u[t], v[t]) : kernel_->value(u[t], v[t]);
  }
  return out;
}

StatusOr<std::vector<ScoredItem>> KernelServable::Recommend(int user, int k, bool groups, const SolveControl& control,
                                                             const SelectedItems* selection) const {
  if (!has_social_graph()) return FailedPreconditionError("the kernel has no social graph");
  KLS_RETURN_IF_ERROR(kernel_->CheckIndex(user, "user"));
  KLS_RETURN_IF_ERROR(control.CheckStop("recommendation"));
  // f(u, ·): the learned pairwise model when there is one (σ(f), §7.4), else the strength kernel's row.
  const SocialGraph& graph = *attachments_->social;
  const Eigen::VectorXd row =
      attachments_->social_klr ? attachments_->social_klr->Row(*kernel_, user) : kernel_->row(user);
  // With a selection: the whole ranking, then the first k that pass (exact).
  const int asked = selection ? (groups ? graph.num_groups : kernel_->num_points()) : k;
  std::vector<ScoredItem> ranked = groups ? RecommendGroupsFromRow(row, graph.groups, graph.num_groups, user, asked)
                                          : RecommendFriendsFromRow(row, graph.contacts[user], user, asked);
  if (!selection) return ranked;
  std::vector<ScoredItem> out;
  for (const ScoredItem& s : ranked) {
    if (static_cast<int>(out.size()) == k) break;
    if (s.index >= 0 && (!selection->allowed || s.index < selection->allowed->size()) && selection->Passes(s.index)) {
      out.push_back(s);
    }
  }
  return out;
}

int KernelServable::num_groups() const { return has_social_graph() ? attachments_->social->num_groups : 0; }

StatusOr<std::vector<std::vector<ScoredItem>>> KernelServable::Search(const std::vector<TopKQuery>& queries,
                                                                      const TopKSearchOptions& options,
                                                                      const SolveControl& control) const {
  if (index_) return index_->Search(queries, options, control);
  // No index (building it ran out of memory at load): a copy-less one for this call.
  TopKIndexOptions scan_only;
  scan_only.max_index_fraction = 1e-9;
  KLS_ASSIGN_OR_RETURN(TopKIndex index, TopKIndex::Build(kernel_, scan_only));
  return index.Search(queries, options, control);
}

StatusOr<Classification> KernelServable::Classify(const Eigen::MatrixXd& rows, const SolveControl& control) const {
  if (!has_classifier()) return FailedPreconditionError("the kernel has no classifier");
  const KernelClassifier& model = *attachments_->classifier;
  if (rows.cols() != model.support_vectors.cols()) {
    return InvalidArgumentError("dim = " + std::to_string(rows.cols()) + " but the model takes " +
                                std::to_string(model.support_vectors.cols()) + " features");
  }
  KLS_RETURN_IF_ERROR(control.CheckStop("classification"));
  Classification out;
  if (attachments_->scaling) {
    KLS_ASSIGN_OR_RETURN(const Eigen::MatrixXd x, attachments_->scaling->Apply(rows));
    KLS_ASSIGN_OR_RETURN(out.decision_values, model.DecisionValues(x));
  } else {
    KLS_ASSIGN_OR_RETURN(out.decision_values, model.DecisionValues(rows));
  }
  out.labels.resize(out.decision_values.size());
  for (Eigen::Index i = 0; i < out.decision_values.size(); ++i) {
    out.labels[i] = out.decision_values[i] > 0 ? model.positive_class : model.negative_class;
  }
  return out;
}

StatusOr<HarmonicResult> KernelServable::ClassifyUsers(const std::vector<int>& labelled, const std::vector<int>& labels,
                                                       bool class_mass_normalization,
                                                       const SolveControl& control) const {
  if (!has_social_graph()) return FailedPreconditionError("the kernel has no social graph");
  for (size_t t = 0; t < labels.size(); ++t) {
    if (labels[t] < 0 || labels[t] >= 1000) {
      return InvalidArgumentError("labels[" + std::to_string(t) + "] = " + std::to_string(labels[t]) +
                                  " must be a class id in [0, 1000)");
    }
  }
  if (!labels.empty() && std::all_of(labels.begin(), labels.end(), [&](int c) { return c == labels[0]; })) {
    return InvalidArgumentError("labels are all " + std::to_string(labels[0]) +
                                "; give labelled users of at least 2 classes");
  }
  const KlrStrength* klr = attachments_->social_klr ? &*attachments_->social_klr : nullptr;
  HarmonicOptions options;
  options.class_mass_normalization = class_mass_normalization;
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd weights, StrengthGraphWeights(*kernel_, klr, control));
  return HarmonicClassify(weights, labelled, labels, 0, options, control);
}

}  // namespace kls
