// Clustering metrics against hand-computed values and O(n²) / dense-table
// references; k-NN accuracy on a hand-worked line and on separated blobs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "core/eval/metrics.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

std::vector<int> RandomLabels(int n, int num_labels, std::mt19937_64& rng) {
  std::vector<int> labels(n);
  for (int& l : labels) l = static_cast<int>(rng() % num_labels);
  return labels;
}

// Straight from the definition: every unordered pair i < j.
double BrutePairAccuracy(const std::vector<int>& a, const std::vector<int>& b) {
  const int n = static_cast<int>(a.size());
  long agree = 0, pairs = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      ++pairs;
      if ((a[i] == a[j]) == (b[i] == b[j])) ++agree;
    }
  }
  return static_cast<double>(agree) / static_cast<double>(pairs);
}

// Textbook ratio form over a std::map contingency table.
double ReferenceNmi(const std::vector<int>& a, const std::vector<int>& b) {
  const double n = static_cast<double>(a.size());
  std::map<int, double> ca, cb;
  std::map<std::pair<int, int>, double> cab;
  for (size_t i = 0; i < a.size(); ++i) {
    ca[a[i]] += 1;
    cb[b[i]] += 1;
    cab[{a[i], b[i]}] += 1;
  }
  double ha = 0, hb = 0, mi = 0;
  for (const auto& [l, c] : ca) ha -= c / n * std::log(c / n);
  for (const auto& [l, c] : cb) hb -= c / n * std::log(c / n);
  for (const auto& [lab, c] : cab) mi += c / n * std::log(n * c / (ca[lab.first] * cb[lab.second]));
  if (ha + hb == 0) return 1.0;
  return 2 * mi / (ha + hb);
}

// ---------------------------------------------------------------- PairAccuracy

TEST(PairAccuracy, HandComputedExample) {
  // truth {0,0,0 | 1,1,1}, predicted {0,0 | 1,1 | 2,2}; n = 6, C(6,2) = 15 pairs.
  // Together in truth: 2·C(3,2) = 6. Together in predicted: 3·C(2,2) = 3.
  // Cells: (t0,p0)=2, (t0,p1)=1, (t1,p1)=1, (t1,p2)=2 → together in both: 1 + 1 = 2.
  // Disagreements = 6 + 3 − 2·2 = 5  →  PA = 1 − 5/15 = 2/3.
  const std::vector<int> truth = {0, 0, 0, 1, 1, 1};
  const std::vector<int> predicted = {0, 0, 1, 1, 2, 2};
  auto pa = PairAccuracy(truth, predicted);
  ASSERT_TRUE(pa.ok()) << pa.status();
  EXPECT_DOUBLE_EQ(*pa, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(*pa, BrutePairAccuracy(truth, predicted));
}

TEST(PairAccuracy, HandComputedCrossedAndSingleCluster) {
  // truth {0,0,1,1} vs predicted {0,1,0,1}: 6 pairs; together in truth 2 ({0,1},{2,3}),
  // in predicted 2 ({0,2},{1,3}), in both 0 → 4 disagreements → PA = 2/6 = 1/3.
  auto crossed = PairAccuracy({0, 0, 1, 1}, {0, 1, 0, 1});
  ASSERT_TRUE(crossed.ok());
  EXPECT_DOUBLE_EQ(*crossed, 1.0 / 3.0);
  // truth one cluster of 4 (6 pairs together) vs {0,0,1,1} (2 together, both in
  // truth's cluster) → 6 + 2 − 2·2 = 4 disagreements → PA = 1/3.
  auto single = PairAccuracy({5, 5, 5, 5}, {0, 0, 1, 1});
  ASSERT_TRUE(single.ok());
  EXPECT_DOUBLE_EQ(*single, 1.0 / 3.0);
  // n = 2, both apart in one and together in the other: the only pair disagrees.
  auto two = PairAccuracy({0, 1}, {3, 3});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, 0.0);
}

