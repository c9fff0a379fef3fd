// Friend and group recommendation from a social-strength matrix (thesis
// §7.4.3, §7.5.1–7.5.2) and the hold-out protocol that measures them.
//
// Friend recommendation: the users v ≠ u not yet in u's contact list, by
// descending f(u, v). Group recommendation (§7.5.2):
//     s(g, u) = Σ_{j ≠ u} f(u, u_j) δ(u_j, g),
// over the groups u has not joined. Ties: smaller index first.
//
// Hold-out protocol (the thesis trains on 4,000 of 4,919 users; the exact
// split of its test users is not given): a random `test_fraction` of the
// users are test users; each test user with >= 2 contacts hides a
// `hide_fraction` of them (removed from both contact lists), and each test
// user with >= 2 groups hides that fraction of the groups. Kernels are built
// from the observed data only. Top-m accuracy = the fraction of the first m
// recommendations that are hidden friends (groups), averaged over test users
// with something hidden.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "core/social/community.h"

namespace kls {

struct HoldoutSplit {
  Community observed;                        ///< the data with the hidden links removed
  std::vector<int> test_users;               ///< sorted
  std::vector<int> train_users;              ///< sorted complement
  std::vector<std::vector<int>> hidden_friends;  ///< per user (empty for train users)
  std::vector<std::vector<int>> hidden_groups;   ///< per user
};

/// Errors: fractions outside (0, 1), invalid data.
StatusOr<HoldoutSplit> MakeHoldout(const Community& data, double test_fraction, double hide_fraction, uint64_t seed);

/// The same from u's row of the strength (n values), u's contact list and
/// every user's groups; what the service calls on a stored, factored strength.
std::vector<ScoredItem> RecommendFriendsFromRow(const Eigen::VectorXd& strength_row, const std::vector<int>& contacts,
                                               int u, int k);
std::vector<ScoredItem> RecommendGroupsFromRow(const Eigen::VectorXd& strength_row,
                                              const std::vector<std::vector<int>>& groups, int num_groups, int u,
                                              int k);
/// Top-k friend suggestions for u (strength n × n).
std::vector<ScoredItem> RecommendFriends(const Eigen::MatrixXd& strength, const Community& observed, int u, int k);

/// Top-k group suggestions for u by s(g, u).
std::vector<ScoredItem> RecommendGroups(const Eigen::MatrixXd& strength, const Community& observed, int u, int k);

/// Mean top-m accuracy for m = 1..max_m (index m−1) over the test users.
std::vector<double> FriendAccuracy(const Eigen::MatrixXd& strength, const HoldoutSplit& split, int max_m = 10);
std::vector<double> GroupAccuracy(const Eigen::MatrixXd& strength, const HoldoutSplit& split, int max_m = 10);

}  // namespace kls
