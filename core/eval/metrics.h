// Clustering and embedding quality metrics used by the evaluation protocols
// (kernel k-means on a learned kernel, then pair accuracy / NMI; k-NN accuracy
// of the embedding). See docs/reproduction/README.md.
//
// Labels are arbitrary non-negative integers: only equality between labels
// matters, so both clustering metrics are invariant to renaming the clusters
// of either partition, and label values need not be contiguous.
//
// Thread safety: every function is pure and may be called concurrently.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/status.h"

namespace kls {

/// Pair accuracy (Hoi et al. 2007; BCDNPKL §4 "Pair-Accuracy"): the fraction
/// of unordered pairs i < j on which the two partitions agree about being
/// together, i.e. 1{c_i = c_j} == 1{ĉ_i = ĉ_j}:
///
///   PA = 1 − (S_C + S_Ĉ − 2 S_CĈ) / C(n, 2),
///
/// where S_C = Σ_a C(|a|, 2) over clusters a of `truth`, S_Ĉ likewise for
/// `predicted`, and S_CĈ = Σ_ab C(n_ab, 2) over the cells of the contingency
/// table (pairs together in both). The counts are exact 64-bit integers.
///
/// Cost O(n) expected time and memory (labels are hashed, and only the
/// non-zero cells of the contingency table are built); never O(n²).
/// Errors (INVALID_ARGUMENT): n < 2, sizes differ ("predicted: has 10 entries
/// but truth has 12"), a negative label ("truth[3] = -1 is negative").
StatusOr<double> PairAccuracy(const std::vector<int>& truth, const std::vector<int>& predicted);

/// Normalized mutual information with arithmetic normalization (Kulis et al.
/// 2006; scikit-learn's default), natural logarithms:
///
///   NMI = 2 I(C; Ĉ) / (H(C) + H(Ĉ)),
///   I = Σ_ab (n_ab / n) log(n n_ab / (|a| |b|)),   H(C) = −Σ_a (|a|/n) log(|a|/n).
///
/// Defined as 1 when both partitions are a single cluster (H(C) + H(Ĉ) = 0);
/// it is 0 when exactly one of them is. The result is clamped to [0, 1]
/// against rounding. Same cost and errors as PairAccuracy, except that n = 1
/// is accepted (NMI = 1); n = 0 is an error.
StatusOr<double> NormalizedMutualInformation(const std::vector<int>& truth,
                                             const std::vector<int>& predicted);

/// Leave-one-out k-NN classification accuracy of an embedding: each point i
/// is classified by a majority vote of the labels of its k nearest *other*
/// points (Euclidean distance between rows of `embedding`), and the result is
/// the fraction of points whose vote equals labels[i].
///
/// Tie rules (deterministic):
///   - neighbours at equal distance are ordered by the smaller point index
///     (as in ExactKnn, core/graph/knn.h);
///   - when several classes share the largest vote count, the winner is the
///     class of the nearest neighbour whose class is among the tied ones.
///     For k = 2 with two different labels this means "the nearest
///     neighbour's label"; for k = 1 it is plain 1-NN.
///
/// `embedding` is n × r (row = point, e.g. V of K = V Vᵀ; Euclidean distance
/// between rows is then the kernel-induced distance). `num_threads` is passed
/// to the k-NN search (0 = all hardware threads); the result does not depend
/// on it. Cost O(n² r / threads) time, O(n k) memory.
/// Errors (INVALID_ARGUMENT): k < 1, k >= n, labels.size() != n, negative
/// labels, an empty or non-finite embedding.
StatusOr<double> KnnAccuracy(const Eigen::MatrixXd& embedding, const std::vector<int>& labels,
                             int k, int num_threads = 1);

}  // namespace kls
