#include "core/social/recommendation.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <string>

namespace kls {

namespace {

std::vector<ScoredItem> TopExcluding(const Eigen::VectorXd& score, const std::vector<char>& excluded, int k) {
  std::vector<int> idx;
  for (int i = 0; i < score.size(); ++i)
    if (!excluded[i]) idx.push_back(i);
  const int m = std::min<int>(k, static_cast<int>(idx.size()));
  std::partial_sort(idx.begin(), idx.begin() + m, idx.end(), [&](int a, int b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
  std::vector<ScoredItem> out(m);
  for (int t = 0; t < m; ++t) out[t] = {idx[t], score[idx[t]]};
  return out;
}

std::vector<double> Accuracy(const std::vector<int>& users, const std::vector<std::vector<int>>& hidden, int max_m,
                             const std::function<std::vector<ScoredItem>(int, int)>& recommend) {
  std::vector<double> acc(max_m, 0.0);
  int counted = 0;
  for (int u : users) {
    if (hidden[u].empty()) continue;
    const std::set<int> truth(hidden[u].begin(), hidden[u].end());
    const std::vector<ScoredItem> rec = recommend(u, max_m);
    int hits = 0;
    for (int m = 1; m <= max_m; ++m) {
      if (m <= static_cast<int>(rec.size()) && truth.count(rec[m - 1].index)) ++hits;
      acc[m - 1] += static_cast<double>(hits) / m;
    }
    ++counted;
  }
  for (double& a : acc) a = counted ? a / counted : 0.0;
  return acc;
}

}  // namespace

StatusOr<HoldoutSplit> MakeHoldout(const Community& data, double test_fraction, double hide_fraction, uint64_t seed) {
  return GuardExceptions("MakeHoldout", [&]() -> StatusOr<HoldoutSplit> {
    if (!(test_fraction > 0.0 && test_fraction < 1.0))
      return InvalidArgumentError("test_fraction = " + FormatNumber(test_fraction) + " must be in (0, 1)");
    if (!(hide_fraction > 0.0 && hide_fraction < 1.0))
      return InvalidArgumentError("hide_fraction = " + FormatNumber(hide_fraction) + " must be in (0, 1)");
    KLS_RETURN_IF_ERROR(data.Validate());
    const int n = data.num_users;
    std::mt19937_64 rng(seed);
    std::vector<int> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const int nt = std::max(1, static_cast<int>(test_fraction * n));
    HoldoutSplit s;
    s.observed = data;
    s.test_users.assign(perm.begin(), perm.begin() + nt);
    s.train_users.assign(perm.begin() + nt, perm.end());
    std::sort(s.test_users.begin(), s.test_users.end());
    std::sort(s.train_users.begin(), s.train_users.end());
    s.hidden_friends.assign(n, {});
    s.hidden_groups.assign(n, {});
    std::vector<std::set<int>> contacts(n);
    for (int u = 0; u < n; ++u) contacts[u].insert(data.contacts[u].begin(), data.contacts[u].end());
    for (int u : s.test_users) {
      std::vector<int> friends(contacts[u].begin(), contacts[u].end());  // current (after earlier hides)
      if (friends.size() >= 2) {
        std::shuffle(friends.begin(), friends.end(), rng);
        const int h = std::max(1, static_cast<int>(hide_fraction * friends.size()));
        for (int t = 0; t < h; ++t) {
          const int v = friends[t];
          contacts[u].erase(v);
          contacts[v].erase(u);
          s.hidden_friends[u].push_back(v);
        }
      }
      std::vector<int> groups = data.groups[u];
      if (groups.size() >= 2) {
        std::shuffle(groups.begin(), groups.end(), rng);
        const int h = std::max(1, static_cast<int>(hide_fraction * groups.size()));
        s.hidden_groups[u].assign(groups.begin(), groups.begin() + h);
        std::vector<int> kept(groups.begin() + h, groups.end());
        std::sort(kept.begin(), kept.end());
        s.observed.groups[u] = kept;
      }
    }
    // A test user's hidden friend that is itself a test user appears in both users' hidden lists.
    for (int u : s.test_users)
      for (int v : s.hidden_friends[u])
        if (std::binary_search(s.test_users.begin(), s.test_users.end(), v) &&
            std::find(s.hidden_friends[v].begin(), s.hidden_friends[v].end(), u) == s.hidden_friends[v].end())
          s.hidden_friends[v].push_back(u);
    for (int u = 0; u < n; ++u) s.observed.contacts[u].assign(contacts[u].begin(), contacts[u].end());
    return s;
  });
}

std::vector<ScoredItem> RecommendFriendsFromRow(const Eigen::VectorXd& strength_row, const std::vector<int>& contacts,
                                               int u, int k) {
  std::vector<char> excluded(strength_row.size(), 0);
  excluded[u] = 1;
  for (int v : contacts) excluded[v] = 1;
  return TopExcluding(strength_row, excluded, k);
}

std::vector<ScoredItem> RecommendGroupsFromRow(const Eigen::VectorXd& strength_row,
                                              const std::vector<std::vector<int>>& groups, int num_groups, int u,
                                              int k) {
  Eigen::VectorXd score = Eigen::VectorXd::Zero(num_groups);
  for (int j = 0; j < static_cast<int>(groups.size()); ++j) {
    if (j == u) continue;
    const double f = strength_row[j];
    for (int g : groups[j]) score[g] += f;  // s(g, u) = Σ_j f(u, u_j) δ(u_j, g)
  }
  std::vector<char> excluded(num_groups, 0);
  for (int g : groups[u]) excluded[g] = 1;
  return TopExcluding(score, excluded, k);
}

std::vector<ScoredItem> RecommendFriends(const Eigen::MatrixXd& strength, const Community& observed, int u, int k) {
  return RecommendFriendsFromRow(strength.row(u).transpose(), observed.contacts[u], u, k);
}

std::vector<ScoredItem> RecommendGroups(const Eigen::MatrixXd& strength, const Community& observed, int u, int k) {
  return RecommendGroupsFromRow(strength.row(u).transpose(), observed.groups, observed.num_groups, u, k);
}

std::vector<double> FriendAccuracy(const Eigen::MatrixXd& strength, const HoldoutSplit& split, int max_m) {
  return Accuracy(split.test_users, split.hidden_friends, max_m,
                  [&](int u, int k) { return RecommendFriends(strength, split.observed, u, k); });
}

std::vector<double> GroupAccuracy(const Eigen::MatrixXd& strength, const HoldoutSplit& split, int max_m) {
  return Accuracy(split.test_users, split.hidden_groups, max_m,
                  [&](int u, int k) { return RecommendGroups(strength, split.observed, u, k); });
}

}  // namespace kls
