// A learned kernel as the service serves it (what TF Serving calls a
// servable): the factor V (K = V Vᵀ), its top-k index, and the attachments
// its family stored — a classifier, a social graph and pairwise KLR model,
// the feature scaling. It answers every query of kls.v1.Queries in core terms;
// the gRPC handlers only translate protos and statuses. Every query method
// takes the call's SolveControl (deadline, cancellation): the long
// computations (search, feature extension, re-ranking walks, harmonic
// classification) stop within milliseconds of it, the short ones check it
// before they start (and SocialStrength every few thousand pairs).
//
// Thread safety: immutable after construction; every method is const and
// may run on many threads at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/feature_scaling.h"
#include "core/mkl/kernel_classifier.h"
#include "core/model/learned_kernel.h"
#include "core/model/topk_index.h"
#include "core/serving/attachment_kinds.h"
#include "core/serving/item_selection.h"
#include "core/ranking/kernel_extension.h"
#include "core/ranking/visual_rank.h"
#include "core/social/harmonic_classifier.h"
#include "core/social/social_model.h"

namespace kls {

/// Attachment names (what a job stores beside the factor) and their encodings.
inline constexpr const char* kClassifierAttachment = "classifier";     ///< SerializeClassifier
inline constexpr const char* kSocialGraphAttachment = "social_graph";  ///< SerializeSocialGraph
inline constexpr const char* kSocialKlrAttachment = "social_klr";      ///< SerializePairwiseKlrModel
/// The job's feature scaling statistics (FeatureScaler::Serialize, versioned);
/// stored only when the scaling is not none. Absent = identity.
inline constexpr const char* kFeatureScalingAttachment = "feature_scaling";
/// A linear map L (d × r) with V = X L (X the training features, scaled):
/// feature queries map new rows exactly, x ↦ scale(x) L, without the training
/// features (metric-learning jobs: itml). SerializeLinearMap.
inline constexpr const char* kLinearMapAttachment = "linear_map";

/// The linear_map attachment's encoding (versioned); ParseLinearMap is its
/// inverse (DATA_LOSS on malformed bytes, a non-finite or empty matrix).
std::string SerializeLinearMap(const Eigen::MatrixXd& map);
StatusOr<Eigen::MatrixXd> ParseLinearMap(const std::string& bytes);

/// The parsed attachments of a kernel.
struct ModelAttachments {
  std::optional<KernelClassifier> classifier;  ///< the classifier (onk, mkl jobs)
  std::optional<SocialGraph> social;           ///< the social graph (social strength jobs)
  std::optional<KlrStrength> social_klr;       ///< the pairwise KLR model (social strength, KLR weighting)
  /// The job's feature scaling; absent = identity. Feature queries apply it.
  std::optional<FeatureScaler> scaling;
  /// V = X L (itml jobs): feature queries are rows · L; absent = harmonic extension.
  std::optional<Eigen::MatrixXd> linear_map;
  /// Attachments of the kinds a family registered (attachment_kinds.h), by name.
  std::map<std::string, ExtraAttachment, std::less<>> extras;
  int64_t bytes = 0;                           ///< memory the attachments take

  /// The parsed attachment `name` of a registered kind whose values are `T`;
  /// null when the kernel has none of that name, or it holds another type.
  template <class T>
  const T* Extra(std::string_view name) const {
    const auto it = extras.find(name);
    if (it == extras.end() || it->second.type != std::type_index(typeid(T))) return nullptr;
    return static_cast<const T*>(it->second.value.get());
  }
};

/// One stored attachment, by name (the bytes are borrowed, not copied).
struct AttachmentView {
  std::string_view name;
  const std::string* bytes;
};

/// Decodes the attachments of `kernel`: the built-in kinds into their
/// members, the kinds registered in `kinds` into `extras`; names of neither
/// (from a newer server, or a family this build lacks) are skipped. DATA_LOSS
/// naming the attachment for a malformed one.
StatusOr<ModelAttachments> ParseAttachments(const LearnedKernel& kernel, const std::vector<AttachmentView>& stored,
                                            const AttachmentKinds& kinds = AttachmentKinds::Global());

/// Classify's answer: decision values f(x) and the class each one picks.
struct Classification {
  Eigen::VectorXd decision_values;
  std::vector<int> labels;
};

class KernelServable {
 public:
  /// `kernel` non-null; `index` may be null (queries scan V); `attachments`
  /// may be null (none).
  KernelServable(std::shared_ptr<const LearnedKernel> kernel, std::shared_ptr<const TopKIndex> index,
                 std::shared_ptr<const ModelAttachments> attachments);

