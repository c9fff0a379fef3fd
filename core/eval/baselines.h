// Baselines a learned kernel is measured against (issue 43), and the pieces of
// the inductive protocol of `kls-bench repro --holdout F` (bench/repro_bench.cc,
// docs/reproduction/generalization.md).
//
// 1. Pairs alone (PairsAloneClustering): a clustering from the pairs only, the
//    features unused — what constraint propagation over the scored points
//    achieves without learning anything about the features. Rule:
//      a. Must-links are merged by union-find into components; every point in
//         no must-link (including points in no pair at all) is its own
//         singleton component. Self pairs (i, i) are ignored.
//      b. A cannot-link (i, j) is an edge between the components of i and j
//         (an edge inside one component — contradictory input — is ignored).
//      c. Components are assigned to the k clusters one at a time, largest
//         first (ties: a seeded shuffle of the equal-size components, so the
//         order does not follow the point indices), each to the cluster with
//         the fewest cannot-link edges to the components already in it; ties
//         go to the cluster with the fewest points, then the smaller cluster
//         index.
//      d. Repair: in the same order, a component that shares its cluster with
//         a cannot-linked component moves to the cluster with strictly fewer
//         such conflicts (ties: fewest points, then the smaller index); passes
//         repeat until none moves (at most 20; each move lowers the number of
//         violated cannot-links).
//      e. If a cannot-link is still violated, an exact search: DSatur
//         backtracking (Brélaz 1979) over the components that have
//         cannot-links (most distinct neighbouring clusters first; ties: the
//         larger, then earlier in the order of c; clusters tried fewest points
//         first), then the other components, in order, to the cluster with the
//         fewest points. It replaces (a–d) when it finds a conflict-free
//         assignment within 200,000 steps; so when k allows one, the result
//         has no cannot-link pair together unless the search runs out of steps
//         (then the result of a–d stands).
//    Points in no pair thus fill the smallest clusters: a balanced guess.
//
// 2. Plain kernels as factors V (K = V Vᵀ), so kernel k-means and every
//    evaluation treat them exactly like learned kernels:
//      - linear: V = X (kernel k-means on V = X is k-means on the raw
//        features, the "raw k-means" baseline);
//      - RBF: K_ij = exp(−‖x_i − x_j‖² / width). Exact factor (top
//        eigenvectors of the n × n matrix, eigenvalues above 1e-10 · λ_max)
//        for n <= RbfOptions::max_exact_points, else Nyström with m seeded
//        random landmarks, V = K_nm U Λ^{-1/2} (eigenvalues of K_mm above
//        1e-10 · λ_max). A plain kernel is defined on every point, so held-out
//        points need no extension: the factor is computed over all of them.
//      - diffusion (Kondor & Lafferty 2002) on the k-NN graph: K = exp(−β Δ)
//        with Δ the graph's normalized Laplacian (the one the NPKL solvers
//        use, core/graph/laplacian.h), through Δ's `rank` smallest eigenpairs
//        (LaplacianDiffusionBasis: dense up to 300 points, shift-invert Lanczos
//        above; core/qsdp/smooth_basis.h): K ≈ U exp(−β Λ) Uᵀ, factor
//        V = U diag(exp(−β λ / 2)) with its rows scaled to unit length — the
//        normalized kernel K_ij / √(K_ii K_jj), unit diagonal like the RBF
//        kernel's. Why: Δ's smoothest eigenvectors are D^{1/2} 1_C (C a
//        cluster of the graph), so a row's length follows its point's degree
//        and kernel k-means splits high from low degrees; on two moons
//        (n = 300, noise 0.05, k = 5, 2 clusters) the k-means pair accuracy
//        was 0.54–0.66 at every β without the scaling, 1.00 with it from
//        β = 64 / scale on. The eigenvalues are shifted so that the
//        smallest is 0: Δ's δ I adds e^{−βδ} to every entry's scale only, which
//        no score sees. β = multiple / scale, scale the largest shifted
//        eigenvalue of the basis (the spectrum the basis keeps): at multiple 1
//        the last kept direction has weight e^{−1}, at 64 only the smoothest
//        directions (the graph's clusters) are left. The directions not kept
//        (λ above the basis) would have weights below e^{−multiple}.
//    The RBF width is chosen on the training pairs only (SelectRbfWidth):
//    grid = multiples of the median pairwise squared distance of the training
//    points; each candidate is scored by the clustering score of
//    core/npkl/cross_validation.h (HeldOutClusterPairAccuracy: kernel k-means
//    with `clusters` clusters on the training points, accuracy of "same
//    cluster" on the training pairs). Best score wins; ties go to the
//    candidate nearest (in log scale) to 1 × median, then the wider one.
//
// 3. Holdout split and restricted pair accuracies for the inductive protocol.
//
// Thread safety: every function is pure and may be called concurrently.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstdint>
#include <vector>

#include "core/common/status.h"
#include "core/data/constraints.h"

