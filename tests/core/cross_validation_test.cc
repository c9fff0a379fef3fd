// k-fold cross-validation of the NPKL loss weight (core/npkl/cross_validation.h):
// stratified deterministic folds, the threshold rule, a clear-cut choice with
// a synthetic learner, thread independence, errors, and a real solver
// (KL-ADMM) on two separated clusters.
#include "core/npkl/cross_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <random>

#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/graph/laplacian.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/simple_npkl.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

std::vector<int> TwoClasses(int n) {
  std::vector<int> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 2;
  return labels;
}

// The ideal kernel of `labels` (class indicator vectors), or a random one.
LearnedKernel IdealKernel(const std::vector<int>& labels) {
  LearnedKernel::Embedding v = LearnedKernel::Embedding::Zero(static_cast<int>(labels.size()), 2);
  for (size_t i = 0; i < labels.size(); ++i) v(i, labels[i]) = 1.0;
  return *LearnedKernel::FromEmbedding(std::move(v));
}
LearnedKernel RandomKernel(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  LearnedKernel::Embedding v(n, 3);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < 3; ++j) v(i, j) = g(rng);
  return *LearnedKernel::FromEmbedding(std::move(v));
}

TEST(CrossValidationTest, FoldsAreStratifiedDeterministicAndKeepSelfPairs) {
  const std::vector<int> labels = TwoClasses(60);
  auto c = GenerateAdmmProtocol(labels, 3);  // must, cannot and self pairs
  ASSERT_TRUE(c.ok()) << c.status();
  auto a = AssignPairFolds(*c, 3, 7);
  auto b = AssignPairFolds(*c, 3, 7);
  auto other = AssignPairFolds(*c, 3, 8);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *other);
  int must[3] = {0, 0, 0}, cannot[3] = {0, 0, 0};
  for (int t = 0; t < c->size(); ++t) {
    const Pair& p = c->pairs[t];
    if (p.i == p.j) {
      EXPECT_EQ((*a)[t], -1);
      continue;
    }
    ASSERT_GE((*a)[t], 0);
    ASSERT_LT((*a)[t], 3);
    (p.kind == PairKind::kMustLink ? must : cannot)[(*a)[t]]++;
  }
  for (int f = 0; f < 3; ++f) {
    EXPECT_LE(std::abs(must[f] - must[0]), 1);
    EXPECT_LE(std::abs(cannot[f] - cannot[0]), 1);
    EXPECT_GT(must[f], 0);
    EXPECT_GT(cannot[f], 0);
  }
}

TEST(CrossValidationTest, PerfectKernelScoresOneAndThresholdIsFittedOnTraining) {
  const std::vector<int> labels = TwoClasses(20);
  auto c = GenerateBcdProtocol(labels, 0.5, 1);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(HeldOutPairAccuracy(IdealKernel(labels), *c, *c), 1.0);
  // K_ij of the ideal kernel is 1 (same class) or 0: any threshold in (0, 1)
  // separates them, but a kernel that is the ideal one plus a constant
  // shifts both, and the fitted threshold follows.
  LearnedKernel::Embedding v = IdealKernel(labels).embedding();
  v.conservativeResize(Eigen::NoChange, 3);
  v.col(2).setConstant(3.0);  // K_ij = 10 (same class) or 9
  auto shifted = LearnedKernel::FromEmbedding(std::move(v));
  ASSERT_TRUE(shifted.ok());
  EXPECT_DOUBLE_EQ(HeldOutPairAccuracy(*shifted, *c, *c), 1.0);
  PairwiseConstraints empty;
  EXPECT_DOUBLE_EQ(HeldOutPairAccuracy(*shifted, *c, empty), 1.0);
}

