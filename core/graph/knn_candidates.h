// Candidate lists shared by the exact and approximate k-NN searches
// (core/graph/knn.cc, core/graph/approximate_knn.cc): a bounded max-heap of
// (squared distance, index) and the write of a finished row into a KnnGraph.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <utility>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/graph/knn.h"

namespace kls::knn_detail {

using Candidate = std::pair<double, int>;  // (squared distance, index); lexicographic order

/// Keeps the k smallest candidates in a max-heap (worst on top).
template <typename T>
inline void Offer(std::vector<T>& heap, int k, T c) {
  if (static_cast<int>(heap.size()) < k) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end());
  } else if (c < heap.front()) {
    std::pop_heap(heap.begin(), heap.end());
    heap.back() = c;
    std::push_heap(heap.begin(), heap.end());
  }
}

/// The input checks every k-NN search shares: non-empty, `options_ok`
/// (the search's own option check, reported under "knn"), finite.
inline Status CheckKnnInput(const Eigen::MatrixXd& points, const Status& options_ok) {
  if (points.rows() == 0 || points.cols() == 0) {
    return InvalidArgumentError("points: empty input (" + std::to_string(points.rows()) + " x " +
                                std::to_string(points.cols()) + ")");
  }
  KLS_RETURN_IF_ERROR(options_ok.WithContext("knn"));
  if (!points.allFinite()) return InvalidArgumentError("points: contains NaN or Inf");
  return OkStatus();
}

/// Sorts `found` (exact squared distances) by (distance, index) and writes its
/// first g.k entries as row `row` of `g` (distances as square roots).
inline void StoreRow(KnnGraph& g, int row, std::vector<Candidate>& found) {
  std::sort(found.begin(), found.end());
  for (int s = 0; s < g.k; ++s) {
    g.indices[static_cast<size_t>(row) * g.k + s] = found[s].second;
    g.distances[static_cast<size_t>(row) * g.k + s] = std::sqrt(found[s].first);
  }
}

}  // namespace kls::knn_detail
