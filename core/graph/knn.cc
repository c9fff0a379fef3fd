#include "core/graph/knn.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <string>
#include <utility>

#include "core/common/parallel.h"
#include "core/graph/knn_candidates.h"

namespace kls {

Status KnnOptions::Validate(int num_points) const {
  if (k < 1) return InvalidArgumentError("k = " + std::to_string(k) + " must be at least 1");
  if (k >= num_points) {
    return InvalidArgumentError("k = " + std::to_string(k) + " must be less than n = " +
                                std::to_string(num_points));
  }
  if (num_threads < 0) return InvalidArgumentError("num_threads = " + std::to_string(num_threads) + " must be >= 0");
  if (query_block < 1) return InvalidArgumentError("query_block = " + std::to_string(query_block) + " must be >= 1");
  if (reference_block < 1) return InvalidArgumentError("reference_block = " + std::to_string(reference_block) + " must be >= 1");
  return OkStatus();
}

namespace {

using knn_detail::Candidate;
using knn_detail::Offer;

// The k nearest other rows of the query rows `rows` (row t of the result for
// points.row(rows[t])): query blocks × reference blocks, one GEMM per tile.
StatusOr<KnnGraph> NearestOfRows(const Eigen::MatrixXd& points, const std::vector<int>& rows,
                                 const KnnOptions& options) {
  const int n = static_cast<int>(points.rows());
  KLS_RETURN_IF_ERROR(knn_detail::CheckKnnInput(points, options.Validate(n)));
  for (int r : rows) {
    if (r < 0 || r >= n) {
      return InvalidArgumentError("knn: query row " + std::to_string(r) + " is outside 0.." + std::to_string(n - 1));
    }
  }
  const int k = options.k;
  const int m = static_cast<int>(rows.size());
  try {
    KnnGraph g;
    g.num_points = m;
    g.k = k;
    g.indices.resize(static_cast<size_t>(m) * k);
    g.distances.resize(static_cast<size_t>(m) * k);
    const Eigen::VectorXd sq = points.rowwise().squaredNorm();
    const int qb = options.query_block, rb = options.reference_block;
    const int num_query_blocks = (m + qb - 1) / qb;
    ParallelFor(num_query_blocks, ResolveThreadCount(options.num_threads), [&](int b0, int b1) {
      Eigen::MatrixXd tile, queries;
      std::vector<std::vector<Candidate>> heaps(qb);
      for (int b = b0; b < b1; ++b) {
        const int q0 = b * qb, q1 = std::min(m, q0 + qb), nq = q1 - q0;
        queries.resize(nq, points.cols());
        for (int t = 0; t < nq; ++t) {
          queries.row(t) = points.row(rows[q0 + t]);
          heaps[t].clear();
          heaps[t].reserve(k + 1);
        }
        for (int r0 = 0; r0 < n; r0 += rb) {
          const int nr = std::min(rb, n - r0);
          tile.noalias() = points.middleRows(r0, nr) * queries.transpose();
          for (int t = 0; t < nq; ++t) {
            const int i = rows[q0 + t];
            const double qi = sq[i];
            const double* col = tile.col(t).data();
            auto& heap = heaps[t];
            for (int s = 0; s < nr; ++s) {
              const int j = r0 + s;
              if (j == i) continue;
              const double d2 = std::max(0.0, qi + sq[j] - 2.0 * col[s]);
              if (static_cast<int>(heap.size()) == k && d2 > heap.front().first) continue;
              Offer(heap, k, {d2, j});
            }
          }
        }
        for (int t = 0; t < nq; ++t) {
          const int i = rows[q0 + t];
          auto& heap = heaps[t];
          // Exact distances for the winners, then a stable (distance, index) order.
          for (auto& c : heap) c.first = (points.row(i) - points.row(c.second)).squaredNorm();
          knn_detail::StoreRow(g, q0 + t, heap);
        }
      }
    });
    return g;
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("knn: out of memory for n = " + std::to_string(n) + ", k = " +
                                  std::to_string(k));
  }
}

}  // namespace

StatusOr<KnnGraph> ExactKnn(const Eigen::MatrixXd& points, const KnnOptions& options) {
  std::vector<int> rows(points.rows());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int>(i);
  return NearestOfRows(points, rows, options);
}

StatusOr<KnnGraph> ExactKnnOfRows(const Eigen::MatrixXd& points, const std::vector<int>& rows,
                                  const KnnOptions& options) {
  return NearestOfRows(points, rows, options);
}

}  // namespace kls
