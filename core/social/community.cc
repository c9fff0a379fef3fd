#include "core/social/community.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

namespace kls {

Status CommunityOptions::Validate() const {
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("num_users", num_users, 2));
  if (num_users > 200000)
    return InvalidArgumentError("options.num_users = " + std::to_string(num_users) + " must be <= 200000");
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("num_topics", num_topics, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("num_cities", num_cities, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("num_groups", num_groups, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("visual_dim", visual_dim, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("tags_per_topic", tags_per_topic, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("noise_vocabulary", noise_vocabulary, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("landmarks_per_topic", landmarks_per_topic, 1));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("visual_noise", visual_noise));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("mean_photos", mean_photos));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("mean_noise_tags", mean_noise_tags));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("mean_groups", mean_groups));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("mean_initiated_friends", mean_initiated_friends));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("mean_comments", mean_comments));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("mean_faves", mean_faves));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("primary_weight", primary_weight));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_topic_tag", p_topic_tag));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_home", p_home));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_landmark", p_landmark));
  if (p_home + p_landmark > 1.0)
    return InvalidArgumentError("options.p_home + options.p_landmark = " + FormatNumber(p_home + p_landmark) +
                                " must be <= 1");
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_group_interest", p_group_interest));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_friend_interest", p_friend_interest));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_friend_geo", p_friend_geo));
  if (p_friend_interest + p_friend_geo > 1.0)
    return InvalidArgumentError("options.p_friend_interest + options.p_friend_geo = " +
                                FormatNumber(p_friend_interest + p_friend_geo) + " must be <= 1");
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_comment_friend", p_comment_friend));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_fave_friend", p_fave_friend));
  return OkStatus();
}

Status Community::Validate() const {
  const int np = num_photos();
  auto user_ok = [&](int u) { return u >= 0 && u < num_users; };
  if (num_users < 1) return InvalidArgumentError("num_users = " + std::to_string(num_users) + " must be >= 1");
  if (photo_visual.rows() != np || photo_tags.rows() != np || static_cast<int>(photo_day.size()) != np ||
      static_cast<int>(photo_latitude.size()) != np || static_cast<int>(photo_longitude.size()) != np)
    return InvalidArgumentError("photo attributes do not all have " + std::to_string(np) + " rows");
  if (!photo_visual.allFinite()) return InvalidArgumentError("photo_visual has a non-finite entry");
  for (int p = 0; p < np; ++p)
    if (!user_ok(photo_owner[p]))
      return InvalidArgumentError("photo_owner[" + std::to_string(p) + "] = " + std::to_string(photo_owner[p]) +
                                  " is not a user");
  for (size_t c = 0; c < comments.size(); ++c)
    if (comments[c].photo < 0 || comments[c].photo >= np || !user_ok(comments[c].author))
      return InvalidArgumentError("comments[" + std::to_string(c) + "] refers to photo " +
                                  std::to_string(comments[c].photo) + " / author " +
                                  std::to_string(comments[c].author) + " out of range");
  if (static_cast<int>(contacts.size()) != num_users || static_cast<int>(groups.size()) != num_users)
    return InvalidArgumentError("contacts and groups need one list per user");
  for (int u = 0; u < num_users; ++u) {
    for (int v : contacts[u])
      if (!user_ok(v) || v == u)
        return InvalidArgumentError("contacts[" + std::to_string(u) + "] holds " + std::to_string(v));
    for (int g : groups[u])
      if (g < 0 || g >= num_groups)
        return InvalidArgumentError("groups[" + std::to_string(u) + "] holds group " + std::to_string(g) +
                                    " outside [0, " + std::to_string(num_groups) + ")");
  }
  for (size_t f = 0; f < favourites.size(); ++f)
    if (!user_ok(favourites[f].first) || favourites[f].second < 0 || favourites[f].second >= np)
      return InvalidArgumentError("favourites[" + std::to_string(f) + "] is out of range");
  return OkStatus();
}

namespace {

// GenerateCommunity's generator: one random stream (rng, and the normal
// distribution's cached second value) drawn by the phases in a fixed order —
// users, friendships, groups, photos, comments, favourites — so a seed gives
// the same community.
struct CommunityGenerator {
  explicit CommunityGenerator(const CommunityOptions& options)
      : o(options), rng(options.seed), nu(options.num_users), nt(options.num_topics) {
    c.num_users = nu;
    c.num_groups = o.num_groups;
  }
  Community Generate() {
    Users();
    Friendships();
    Groups();
    Photos();
    Comments();
    Favourites();
    return std::move(c);
  }

