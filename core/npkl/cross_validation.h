// Automatic choice of an NPKL solver's loss weight (C for BCDNPKL and
// SimpleNPKL, γ for KL-ADMM) by k-fold cross-validation on the pairwise
// constraints (issue 25, item 3). One implementation for every family: the
// caller passes a "learn a kernel from these constraints with this value"
// callable; this file owns the folds, the scoring and the parallelism.
//
// Folds. The pairs i ≠ j are split into `folds` folds stratified by kind: the
// must-links and the cannot-links are shuffled separately by
// std::mt19937_64(seed) and dealt round-robin, so every fold holds ⌊·⌋ or ⌈·⌉
// of each kind. Self pairs (i, i) (KL-ADMM's protocol) carry no information
// about a grouping and stay in every training set.
//
// Score. For candidate v and fold f, K = learn(pairs ∉ f, v); the similarity
// of a pair is s_ij = K_ij, the quantity the NPKL losses act on (margins
// z_ij = T_ij K_ij); the threshold t is fitted on the *training* pairs — the
// midpoint between consecutive sorted training similarities that maximizes
// the training accuracy of "must-link iff s > t" (ties: the smallest such
// t) — and the fold's score is the accuracy of that rule on the held-out
// pairs, in [0, 1]. A candidate's score is the mean over folds; the best mean
// wins, ties going to the smaller value (the grid is searched in ascending
// order).
//
// Clustering score (options.clusters = c >= 2). A kernel that will be
// clustered is better scored the way it will be used: kernel k-means with c
// clusters on the fold's kernel (core/eval/kernel_kmeans.h, 10 k-means++
// restarts, seed 1), and a held-out pair is right when "same cluster" agrees
// with its kind. The threshold rule asks every pair's K_ij to clear one
// global bar; a solve that keeps its capacity on the constrained points
// (SimpleNPKL with B = 1 and C >= 1) leaves the pairs of unconstrained points
// near K_ij = 0, fails that bar, and yet clusters them well — with the
// threshold score SimpleNPKL chose C = 0.1 on 60 of 60 iris, ionosphere and
// breast-cancer trials where clustering prefers C = 1
// (docs/reproduction/npkl.md, "C / γ chosen by cross-validation").
//
// Parallelism: the (candidate, fold) learns are independent and run on up to
// num_threads threads (core/common/parallel.h); results do not depend on the
// thread count when `learn` is deterministic.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/constraints.h"
#include "core/model/learned_kernel.h"

namespace kls {

struct CrossValidationOptions {
  /// Folds, 2..20.
  int folds = 3;
  /// Candidate values, each finite and > 0, 1..32 of them (sorted and
  /// de-duplicated by CrossValidate). Default {0.1, 1, 10}: the papers' C
  /// ranges span decades, and one learn per decade keeps the cost at
  /// 3 × folds learns.
  std::vector<double> grid = {0.1, 1.0, 10.0};
  /// Seed of the fold assignment.
  uint64_t seed = 1;
  /// Threads for the (candidate, fold) learns, 1..256; 0 = all hardware threads.
  int num_threads = 1;
  /// 0 = the threshold score; c in [2, 1000] = the clustering score with c
  /// clusters (file comment), which needs c <= the number of points.
  int clusters = 0;
  /// The folds evaluated (each in [0, folds), no repeats); empty = all. The
  /// folds are assigned as always (AssignPairFolds over all `folds`); only
  /// these are learned and scored, so fold f's scores are the same whether it
  /// runs alone or with the others. `method auto` screens its candidates on
  /// fold 0 and finishes the leaders on the rest (core/npkl/auto_select.h).
  std::vector<int> only_folds;

  /// INVALID_ARGUMENT naming the field and value ("cross_validation.folds = 1
  /// must be in [2, 20]").
  Status Validate() const;
};

struct CrossValidationCandidate {
  double value = 0.0;
  std::vector<double> fold_scores;  ///< held-out pair accuracy per fold evaluated (only_folds' order), in [0, 1]
  double mean_score = 0.0;          ///< over the folds evaluated
};

struct CrossValidationResult {
  std::vector<CrossValidationCandidate> candidates;  ///< ascending value
  int best_index = 0;
  double best_value = 0.0;
  int folds = 0;
  int clusters = 0;  ///< options.clusters: 0 = threshold score
  double seconds = 0.0;
  /// Each candidate's mean_score over its fold_scores (summed in their order),
  /// then best_index (the first of the largest means) and best_value.
  void Score();
  /// {"folds":3,"score":"threshold" | "kmeans","clusters":c (kmeans only),"best":1,
  ///  "candidates":[{"value":0.1,"fold_scores":[…],"mean":…},…],"seconds":…}
  std::string Json() const;
};

/// The index of the first of the largest `values` (0 when empty): a grid's
/// choice, the smallest value on ties since grids ascend.
int FirstLargest(const std::vector<double>& values);

/// Learns a kernel over all n points from `train` with loss weight `value`.
/// Called concurrently from several threads.
using LearnKernelFn =
    std::function<StatusOr<LearnedKernel>(const PairwiseConstraints& train, double value, const SolveControl& control)>;

/// Fold of every pair: -1 for a self pair (always trained on), else 0..folds−1
/// (see the file comment). INVALID_ARGUMENT when some fold would get no pair
/// (fewer non-self pairs than folds).
StatusOr<std::vector<int>> AssignPairFolds(const PairwiseConstraints& constraints, int folds, uint64_t seed);

/// Accuracy on `test` of the K_ij-threshold rule fitted on `train` (file
/// comment), self pairs of either set ignored; 1 when `test` has no pair i ≠ j.
double HeldOutPairAccuracy(const LearnedKernel& kernel, const PairwiseConstraints& train,
                           const PairwiseConstraints& test);

/// K_ij of any kernel, for the pairs a score reads (a plain kernel needs no factor).
using PairSimilarityFn = std::function<double(int i, int j)>;
/// The same score for a kernel given by its entries.
double HeldOutPairAccuracy(const PairSimilarityFn& similarity, const PairwiseConstraints& train,
                           const PairwiseConstraints& test);

/// Accuracy on `test` of "must-link iff i and j fall in the same cluster" of
/// kernel k-means with `clusters` clusters on `kernel` (file comment), self
/// pairs ignored; 1 when `test` has no pair i ≠ j. Errors: INVALID_ARGUMENT
/// naming cross_validation.clusters when it exceeds the kernel's points;
/// KernelKMeans's errors otherwise.
StatusOr<double> HeldOutClusterPairAccuracy(const LearnedKernel& kernel, const PairwiseConstraints& test, int clusters,
                                            const SolveControl& control = SolveControl());

/// Runs the cross-validation. `control`'s cancellation and deadline reach
/// every learn (its progress and checkpoint sinks do not: the learns run
/// concurrently); a stop ends with CANCELLED / DEADLINE_EXCEEDED. The first
/// failing learn's error (in (candidate, fold) order) is returned, prefixed
/// with the value and fold.
StatusOr<CrossValidationResult> CrossValidate(const PairwiseConstraints& constraints, const LearnKernelFn& learn,
                                              const CrossValidationOptions& options,
                                              const SolveControl& control = SolveControl());

}  // namespace kls
