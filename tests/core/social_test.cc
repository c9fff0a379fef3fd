// Tests of core/social: harmonic classification (§7.5.3), user kernels
// (§7.2.2), PSD repair, kernel target alignment (Theorem 7.35),
// recommendations and the community generator.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <random>
#include <algorithm>
#include <cmath>
#include <string>

#include "core/data/csv_reader.h"
#include "core/social/harmonic_classifier.h"

namespace kls {
namespace {

std::string DataPath(const char* name) { return std::string(KLS_TEST_DATA_DIR) + "/" + name; }

TEST(Harmonic, KarateClubFromOneLabelPerClub) {
  auto data = ReadCsvFile(DataPath("karate_club.csv"));
  ASSERT_TRUE(data.ok()) << data.status();
  const Eigen::MatrixXd w = data->features;
  ASSERT_EQ(w.rows(), 34);
  // Node 0 (the instructor) and node 33 (the administrator) lead the two clubs.
  const std::vector<int> labelled = {0, 33};
  const std::vector<int> labels = {data->labels[0], data->labels[33]};
  ASSERT_NE(labels[0], labels[1]);
  auto r = HarmonicClassify(w, labelled, labels);
  ASSERT_TRUE(r.ok()) << r.status();
  int correct = 0;
  for (int i = 0; i < 34; ++i) correct += r->labels[i] == data->labels[i];
  const double accuracy = correct / 34.0;
  std::printf("karate harmonic accuracy = %.4f (%d / 34)\n", accuracy, correct);
  RecordProperty("karate_accuracy", std::to_string(accuracy));
  EXPECT_GE(accuracy, 0.9);  // ZGL03-style harmonic labelling recovers the split up to a few boundary members

  // Harmonic property: every unlabelled F_i is the weighted mean of its neighbours.
  for (int i = 1; i < 33; ++i) {
    const double d = w.row(i).sum() - w(i, i);
    const Eigen::RowVectorXd mean = (w.row(i) * r->scores - w(i, i) * r->scores.row(i)) / d;
    EXPECT_LT((r->scores.row(i) - mean).cwiseAbs().maxCoeff(), 1e-12) << "node " << i;
  }
  // Independent check: label propagation (Jacobi sweeps with clamped labels) converges to the same F.
  Eigen::MatrixXd f = Eigen::MatrixXd::Zero(34, 2);
  f(0, labels[0]) = 1;
  f(33, labels[1]) = 1;
  for (int sweep = 0; sweep < 20000; ++sweep) {
    Eigen::MatrixXd next = f;
    for (int i = 1; i < 33; ++i) next.row(i) = w.row(i) * f / w.row(i).sum();
    f = next;
  }
  EXPECT_LT((f - r->scores).cwiseAbs().maxCoeff(), 1e-9);
}

TEST(Harmonic, DisconnectedUnlabelledComponentIsAnError) {
  Eigen::MatrixXd w = Eigen::MatrixXd::Zero(4, 4);
  w(0, 1) = w(1, 0) = 1;
  w(2, 3) = w(3, 2) = 1;
  auto r = HarmonicClassify(w, {0}, {1}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("node 2"), std::string::npos);
  w(0, 1) = -1;
  auto r2 = HarmonicClassify(w, {0}, {1}, 2);
  EXPECT_EQ(r2.status().code(), StatusCode::kInvalidArgument);
  auto r3 = HarmonicClassify(Eigen::MatrixXd::Identity(3, 3), {5}, {0}, 2);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("labelled[0] = 5"), std::string::npos);
}

}  // namespace
}  // namespace kls

// ---------------------------------------------------------------------------
// Community generator, user kernels, KTA, recommendation.
#include "core/social/community.h"
#include "core/social/kernel_alignment.h"
#include "core/social/recommendation.h"
#include "core/social/user_kernels.h"
#include "core/social/social_model.h"
#include "core/social/pairwise_klr.h"