  const LearnedKernel& kernel() const { return *kernel_; }
  const ModelAttachments& attachments() const { return *attachments_; }
  bool has_classifier() const { return attachments_->classifier.has_value(); }
  bool has_social_graph() const { return attachments_->social.has_value(); }
  bool has_linear_map() const { return attachments_->linear_map.has_value(); }

  /// The k items most similar to item `item` (INVALID_ARGUMENT naming `field` when out of range).
  StatusOr<std::vector<ScoredItem>> TopKOfItem(int item, int k, bool exclude_self, const char* field,
                                               const SolveControl& control) const;
  /// The k items with the largest ⟨v_i, query⟩; `query` has rank() entries, all finite.
  StatusOr<std::vector<ScoredItem>> TopKOfVector(const Eigen::VectorXd& query, int k,
                                                 const SolveControl& control) const;

  /// A batch of top-k queries (TopKIndex::Search: exact under any allowed
  /// bitmap, one pass over the items per shared bitmap), stopping within a
  /// few blocks of `control`'s deadline or cancellation.
  StatusOr<std::vector<std::vector<ScoredItem>>> Search(const std::vector<TopKQuery>& queries,
                                                        const TopKSearchOptions& options,
                                                        const SolveControl& control) const;

  /// Embedding rows of unseen points (harmonic extension, thesis §6.3.3):
  /// `rows` are raw features (the kernel's scaling is applied here), `train`
  /// the kernel's training features, already scaled (one row per item).
  /// FAILED_PRECONDITION when the kernel is not over `train`'s rows;
  /// INVALID_ARGUMENT naming `field` when the widths differ.
  /// With a linear map (has_linear_map) the answer is exact, scale(rows) · L,
  /// and `train` is not read (it may be empty).
  StatusOr<LearnedKernel::Embedding> ExtendToFeatures(const Eigen::MatrixXd& train, const Eigen::MatrixXd& rows,
                                                      const HarmonicExtensionOptions& options,
                                                      const std::string& field, const SolveControl& control) const;

  /// VisualRank over `candidates` (indices) with the optional `prior` (one
  /// value per candidate, or empty); the first `k` (0 = all).
  /// Candidates a `selection` fails are dropped first (with their priors).
  StatusOr<std::vector<ScoredItem>> ReRank(const std::vector<int>& candidates, const Eigen::VectorXd& prior,
                                           const VisualRankOptions& options, int k, int* iterations,
                                           const SolveControl& control, const SelectedItems* selection = nullptr) const;

  /// Strength of each pair (u[t], v[t]): the pairwise KLR model's σ(f) when
  /// the kernel has one, else the strength kernel's entry.
  /// FAILED_PRECONDITION without a social graph.
  StatusOr<std::vector<double>> SocialStrength(const std::vector<int>& u, const std::vector<int>& v,
                                               const SolveControl& control) const;

  /// Friends (not yet contacts) or groups for `user`, strongest first; with
  /// a `selection` (over users, or over group ids), the k best that pass it.
  StatusOr<std::vector<ScoredItem>> Recommend(int user, int k, bool groups, const SolveControl& control,
                                              const SelectedItems* selection = nullptr) const;
  /// Number of groups of the social graph (0 without one): the item space
  /// of RecommendGroups' selections.
  int num_groups() const;

  /// The classifier's decision on each raw feature row (scaling applied here).
  StatusOr<Classification> Classify(const Eigen::MatrixXd& rows, const SolveControl& control) const;

  /// Harmonic classes of every user from the labelled ones (thesis §7.5), on
  /// the strength graph. Labels must be class ids in [0, 1000) of >= 2 classes.
  StatusOr<HarmonicResult> ClassifyUsers(const std::vector<int>& labelled, const std::vector<int>& labels,
                                         bool class_mass_normalization, const SolveControl& control) const;

 private:
  std::shared_ptr<const LearnedKernel> kernel_;
  std::shared_ptr<const TopKIndex> index_;
  std::shared_ptr<const ModelAttachments> attachments_;
};

}  // namespace kls
