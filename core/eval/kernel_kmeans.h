// Kernel k-means on a factored kernel K = V Vᵀ (V is n × r), the clustering
// step of the evaluation protocol (docs/reproduction/README.md).
//
// Why this is plain k-means: with K = V Vᵀ the rows v_i of V are an explicit
// feature map, φ(x_i) = v_i, since ‖φ_i − φ_j‖² = K_ii + K_jj − 2 K_ij =
// ‖v_i − v_j‖². A feature-space cluster mean is the mean of its rows of V, so
// kernel k-means in feature space is exactly Lloyd's k-means on the rows of V,
// and each iteration costs O(n r k) instead of the O(n²) of the kernel-trick
// formulation. No n × n matrix is ever formed (except by KernelKMeansDense,
// whose input already is one).
//
// Algorithm, per restart:
//   1. k-means++ seeding (D² sampling, Arthur & Vassilvitskii 2007): the first
//      center is a uniformly random row, each further center is a row drawn
//      with probability proportional to its squared distance to the nearest
//      center chosen so far.
//   2. Lloyd iterations. Assignment: squared distances ‖v‖² − 2 v·c + ‖c‖²
//      for blocks of rows against all centers, one Eigen GEMM per block;
//      ties go to the smaller cluster index. Update: cluster means.
//      A cluster left empty is re-seeded with the point farthest from its
//      assigned center (ties: smaller point index) among clusters that keep
//      at least one other point, so every cluster is non-empty afterwards.
//   3. Stop when the assignment no longer changes, when the relative decrease
//      of the objective is at most `tolerance`, at `max_iterations`, or when
//      the SolveControl asks to stop (checked once per Lloyd iteration).
// The restart with the lowest objective wins (ties: the earlier restart).
//
// Determinism: restart r draws from std::mt19937_64 seeded with a SplitMix64
// hash of (seed, r), and random numbers are turned into indices with integer
// arithmetic rather than std:: distributions, so results are reproducible for
// a given seed across standard libraries. The assignment blocks are fixed
// (independent of the thread count) and sums are taken serially in index
// order, so the result also does not depend on num_threads.
//
// Thread safety: KernelKMeans is a pure function; concurrent calls are safe.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"

namespace kls {

struct KMeansOptions {
  int num_clusters = 2;       ///< k; 1 <= k <= n (n is checked by KernelKMeans)
  int restarts = 10;          ///< independent k-means++ seedings; the best one is kept (>= 1)
  int max_iterations = 300;   ///< Lloyd iterations per restart (>= 1)
  double tolerance = 1e-8;    ///< stop when (J_prev − J) <= tolerance · J_prev (relative, >= 0)
  uint64_t seed = 42;         ///< base seed; restart r uses a seed derived from (seed, r)
  int num_threads = 1;        ///< threads for the assignment step; 0 = all hardware threads

  /// INVALID_ARGUMENT naming the field and value for any out-of-range field.
  Status Validate() const;
};

struct KMeansResult {
  std::vector<int> assignment;  ///< n cluster ids in [0, num_clusters); every cluster non-empty
  Eigen::MatrixXd centers;      ///< num_clusters × r, the mean of each cluster's rows of V
  double objective = 0.0;       ///< Σ_i ‖v_i − center(assignment_i)‖² (sum of squared distances)
  int iterations = 0;           ///< Lloyd iterations of the best restart
  int best_restart = 0;         ///< 0-based index of the restart that was kept
  /// Outcome of the best restart: kConverged (assignment stable or tolerance
  /// met), kIterationLimit, or kCancelled / kTimeLimit when the SolveControl
  /// stopped the run (remaining restarts are then skipped; the result is the
  /// best finished-or-interrupted restart so far and is still a valid clustering).
  Termination termination = Termination::kConverged;
};

/// Kernel k-means on K = V Vᵀ given the n × r factor V (row i = point i).
/// Cost O(restarts · (max_iterations + k) · n r k / threads) time,
/// O(n + k r + block · k) extra memory.
/// Errors: INVALID_ARGUMENT for an empty V, non-finite entries (naming the
/// first one), invalid options, or num_clusters > n ("options.num_clusters = 5
/// but the embedding has 3 rows"); RESOURCE_EXHAUSTED on allocation failure;
/// INTERNAL for any other exception.
StatusOr<KMeansResult> KernelKMeans(const Eigen::MatrixXd& V, const KMeansOptions& options,
                                    const SolveControl& control = SolveControl());

/// Convenience for small n: factors a dense symmetric kernel K = U Λ Uᵀ,
/// V = U Λ₊^{1/2} (negative eigenvalues clamped to zero, numerically-zero ones
/// dropped; see LearnedKernel::FromDenseKernel), then runs KernelKMeans on V.
/// O(n³) for the eigendecomposition. Errors: K not square, empty, non-finite
/// or not symmetric (to 1e-8 relative), plus those of KernelKMeans.
StatusOr<KMeansResult> KernelKMeansDense(const Eigen::MatrixXd& K, const KMeansOptions& options,
                                         const SolveControl& control = SolveControl());

}  // namespace kls
