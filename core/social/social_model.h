// The stored social-strength model (thesis ch. 7) as the service learns and
// serves it: the combined user-similarity kernel f(u, v) = Σ_t θ_t K_t(u, v)
// in factored form (LearnedKernel; the §7.5.1-repaired kernels are PSD, so
// their non-negative combination is too), plus the observed social graph
// (contact lists, group memberships) that friend and group recommendation
// need to exclude existing links and to score groups (§7.5.2).
//
// Weights: kKta — Theorem 7.35 with the observed contact graph as the target
// (all users train: the service learns from everything it was given);
// kUniform — θ_t = 1/7.
//
// Thread safety: re-entrant; a SocialGraph is immutable once built.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "core/social/community.h"
#include "core/social/user_kernels.h"

namespace kls {

struct SocialGraph {
  int num_groups = 0;
  std::vector<std::vector<int>> contacts;  ///< per user, sorted
  std::vector<std::vector<int>> groups;    ///< per user, sorted
  int num_users() const { return static_cast<int>(contacts.size()); }
};

enum class StrengthWeighting { kKta, kUniform };

struct SocialStrengthOptions {
  StrengthWeighting weighting = StrengthWeighting::kKta;
  UserKernelOptions kernels;  ///< geo cell size; PSD repair is always on here
  Status Validate() const;
};

struct SocialStrengthModel {
  LearnedKernel strength;                      ///< f = Σ θ_t K_t, users × rank
  std::array<double, kNumUserKernels> weights{};  ///< θ_t, indexed by UserKernel
  double alignment = 0.0;                      ///< KTA: ρ(f, target) on the training users
  SocialGraph graph;
  SolveStats stats;
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
