// The user data model of thesis ch. 7 (Definitions 7.2–7.3) and a seeded
// generator of a photo-sharing community with planted structure (there is no
// Flickr crawl; thesis Table 7.2 had 4,919 users).
//
// Data model. A user has photos, a contact list and group memberships; a
// photo has visual features X, tags T, a date D, a geo-location L and
// comments C (each with its author); users mark favourite photos.
//
// Generator (every draw from one std::mt19937_64 seeded by `seed`):
//   * Latent interests: each user has a primary topic (uniform) and two
//     secondary topics; interest θ_u = primary_weight on the primary, the rest
//     split between the secondaries. Each user lives in a home city
//     (Zipf(1) over num_cities).
//   * Photos: 1 + Poisson(mean_photos) per user; topic ~ θ_u; visual feature =
//     topic centre (N(0, I)) + N(0, visual_noise²) noise (a large noise is the
//     semantic gap of raw visual features); tags: each of the topic's
//     tags_per_topic tags with p_topic_tag, plus Poisson(mean_noise_tags) tags
//     from a Zipf(1) general vocabulary; date uniform over ten years;
//     location: home city (p_home), a landmark of the photo's topic
//     (p_landmark), else anywhere (jitter 0.05°).
//   * Groups: each has a topic and a Zipf popularity; a user joins
//     1 + Poisson(mean_groups) groups, of an interest topic with p_group_interest,
//     else any group, by popularity.
//   * Friendships (undirected, both contact lists): each user initiates
//     1 + Poisson(mean_initiated_friends) ties: with p_friend_interest to a
//     user sharing a topic drawn from θ_u (interest), with p_friend_geo to a
//     user of the same home city (geography), else to anyone.
//   * Comments: Poisson(mean_comments) per photo; the author is a friend of the
//     owner with p_comment_friend, else a user whose primary topic is the
//     photo's topic — comments concentrate on friends.
//   * Favourites: Poisson(mean_faves) per user; a friend's photo with
//     p_fave_friend, else a photo drawn by a global log-normal "quality"
//     popularity — favourites are mostly noise.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/common/status.h"

namespace kls {

struct CommunityOptions {
  int num_users = 2000;            ///< users (>= 2)
  int num_topics = 20;             ///< latent interests (>= 1)
  int num_cities = 30;             ///< home cities (>= 1)
  int num_groups = 300;            ///< interest groups (>= 1)
  int visual_dim = 32;             ///< visual feature dimension (>= 1)
  double visual_noise = 2.0;       ///< photo feature noise std (>= 0); topic centres are N(0, I)
  double primary_weight = 0.6;     ///< interest mass on the primary topic, in [0, 1]
  double mean_photos = 15.0;       ///< photos per user − 1, Poisson mean (>= 0)
  int tags_per_topic = 15;         ///< tags of each topic (>= 1)
  double p_topic_tag = 0.25;       ///< P(each topic tag on a photo), in [0, 1]
  int noise_vocabulary = 500;      ///< general tags (>= 1)
  double mean_noise_tags = 3.0;    ///< noise tags per photo, Poisson mean (>= 0)
  double p_home = 0.6;             ///< P(photo taken in the home city), in [0, 1]
  double p_landmark = 0.2;         ///< P(photo at a landmark of its topic), in [0, 1 − p_home]
  int landmarks_per_topic = 3;     ///< (>= 1)
  double mean_groups = 5.0;        ///< groups per user − 1, Poisson mean (>= 0)
  double p_group_interest = 0.8;   ///< P(a joined group is of an interest topic), in [0, 1]
  double mean_initiated_friends = 5.0;  ///< friendships a user initiates − 1, Poisson mean (>= 0)
  double p_friend_interest = 0.45; ///< P(tie from a shared interest), in [0, 1]
  double p_friend_geo = 0.45;      ///< P(tie from the same city), in [0, 1 − p_friend_interest]
  double mean_comments = 1.5;      ///< comments per photo, Poisson mean (>= 0)
  double p_comment_friend = 0.7;   ///< P(commenter is a friend of the owner), in [0, 1]
  double mean_faves = 10.0;        ///< favourites per user, Poisson mean (>= 0)
  double p_fave_friend = 0.1;      ///< P(a favourite is a friend's photo), in [0, 1]
  uint64_t seed = 1;

  Status Validate() const;
};

struct Comment {
  int photo = 0;   ///< commented photo
  int author = 0;  ///< user who wrote it
};

/// Bounds on a social data set from outside (an upload's header, the CSV
/// directory reader): the user kernels are dense num_users × num_users.
inline constexpr int kMaxCommunityUsers = 20'000;
inline constexpr int kMaxCommunityGroups = 1'000'000;
inline constexpr int kMaxCommunityVocabulary = 10'000'000;

struct Community {
  int num_users = 0;
  int num_groups = 0;
  // Photos (Definition 7.3).
  std::vector<int> photo_owner;               ///< owner of each photo
  Eigen::MatrixXd photo_visual;               ///< photos × d
  Eigen::SparseMatrix<double> photo_tags;     ///< photos × vocabulary, binary
  std::vector<int> photo_day;                 ///< date, days since the epoch of the set
  std::vector<double> photo_latitude, photo_longitude;  ///< degrees
  std::vector<Comment> comments;
  // Users (Definition 7.2).
  std::vector<std::vector<int>> contacts;     ///< contact list of each user (sorted)
  std::vector<std::vector<int>> groups;       ///< groups of each user (sorted)
  std::vector<std::pair<int, int>> favourites;  ///< (user, photo)
  // Planted truth (not visible to the kernels).
  std::vector<int> primary_topic;
  std::vector<int> home_city;

  int num_photos() const { return static_cast<int>(photo_owner.size()); }
  /// Checks every index (owners, authors, contacts, groups, favourites) and
  /// the shapes; INVALID_ARGUMENT naming the first bad entry.
  Status Validate() const;
};

StatusOr<Community> GenerateCommunity(const CommunityOptions& options);

}  // namespace kls
