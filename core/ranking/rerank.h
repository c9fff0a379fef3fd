// Query-dependent two-level social image re-ranking (thesis §6.3.4, §6.4):
// (1) text retrieval over the whole corpus by tf-idf similarity of the query
// and each image's tags picks a candidate set; (2) VisualRank (visual_rank.h)
// with some kernel on the candidates re-orders them. The kernels compared in
// Table 6.3: raw (no re-ranking), text (linear kernel of tf-idf tags), linear,
// polynomial, RBF on visual features, and NPK (npk_ranking.h).
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "core/ranking/visual_rank.h"

namespace kls {

/// Normalized tf-idf rows (§6.4.3): t_ij = δ_ij idf_j / ‖δ_i idf‖₂ with
/// idf_j = log(n / r_j), r_j = images tagged with j. (The thesis prints
/// idf_j = log(r_j), which would weight frequent tags up; the standard
/// inverse form is used.) An image with no tags keeps a zero row.
/// `tags`: n × V, non-zero = tagged. Errors: empty matrix, negative entries.
StatusOr<Eigen::SparseMatrix<double, Eigen::RowMajor>> TfIdf(const Eigen::SparseMatrix<double>& tags);

/// The text kernel of NPK ranking (§6.4.3): K_t = T Tᵀ, the cosine of the
/// normalized tf-idf rows T of the n × V tag counts. Errors: empty matrix,
/// negative counts. Cost: O(n² V) dense.
StatusOr<Eigen::MatrixXd> TextKernel(const Eigen::MatrixXd& counts);

/// Raw text score of every image for a single-tag query: cos(q, t_i) = t_i[tag].
/// Errors: tag outside [0, V).
StatusOr<Eigen::VectorXd> QueryScores(const Eigen::SparseMatrix<double, Eigen::RowMajor>& tfidf, int tag);

/// Query-time re-ranking (the second level of §6.3's two-level scheme):
/// VisualRank (§6.2) on the learned kernel restricted to `candidates`, K_c =
/// V_c V_cᵀ shifted to be non-negative (K_c − min K_c when min K_c < 0, so the
/// walk follows relative similarity), with `prior` (one >= 0 value per
/// candidate, e.g. the text scores; empty = uniform). Returns the candidates
/// (their item indices) by descending score, ties by position in the list.
/// Errors: an index out of range, a duplicate candidate, a bad prior or bad
/// options (INVALID_ARGUMENT naming the field); CANCELLED /
/// DEADLINE_EXCEEDED when `control` stops the power iteration (checked every
/// iteration). O(c² r + c² · iterations).
StatusOr<std::vector<ScoredItem>> ReRankCandidates(const LearnedKernel& kernel, const std::vector<int>& candidates,
                                                   const Eigen::VectorXd& prior, const VisualRankOptions& options,
                                                   int* iterations = nullptr,
                                                   const SolveControl& control = SolveControl());

/// Up to `count` indices with score > 0, by descending score, ties by smaller index.
std::vector<int> TopCandidates(const Eigen::VectorXd& scores, int count);

enum class ParametricKernel {
  kLinear,      ///< x·y
  kPolynomial,  ///< (1 + x·y)^degree
  kRbf,         ///< exp(−‖x − y‖² / width)
};

/// Dense kernel matrix on the rows of `x`. width <= 0 for RBF means the mean
/// squared pairwise distance. Errors: degree < 1, empty or non-finite x.
StatusOr<Eigen::MatrixXd> ParametricKernelMatrix(const Eigen::MatrixXd& x, ParametricKernel kind, int degree = 2,
                                                 double width = 0.0);

/// Top-N accuracy (§6.4.3, [JB08]): the fraction of the first min(N, |order|)
/// ranked items that are relevant (0 for an empty order).
double TopNAccuracy(const std::vector<int>& order, const std::vector<char>& relevant, int n);

/// Disjoint validation / test query sets (thesis protocol: hyper-parameters are
/// chosen on queries that are never scored as test queries).
struct QuerySplit {
  std::vector<int> validation;  ///< ascending query ids
  std::vector<int> test;        ///< ascending query ids; validation ∩ test = ∅, union = [0, num_queries)
};

/// Splits queries 0..num_queries−1 by a seeded shuffle into `num_validation`
/// validation queries and the rest as test queries. Deterministic for a seed.
/// Errors: num_queries < 2, num_validation outside [1, num_queries − 1].
StatusOr<QuerySplit> SplitQueries(int num_queries, int num_validation, uint64_t seed);

/// Model selection on validation queries: the grid point p in [0, grid_size)
/// with the highest mean of score(p, q) over q ∈ validation (ties: smaller p).
/// `score` is called only with queries of `validation` — never a test query.
/// mean_score[p] is the validation mean of point p. Errors: empty grid or
/// validation set, a failing or non-finite score.
struct GridChoice {
  int best = -1;
  std::vector<double> mean_score;
};
StatusOr<GridChoice> ChooseOnValidation(int grid_size, const std::vector<int>& validation,
                                        const std::function<StatusOr<double>(int point, int query)>& score);

}  // namespace kls