  int uniform_int(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }
  static std::discrete_distribution<int> zipf(int n) {
    std::vector<double> w(n);
    for (int i = 0; i < n; ++i) w[i] = 1.0 / (i + 1.0);
    return std::discrete_distribution<int>(w.begin(), w.end());
  }

  // Users: interests (theta) and home cities; the cities and landmarks.
  void Users() {
    theta.assign(nu, std::vector<double>(nt, 0.0));
    users_of_topic.resize(nt);
    users_of_city.resize(o.num_cities);
    auto city_dist = zipf(o.num_cities);
    c.primary_topic.resize(nu);
    c.home_city.resize(nu);
    for (int u = 0; u < nu; ++u) {
      const int p = uniform_int(nt);
      c.primary_topic[u] = p;
      theta[u][p] += o.primary_weight;
      for (int s = 0; s < 2; ++s) theta[u][uniform_int(nt)] += 0.5 * (1.0 - o.primary_weight);
      for (int t = 0; t < nt; ++t)
        if (theta[u][t] > 0) users_of_topic[t].push_back(u);
      c.home_city[u] = city_dist(rng);
      users_of_city[c.home_city[u]].push_back(u);
    }
    city.resize(o.num_cities);
    landmark.resize(nt * o.landmarks_per_topic);
    for (auto& x : city) x = {-60 + 120 * unif(rng), -180 + 360 * unif(rng)};
    for (auto& x : landmark) x = {-60 + 120 * unif(rng), -180 + 360 * unif(rng)};
  }

  void Friendships() {
    std::vector<std::set<int>> friends(nu);
    std::poisson_distribution<int> initiated(o.mean_initiated_friends);
    for (int u = 0; u < nu; ++u) {
      const int count = 1 + initiated(rng);
      std::discrete_distribution<int> topic_of_u(theta[u].begin(), theta[u].end());
      for (int k = 0; k < count; ++k) {
        const double r = unif(rng);
        int v;
        if (r < o.p_friend_interest) {
          const auto& pool = users_of_topic[topic_of_u(rng)];
          v = pool[uniform_int(static_cast<int>(pool.size()))];
        } else if (r < o.p_friend_interest + o.p_friend_geo) {
          const auto& pool = users_of_city[c.home_city[u]];
          v = pool[uniform_int(static_cast<int>(pool.size()))];
        } else {
          v = uniform_int(nu);
        }
        if (v != u) {
          friends[u].insert(v);
          friends[v].insert(u);
        }
      }
    }
    c.contacts.resize(nu);
    for (int u = 0; u < nu; ++u) c.contacts[u].assign(friends[u].begin(), friends[u].end());
  }

  void Groups() {
    std::vector<int> group_topic(o.num_groups);
    std::vector<std::vector<int>> groups_of_topic(nt);
    for (int g = 0; g < o.num_groups; ++g) {
      group_topic[g] = uniform_int(nt);
      groups_of_topic[group_topic[g]].push_back(g);  // in index order = popularity order (Zipf below)
    }
    auto group_pop = zipf(o.num_groups);
    std::poisson_distribution<int> joined(o.mean_groups);
    c.groups.resize(nu);
    for (int u = 0; u < nu; ++u) {
      std::discrete_distribution<int> topic_of_u(theta[u].begin(), theta[u].end());
      std::set<int> mine;
      const int count = 1 + joined(rng);
      for (int k = 0; k < count; ++k) {
        const auto& pool = groups_of_topic[topic_of_u(rng)];
        if (unif(rng) < o.p_group_interest && !pool.empty()) {
          auto within = zipf(static_cast<int>(pool.size()));
          mine.insert(pool[within(rng)]);
        } else {
          mine.insert(group_pop(rng));
        }
      }
      c.groups[u].assign(mine.begin(), mine.end());
    }
  }

