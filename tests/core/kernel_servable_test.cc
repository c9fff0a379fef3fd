// KernelServable (core/serving/kernel_servable.h): a kernel with its index and
// attachments answers the service's queries in core terms — the same answers
// as the underlying core calls, the model queries refused without their
// model, and label checks naming the entry.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>

#include "core/ranking/rerank.h"
#include "core/serving/kernel_servable.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const LearnedKernel> RandomKernel(int n, int r, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  LearnedKernel::Embedding v(n, r);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < r; ++j) v(i, j) = normal(rng);
  auto k = LearnedKernel::FromEmbedding(std::move(v));
  EXPECT_TRUE(k.ok()) << k.status();
  return std::make_shared<const LearnedKernel>(std::move(k).value());
}

TEST(KernelServable, TopKAndReRankAnswerLikeTheKernel) {
  const auto kernel = RandomKernel(30, 4, 1);
  const KernelServable plain(kernel, nullptr, nullptr);
  auto top = plain.TopKOfItem(3, 5, true, "item", SolveControl());
  ASSERT_TRUE(top.ok()) << top.status();
  const std::vector<ScoredItem> expected = kernel->TopK(3, 5, true);
  ASSERT_EQ(top->size(), expected.size());
  for (size_t t = 0; t < expected.size(); ++t) EXPECT_EQ((*top)[t].index, expected[t].index);
  EXPECT_THAT(plain.TopKOfItem(30, 5, true, "item", SolveControl()).status().message(), HasSubstr("item"));
  EXPECT_THAT(plain.TopKOfVector(Eigen::VectorXd::Ones(3), 5, SolveControl()).status().message(),
              HasSubstr("vector has 3 values but the kernel has rank 4"));

  const std::vector<int> candidates = {0, 4, 9, 16, 25};
  int iterations = 0;
  auto ranked = plain.ReRank(candidates, Eigen::VectorXd(), VisualRankOptions(), 2, &iterations, SolveControl());
  ASSERT_TRUE(ranked.ok()) << ranked.status();
  auto full = ReRankCandidates(*kernel, candidates, Eigen::VectorXd(), VisualRankOptions());
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(ranked->size(), 2u);
  EXPECT_EQ((*ranked)[0].index, (*full)[0].index);
  EXPECT_EQ((*ranked)[1].index, (*full)[1].index);
  EXPECT_GT(iterations, 0);
}

