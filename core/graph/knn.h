// Exact k-nearest-neighbour search (Euclidean), blocked and multithreaded.
//
// Squared distances come from ‖q‖² + ‖x‖² − 2 q·x over blocks of queries ×
// blocks of references (one Eigen GEMM per tile), so the cost is one
// n×n×d matrix product split across threads with O(threads · tile) memory —
// never an n×n matrix. The k winners' distances are then recomputed directly,
// so reported distances are exact to rounding. Complexity O(n² d / threads).
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/status.h"

namespace kls {

/// For each point i, its k nearest other points, nearest first (ties broken by
/// the smaller index). Row-major: neighbour t of point i is at i*k + t.
struct KnnGraph {
  int num_points = 0;
  int k = 0;
  std::vector<int> indices;       ///< n·k neighbour ids (never i itself)
  std::vector<double> distances;  ///< n·k Euclidean distances, ascending per row

  int neighbor(int i, int t) const { return indices[static_cast<size_t>(i) * k + t]; }
  double distance(int i, int t) const { return distances[static_cast<size_t>(i) * k + t]; }
};

struct KnnOptions {
  int k = 5;                ///< neighbours per point; 1 <= k < n
  int num_threads = 0;      ///< 0 = all hardware threads
  int query_block = 256;    ///< rows of queries per tile
  int reference_block = 2048;  ///< rows of references per tile
  Status Validate(int num_points) const;
};

/// Exact k-NN of every row of `points` (n × d) among the other rows.
/// Errors: k >= n or k < 1 (naming k and n), empty or non-finite input.
/// Deterministic: the result does not depend on num_threads.
StatusOr<KnnGraph> ExactKnn(const Eigen::MatrixXd& points, const KnnOptions& options);

/// Exact k nearest other rows of `points` for the listed rows only: row t of
/// the result belongs to points.row(rows[t]) (num_points = rows.size()). The
/// recall check of an approximate graph (core/graph/approximate_knn.h).
StatusOr<KnnGraph> ExactKnnOfRows(const Eigen::MatrixXd& points, const std::vector<int>& rows,
                                  const KnnOptions& options);

}  // namespace kls