namespace kls {

/// Cluster ids in [0, k) for points 0..n−1 from the pairs alone (file
/// comment, rule 1). `seed` only orders equal-size components.
/// Errors (INVALID_ARGUMENT): n < 1, k < 1, k > n, constraints invalid for n.
StatusOr<std::vector<int>> PairsAloneClustering(int n, const PairwiseConstraints& constraints, int k,
                                                uint64_t seed);

/// V = X (the linear kernel K = X Xᵀ). Errors: empty or non-finite X.
StatusOr<Eigen::MatrixXd> LinearKernelFactor(const Eigen::MatrixXd& features);

struct RbfOptions {
  /// Up to this many points the factor is exact (an n × n eigendecomposition);
  /// above it, Nyström with `landmarks` landmarks.
  int max_exact_points = 3000;
  int landmarks = 500;
  uint64_t seed = 1;  ///< landmark draw
  Status Validate() const;
};

/// Factor V (n × r) of K_ij = exp(−‖x_i − x_j‖² / width) (file comment).
/// Errors: width <= 0 or non-finite, empty or non-finite X, bad options.
StatusOr<Eigen::MatrixXd> RbfKernelFactor(const Eigen::MatrixXd& features, double width,
                                          const RbfOptions& options = {});

/// The most points the diffusion kernel is computed for: its eigenpairs come
/// from a sparse LU of the Laplacian (shift-invert), whose fill grows fast on
/// k-NN graphs of many dimensions — measured on a 10-D two-Gaussian k = 5
/// graph: 0.15 s at 1,000 points, 3 s at 5,000, more than 300 s at 20,000
/// (under load). Above it the guard and `method auto` leave the diffusion
/// kernel out.
inline constexpr int kDiffusionMaxPoints = 3000;

/// The smallest eigenpairs of a graph Laplacian, for the diffusion kernel
/// (file comment, item 2).
struct LaplacianDiffusionBasis {
  Eigen::MatrixXd vectors;      ///< n × m orthonormal, ascending eigenvalue
  Eigen::VectorXd eigenvalues;  ///< shifted so that the smallest is 0, ascending
  double scale = 1.0;           ///< the largest shifted eigenvalue (1 when all are 0)
};

/// The `rank` (capped at n) smallest eigenpairs of the symmetric PSD sparse
/// `laplacian` (both triangles stored). Errors: rank < 1, an empty or
/// non-square matrix, the eigensolver's; FAILED_PRECONDITION above kDiffusionMaxPoints.
StatusOr<LaplacianDiffusionBasis> DiffusionBasis(const Eigen::SparseMatrix<double>& laplacian, int rank = 64);

/// V = U diag(exp(−β λ / 2)), β = multiple / basis.scale, rows scaled to unit
/// length (a zero row stays zero): the factor of the normalized diffusion
/// kernel K = V Vᵀ ≈ exp(−β Δ)_ij / √(exp(−β Δ)_ii exp(−β Δ)_jj).
/// Errors: multiple <= 0 or non-finite.
StatusOr<Eigen::MatrixXd> DiffusionKernelFactor(const LaplacianDiffusionBasis& basis, double multiple);

/// Median of ‖x_i − x_j‖² over pairs i < j (over a seeded sample of 2000
/// points when n is larger). Errors: fewer than 2 points, non-finite X.
StatusOr<double> MedianSquaredDistance(const Eigen::MatrixXd& features, uint64_t seed = 1);

struct RbfWidthSelection {
  double median = 0.0;              ///< median squared distance of the training points
  std::vector<double> multiples;    ///< the grid, ascending
  std::vector<double> scores;       ///< clustering score per multiple, in [0, 1]
  int best_index = 0;
  double width = 0.0;               ///< multiples[best_index] · median
};

struct RbfWidthOptions {
  std::vector<double> multiples = {0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0};
  /// k of the clustering score (>= 2, <= n); the score's k-means is
  /// HeldOutClusterPairAccuracy's (10 k-means++ restarts, seed 1).
  int clusters = 2;
  RbfOptions rbf;  ///< how each candidate's factor is computed (its seed: the landmarks, the median sample)
  Status Validate() const;
};

/// Chooses the RBF width on `train_features` (n × d) from `train_pairs`
/// (indices into those n points) — file comment, item 2.
/// Errors: bad options, no pair i ≠ j, and those of the pieces.
StatusOr<RbfWidthSelection> SelectRbfWidth(const Eigen::MatrixXd& train_features,
                                           const PairwiseConstraints& train_pairs, const RbfWidthOptions& options);

/// A seeded holdout split stratified by label: in every class of c points,
/// round(fraction · c) points — but at most c − 1, so each class keeps a
/// training point — go to `heldout`, chosen by a std::mt19937_64(seed)
/// shuffle of the class; the rest to `train`. Both lists ascending.
struct HoldoutSplit {
  std::vector<int> train;
  std::vector<int> heldout;
};
/// Errors (INVALID_ARGUMENT): fraction not in (0, 1), empty or negative labels,
/// an empty side (e.g. every class has one point).
StatusOr<HoldoutSplit> StratifiedHoldout(const std::vector<int>& labels, double fraction, uint64_t seed);

/// Pair accuracy over the pairs (i, j), i ∈ a, j ∈ b, of two disjoint index
/// sets (the train × held-out pairs): the fraction on which 1{truth_i =
/// truth_j} == 1{predicted_i = predicted_j}. O(|a| + |b|) expected.
/// Errors: sizes differ, negative labels, an index out of range, an empty set.
StatusOr<double> CrossPairAccuracy(const std::vector<int>& truth, const std::vector<int>& predicted,
                                   const std::vector<int>& a, const std::vector<int>& b);

/// Pair accuracy and NMI (core/eval/metrics.h) of `predicted` against `truth`
/// restricted to the points `subset` (>= 2 of them).
StatusOr<double> SubsetPairAccuracy(const std::vector<int>& truth, const std::vector<int>& predicted,
                                    const std::vector<int>& subset);
StatusOr<double> SubsetNmi(const std::vector<int>& truth, const std::vector<int>& predicted,
                           const std::vector<int>& subset);

}  // namespace kls