TEST(CrossValidationTest, PicksTheClearCutValueAndReportsEveryFold) {
  const std::vector<int> labels = TwoClasses(80);
  auto c = GenerateBcdProtocol(labels, 0.3, 2);
  ASSERT_TRUE(c.ok());
  std::atomic<int> calls{0};
  LearnKernelFn learn = [&](const PairwiseConstraints& train, double value,
                            const SolveControl&) -> StatusOr<LearnedKernel> {
    ++calls;
    EXPECT_LT(train.size(), c->size());
    if (value == 1.0) return IdealKernel(labels);
    return RandomKernel(80, static_cast<uint64_t>(value * 1000) + train.size());
  };
  CrossValidationOptions o;
  o.folds = 4;
  o.grid = {10.0, 1.0, 0.1, 1.0};  // unsorted, with a repeat
  for (int threads : {1, 3}) {
    o.num_threads = threads;
    calls = 0;
    auto r = CrossValidate(*c, learn, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(calls.load(), 12);
    ASSERT_EQ(r->candidates.size(), 3u);
    EXPECT_DOUBLE_EQ(r->candidates[0].value, 0.1);
    EXPECT_DOUBLE_EQ(r->best_value, 1.0);
    EXPECT_EQ(r->best_index, 1);
    for (const auto& cand : r->candidates) EXPECT_EQ(cand.fold_scores.size(), 4u);
    for (double s : r->candidates[1].fold_scores) EXPECT_DOUBLE_EQ(s, 1.0);
    EXPECT_LT(r->candidates[0].mean_score, 0.9);
    EXPECT_THAT(r->Json(), HasSubstr("\"best\":1,"));
    EXPECT_THAT(r->Json(), HasSubstr("\"fold_scores\":[1,1,1,1]"));
  }
}

TEST(CrossValidationTest, TiesGoToTheSmallerValue) {
  const std::vector<int> labels = TwoClasses(30);
  auto c = GenerateBcdProtocol(labels, 0.5, 4);
  ASSERT_TRUE(c.ok());
  LearnKernelFn learn = [&](const PairwiseConstraints&, double, const SolveControl&) -> StatusOr<LearnedKernel> {
    return IdealKernel(labels);
  };
  auto r = CrossValidate(*c, learn, CrossValidationOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->best_value, 0.1);
}

TEST(CrossValidationTest, ErrorsNameTheFieldValueAndFold) {
  const std::vector<int> labels = TwoClasses(30);
  auto c = GenerateBcdProtocol(labels, 0.5, 4);
  ASSERT_TRUE(c.ok());
  LearnKernelFn ok = [&](const PairwiseConstraints&, double, const SolveControl&) -> StatusOr<LearnedKernel> {
    return IdealKernel(labels);
  };
  CrossValidationOptions o;
  o.folds = 1;
  EXPECT_THAT(CrossValidate(*c, ok, o).status().message(), HasSubstr("cross_validation.folds = 1"));
  o = CrossValidationOptions();
  o.grid = {1.0, -2.0};
  auto bad = CrossValidate(*c, ok, o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("cross_validation.grid[1] = -2"));
  o = CrossValidationOptions();
  o.grid.clear();
  EXPECT_THAT(CrossValidate(*c, ok, o).status().message(), HasSubstr("cross_validation.grid has 0 values"));
  PairwiseConstraints two;
  two.pairs = {{0, 1, PairKind::kMustLink}, {0, 2, PairKind::kCannotLink}, {3, 3, PairKind::kMustLink}};
  EXPECT_THAT(CrossValidate(two, ok, CrossValidationOptions()).status().message(),
              HasSubstr("exceeds the data set's 2 pairs"));
  LearnKernelFn failing = [&](const PairwiseConstraints&, double v, const SolveControl&) -> StatusOr<LearnedKernel> {
    if (v == 10.0) return InvalidArgumentError("boom");
    return IdealKernel(labels);
  };
  auto f = CrossValidate(*c, failing, CrossValidationOptions());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr("value 10, fold 0: boom"));
  SolveControl cancelled;
  cancelled.cancel.Cancel();
  EXPECT_EQ(CrossValidate(*c, ok, CrossValidationOptions(), cancelled).status().code(), StatusCode::kCancelled);
}

// The kernel of a solve that keeps its capacity on the constrained points:
// points 0..19 (every training pair) sit at length 1 on their class's axis,
// points 20..39 (every held-out pair) at length 0.5. The threshold fitted on
// the training pairs (K_ij = 1 or 0) is 0.5, which the held-out must-links
// (K_ij = 0.25) miss; 2-means still splits the axes, so the clustering score
// gets every held-out pair right.
TEST(CrossValidationTest, ClusteringScoreFollowsTheGroupsWhereTheThresholdMisses) {
  const int n = 40;
  const std::vector<int> labels = TwoClasses(n);
  LearnedKernel::Embedding v = LearnedKernel::Embedding::Zero(n, 2);
  for (int i = 0; i < n; ++i) v(i, labels[i]) = i < 20 ? 1.0 : 0.5;
  auto kernel = LearnedKernel::FromEmbedding(std::move(v));
  ASSERT_TRUE(kernel.ok());
  PairwiseConstraints train, test;
  for (int i = 0; i < 20; ++i)
    for (int j = i + 1; j < 20; ++j)
      train.pairs.push_back({i, j, labels[i] == labels[j] ? PairKind::kMustLink : PairKind::kCannotLink});
  int must = 0;
  for (int i = 20; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      test.pairs.push_back({i, j, labels[i] == labels[j] ? PairKind::kMustLink : PairKind::kCannotLink});
      must += labels[i] == labels[j] ? 1 : 0;
    }
  const double cannot_fraction = 1.0 - static_cast<double>(must) / test.pairs.size();
  EXPECT_DOUBLE_EQ(HeldOutPairAccuracy(*kernel, train, test), cannot_fraction);
  auto clustered = HeldOutClusterPairAccuracy(*kernel, test, 2);
  ASSERT_TRUE(clustered.ok()) << clustered.status();
  EXPECT_DOUBLE_EQ(*clustered, 1.0);

  auto too_many = HeldOutClusterPairAccuracy(*kernel, test, 41);
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.status().message(), HasSubstr("cross_validation.clusters = 41 exceeds the data set's 40 points"));
  CrossValidationOptions o;
  o.clusters = 1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("cross_validation.clusters = 1 must be 0 (threshold score) or in [2, 1000]"));
  o.clusters = 41;
  LearnKernelFn same = [&](const PairwiseConstraints&, double, const SolveControl&) -> StatusOr<LearnedKernel> {
    return *kernel;
  };
  auto c = GenerateBcdProtocol(labels, 0.5, 4);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(CrossValidate(*c, same, o).status().message(),
              HasSubstr("value 0.1, fold 0: cross_validation.clusters = 41 exceeds"));
  o.clusters = 2;
  auto r = CrossValidate(*c, same, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->Json(), HasSubstr("\"score\":\"kmeans\",\"clusters\":2,"));
}