TEST(PairAccuracy, IdenticalPartitionsGiveOne) {
  std::mt19937_64 rng(7);
  const auto labels = RandomLabels(200, 6, rng);
  auto pa = PairAccuracy(labels, labels);
  ASSERT_TRUE(pa.ok());
  EXPECT_EQ(*pa, 1.0);
}

TEST(PairAccuracy, MatchesBruteForceOnRandomLabelings) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 150);
    const int k1 = 1 + static_cast<int>(rng() % 8), k2 = 1 + static_cast<int>(rng() % 8);
    const auto a = RandomLabels(n, k1, rng);
    const auto b = RandomLabels(n, k2, rng);
    auto pa = PairAccuracy(a, b);
    ASSERT_TRUE(pa.ok()) << pa.status();
    EXPECT_NEAR(*pa, BrutePairAccuracy(a, b), 1e-15) << "trial " << trial << " n=" << n;
  }
}

// ------------------------------------------------------------------------- NMI

TEST(Nmi, HandComputedExample) {
  // Same partitions as PairAccuracy.HandComputedExample, natural logs, n = 6.
  // H(C) = log 2 (two clusters of 3); H(Ĉ) = log 3 (three clusters of 2).
  // I = Σ (n_ab/n) log(n n_ab / (|a||b|)):
  //   (t0,p0): 2/6 · log(6·2/(3·2)) = (1/3) log 2
  //   (t0,p1): 1/6 · log(6·1/(3·2)) = 0
  //   (t1,p1): 1/6 · log(6·1/(3·2)) = 0
  //   (t1,p2): 2/6 · log(6·2/(3·2)) = (1/3) log 2        → I = (2/3) log 2.
  // NMI = 2I / (log 2 + log 3) = (4/3) log 2 / log 6 ≈ 0.515804.
  auto nmi = NormalizedMutualInformation({0, 0, 0, 1, 1, 1}, {0, 0, 1, 1, 2, 2});
  ASSERT_TRUE(nmi.ok()) << nmi.status();
  EXPECT_NEAR(*nmi, (4.0 / 3.0) * std::log(2.0) / std::log(6.0), 1e-14);
  EXPECT_NEAR(*nmi, 0.515804, 1e-6);
}

TEST(Nmi, HandComputedIndependentAndDegenerate) {
  // {0,0,1,1} vs {0,1,0,1}: every cell has n_ab = 1 = 4·1/(2·2) → log 1 = 0 → I = 0.
  auto independent = NormalizedMutualInformation({0, 0, 1, 1}, {0, 1, 0, 1});
  ASSERT_TRUE(independent.ok());
  EXPECT_NEAR(*independent, 0.0, 1e-15);
  // Both single clusters: H(C) + H(Ĉ) = 0, defined as 1.
  auto both_single = NormalizedMutualInformation({3, 3, 3}, {8, 8, 8});
  ASSERT_TRUE(both_single.ok());
  EXPECT_EQ(*both_single, 1.0);
  // Exactly one single cluster: I = 0, H(C) + H(Ĉ) = log 2 > 0 → 0.
  auto one_single = NormalizedMutualInformation({0, 0, 0, 0}, {0, 0, 1, 1});
  ASSERT_TRUE(one_single.ok());
  EXPECT_EQ(*one_single, 0.0);
  // n = 1 is a single cluster on both sides.
  auto one_point = NormalizedMutualInformation({4}, {0});
  ASSERT_TRUE(one_point.ok());
  EXPECT_EQ(*one_point, 1.0);
}

TEST(Nmi, IdenticalPartitionsGiveOne) {
  std::mt19937_64 rng(11);
  const auto labels = RandomLabels(300, 9, rng);
  auto nmi = NormalizedMutualInformation(labels, labels);
  ASSERT_TRUE(nmi.ok());
  EXPECT_DOUBLE_EQ(*nmi, 1.0);
}

