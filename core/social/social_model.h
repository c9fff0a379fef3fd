// The stored social-strength model (thesis ch. 7) as the service learns and
// serves it: the combined user-similarity kernel f(u, v) = Σ_t θ_t K_t(u, v)
// in factored form (LearnedKernel; the §7.5.1-repaired kernels are PSD, so
// their non-negative combination is too), plus the observed social graph
// (contact lists, group memberships) that friend and group recommendation
// need to exclude existing links and to score groups (§7.5.2).
//
// Weights: kKta — Theorem 7.35 with the observed contact graph as the target
// (all users train: the service learns from everything it was given);
// kUniform — θ_t = 1/7; kKlr — the KTA combination as the first stage and the
// pairwise kernel logistic regression of §7.4 (eq. 7.2–7.3, pairwise_klr.h) as
// the second: training pairs of every user by §7.4.2, the import vector
// machine on (7.3), and the strength f(u, v) = σ(Σ_s α_s k(û, û_s)).
//
// Serving a KLR model. Its strength matrix is not PSD (nor low-rank in
// general), so it is never stored densely: KlrStrength keeps the stored
// factored user kernel plus the columns K_u(·, a_s), K_u(·, b_s) of the import
// pairs (n × 2|S|) and evaluates one row f(u, ·) in O(n (|S| + rank)).
//
// Thread safety: re-entrant; a SocialGraph is immutable once built.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "core/social/community.h"
#include "core/social/pairwise_klr.h"
#include "core/social/user_kernels.h"

namespace kls {

struct SocialGraph {
  int num_groups = 0;
  std::vector<std::vector<int>> contacts;  ///< per user, sorted
  std::vector<std::vector<int>> groups;    ///< per user, sorted
  int num_users() const { return static_cast<int>(contacts.size()); }
};

enum class StrengthWeighting { kKta, kUniform, kKlr };
/// "kta", "uniform", "klr".
const char* StrengthWeightingName(StrengthWeighting w);

struct SocialStrengthOptions {
  StrengthWeighting weighting = StrengthWeighting::kKta;
  UserKernelOptions kernels;  ///< geo cell size; PSD repair is always on here
  TrainingPairOptions klr_pairs;  ///< kKlr: §7.4.2 pair selection (symmetric follows klr.pair_kernel)
  PairwiseKlrOptions klr;         ///< kKlr: the IVM on (7.3)
  /// INVALID_ARGUMENT "<path>.<field> = <value> <rule>". The fields the
  /// service sets are named as kls.v1.SocialStrengthOptions spells them:
  /// cell_degrees (kernels.cell_degrees), klr_c (klr.c), klr_import_vectors
  /// (klr.max_import_vectors), klr_positives / klr_negatives
  /// (klr_pairs.positives_per_user / negatives_per_user), klr_bias_weight and
  /// klr_link_weight (klr.pair_kernel); the others by their path
  /// ("<path>.klr.stop_window", "<path>.klr_pairs.negative_pool_fraction").
  /// klr and klr_pairs are checked only for kKlr.
  Status Validate(std::string_view path = "options") const;
};

struct SocialStrengthModel {
  LearnedKernel strength;                      ///< f = Σ θ_t K_t, users × rank
  std::array<double, kNumUserKernels> weights{};  ///< θ_t, indexed by UserKernel
  double alignment = 0.0;                      ///< KTA: ρ(f, target) on the training users
  SocialGraph graph;
  std::optional<PairwiseKlrModel> klr;         ///< kKlr: the second stage on `strength` as K_u
  double klr_training_accuracy = 0.0;          ///< kKlr: fraction of training pairs ranked right
  int klr_training_pairs = 0;
  SolveReport stats;                            ///< kKlr: iterations = import vectors, objective = (7.3)
};

/// Learns the model from a community's observed data. Errors: invalid
/// community or options; FAILED_PRECONDITION when no kernel aligns with the
/// contact graph (kKta with no contacts at all).
StatusOr<SocialStrengthModel> LearnSocialStrength(const Community& data, const SocialStrengthOptions& options,
                                                  const SolveControl& control = SolveControl());

/// Friend / group suggestions for user u from the factored strength
/// (recommendation.h semantics: existing contacts / groups excluded).
/// u must be in range (callers check with strength.CheckIndex).
std::vector<ScoredItem> RecommendFriends(const LearnedKernel& strength, const SocialGraph& graph, int u, int k);
std::vector<ScoredItem> RecommendGroups(const LearnedKernel& strength, const SocialGraph& graph, int u, int k);

/// A pairwise KLR model served on the factored user kernel it was learned
/// with (f(u, v) as SocialStrengthMatrix computes it, without the n × n
/// matrix). Immutable after Create; the kernel passed to Row/Score must be the
/// one given to Create (same object or equal values).
class KlrStrength {
 public:
  /// Errors: INVALID_ARGUMENT when the model does not fit the kernel
  /// (user count, import pair indices, α size, non-finite α).
  static StatusOr<KlrStrength> Create(const LearnedKernel& user_kernel, PairwiseKlrModel model);

  /// σ(f(u, v)) for one pair / for every v (indices must be in range).
  double Score(const LearnedKernel& user_kernel, int u, int v) const;
  Eigen::VectorXd Row(const LearnedKernel& user_kernel, int u) const;
  const PairwiseKlrModel& model() const { return model_; }
  size_t memory_bytes() const;

 private:
  PairwiseKlrModel model_;
  Eigen::MatrixXd ka_, kb_;  ///< K_u(·, a_s), K_u(·, b_s): n × |S|
  Eigen::VectorXd g_;        ///< kDifference: g = (ka − kb) α
  double bias_ = 0.0;        ///< bias_weight Σ_s α_s
  double beta_ = 0.0;        ///< link_weight Σ_s α_s K_u(a_s, b_s)
};

/// The n × n non-negative, symmetric, zero-diagonal weight matrix of the
/// strength graph that §7.5.3's harmonic classifier runs on: ½(F + Fᵀ) with
/// F = σ(f) for a KLR model, F = max(0, K) for a kernel strength.
/// `klr` may be null. O(n² (rank + |S|)).
Eigen::MatrixXd StrengthGraphWeights(const LearnedKernel& strength, const KlrStrength* klr);
/// The same, stopped by `control` (checked every 256 rows): CANCELLED /
/// DEADLINE_EXCEEDED.
StatusOr<Eigen::MatrixXd> StrengthGraphWeights(const LearnedKernel& strength, const KlrStrength* klr,
                                               const SolveControl& control);

/// Versioned binary encoding; Parse checks every index (DATA_LOSS on error)
/// and that the graph has `num_users` users.
std::string SerializeSocialGraph(const SocialGraph& graph);
StatusOr<SocialGraph> ParseSocialGraph(const std::string& bytes, int num_users);

/// A community's observed data without the photos' visual features (a stored
/// social data set keeps those as its feature rows) and without the planted
/// truth. Parse restores photo_visual from `visual` (photos × d) and runs
/// Community::Validate (DATA_LOSS on any problem).
std::string SerializeCommunityRelations(const Community& data);
StatusOr<Community> ParseCommunityRelations(const std::string& bytes, const Eigen::MatrixXd& visual);

}  // namespace kls