namespace kls {
namespace {

// Three users, hand-made: checks each §7.2.2 count kernel against its definition.
Community TinyCommunity() {
  Community c;
  c.num_users = 3;
  c.num_groups = 3;
  c.photo_owner = {0, 0, 1, 2};
  c.photo_visual = Eigen::MatrixXd::Zero(4, 2);
  c.photo_visual << 0, 0, 2, 0, 1, 0, 5, 5;
  c.photo_tags.resize(4, 3);
  c.photo_tags.insert(0, 0) = 1;
  c.photo_tags.insert(2, 0) = 1;
  c.photo_tags.insert(3, 2) = 1;
  c.photo_day = {1, 2, 3, 4};
  c.photo_latitude = {10.1, 40.2, 10.2, -30};
  c.photo_longitude = {20.1, 50.2, 20.2, 100};
  c.comments = {{0, 1}, {2, 0}, {2, 0}, {3, 0}};
  c.contacts = {{1, 2}, {0}, {0}};
  c.groups = {{0, 1}, {1, 2}, {1}};
  c.favourites = {{0, 3}, {1, 3}, {2, 1}};
  return c;
}

TEST(UserKernels, CountKernelsFollowTheirDefinitions) {
  UserKernelOptions o;
  o.repair_psd = false;
  auto k = ComputeUserKernels(TinyCommunity(), o);
  ASSERT_TRUE(k.ok()) << k.status();
  // Comments between 0 and 1: one on 0's photo by 1, two on 1's photo by 0.
  EXPECT_EQ((*k)[UserKernel::kComment](0, 1), 3.0);
  EXPECT_EQ((*k)[UserKernel::kComment](0, 2), 1.0);
  EXPECT_EQ((*k)[UserKernel::kGroup](0, 1), 1.0);  // group 1
  EXPECT_EQ((*k)[UserKernel::kGroup](1, 1), 2.0);  // diagonal = groups joined
  EXPECT_EQ((*k)[UserKernel::kContact](1, 2), 1.0);  // common friend 0
  EXPECT_EQ((*k)[UserKernel::kLocation](0, 1), 1.0);  // both near (10, 20)
  EXPECT_EQ((*k)[UserKernel::kLocation](0, 0), 2.0);
  EXPECT_EQ((*k)[UserKernel::kFave](0, 1), 1.0);     // photo 3
  // Visual: centroids (1,0), (1,0), (5,5): identical centroids give 1.
  EXPECT_NEAR((*k)[UserKernel::kVisual](0, 1), 1.0, 1e-15);
  EXPECT_LT((*k)[UserKernel::kVisual](0, 2), 1.0);
  // Textual: users 0 and 1 both have only tag 0 → cosine 1; user 2 shares nothing.
  EXPECT_NEAR((*k)[UserKernel::kTextual](0, 1), 1.0, 1e-12);
  EXPECT_EQ((*k)[UserKernel::kTextual](0, 2), 0.0);
}

TEST(UserKernels, PsdRepairGivesPsdMatricesOnAGeneratedCommunity) {
  CommunityOptions o;
  o.num_users = 150;
  o.num_groups = 40;
  auto c = GenerateCommunity(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto k = ComputeUserKernels(*c);
  ASSERT_TRUE(k.ok()) << k.status();
  for (int t = 0; t < kNumUserKernels; ++t) {
    const Eigen::MatrixXd& m = k->k[t];
    EXPECT_LT((m - m.transpose()).cwiseAbs().maxCoeff(), 1e-12) << UserKernelName(static_cast<UserKernel>(t));
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(m, Eigen::EigenvaluesOnly);
    EXPECT_GT(es.eigenvalues()[0], -1e-9) << UserKernelName(static_cast<UserKernel>(t));
  }
  // Lanczos path of the smallest eigenvalue agrees with the dense one.
  Eigen::MatrixXd big = Eigen::MatrixXd::Random(700, 700);
  big = (big + big.transpose()).eval();
  auto lmin = SmallestEigenvalue(big);
  ASSERT_TRUE(lmin.ok());
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(big, Eigen::EigenvaluesOnly);
  EXPECT_NEAR(*lmin, es.eigenvalues()[0], 1e-6 * std::abs(es.eigenvalues()[0]));
}

TEST(Community, DeterministicPlantedAndValidated) {
  CommunityOptions o;
  o.num_users = 300;
  auto a = GenerateCommunity(o), b = GenerateCommunity(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->contacts, b->contacts);
  EXPECT_EQ(a->comments.size(), b->comments.size());
  // Comments concentrate on friends: most comment pairs are contacts.
  int friend_comments = 0;
  for (const Comment& cm : a->comments) {
    const auto& f = a->contacts[a->photo_owner[cm.photo]];
    friend_comments += std::binary_search(f.begin(), f.end(), cm.author);
  }
  EXPECT_GT(friend_comments, static_cast<int>(a->comments.size() / 2));
  o.p_friend_interest = 0.7;
  o.p_friend_geo = 0.7;
  auto bad = GenerateCommunity(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p_friend_interest + options.p_friend_geo"), std::string::npos);
  Community broken = TinyCommunity();
  broken.contacts[1] = {7};
  EXPECT_EQ(broken.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(Kta, Theorem735WeightsAreOptimal) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  const int n = 40, p = 5;
  std::vector<Eigen::MatrixXd> ks;
  for (int t = 0; t < p; ++t) {
    Eigen::MatrixXd x(n, 3);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < 3; ++j) x(i, j) = g(rng);
    ks.push_back(x * x.transpose());
  }
  Eigen::MatrixXd y = 0.7 * ks[0] + 0.2 * ks[2];
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) y(i, j) = y(j, i) = y(i, j) + 0.5 * g(rng);
  std::vector<const Eigen::MatrixXd*> ptrs;
  for (auto& k : ks) ptrs.push_back(&k);
  auto r = SolveKta(ptrs, y);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->weights.norm(), 1.0, 1e-12);
  EXPECT_GE(r->weights.minCoeff(), 0.0);
  EXPECT_LT(r->kkt_residual, 1e-7 * r->m.cwiseAbs().maxCoeff());
  // No random non-negative θ aligns better (the theorem's claim), and the alignment is recomputed directly.
  Eigen::MatrixXd kstar = Eigen::MatrixXd::Zero(n, n);
  for (int t = 0; t < p; ++t) kstar += r->weights[t] * ks[t];
  EXPECT_NEAR(CenteredAlignment(kstar, y), r->alignment, 1e-10);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 300; ++trial) {
    Eigen::MatrixXd k = Eigen::MatrixXd::Zero(n, n);
    for (int t = 0; t < p; ++t) k += (trial % 3 == 0 && t % 2 ? 0.0 : u(rng)) * ks[t];
    EXPECT_LE(CenteredAlignment(k, y), r->alignment + 1e-12);
  }
  // Centred product identity against an explicit H K H.
  const Eigen::MatrixXd h = Eigen::MatrixXd::Identity(n, n) - Eigen::MatrixXd::Constant(n, n, 1.0 / n);
  EXPECT_NEAR(CenteredProduct(ks[1], y, {}), (h * ks[1] * h).cwiseProduct(h * y * h).sum(), 1e-8);
  std::vector<int> sub = {0, 3, 5, 7, 11, 13};
  Eigen::MatrixXd a(6, 6), b(6, 6);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) a(i, j) = ks[1](sub[i], sub[j]), b(i, j) = y(sub[i], sub[j]);
  EXPECT_NEAR(CenteredProduct(ks[1], y, sub), CenteredProduct(a, b, {}), 1e-10);
  EXPECT_FALSE(SolveKta({}, y).ok());
}

