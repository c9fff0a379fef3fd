// Baselines of issue 43 (core/eval/baselines.h): the pairs-alone clustering
// recovers the must-link components and keeps cannot-link pairs apart; the RBF
// width chosen on the training pairs beats the linear kernel on two moons; the
// plain-kernel factors reproduce their kernels; the holdout split is
// stratified and seeded; the restricted pair accuracies match brute force.
#include "core/eval/baselines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "core/data/constraint_generators.h"
#include "core/data/synthetic.h"
#include "core/model/learned_kernel.h"
#include "core/npkl/cross_validation.h"

namespace kls {
namespace {

PairwiseConstraints Pairs(std::initializer_list<std::tuple<int, int, int>> list) {
  PairwiseConstraints c;
  for (auto [i, j, s] : list) c.pairs.push_back({i, j, s > 0 ? PairKind::kMustLink : PairKind::kCannotLink});
  return c;
}

// The Laplacian of a path over n points (both triangles stored).
Eigen::SparseMatrix<double> PathLaplacian(int n) {
  std::vector<Eigen::Triplet<double>> t;
  for (int i = 0; i + 1 < n; ++i) {
    t.emplace_back(i, i + 1, -1.0);
    t.emplace_back(i + 1, i, -1.0);
    t.emplace_back(i, i, 1.0);
    t.emplace_back(i + 1, i + 1, 1.0);
  }
  Eigen::SparseMatrix<double> l(n, n);
  l.setFromTriplets(t.begin(), t.end());
  return l;
}

// The diffusion kernel's eigenpairs are computed up to kDiffusionMaxPoints
// points and refused above, naming the limit (the guard and auto leave it out there).
TEST(Baselines, DiffusionBasisStopsAtItsPointLimit) {
  auto at_limit = DiffusionBasis(PathLaplacian(kDiffusionMaxPoints), 8);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_EQ(at_limit->vectors.rows(), kDiffusionMaxPoints);
  EXPECT_EQ(at_limit->vectors.cols(), 8);
  EXPECT_NEAR(at_limit->eigenvalues(0), 0.0, 1e-9);  // the path is connected: one zero eigenvalue
  EXPECT_GT(at_limit->eigenvalues(1), 0.0);
  auto above = DiffusionBasis(PathLaplacian(kDiffusionMaxPoints + 1), 8);
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(above.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(above.status().message(), ::testing::HasSubstr(std::to_string(kDiffusionMaxPoints)));
}

TEST(Baselines, PairsAloneRecoversComponentsAndSeparatesCannotLinks) {
  // Components {0,1,2}, {3,4}, {5,6,7} (must-links), pairwise cannot-links
  // between them, points 8 and 9 in no pair; k = 3 allows all of it.
  const PairwiseConstraints c =
      Pairs({{0, 1, 1}, {1, 2, 1}, {3, 4, 1}, {5, 6, 1}, {7, 6, 1}, {0, 3, -1}, {4, 5, -1}, {2, 7, -1}});
  for (uint64_t seed : {1, 2, 3}) {
    auto a = PairsAloneClustering(10, c, 3, seed);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_EQ(a->size(), 10u);
    for (const Pair& p : c.pairs) {
      if (p.kind == PairKind::kMustLink) {
        EXPECT_EQ((*a)[p.i], (*a)[p.j]) << p.i << "," << p.j;
      } else {
        EXPECT_NE((*a)[p.i], (*a)[p.j]) << p.i << "," << p.j;
      }
    }
    // Largest components first, each to an empty cluster; then the two
    // singletons go to the smallest cluster ({3,4}, then a 3-point one).
    std::map<int, int> size;
    for (int x : *a) ++size[x];
    EXPECT_EQ(size.size(), 3u);
    EXPECT_EQ(size[(*a)[3]], 3) << "points 8, 9 join the smallest cluster first";
  }
}

TEST(Baselines, PairsAloneKeepsConsistentLabelPairsApart) {
  // Protocol pairs drawn from 3 classes of 40: every must-link together, no
  // cannot-link together (the pairs are consistent with a 3-colouring).
  std::vector<int> labels;
  for (int i = 0; i < 120; ++i) labels.push_back(i % 3);
  for (const char* protocol : {"bcd", "admm", "simplenpkl"})
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    ConstraintProtocol request;
    request.name = protocol;
    request.seed = seed;
    auto c = GenerateProtocol(request, labels, "protocol");
    ASSERT_TRUE(c.ok());
    auto a = PairsAloneClustering(120, *c, 3, seed);
    ASSERT_TRUE(a.ok());
    int violated = 0;
    for (const Pair& p : c->pairs) violated += ((*a)[p.i] == (*a)[p.j]) != (p.kind == PairKind::kMustLink);
    EXPECT_EQ(violated, 0) << protocol << " seed " << seed;
  }
}

TEST(Baselines, PairsAloneRejectsBadArguments) {
  EXPECT_FALSE(PairsAloneClustering(0, {}, 1, 1).ok());
  EXPECT_FALSE(PairsAloneClustering(3, {}, 4, 1).ok());
  EXPECT_FALSE(PairsAloneClustering(3, Pairs({{0, 5, 1}}), 2, 1).ok());
  auto a = PairsAloneClustering(5, {}, 2, 1);  // no pairs: a balanced guess
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(std::count(a->begin(), a->end(), 0), 3);
}

TEST(Baselines, RbfFactorReproducesTheKernelExactAndNystrom) {
  auto data = MakeTwoMoons(300, kTwoMoonsDefaultNoise, 3);
  ASSERT_TRUE(data.ok());
  const Eigen::MatrixXd& x = data->features;
  const double width = 0.5;
  Eigen::MatrixXd k(x.rows(), x.rows());
  for (int i = 0; i < x.rows(); ++i)
    for (int j = 0; j < x.rows(); ++j) k(i, j) = std::exp(-(x.row(i) - x.row(j)).squaredNorm() / width);
  auto exact = RbfKernelFactor(x, width);
  ASSERT_TRUE(exact.ok());
  EXPECT_LT((*exact * exact->transpose() - k).cwiseAbs().maxCoeff(), 1e-8);
  RbfOptions nys;
  nys.max_exact_points = 100;
  nys.landmarks = 150;
  auto approx = RbfKernelFactor(x, width, nys);
  ASSERT_TRUE(approx.ok());
  EXPECT_EQ(approx->rows(), x.rows());
  EXPECT_LT((*approx * approx->transpose() - k).norm() / k.norm(), 0.01);
  EXPECT_FALSE(RbfKernelFactor(x, 0.0).ok());
  auto lin = LinearKernelFactor(x);
  ASSERT_TRUE(lin.ok());
  EXPECT_EQ(*lin, x);
}

TEST(Baselines, RbfWidthChosenOnPairsBeatsLinearOnTwoMoons) {
  auto data = MakeTwoMoons(300, kTwoMoonsDefaultNoise, 1);
  ASSERT_TRUE(data.ok());
  ConstraintProtocol request;
  request.name = "bcd";
  request.seed = 1;
  auto pairs = GenerateProtocol(request, data->labels, "protocol");
  ASSERT_TRUE(pairs.ok());
  RbfWidthOptions options;
  options.clusters = 2;
  auto sel = SelectRbfWidth(data->features, *pairs, options);
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  ASSERT_EQ(sel->scores.size(), options.multiples.size());
  EXPECT_GT(sel->median, 0);
  EXPECT_DOUBLE_EQ(sel->width, sel->multiples[sel->best_index] * sel->median);
  for (double s : sel->scores) EXPECT_LE(s, sel->scores[sel->best_index]);
  // The chosen width is narrow (the moons interleave at the median scale)…
  EXPECT_LT(sel->multiples[sel->best_index], 1.0);
  // … and scores well above the linear kernel, which cuts the moons straight.
  auto lin = LinearKernelFactor(data->features);
  ASSERT_TRUE(lin.ok());
  auto lin_kernel = LearnedKernel::FromEmbedding(LearnedKernel::Embedding(*lin));
  ASSERT_TRUE(lin_kernel.ok());
  auto lin_score = HeldOutClusterPairAccuracy(*lin_kernel, *pairs, 2);
  ASSERT_TRUE(lin_score.ok());
  EXPECT_GT(sel->scores[sel->best_index], *lin_score + 0.1)
      << "rbf " << sel->scores[sel->best_index] << " linear " << *lin_score;
  EXPECT_GT(sel->scores[sel->best_index], 0.85);
}

TEST(Baselines, HoldoutIsStratifiedAndSeeded) {
  std::vector<int> labels;
  for (int i = 0; i < 50; ++i) labels.push_back(0);
  for (int i = 0; i < 30; ++i) labels.push_back(7);
  for (int i = 0; i < 20; ++i) labels.push_back(2);
  std::shuffle(labels.begin(), labels.end(), std::mt19937_64(5));
  auto a = StratifiedHoldout(labels, 0.3, 11);
  auto b = StratifiedHoldout(labels, 0.3, 11);
  auto c = StratifiedHoldout(labels, 0.3, 12);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->heldout, b->heldout);
  EXPECT_EQ(a->train, b->train);
  EXPECT_NE(a->heldout, c->heldout);
  std::map<int, int> held;
  for (int i : a->heldout) ++held[labels[i]];
  EXPECT_EQ(held[0], 15);
  EXPECT_EQ(held[7], 9);
  EXPECT_EQ(held[2], 6);
  std::set<int> all(a->train.begin(), a->train.end());
  for (int i : a->heldout) EXPECT_TRUE(all.insert(i).second) << "point " << i << " on both sides";
  EXPECT_EQ(all.size(), labels.size());
  EXPECT_TRUE(std::is_sorted(a->train.begin(), a->train.end()));
  // A class of one point stays in training.
  auto d = StratifiedHoldout({0, 0, 0, 1}, 0.5, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->heldout.size(), 2u);
  EXPECT_FALSE(StratifiedHoldout(labels, 0.0, 1).ok());
  EXPECT_FALSE(StratifiedHoldout(labels, 1.0, 1).ok());
  EXPECT_FALSE(StratifiedHoldout({0, 1}, 0.5, 1).ok());
}

TEST(Baselines, RestrictedPairAccuraciesMatchBruteForce) {
  std::mt19937_64 rng(3);
  std::vector<int> truth(60), pred(60);
  for (int i = 0; i < 60; ++i) {
    truth[i] = static_cast<int>(rng() % 3);
    pred[i] = static_cast<int>(rng() % 4) * 5;
  }
  auto split = StratifiedHoldout(truth, 0.3, 2);
  ASSERT_TRUE(split.ok());
  const auto& t = split->train;
  const auto& h = split->heldout;
  int agree = 0;
  for (int i : t)
    for (int j : h) agree += (truth[i] == truth[j]) == (pred[i] == pred[j]);
  auto cross = CrossPairAccuracy(truth, pred, t, h);
  ASSERT_TRUE(cross.ok());
  EXPECT_NEAR(*cross, static_cast<double>(agree) / (t.size() * h.size()), 1e-12);
  int agree_h = 0, pairs_h = 0;
  for (size_t a = 0; a < h.size(); ++a)
    for (size_t b = a + 1; b < h.size(); ++b, ++pairs_h)
      agree_h += (truth[h[a]] == truth[h[b]]) == (pred[h[a]] == pred[h[b]]);
  auto within = SubsetPairAccuracy(truth, pred, h);
  ASSERT_TRUE(within.ok());
  EXPECT_NEAR(*within, static_cast<double>(agree_h) / pairs_h, 1e-12);
  EXPECT_FALSE(CrossPairAccuracy(truth, pred, {}, h).ok());
  EXPECT_FALSE(CrossPairAccuracy(truth, pred, {0, 99}, h).ok());
  EXPECT_FALSE(SubsetNmi(truth, {1, 2}, h).ok());
}

}  // namespace
}  // namespace kls
