// kls-bench rerank: thesis Table 6.3 on the seeded tagged-image corpus
// (core/ranking/tagged_corpus.h). For each of Q queries: tf-idf text retrieval
// picks the top `candidates` images (level 1, §6.3.4); VisualRank (§6.2) with
// each kernel re-orders them (level 2); Top-N accuracy (§6.4.3) is averaged
// over the queries. "rerank_seconds_200" is the mean wall time to learn the
// NPK kernel (eq. 6.2–6.8, Protocol 5, low-rank §6.3.4) and run VisualRank on
// one query's candidates (thesis Fig. 6.2: about 1 s for 200 images).
#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "bench/bench_util.h"
#include "core/common/solve_control.h"
#include "core/ranking/kernel_extension.h"
#include "core/ranking/npk_ranking.h"
#include "core/ranking/rerank.h"
#include "core/ranking/tagged_corpus.h"
#include "core/ranking/visual_rank.h"

namespace kls::bench {
namespace {

const int kTopN[] = {3, 5, 10, 20, 50, 100};
const char* kMethods[] = {"raw", "text", "linear", "poly", "rbf", "npk"};

// The NPK objective (6.2) is invariant under K → K + c11ᵀ (H annihilates 1 and tr(K A^{ij}) ignores it), so
// the learned kernel is a similarity only up to a constant; VisualRank needs non-negative weights, and the
// representative with the smallest entry at 0 is used rather than clipping, which would discard the
// (centred, about half negative) off-diagonal structure.
Eigen::MatrixXd ShiftNonNegative(Eigen::MatrixXd k) {
  const double lo = k.minCoeff();
  if (lo < 0.0) k.array() -= lo;
  return k;
}

struct ExtensionStudy {
  double transductive[6] = {}, warping[6] = {}, harmonic[6] = {}, rbf[6] = {};
};

// Top-N accuracies of VisualRank under `k` (all n candidates), counted over the held-out items only.
StatusOr<std::vector<double>> HeldOutAccuracy(const Eigen::MatrixXd& k, const std::vector<char>& held,
                                              const std::vector<char>& relevant, const VisualRankOptions& vo) {
  KLS_ASSIGN_OR_RETURN(VisualRankResult vr, SolveVisualRank(k, Eigen::VectorXd(), vo));
  std::vector<int> order;
  for (int i : RankByScore(vr.scores))
    if (held[i]) order.push_back(i);
  std::vector<double> acc(6);
  for (int s = 0; s < 6; ++s) acc[s] = TopNAccuracy(order, relevant, kTopN[s]);
  return acc;
}

// §6.3.3 study: hold out a random `holdout` fraction of the candidates, learn NPK on the rest, extend it to
// the held-out items by kernel warping (6.9) and by harmonic extension, and compare the held-out Top-N
// accuracy with the transductive kernel learned on all candidates and with plain RBF.
StatusOr<ExtensionStudy> EvaluateExtension(const Eigen::MatrixXd& x, const Eigen::MatrixXd& kt,
                                           const std::vector<char>& relevant, double holdout, uint64_t seed,
                                           const NpkRankingOptions& no, const VisualRankOptions& vo,
                                           double warp_strength) {
  const int n = static_cast<int>(x.rows());
  std::vector<int> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  const int h = std::max(1, static_cast<int>(std::lround(holdout * n)));
  std::vector<char> held(n, 0);
  for (int t = 0; t < h; ++t) held[perm[t]] = 1;
  std::vector<int> train;
  for (int i = 0; i < n; ++i)
    if (!held[i]) train.push_back(i);
  const int nt = static_cast<int>(train.size());
  Eigen::MatrixXd xt(nt, x.cols()), ktt(nt, nt);
  for (int a = 0; a < nt; ++a) {
    xt.row(a) = x.row(train[a]);
    for (int b = 0; b < nt; ++b) ktt(a, b) = kt(train[a], train[b]);
  }
  ExtensionStudy out;
  auto put = [](double* dst, const std::vector<double>& v) { std::copy(v.begin(), v.end(), dst); };
  KLS_ASSIGN_OR_RETURN(NpkRankingResult all, SolveNpkRanking(x, kt, no));
  KLS_ASSIGN_OR_RETURN(auto acc_t, HeldOutAccuracy(ShiftNonNegative(all.kernel.Dense()), held, relevant, vo));
  put(out.transductive, acc_t);
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd rbf, ParametricKernelMatrix(x, ParametricKernel::kRbf));
  KLS_ASSIGN_OR_RETURN(auto acc_r, HeldOutAccuracy(rbf, held, relevant, vo));
  put(out.rbf, acc_r);
  KLS_ASSIGN_OR_RETURN(NpkRankingResult part, SolveNpkRanking(xt, ktt, no));
  // RBF width of the input kernel: the mean squared pairwise distance (as ParametricKernelMatrix).
  const Eigen::VectorXd sq = x.rowwise().squaredNorm();
  const double width = (2.0 * n * sq.sum() - 2.0 * x.colwise().sum().squaredNorm()) / (double(n) * (n - 1));
  KLS_ASSIGN_OR_RETURN(KernelWarping warp, KernelWarping::Create(xt, part.kernel.Dense(), width, warp_strength));
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd kw, warp.Matrix(x, x));
  KLS_ASSIGN_OR_RETURN(auto acc_w, HeldOutAccuracy(kw, held, relevant, vo));
  put(out.warping, acc_w);
  KLS_ASSIGN_OR_RETURN(LearnedKernel::Embedding ext, HarmonicExtension(part.kernel, xt, x));
  KLS_ASSIGN_OR_RETURN(auto acc_h,
                       HeldOutAccuracy(ShiftNonNegative(Eigen::MatrixXd(ext * ext.transpose())), held, relevant, vo));
  put(out.harmonic, acc_h);
  return out;
}