TEST(Nmi, MatchesReferenceAndIsSymmetricInRange) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 200);
    const auto a = RandomLabels(n, 1 + static_cast<int>(rng() % 7), rng);
    const auto b = RandomLabels(n, 1 + static_cast<int>(rng() % 7), rng);
    auto ab = NormalizedMutualInformation(a, b);
    auto ba = NormalizedMutualInformation(b, a);
    ASSERT_TRUE(ab.ok() && ba.ok());
    const double ref = ReferenceNmi(a, b);
    EXPECT_NEAR(*ab, std::clamp(ref, 0.0, 1.0), 1e-12) << "trial " << trial;
    EXPECT_NEAR(*ab, *ba, 1e-12);
    EXPECT_GE(*ab, 0.0);
    EXPECT_LE(*ab, 1.0);
  }
}

// ------------------------------------------------------- shared properties

TEST(ClusteringMetrics, InvariantToLabelPermutationAndValues) {
  std::mt19937_64 rng(5);
  const auto truth = RandomLabels(120, 5, rng);
  const auto predicted = RandomLabels(120, 4, rng);
  // Rename predicted's labels by a permutation onto large, non-contiguous values.
  const std::vector<int> rename = {INT_MAX, 17, 0, 1000000};
  std::vector<int> renamed(predicted.size());
  for (size_t i = 0; i < predicted.size(); ++i) renamed[i] = rename[predicted[i]];
  std::vector<int> truth_renamed(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) truth_renamed[i] = (truth[i] + 3) % 5 * 11;

  auto pa = PairAccuracy(truth, predicted);
  auto pa_renamed = PairAccuracy(truth_renamed, renamed);
  auto nmi = NormalizedMutualInformation(truth, predicted);
  auto nmi_renamed = NormalizedMutualInformation(truth_renamed, renamed);
  ASSERT_TRUE(pa.ok() && pa_renamed.ok() && nmi.ok() && nmi_renamed.ok());
  EXPECT_EQ(*pa, *pa_renamed);
  EXPECT_NEAR(*nmi, *nmi_renamed, 1e-14);
  EXPECT_LT(*pa, 1.0);  // the labelings are random, so this is a real comparison
}

TEST(ClusteringMetrics, Errors) {
  const std::vector<int> twelve(12, 0), ten(10, 0);
  for (auto result : {PairAccuracy(twelve, ten), NormalizedMutualInformation(twelve, ten)}) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("predicted: has 10 entries but truth has 12"));
  }
  auto neg_truth = PairAccuracy({0, 1, 0, -1}, {0, 0, 0, 0});
  ASSERT_FALSE(neg_truth.ok());
  EXPECT_THAT(neg_truth.status().message(), HasSubstr("truth[3] = -1 is negative"));
  auto neg_pred = NormalizedMutualInformation({0, 1}, {-2, 0});
  ASSERT_FALSE(neg_pred.ok());
  EXPECT_THAT(neg_pred.status().message(), HasSubstr("predicted[0] = -2 is negative"));

  auto one = PairAccuracy({0}, {0});
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(one.status().message(), HasSubstr("truth: has 1 entries but at least 2"));
  auto empty = NormalizedMutualInformation({}, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("truth: has 0 entries"));
}

// ---------------------------------------------------------------- KnnAccuracy

// Six points on a line (r = 1):
//   index : 0    1    2    3     4     5
//   x     : 0.0  1.0  2.5  10.0  11.0  12.5
//   label : 0    0    1    1     1     0
Eigen::MatrixXd LinePoints() {
  Eigen::MatrixXd x(6, 1);
  x << 0.0, 1.0, 2.5, 10.0, 11.0, 12.5;
  return x;
}
const std::vector<int> kLineLabels = {0, 0, 1, 1, 1, 0};