// SimpleNPKL with the thesis's B = 1 on iris under its Table 3.2 protocol
// (binary 5-NN graph, pairs until 70 % n must-link components): k-means on
// the learned kernel is best at C = 1 (97.5 % pair accuracy over 20 trials
// against 96.0 at C = 0.1), but with C = 1 the pairs of points outside the
// training folds keep K_ij near 0, so the threshold score picks C = 0.1. The
// clustering score picks C = 1.
TEST(CrossValidationTest, SimpleNpklOnIrisTheClusteringScorePicksTheCThatClustersBest) {
  auto iris = ReadCsvFile("data/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  GraphOptions go;
  go.k = 5;
  go.weight = EdgeWeight::kBinary;
  auto graph = BuildGraph(iris->features, go);
  ASSERT_TRUE(graph.ok());
  auto c = GenerateComponentProtocol(iris->labels, 0.7, 1);
  ASSERT_TRUE(c.ok());
  LearnKernelFn learn = [&](const PairwiseConstraints& train, double value,
                            const SolveControl& control) -> StatusOr<LearnedKernel> {
    SimpleNpklOptions o;
    o.c = value;
    KLS_ASSIGN_OR_RETURN(NpklResult r, SolveSimpleNpkl(NpklProblem{graph->laplacian, train}, o, control));
    return std::move(r.kernel);
  };
  CrossValidationOptions o;
  o.grid = {0.1, 1.0};
  auto threshold = CrossValidate(*c, learn, o);
  ASSERT_TRUE(threshold.ok()) << threshold.status();
  EXPECT_DOUBLE_EQ(threshold->best_value, 0.1) << threshold->Json();
  o.clusters = 3;
  auto clustering = CrossValidate(*c, learn, o);
  ASSERT_TRUE(clustering.ok()) << clustering.status();
  EXPECT_DOUBLE_EQ(clustering->best_value, 1.0) << clustering->Json();
  std::printf("iris SimpleNPKL cross-validation: threshold %s\n  clustering %s\n", threshold->Json().c_str(),
              clustering->Json().c_str());
}

// KL-ADMM on iris (the paper's protocol and graph): at γ = 1e-4 the pairs
// barely count and the kernel follows the 5-NN graph, in which versicolor and
// virginica touch; at γ = 10 it follows the pairs. The cross-validation must
// pick γ = 10, by a clear margin.
TEST(CrossValidationTest, KlAdmmOnIrisPicksTheGammaThatFollowsThePairs) {
  auto iris = ReadCsvFile("data/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  GraphOptions go;
  go.k = 5;
  go.weight = EdgeWeight::kGaussian;
  auto graph = BuildGraph(iris->features, go);
  ASSERT_TRUE(graph.ok());
  auto c = GenerateAdmmProtocol(iris->labels, 1);
  ASSERT_TRUE(c.ok());
  LearnKernelFn learn = [&](const PairwiseConstraints& train, double gamma,
                            const SolveControl& control) -> StatusOr<LearnedKernel> {
    NpklProblem p{graph->laplacian, train};
    KlAdmmOptions o;
    o.gamma = gamma;
    KLS_ASSIGN_OR_RETURN(NpklResult r, SolveKlAdmm(p, o, control));
    return std::move(r.kernel);
  };
  CrossValidationOptions o;
  o.grid = {1e-4, 10.0};
  o.num_threads = 2;
  auto r = CrossValidate(*c, learn, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->best_value, 10.0) << r->Json();
  EXPECT_GT(r->candidates[1].mean_score, r->candidates[0].mean_score + 0.05) << r->Json();
  std::printf("iris cross-validation: %s\n", r->Json().c_str());
}

}  // namespace
}  // namespace kls