TEST(Recommendation, GroupScoreIsStrengthWeightedMembership) {
  const Community c = TinyCommunity();
  Eigen::MatrixXd f(3, 3);
  f << 1, 0.5, 0.2, 0.5, 1, 0.1, 0.2, 0.1, 1;
  // User 2 is in group 1; s(0, 2) = f(2,0)·1 = 0.2, s(2, 2) = f(2,1)·1 = 0.1.
  const auto rec = RecommendGroups(f, c, 2, 3);
  ASSERT_EQ(rec.size(), 2u);
  EXPECT_EQ(rec[0].index, 0);
  EXPECT_NEAR(rec[0].score, 0.2, 1e-15);
  EXPECT_EQ(rec[1].index, 2);
  EXPECT_NEAR(rec[1].score, 0.1, 1e-15);
  // Friend suggestions exclude self and existing contacts.
  EXPECT_EQ(RecommendFriends(f, c, 1, 5).size(), 1u);
  EXPECT_EQ(RecommendFriends(f, c, 1, 5)[0].index, 2);
}

TEST(Recommendation, HoldoutHidesLinksSymmetrically) {
  CommunityOptions o;
  o.num_users = 200;
  auto c = GenerateCommunity(o);
  ASSERT_TRUE(c.ok());
  auto s = MakeHoldout(*c, 0.2, 0.5, 9);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->test_users.size(), 40u);
  for (int u : s->test_users)
    for (int v : s->hidden_friends[u]) {
      const auto& cu = s->observed.contacts[u];
      const auto& cv = s->observed.contacts[v];
      EXPECT_FALSE(std::binary_search(cu.begin(), cu.end(), v));
      EXPECT_FALSE(std::binary_search(cv.begin(), cv.end(), u));
    }
  // A strength that knows the hidden links scores perfectly at m = 1.
  Eigen::MatrixXd oracle = Eigen::MatrixXd::Zero(200, 200);
  for (int u : s->test_users)
    for (int v : s->hidden_friends[u]) oracle(u, v) = 1.0;
  EXPECT_NEAR(FriendAccuracy(oracle, *s, 1)[0], 1.0, 1e-15);
  EXPECT_FALSE(MakeHoldout(*c, 1.5, 0.5, 1).ok());
}