  // Photos: owner, topic, visual features, tags, day and place.
  void Photos() {
    std::vector<Eigen::VectorXd> centre(nt, Eigen::VectorXd(o.visual_dim));
    for (auto& m : centre)
      for (int k = 0; k < o.visual_dim; ++k) m[k] = gauss(rng);
    const int noise_first = nt * o.tags_per_topic;
    auto noise_tag = zipf(o.noise_vocabulary);
    std::poisson_distribution<int> photos(o.mean_photos), noise_tags(o.mean_noise_tags);
    std::vector<Eigen::VectorXd> visual;
    std::vector<Eigen::Triplet<double>> trip;
    std::vector<std::vector<int>> photos_of_topic(nt);
    photos_of.resize(nu);
    for (int u = 0; u < nu; ++u) {
      std::discrete_distribution<int> topic_of_u(theta[u].begin(), theta[u].end());
      const int count = 1 + photos(rng);
      for (int k = 0; k < count; ++k) {
        const int p = c.num_photos();
        const int t = topic_of_u(rng);
        c.photo_owner.push_back(u);
        photo_topic.push_back(t);
        photos_of[u].push_back(p);
        photos_of_topic[t].push_back(p);
        Eigen::VectorXd x = centre[t];
        for (int j = 0; j < o.visual_dim; ++j) x[j] += o.visual_noise * gauss(rng);
        visual.push_back(std::move(x));
        std::set<int> tags;
        for (int j = 0; j < o.tags_per_topic; ++j)
          if (unif(rng) < o.p_topic_tag) tags.insert(t * o.tags_per_topic + j);
        const int extra = noise_tags(rng);
        for (int j = 0; j < extra; ++j) tags.insert(noise_first + noise_tag(rng));
        for (int tag : tags) trip.emplace_back(p, tag, 1.0);
        c.photo_day.push_back(uniform_int(3650));
        const double r = unif(rng);
        std::pair<double, double> at;
        if (r < o.p_home) {
          at = city[c.home_city[u]];
        } else if (r < o.p_home + o.p_landmark) {
          at = landmark[t * o.landmarks_per_topic + uniform_int(o.landmarks_per_topic)];
        } else {
          at = {-60 + 120 * unif(rng), -180 + 360 * unif(rng)};
        }
        c.photo_latitude.push_back(at.first + 0.05 * gauss(rng));
        c.photo_longitude.push_back(at.second + 0.05 * gauss(rng));
      }
    }
    const int np = c.num_photos();
    c.photo_visual.resize(np, o.visual_dim);
    for (int p = 0; p < np; ++p) c.photo_visual.row(p) = visual[p].transpose();
    c.photo_tags.resize(np, noise_first + o.noise_vocabulary);
    c.photo_tags.setFromTriplets(trip.begin(), trip.end());
  }

  void Comments() {
    const int np = c.num_photos();
    std::poisson_distribution<int> comments(o.mean_comments);
    for (int p = 0; p < np; ++p) {
      const int owner = c.photo_owner[p];
      const int count = comments(rng);
      for (int k = 0; k < count; ++k) {
        int author;
        if (unif(rng) < o.p_comment_friend && !c.contacts[owner].empty()) {
          author = c.contacts[owner][uniform_int(static_cast<int>(c.contacts[owner].size()))];
        } else {
          const auto& pool = users_of_topic[photo_topic[p]];
          author = pool.empty() ? uniform_int(nu) : pool[uniform_int(static_cast<int>(pool.size()))];
        }
        if (author != owner) c.comments.push_back({p, author});
      }
    }
  }

  void Favourites() {
    const int np = c.num_photos();
    std::vector<double> quality(np);
    std::lognormal_distribution<double> lognormal(0.0, 1.5);
    for (double& q : quality) q = lognormal(rng);
    std::discrete_distribution<int> by_quality(quality.begin(), quality.end());
    std::poisson_distribution<int> faves(o.mean_faves);
    for (int u = 0; u < nu; ++u) {
      std::set<int> mine;
      const int count = faves(rng);
      for (int k = 0; k < count; ++k) {
        int p;
        if (unif(rng) < o.p_fave_friend && !c.contacts[u].empty()) {
          const int f = c.contacts[u][uniform_int(static_cast<int>(c.contacts[u].size()))];
          p = photos_of[f][uniform_int(static_cast<int>(photos_of[f].size()))];
        } else {
          p = by_quality(rng);
        }
        if (c.photo_owner[p] != u) mine.insert(p);
      }
      for (int p : mine) c.favourites.emplace_back(u, p);
    }
  }

  const CommunityOptions& o;
  std::mt19937_64 rng;
  std::normal_distribution<double> gauss{0.0, 1.0};
  std::uniform_real_distribution<double> unif{0.0, 1.0};
  const int nu, nt;
  Community c;
  // Between phases.
  std::vector<std::vector<double>> theta;  // user → topic interest weights
  std::vector<std::vector<int>> users_of_topic, users_of_city;
  std::vector<std::pair<double, double>> city, landmark;  // (latitude, longitude)
  std::vector<int> photo_topic;
  std::vector<std::vector<int>> photos_of;  // user → photos
};

}  // namespace

StatusOr<Community> GenerateCommunity(const CommunityOptions& o) {
  return GuardExceptions("GenerateCommunity", [&]() -> StatusOr<Community> {
    KLS_RETURN_IF_ERROR(o.Validate());
    Community c = CommunityGenerator(o).Generate();
    KLS_RETURN_IF_ERROR(c.Validate());
    return c;
  });
}

}  // namespace kls
