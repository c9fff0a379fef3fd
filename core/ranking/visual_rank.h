// VisualRank (Jing & Baluja 2008; thesis ch. 6, §6.2).
//
//     VR = λ_d K̂ VR + (1 − λ_d) P,                                   (§6.2)
//
// K̂ the column-stochastic form of a similarity matrix K (0 <= K̂_ij <= 1,
// every column sums to 1), λ_d ∈ [0, 1) the damping factor and P a prior
// score vector (uniform 1/n in the thesis). Any kernel can be plugged in: a
// parametric one (linear, polynomial, RBF on visual features, tf-idf on tags)
// or a learned one (npk_ranking.h).
//
// Column normalization. Kernel values can be negative (linear or learned
// kernels); a random walk needs non-negative weights, so negative entries are
// clipped to 0 before the columns are divided by their sums. A column that
// sums to 0 (an item similar to nothing) is replaced by the prior, the
// PageRank convention for dangling nodes, which keeps K̂ column-stochastic.
//
// Method. Power iteration VR ← λ_d K̂ VR + (1 − λ_d) P from VR = P. For a
// column-stochastic K̂ the map is a contraction in ‖·‖₁ with factor λ_d, so
// after t steps ‖VR_t − VR*‖₁ <= λ_d^t ‖VR_0 − VR*‖₁; the solver stops when
// ‖VR_t − VR_{t−1}‖₁ <= tolerance (then ‖VR_t − VR*‖₁ <= λ_d/(1−λ_d) · tol).
// Cost O(n²) per iteration for a dense K, O(n² + iterations · n²) in all.
//
// Thread safety: pure functions, re-entrant.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"

namespace kls {

struct VisualRankOptions {
  /// λ_d ∈ [0, 1): weight of the similarity walk; 1 − λ_d goes to the prior. JB08/PageRank use 0.85.
  double damping = 0.85;
  /// Stop when ‖VR_t − VR_{t−1}‖₁ <= tolerance (> 0).
  double tolerance = 1e-12;
  /// Power iterations (>= 1).
  int max_iterations = 10000;
  /// Zero K's diagonal before normalizing (the walk never stays put); off in the thesis.
  bool zero_diagonal = false;

  /// INVALID_ARGUMENT naming the field and value when out of range.
  Status Validate() const;
};

struct VisualRankResult {
  Eigen::VectorXd scores;  ///< VR, n values, non-negative, summing to sum(P)
  SolveReport stats;        ///< iterations, termination, final_objective = last ‖ΔVR‖₁
};

/// K̂: clip negatives, optionally zero the diagonal, divide each column by its
/// sum; a zero column becomes `prior` / sum(prior). Errors: non-square or
/// non-finite K, prior of the wrong size, negative or all-zero prior.
StatusOr<Eigen::MatrixXd> ColumnStochastic(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& prior,
                                           bool zero_diagonal = false);

/// Solves §6.2 by power iteration. `prior` empty means uniform 1/n.
/// Errors: INVALID_ARGUMENT for bad options, an empty/non-square/non-finite
/// kernel or a bad prior (size, negative, all zero).
StatusOr<VisualRankResult> SolveVisualRank(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& prior,
                                           const VisualRankOptions& options,
                                           const SolveControl& control = SolveControl());

/// Indices 0..n−1 ordered by descending score (ties: smaller index first).
std::vector<int> RankByScore(const Eigen::VectorXd& scores);

}  // namespace kls