TEST(SocialModel, ValidateNamesTheServiceFieldsUnderThePath) {
  SocialStrengthOptions o;
  EXPECT_TRUE(o.Validate("social_strength").ok());
  o.kernels.cell_degrees = 0;
  EXPECT_EQ(o.Validate("social_strength").message(), "social_strength.cell_degrees = 0 must be finite and > 0");
  EXPECT_EQ(o.Validate().message(), "options.cell_degrees = 0 must be finite and > 0");
  // The KLR options are checked (and named as the service's message spells them) only for kKlr.
  o = SocialStrengthOptions();
  o.klr.c = -1;
  EXPECT_TRUE(o.Validate("social_strength").ok());
  o.weighting = StrengthWeighting::kKlr;
  EXPECT_EQ(o.Validate("social_strength").message(), "social_strength.klr_c = -1 must be finite and > 0");
  o.klr.c = 1e-3;
  o.klr_pairs.negatives_per_user = 0;
  EXPECT_EQ(o.Validate("job.social").message(), "job.social.klr_negatives = 0 must be >= 1");
  o.klr_pairs.negatives_per_user = 10;
  o.klr.pair_kernel.link_weight = NAN;
  EXPECT_EQ(o.Validate("social_strength").message(),
            "social_strength.klr_bias_weight = 1 and klr_link_weight = nan must be finite and >= 0");
  o.klr.pair_kernel.link_weight = 1;
  o.klr.stop_window = 0;  // not a service field: named by its path in the core struct
  EXPECT_EQ(o.Validate("social_strength").message(), "social_strength.klr.stop_window = 0 must be >= 1");
  o.klr.stop_window = 3;
  o.klr_pairs.negative_pool_fraction = 2;
  EXPECT_EQ(o.Validate("social_strength").message(),
            "social_strength.klr_pairs.negative_pool_fraction = 2 must be in (0, 1]");
}

TEST(SocialModel, KlrWeightingLearnsTheSecondStageOnTheStoredKernel) {
  CommunityOptions o;
  o.num_users = 150;
  o.num_groups = 30;
  auto c = GenerateCommunity(o);
  ASSERT_TRUE(c.ok()) << c.status();
  SocialStrengthOptions so;
  so.weighting = StrengthWeighting::kKlr;
  so.klr.max_import_vectors = 20;
  auto m = LearnSocialStrength(*c, so);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->klr.has_value());
  // The first stage is the KTA combination (same weights as a kKta model).
  auto kta = LearnSocialStrength(*c, SocialStrengthOptions());
  ASSERT_TRUE(kta.ok());
  for (int t = 0; t < kNumUserKernels; ++t) EXPECT_NEAR(m->weights[t], kta->weights[t], 1e-12);
  EXPECT_FALSE(kta->klr.has_value());
  // (7.3) below ln 2 (α = 0), most training pairs ranked right, import set within the cap.
  EXPECT_LT(m->stats.final_objective, std::log(2.0));
  EXPECT_GT(m->klr_training_accuracy, 0.8);
  EXPECT_GT(m->klr_training_pairs, 150);
  EXPECT_LE(m->klr->import_pairs.size(), 20u);
  EXPECT_EQ(m->stats.iterations, static_cast<int>(m->klr->import_pairs.size()));
  // Served on the factored kernel it equals the dense σ(f) of pairwise_klr.h.
  auto served = KlrStrength::Create(m->strength, *m->klr);
  ASSERT_TRUE(served.ok()) << served.status();
  auto dense = SocialStrengthMatrix(m->strength.Dense(), *m->klr);
  ASSERT_TRUE(dense.ok());
  for (int u : {0, 17, 149}) EXPECT_LT((served->Row(m->strength, u) - dense->row(u).transpose()).norm(), 1e-10);
  // Contacts score higher than non-contacts on average (the model learned the contact graph).
  double in = 0, out = 0;
  int nin = 0, nout = 0;
  for (int u = 0; u < 150; ++u) {
    const Eigen::VectorXd row = served->Row(m->strength, u);
    for (int v = 0; v < 150; ++v) {
      if (v == u) continue;
      const bool contact = std::binary_search(c->contacts[u].begin(), c->contacts[u].end(), v);
      (contact ? in : out) += row[v];
      ++(contact ? nin : nout);
    }
  }
  ASSERT_GT(nin, 0);
  EXPECT_GT(in / nin, out / nout + 0.2);
  so.klr.c = -1;
  EXPECT_EQ(LearnSocialStrength(*c, so).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kls