TEST(KnnAccuracy, HandComputedLine) {
  // k = 1: 0→1 (0 ✓), 1→0 (0 ✓), 2→1 (0 ✗), 3→4 (1 ✓), 4→3 (1 ✓), 5→4 (1 ✗)  → 4/6.
  // k = 2 (ties go to the nearest neighbour's class):
  //   0: {1:0, 2:1} tie → 0 ✓;  1: {0:0, 2:1} tie → 0 ✓;  2: {1:0, 0:0} → 0 ✗;
  //   3: {4:1, 5:0} tie → 1 ✓;  4: {3:1, 5:0} tie → 1 ✓;  5: {4:1, 3:1} → 1 ✗  → 4/6.
  //   (A "smallest label wins" rule would give 2/6 here.)
  // k = 3: 0: {1,2,3} → 0,1,1 → 1 ✗;  1: {0,2,3} → 0,1,1 → 1 ✗;  2: {1,0,3} → 0,0,1 → 0 ✗;
  //        3: {4,5,2} → 1,0,1 → 1 ✓;  4: {3,5,2} → 1,0,1 → 1 ✓;  5: {4,3,2} → 1,1,1 → 1 ✗  → 2/6.
  const Eigen::MatrixXd x = LinePoints();
  for (const auto& [k, expected] : std::vector<std::pair<int, double>>{{1, 4.0 / 6}, {2, 4.0 / 6}, {3, 2.0 / 6}}) {
    auto acc = KnnAccuracy(x, kLineLabels, k);
    ASSERT_TRUE(acc.ok()) << acc.status();
    EXPECT_DOUBLE_EQ(*acc, expected) << "k = " << k;
  }
}

TEST(KnnAccuracy, SeparatedBlobsGiveOne) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 1.0);
  const int per = 25, dim = 4;
  Eigen::MatrixXd x(3 * per, dim);
  std::vector<int> labels(3 * per);
  for (int i = 0; i < 3 * per; ++i) {
    labels[i] = i % 3;
    for (int j = 0; j < dim; ++j) x(i, j) = noise(rng) + (j == 0 ? 20.0 * labels[i] : 0.0);
  }
  for (int threads : {1, 3}) {
    auto acc = KnnAccuracy(x, labels, 5, threads);
    ASSERT_TRUE(acc.ok()) << acc.status();
    EXPECT_EQ(*acc, 1.0);
  }
  // Labels shuffled independently of the geometry: about chance level (1/3).
  // (A rotation of the interleaved labels would only rename the classes.)
  std::vector<int> wrong = labels;
  std::shuffle(wrong.begin(), wrong.end(), rng);
  auto bad = KnnAccuracy(x, wrong, 5);
  ASSERT_TRUE(bad.ok());
  EXPECT_LT(*bad, 0.6);
}

TEST(KnnAccuracy, Errors) {
  const Eigen::MatrixXd x = LinePoints();
  auto k0 = KnnAccuracy(x, kLineLabels, 0);
  ASSERT_FALSE(k0.ok());
  EXPECT_THAT(k0.status().message(), HasSubstr("k = 0 must be at least 1"));
  auto kn = KnnAccuracy(x, kLineLabels, 6);
  ASSERT_FALSE(kn.ok());
  EXPECT_THAT(kn.status().message(), HasSubstr("k = 6 must be less than the number of points n = 6"));
  auto size = KnnAccuracy(x, {0, 1, 0}, 1);
  ASSERT_FALSE(size.ok());
  EXPECT_THAT(size.status().message(), HasSubstr("labels: has 3 entries but the embedding has 6 rows"));
  auto neg = KnnAccuracy(x, {0, 0, 1, -1, 1, 0}, 1);
  ASSERT_FALSE(neg.ok());
  EXPECT_THAT(neg.status().message(), HasSubstr("labels[3] = -1 is negative"));
  Eigen::MatrixXd nan = x;
  nan(4, 0) = std::numeric_limits<double>::quiet_NaN();
  auto nonfinite = KnnAccuracy(nan, kLineLabels, 1);
  ASSERT_FALSE(nonfinite.ok());
  EXPECT_THAT(nonfinite.status().message(), HasSubstr("embedding[4][0]"));
  auto empty = KnnAccuracy(Eigen::MatrixXd(0, 2), {}, 1);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kls
