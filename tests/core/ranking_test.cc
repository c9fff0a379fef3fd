// Tests of core/ranking: VisualRank (§6.2), NPK ranking (§6.3, eq. 6.2–6.8),
// the re-ranking pipeline and the tagged-corpus generator.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <random>

#include "core/ranking/visual_rank.h"

namespace kls {
namespace {

Eigen::MatrixXd RandomKernel(int n, int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd x(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x(i, j) = g(rng);
  return x * x.transpose();
}

TEST(VisualRank, ColumnStochasticClipsAndNormalizes) {
  Eigen::MatrixXd k = RandomKernel(12, 3, 1);  // has negative entries
  ASSERT_LT(k.minCoeff(), 0.0);
  auto kh = ColumnStochastic(k, Eigen::VectorXd::Constant(12, 1.0 / 12));
  ASSERT_TRUE(kh.ok()) << kh.status();
  EXPECT_GE(kh->minCoeff(), 0.0);
  for (int j = 0; j < 12; ++j) EXPECT_NEAR(kh->col(j).sum(), 1.0, 1e-14);
}

TEST(VisualRank, MatchesExactLinearSolve) {
  // VR = λ K̂ VR + (1 − λ) P  ⇔  (I − λ K̂) VR = (1 − λ) P: solved independently by LU.
  const int n = 40;
  Eigen::MatrixXd k = RandomKernel(n, 5, 2);
  Eigen::VectorXd prior = Eigen::VectorXd::LinSpaced(n, 1.0, 2.0);
  prior /= prior.sum();
  VisualRankOptions options;
  options.damping = 0.8;
  auto r = SolveVisualRank(k, prior, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stats.termination, Termination::kConverged);
  auto kh = ColumnStochastic(k, prior);
  ASSERT_TRUE(kh.ok());
  const Eigen::MatrixXd a = Eigen::MatrixXd::Identity(n, n) - options.damping * *kh;
  const Eigen::VectorXd exact = a.partialPivLu().solve((1.0 - options.damping) * prior);
  EXPECT_LT((r->scores - exact).lpNorm<Eigen::Infinity>(), 1e-12);
  EXPECT_NEAR(r->scores.sum(), 1.0, 1e-12);  // column-stochastic walk keeps the mass of P
}

TEST(VisualRank, DenseClusterOutranksOutliers) {
  // Ten mutually similar items and ten isolated ones: the cluster gets the mass.
  const int n = 20;
  Eigen::MatrixXd k = Eigen::MatrixXd::Identity(n, n);
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 10; ++j) k(i, j) = 1.0;
  for (int i = 10; i < n; ++i) k(i, 0) = k(0, i) = 0.05;
  auto r = SolveVisualRank(k, Eigen::VectorXd(), VisualRankOptions());
  ASSERT_TRUE(r.ok());
  const std::vector<int> order = RankByScore(r->scores);
  for (int t = 0; t < 10; ++t) EXPECT_LT(order[t], 10);
}

TEST(VisualRank, BadInputNamesTheField) {
  VisualRankOptions options;
  options.damping = 1.0;
  auto r = SolveVisualRank(Eigen::MatrixXd::Identity(3, 3), Eigen::VectorXd(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("options.damping = 1"), std::string::npos);
  auto r2 = SolveVisualRank(Eigen::MatrixXd::Identity(3, 3), Eigen::VectorXd::Constant(3, -1.0), VisualRankOptions());
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("prior[0]"), std::string::npos);
  auto r3 = SolveVisualRank(Eigen::MatrixXd(2, 3), Eigen::VectorXd(), VisualRankOptions());
  EXPECT_EQ(r3.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kls

// ---------------------------------------------------------------------------
// NPK ranking (§6.3), tagged corpus, re-ranking helpers (tf-idf text scores,
// candidates, query splits), unseen-item extension.
#include "core/ranking/kernel_extension.h"
#include "core/ranking/npk_ranking.h"
#include "core/ranking/ranking_protocol.h"
#include "core/ranking/rerank.h"
#include "core/ranking/tagged_corpus.h"
#include "core/ranking/text_kernel.h"

namespace kls {
namespace {

struct SmallQuery {
  Eigen::MatrixXd x, kt;
  std::vector<char> relevant;
};

SmallQuery MakeQuery(uint64_t seed, int concepts = 4, int per_concept = 40) {
  TaggedCorpusOptions o;
  o.num_concepts = concepts;
  o.images_per_concept = per_concept;
  o.seed = seed;
  auto c = GenerateTaggedCorpus(o);
  EXPECT_TRUE(c.ok()) << c.status();
  auto tfidf = TfIdf(c->tags);
  EXPECT_TRUE(tfidf.ok());
  auto s = QueryScores(*tfidf, c->query_tag[0]);
  EXPECT_TRUE(s.ok());
  const std::vector<int> cand = TopCandidates(*s, 60);
  SmallQuery q;
  const int n = static_cast<int>(cand.size());
  q.x.resize(n, c->visual.cols());
  Eigen::MatrixXd t(n, tfidf->cols());
  for (int i = 0; i < n; ++i) {
    q.x.row(i) = c->visual.row(cand[i]);
    t.row(i) = Eigen::RowVectorXd(tfidf->row(cand[i]));
    q.relevant.push_back(c->concept_of[cand[i]] == 0);
  }
  q.kt = t * t.transpose();
  return q;
}

TEST(TaggedCorpus, DeterministicAndPlanted) {
  TaggedCorpusOptions o;
  o.num_concepts = 3;
  o.images_per_concept = 50;
  auto a = GenerateTaggedCorpus(o), b = GenerateTaggedCorpus(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->num_images(), 300);
  EXPECT_EQ((a->visual - b->visual).norm(), 0.0);
  EXPECT_EQ(a->concept_of, b->concept_of);
  // The query tag is incomplete on relevant images and present on some confusers.
  int rel_tagged = 0, conf_tagged = 0;
  for (int i = 0; i < a->num_images(); ++i) {
    const bool tagged = a->tags.coeff(i, a->query_tag[0]) > 0;
    if (a->concept_of[i] == 0) rel_tagged += tagged;
    if (a->concept_of[i] == 3) conf_tagged += tagged;
  }
  EXPECT_GT(rel_tagged, 10);
  EXPECT_LT(rel_tagged, 50);
  EXPECT_GT(conf_tagged, 5);
  o.p_query_tag = 1.5;
  auto bad = GenerateTaggedCorpus(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("options.p_query_tag = 1.5"), std::string::npos);
}

TEST(Rerank, TfIdfRowsAreUnitAndQueryScoresMatch) {
  Eigen::SparseMatrix<double> tags(3, 3);
  tags.insert(0, 0) = 1;
  tags.insert(0, 1) = 1;
  tags.insert(1, 1) = 1;
  tags.insert(2, 2) = 1;
  auto t = TfIdf(tags);
  ASSERT_TRUE(t.ok());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(Eigen::RowVectorXd(t->row(i)).norm(), 1.0, 1e-14);
  // Image 0: idf(0) = log 3, idf(1) = log 1.5.
  const double w0 = std::log(3.0), w1 = std::log(1.5);
  EXPECT_NEAR(t->coeff(0, 0), w0 / std::hypot(w0, w1), 1e-14);
  auto s = QueryScores(*t, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(TopCandidates(*s, 5), (std::vector<int>{1, 0}));
  EXPECT_FALSE(QueryScores(*t, 7).ok());
}

TEST(NpkRanking, ClosedFormTheorem634IsOptimal) {
  // max tr(AK) s.t. K ⪰ 0, tr KK <= B  ⇒  K* = A₊ √(B / tr A₊²): compare with random feasible K.
  const Eigen::MatrixXd g = RandomKernel(8, 8, 5);
  Eigen::MatrixXd a = g - 8.0 * Eigen::MatrixXd::Identity(8, 8);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(a);
  const Eigen::VectorXd lp = es.eigenvalues().cwiseMax(0.0);
  const Eigen::MatrixXd ap = es.eigenvectors() * lp.asDiagonal() * es.eigenvectors().transpose();
  const double b = 2.0;
  const Eigen::MatrixXd ks = ap * std::sqrt(b / (ap * ap).trace());
  const double best = (a * ks).trace();
  for (int t = 0; t < 200; ++t) {
    Eigen::MatrixXd k = RandomKernel(8, 1 + t % 8, 100 + t);
    k *= std::sqrt(b / (k * k).trace());
    EXPECT_LE((a * k).trace(), best + 1e-12);
  }
}

void CheckNpkOptimality(const SmallQuery& q, const NpkRankingOptions& o) {
  auto r = SolveNpkRanking(q.x, q.kt, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stats.termination, Termination::kConverged);
  EXPECT_LE(r->stats.certificate.gap, o.tolerance);
  EXPECT_GE(r->stats.certificate.gap, -1e-9);  // weak duality
  const Eigen::MatrixXd k = r->kernel.Dense();
  // Feasibility: PSD (factored) and tr KK <= B.
  EXPECT_LE((k * k).trace(), o.b * (1 + 1e-9));
  // Dual stationarity: α >= 0 and the projected gradient step is small where α > 0 (KKT of max_α g).
  EXPECT_GE(r->alpha.minCoeff(), 0.0);
  for (size_t p = 0; p < r->pairs.size(); ++p) {
    const auto [i, j] = r->pairs[p];
    const double dist = k(i, i) + k(j, j) - 2 * k(i, j);
    const double grad = dist - r->squared_distances[p] - r->alpha[p] / o.c;
    if (r->alpha[p] > 1e-6) EXPECT_NEAR(grad, 0.0, 0.05 * (r->squared_distances.mean() + 1e-12));
  }
  // The objective improves on the pure-text start K*(0).
  EXPECT_LE(r->stats.final_objective, r->stats.objective_history.front() + 1e-12);
}

TEST(NpkRanking, FullAndLowRankConvergeWithCertifiedGap) {
  const SmallQuery q = MakeQuery(3);
  NpkRankingOptions o;
  o.tolerance = 1e-6;
  o.max_iterations = 5000;
  o.low_rank = 0;
  CheckNpkOptimality(q, o);
  o.low_rank = 15;
  CheckNpkOptimality(q, o);
}

TEST(NpkRanking, LowRankBasisIsSmoothestLaplacianEigenvectors) {
  const SmallQuery q = MakeQuery(4);
  auto v = SmoothLaplacianBasis(q.x, 10, 6);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_LT((v->transpose() * *v - Eigen::MatrixXd::Identity(6, 6)).norm(), 1e-8);
}

TEST(NpkRanking, BadOptionsNameTheField) {
  const SmallQuery q = MakeQuery(5);
  NpkRankingOptions o;
  o.c = -1;
  auto r = SolveNpkRanking(q.x, q.kt, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("options.c = -1"), std::string::npos);
  o = NpkRankingOptions();
  o.low_rank = 100000;
  EXPECT_EQ(SolveNpkRanking(q.x, q.kt, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(SolveNpkRanking(q.x, Eigen::MatrixXd::Zero(3, 3), NpkRankingOptions()).ok());
}

TEST(KernelExtension, WarpingReproducesTransductiveValuesOnTrainingItems) {
  // On training items eq. (6.9) gives K̃ = K_x − K_x (I + M K_x)⁻¹ M K_x = K_x (I + M K_x)⁻¹.
  const SmallQuery q = MakeQuery(6);
  auto npk = SolveNpkRanking(q.x, q.kt, NpkRankingOptions());
  ASSERT_TRUE(npk.ok());
  const double width = 50.0;
  auto warp = KernelWarping::Create(q.x, npk->kernel.Dense(), width, 30.0);
  ASSERT_TRUE(warp.ok()) << warp.status();
  auto kw = warp->Matrix(q.x, q.x);
  ASSERT_TRUE(kw.ok());
  const Eigen::MatrixXd kx = warp->InputKernel(q.x, q.x);
  const int n = static_cast<int>(kx.rows());
  // Independent form: (I + K_x M)⁻¹ K_x (= K_x (I + M K_x)⁻¹, no inverse of the ill-conditioned K_x).
  const Eigen::MatrixXd expected =
      (Eigen::MatrixXd::Identity(n, n) + kx * warp->deformation()).partialPivLu().solve(kx);
  EXPECT_LT((*kw - expected).cwiseAbs().maxCoeff(), 1e-8 * std::max(1.0, expected.cwiseAbs().maxCoeff()));
  // The deformation is a graph Laplacian: symmetric, rows sum to 0, PSD.
  EXPECT_LT(warp->deformation().rowwise().sum().cwiseAbs().maxCoeff(), 1e-10);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(warp->deformation());
  EXPECT_GT(es.eigenvalues()[0], -1e-10);
  // A new point: eq. (6.9) agrees with the augmented-matrix form of the same deformation.
  const Eigen::MatrixXd y = q.x.topRows(2).array() + 0.3;
  auto ky = warp->Matrix(y, q.x);
  ASSERT_TRUE(ky.ok());
  const Eigen::MatrixXd direct = warp->InputKernel(y, q.x) - warp->InputKernel(q.x, y).transpose() * warp->warp() * kx;
  EXPECT_LT((*ky - direct).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_FALSE(warp->Matrix(Eigen::MatrixXd::Zero(1, 2), q.x).ok());
}

TEST(KernelExtension, HarmonicExtensionReproducesTrainingRowsAndAveragesNeighbours) {
  const SmallQuery q = MakeQuery(7);
  auto npk = SolveNpkRanking(q.x, q.kt, NpkRankingOptions());
  ASSERT_TRUE(npk.ok());
  auto ext = HarmonicExtension(npk->kernel, q.x, q.x);
  ASSERT_TRUE(ext.ok()) << ext.status();
  const Eigen::MatrixXd k_ext = *ext * ext->transpose();
  EXPECT_LT((k_ext - npk->kernel.Dense()).cwiseAbs().maxCoeff(), 1e-8);
  // A new point's row is a convex combination of its neighbours' rows: with one neighbour it is that row.
  HarmonicExtensionOptions one;
  one.neighbors = 1;
  const Eigen::MatrixXd y = q.x.row(4).array() + 1e-3;
  auto e1 = HarmonicExtension(npk->kernel, q.x, y, one);
  ASSERT_TRUE(e1.ok());
  EXPECT_LT((e1->row(0) - npk->kernel.embedding().row(4)).norm(), 1e-12);
  one.neighbors = 0;
  EXPECT_FALSE(HarmonicExtension(npk->kernel, q.x, y, one).ok());
}

}  // namespace
}  // namespace kls

// The validation split of kls-bench rerank (thesis protocol): hyper-parameters are chosen on queries that are
// never test queries.
namespace kls {
namespace {

TEST(QuerySplit, DisjointCoveringAndSeeded) {
  for (uint64_t seed : {1u, 2u, 3u, 10u}) {
    auto s = SplitQueries(20, 6, seed);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->validation.size(), 6u);
    EXPECT_EQ(s->test.size(), 14u);
    std::vector<int> seen(20, 0);
    for (int q : s->validation) ++seen[q];
    for (int q : s->test) ++seen[q];
    for (int q = 0; q < 20; ++q) EXPECT_EQ(seen[q], 1) << "query " << q << " seed " << seed;
    auto again = SplitQueries(20, 6, seed);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->validation, s->validation);
    EXPECT_EQ(again->test, s->test);
  }
  auto a = SplitQueries(20, 6, 1), b = SplitQueries(20, 6, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->validation, b->validation);
  EXPECT_FALSE(SplitQueries(20, 0, 1).ok());
  EXPECT_FALSE(SplitQueries(20, 20, 1).ok());
  EXPECT_FALSE(SplitQueries(1, 1, 1).ok());
}

TEST(QuerySplit, SelectionNeverScoresATestQuery) {
  auto s = SplitQueries(20, 6, 7);
  ASSERT_TRUE(s.ok());
  std::vector<char> is_test(20, 0);
  for (int q : s->test) is_test[q] = 1;
  // Point 1 is best on validation; point 2 would be best if test queries leaked into selection.
  auto score = [&](int p, int q) -> StatusOr<double> {
    EXPECT_FALSE(is_test[q]) << "selection scored test query " << q;
    if (is_test[q]) return 100.0 * (p == 2);
    return p == 1 ? 0.9 : 0.5;
  };
  int calls = 0;
  auto counted = [&](int p, int q) -> StatusOr<double> {
    ++calls;
    return score(p, q);
  };
  auto c = ChooseOnValidation(3, s->validation, counted);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->best, 1);
  EXPECT_EQ(calls, 3 * 6);
  EXPECT_DOUBLE_EQ(c->mean_score[1], 0.9);
  EXPECT_DOUBLE_EQ(c->mean_score[0], 0.5);
  // Ties go to the smaller grid index; an empty validation set is refused.
  auto tie = ChooseOnValidation(3, s->validation, [](int, int) -> StatusOr<double> { return 0.7; });
  ASSERT_TRUE(tie.ok());
  EXPECT_EQ(tie->best, 0);
  EXPECT_FALSE(ChooseOnValidation(3, {}, score).ok());
  EXPECT_FALSE(ChooseOnValidation(0, s->validation, score).ok());
}

}  // namespace
}  // namespace kls