struct Args {
  int queries = 20, candidates = 200, images_per_concept = 300, degree = 2, low_rank = 30, neighbors = 5;
  int laplacian_neighbors = 10, max_iterations = 500;
  double c = 10.0, ratio = 0.5, damping = 0.85, holdout = 0.25, warp_strength = 1.0;
  uint64_t seed = 1;
};

}  // namespace

Runner RegisterRerank(CLI::App& app, bool* json) {
  auto a = std::make_shared<Args>();
  app.add_option("--queries", a->queries, "test queries (= query concepts of the corpus)");
  app.add_option("--candidates", a->candidates, "candidates retrieved by text per query");
  app.add_option("--images-per-concept", a->images_per_concept, "corpus size per concept");
  app.add_option("--seed", a->seed, "corpus seed");
  app.add_option("--degree", a->degree, "polynomial kernel degree");
  app.add_option("--rank", a->low_rank, "NPK low-rank m (0 = full K)");
  app.add_option("--neighbors", a->neighbors, "k of the visual k-NN distance constraints");
  app.add_option("--laplacian-neighbors", a->laplacian_neighbors, "k of the Laplacian graph for V");
  app.add_option("--C", a->c, "NPK C");
  app.add_option("--ratio", a->ratio, "NPK distance_ratio");
  app.add_option("--damping", a->damping, "VisualRank damping factor");
  app.add_option("--max-iterations", a->max_iterations, "NPK iteration cap");
  app.add_option("--holdout", a->holdout, "fraction of candidates held out for the unseen-item study (0 = skip)");
  app.add_option("--warp-strength", a->warp_strength, "kernel warping strength gamma (M = gamma L)");
  return [a, json]() -> int {
    TaggedCorpusOptions co;
    co.num_concepts = a->queries;
    co.images_per_concept = a->images_per_concept;
    co.seed = a->seed;
    auto corpus = GenerateTaggedCorpus(co);
    if (!corpus.ok()) return Fail(corpus.status());
    auto tfidf = TfIdf(corpus->tags);
    if (!tfidf.ok()) return Fail(tfidf.status());
    NpkRankingOptions no;
    no.c = a->c;
    no.distance_ratio = a->ratio;
    no.low_rank = a->low_rank;
    no.constraint_neighbors = a->neighbors;
    no.laplacian_neighbors = a->laplacian_neighbors;
    no.max_iterations = a->max_iterations;
    VisualRankOptions vo;
    vo.damping = a->damping;

    std::map<std::string, std::vector<double>> acc;  // method → sums per N
    for (const char* m : kMethods) acc[m].assign(6, 0.0);
    double npk_seconds = 0, npk_seconds_max = 0, gap_sum = 0, iter_sum = 0, candidates_sum = 0, relevant_sum = 0;
    std::map<std::string, std::vector<double>> ext;  // unseen-item study
    for (const char* m : {"transductive", "warping", "harmonic", "rbf"}) ext[m].assign(6, 0.0);
    int ext_queries = 0;
    for (int q = 0; q < a->queries; ++q) {
      auto scores = QueryScores(*tfidf, corpus->query_tag[q]);
      if (!scores.ok()) return Fail(scores.status());
      const std::vector<int> cand = TopCandidates(*scores, a->candidates);
      const int n = static_cast<int>(cand.size());
      if (n <= std::max(a->neighbors, a->laplacian_neighbors) + 1 || n < a->low_rank)
        return Fail(FailedPreconditionError("query " + std::to_string(q) + " retrieved only " + std::to_string(n) +
                                            " candidates"));
      std::vector<char> relevant(n);
      Eigen::MatrixXd x(n, corpus->visual.cols());
      Eigen::SparseMatrix<double, Eigen::RowMajor> t(n, tfidf->cols());
      std::vector<Eigen::Triplet<double>> trip;
      for (int i = 0; i < n; ++i) {
        relevant[i] = corpus->concept_of[cand[i]] == q;
        relevant_sum += relevant[i];
        x.row(i) = corpus->visual.row(cand[i]);
        for (Eigen::SparseMatrix<double, Eigen::RowMajor>::InnerIterator it(*tfidf, cand[i]); it; ++it)
          trip.emplace_back(i, static_cast<int>(it.col()), it.value());
      }
      candidates_sum += n;
      t.setFromTriplets(trip.begin(), trip.end());
      const Eigen::MatrixXd kt = Eigen::MatrixXd(t * t.transpose());
      std::vector<int> raw(n);
      for (int i = 0; i < n; ++i) raw[i] = i;  // candidates arrive in raw-score order
      std::map<std::string, std::vector<int>> orders;
      orders["raw"] = raw;
      auto rank_with = [&](const Eigen::MatrixXd& k) -> StatusOr<std::vector<int>> {
        KLS_ASSIGN_OR_RETURN(VisualRankResult vr, SolveVisualRank(k, Eigen::VectorXd(), vo));
        return RankByScore(vr.scores);
      };
      struct Named {
        const char* name;
        ParametricKernel kind;
      };
      auto o_text = rank_with(kt);
      if (!o_text.ok()) return Fail(o_text.status());
      orders["text"] = *o_text;
      for (Named nk : {Named{"linear", ParametricKernel::kLinear}, Named{"poly", ParametricKernel::kPolynomial},
                       Named{"rbf", ParametricKernel::kRbf}}) {
        auto k = ParametricKernelMatrix(x, nk.kind, a->degree);
        if (!k.ok()) return Fail(k.status());
        auto o = rank_with(*k);
        if (!o.ok()) return Fail(o.status());
        orders[nk.name] = *o;
      }
      Stopwatch watch;
      auto npk = SolveNpkRanking(x, kt, no);
      if (!npk.ok()) return Fail(npk.status());
      auto o_npk = rank_with(ShiftNonNegative(npk->kernel.Dense()));
      if (!o_npk.ok()) return Fail(o_npk.status());
      const double secs = watch.Seconds();
      npk_seconds += secs;
      npk_seconds_max = std::max(npk_seconds_max, secs);
      gap_sum += npk->duality_gap;
      iter_sum += npk->stats.iterations;
      orders["npk"] = *o_npk;
      for (const char* m : kMethods)
        for (int s = 0; s < 6; ++s) acc[m][s] += TopNAccuracy(orders[m], relevant, kTopN[s]);

      // Unseen items: learn on the first (1 − holdout) of a random split, extend to the rest.
      if (a->holdout > 0.0) {
        auto study = EvaluateExtension(x, kt, relevant, a->holdout, a->seed * 1000 + q, no, vo, a->warp_strength);
        if (!study.ok()) return Fail(study.status());
        for (int s = 0; s < 6; ++s) {
          ext["transductive"][s] += study->transductive[s];
          ext["warping"][s] += study->warping[s];
          ext["harmonic"][s] += study->harmonic[s];
          ext["rbf"][s] += study->rbf[s];
        }
        ++ext_queries;
      }
    }
    nlohmann::json out;
    out["benchmark"] = "rerank";
    out["queries"] = a->queries;
    out["seed"] = a->seed;
    out["mean_candidates"] = candidates_sum / a->queries;
    out["mean_relevant_fraction_in_candidates"] = relevant_sum / candidates_sum;
    for (int s = 0; s < 6; ++s) {
      nlohmann::json row;
      for (const char* m : kMethods) row[m] = acc[m][s] / a->queries;
      out["top" + std::to_string(kTopN[s])] = row;
    }
    out["rerank_seconds_200"] = npk_seconds / a->queries;
    out["rerank_seconds_max"] = npk_seconds_max;
    out["npk"] = {{"C", a->c},
                  {"distance_ratio", a->ratio},
                  {"rank", a->low_rank},
                  {"neighbors", a->neighbors},
                  {"mean_iterations", iter_sum / a->queries},
                  {"mean_duality_gap", gap_sum / a->queries}};
    if (ext_queries > 0) {
      nlohmann::json e;
      e["holdout_fraction"] = a->holdout;
      e["warp_strength"] = a->warp_strength;
      e["note"] = "Top-N accuracy of VisualRank over the held-out candidates only";
      for (auto& [name, v] : ext) {
        nlohmann::json row;
        for (int s = 0; s < 6; ++s) row["top" + std::to_string(kTopN[s])] = v[s] / ext_queries;
        e[name] = row;
      }
      out["unseen_items"] = e;
    }
    out["machine"] = MachineInfo();
    Emit(out, *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("rerank", "thesis Table 6.3: VisualRank re-ranking with text/linear/poly/RBF/NPK kernels",
                     RegisterRerank);

}  // namespace kls::bench