TEST(KernelServable, ModelQueriesNeedTheirModel) {
  const KernelServable plain(RandomKernel(10, 2, 2), nullptr, nullptr);
  EXPECT_FALSE(plain.has_classifier());
  EXPECT_FALSE(plain.has_social_graph());
  EXPECT_EQ(plain.Classify(Eigen::MatrixXd::Ones(1, 2), SolveControl()).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(plain.Recommend(0, 3, false, SolveControl()).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(plain.SocialStrength({0}, {1}, SolveControl()).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(plain.ClassifyUsers({0, 1}, {0, 1}, false, SolveControl()).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(KernelServable, SocialQueriesUseTheStrengthKernelAndCheckLabels) {
  const int n = 8;
  const auto kernel = RandomKernel(n, 3, 3);
  auto attachments = std::make_shared<ModelAttachments>();
  attachments->social = SocialGraph();
  attachments->social->num_groups = 2;
  attachments->social->contacts.assign(n, {});
  attachments->social->groups.assign(n, {});
  attachments->social->contacts[0] = {1};
  const KernelServable social(kernel, nullptr, attachments);
  auto strength = social.SocialStrength({0, 2}, {1, 5}, SolveControl());
  ASSERT_TRUE(strength.ok()) << strength.status();
  EXPECT_DOUBLE_EQ((*strength)[0], kernel->value(0, 1));
  EXPECT_DOUBLE_EQ((*strength)[1], kernel->value(2, 5));
  auto friends = social.Recommend(0, 3, false, SolveControl());
  ASSERT_TRUE(friends.ok()) << friends.status();
  for (const ScoredItem& s : *friends) EXPECT_NE(s.index, 1) << "a contact is not recommended";
  EXPECT_THAT(social.ClassifyUsers({0, 1}, {0, 1000}, false, SolveControl()).status().message(),
              HasSubstr("labels[1] = 1000 must be a class id in [0, 1000)"));
  EXPECT_THAT(social.ClassifyUsers({0, 1}, {2, 2}, false, SolveControl()).status().message(),
              HasSubstr("labels are all 2"));
}

TEST(KernelServable, EveryQueryStopsOnTheCallsControl) {
  const int n = 8;
  const auto kernel = RandomKernel(n, 3, 4);
  auto attachments = std::make_shared<ModelAttachments>();
  attachments->social = SocialGraph();
  attachments->social->contacts.assign(n, {});
  attachments->social->groups.assign(n, {});
  const KernelServable social(kernel, nullptr, attachments);
  SolveControl cancelled;
  cancelled.cancel.Cancel();
  SolveControl expired;
  expired.deadline = SolveControl::Clock::now() - std::chrono::milliseconds(1);
  for (const SolveControl* control : {&cancelled, &expired}) {
    const StatusCode code = control == &cancelled ? StatusCode::kCancelled : StatusCode::kDeadlineExceeded;
    EXPECT_EQ(social.TopKOfItem(0, 3, true, "item", *control).status().code(), code);
    EXPECT_EQ(social.TopKOfVector(Eigen::VectorXd::Ones(3), 3, *control).status().code(), code);
    EXPECT_EQ(social.SocialStrength({0}, {1}, *control).status().code(), code);
    EXPECT_EQ(social.Recommend(0, 3, false, *control).status().code(), code);
  }
}

TEST(KernelServable, LinearMapExtendsFeatureRowsExactlyWithoutTrainingFeatures) {
  // V = X L for 20 training rows of 3 features, L 3 × 2; the scaling is z-score.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd x(20, 3), l(3, 2);
  for (int i = 0; i < x.size(); ++i) x(i) = 5 + 2 * normal(rng);
  for (int i = 0; i < l.size(); ++i) l(i) = normal(rng);
  auto scaler = FeatureScaler::Fit(x, FeatureScaling::kZScore);
  ASSERT_TRUE(scaler.ok());
  auto kernel = LearnedKernel::FromEmbedding(LearnedKernel::Embedding(*scaler->Apply(x) * l));
  ASSERT_TRUE(kernel.ok());
  const std::string map_bytes = SerializeLinearMap(l), scaling_bytes = scaler->Serialize();
  auto attachments = ParseAttachments(*kernel, {{kLinearMapAttachment, &map_bytes},
                                                {kFeatureScalingAttachment, &scaling_bytes}});
  ASSERT_TRUE(attachments.ok()) << attachments.status();
  ASSERT_TRUE(attachments->linear_map.has_value());
  const KernelServable servable(std::make_shared<const LearnedKernel>(*kernel), nullptr,
                                std::make_shared<const ModelAttachments>(*attachments));
  EXPECT_TRUE(servable.has_linear_map());
  Eigen::MatrixXd rows(2, 3);
  rows << 1, 2, 3, 7, 5, 4;
  auto v = servable.ExtendToFeatures(Eigen::MatrixXd(), rows, {}, "features", SolveControl());
  ASSERT_TRUE(v.ok()) << v.status();
  const Eigen::MatrixXd want = *scaler->Apply(rows) * l;
  EXPECT_LE((Eigen::MatrixXd(*v) - want).cwiseAbs().maxCoeff(), 1e-12);
  // A training row maps to its own row of V.
  auto own = servable.ExtendToFeatures(Eigen::MatrixXd(), x.topRows(1), {}, "features", SolveControl());
  ASSERT_TRUE(own.ok());
  EXPECT_LE((Eigen::MatrixXd(*own) - Eigen::MatrixXd(kernel->embedding().topRows(1))).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_THAT(servable.ExtendToFeatures(Eigen::MatrixXd(), Eigen::MatrixXd::Ones(1, 2), {}, "features", SolveControl())
                  .status()
                  .message(),
              HasSubstr("features: 2 features per row but the kernel's linear map takes 3"));
  // A map of another rank than the kernel's, or damaged bytes, is DATA_LOSS.
  const std::string wrong = SerializeLinearMap(Eigen::MatrixXd::Ones(3, 3));
  auto bad = ParseAttachments(*kernel, {{kLinearMapAttachment, &wrong}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  const std::string truncated = map_bytes.substr(0, map_bytes.size() - 3);
  EXPECT_EQ(ParseAttachments(*kernel, {{kLinearMapAttachment, &truncated}}).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace kls
