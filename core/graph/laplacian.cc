#include "core/graph/laplacian.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <string>
#include <vector>

namespace kls {

Status GraphOptions::Validate(int num_points) const {
  if (k < 1 || k >= num_points) {
    return InvalidArgumentError("graph.k = " + std::to_string(k) + " must be in [1, n) with n = " +
                                std::to_string(num_points));
  }
  if (!std::isfinite(sigma)) return InvalidArgumentError("graph.sigma = " + std::to_string(sigma) + " is not finite");
  if (weight == EdgeWeight::kGaussian && sigma <= 0.0 && sigma_neighbors < 1) {
    return InvalidArgumentError("graph.sigma_neighbors = " + std::to_string(sigma_neighbors) + " must be >= 1");
  }
  if (!(delta >= 0.0) || !std::isfinite(delta)) {
    return InvalidArgumentError("graph.delta = " + std::to_string(delta) + " must be finite and >= 0");
  }
  if (num_threads < 0) return InvalidArgumentError("graph.num_threads = " + std::to_string(num_threads) + " must be >= 0");
  if (approximate_above < 1) {
    return InvalidArgumentError("graph.approximate_above = " + std::to_string(approximate_above) + " must be >= 1");
  }
  if (recall_sample < 0) {
    return InvalidArgumentError("graph.recall_sample = " + std::to_string(recall_sample) + " must be >= 0");
  }
  if (knn_method == KnnMethod::kHnsw && !HaveHnsw()) {
    return FailedPreconditionError("graph.knn = hnsw: this build has no FAISS (install libfaiss-dev and rebuild)");
  }
  return OkStatus();
}

double AutomaticSigma(const KnnGraph& g, int neighbors) {
  const int m = std::min(neighbors, g.k);
  if (g.num_points == 0 || m == 0) return 0.0;
  double total = 0.0;
  for (int i = 0; i < g.num_points; ++i) {
    double s = 0.0;
    for (int t = 0; t < m; ++t) s += g.distance(i, t);
    total += s / m;
  }
  return 0.5 * total / g.num_points;
}

Eigen::SparseMatrix<double> SymmetricAdjacency(const KnnGraph& g, int k, EdgeWeight weight, double sigma) {
  k = std::min(k, g.k);
  const double inv_two_sigma2 = sigma > 0.0 ? 1.0 / (2.0 * sigma * sigma) : 0.0;
  std::vector<Eigen::Triplet<double>> triplets;
  triplets.reserve(static_cast<size_t>(g.num_points) * k * 2);
  for (int i = 0; i < g.num_points; ++i) {
    for (int t = 0; t < k; ++t) {
      const int j = g.neighbor(i, t);
      const double d = g.distance(i, t);
      const double w = weight == EdgeWeight::kBinary ? 1.0 : std::exp(-d * d * inv_two_sigma2);
      triplets.emplace_back(i, j, w);
      triplets.emplace_back(j, i, w);
    }
  }
  Eigen::SparseMatrix<double> s(g.num_points, g.num_points);
  // An edge found from both ends appears twice with the same weight: keep one.
  s.setFromTriplets(triplets.begin(), triplets.end(), [](double a, double) { return a; });
  s.makeCompressed();
  return s;
}

Eigen::SparseMatrix<double> NormalizedLaplacian(const Eigen::SparseMatrix<double>& adjacency, double delta) {
  const int n = static_cast<int>(adjacency.rows());
  Eigen::VectorXd inv_sqrt_degree(n);
  for (int i = 0; i < n; ++i) {
    const double d = adjacency.col(i).sum();  // symmetric: column sum = row sum
    inv_sqrt_degree[i] = d > 0.0 ? 1.0 / std::sqrt(d) : 0.0;
  }
  std::vector<Eigen::Triplet<double>> triplets;
  triplets.reserve(adjacency.nonZeros() + n);
  for (int j = 0; j < n; ++j) {
    triplets.emplace_back(j, j, 1.0 + delta);
    for (Eigen::SparseMatrix<double>::InnerIterator it(adjacency, j); it; ++it) {
      triplets.emplace_back(it.row(), j, -inv_sqrt_degree[it.row()] * it.value() * inv_sqrt_degree[j]);
    }
  }
  Eigen::SparseMatrix<double> lap(n, n);
  lap.setFromTriplets(triplets.begin(), triplets.end());
  lap.makeCompressed();
  return lap;
}

StatusOr<Graph> BuildGraph(const Eigen::MatrixXd& points, const GraphOptions& options) {
  const int n = static_cast<int>(points.rows());
  if (n < 2) return InvalidArgumentError("points: a graph needs at least 2 points, got " + std::to_string(n));
  KLS_RETURN_IF_ERROR(options.Validate(n));
  const bool auto_sigma = options.weight == EdgeWeight::kGaussian && options.sigma <= 0.0;
  KnnOptions knn_options;
  knn_options.k = options.k;
  if (auto_sigma) knn_options.k = std::min(n - 1, std::max(options.k, options.sigma_neighbors));
  knn_options.num_threads = options.num_threads;
  try {
    Graph graph;
    graph.knn_method = ResolveKnnMethod(options.knn_method, n, options.approximate_above);
    const auto start = std::chrono::steady_clock::now();
    if (graph.knn_method == KnnMethod::kIvf) {
      IvfOptions ivf;
      ivf.k = knn_options.k;
      ivf.num_threads = options.num_threads;
      KLS_ASSIGN_OR_RETURN(graph.knn, IvfKnn(points, ivf, &graph.ivf));
    } else if (graph.knn_method == KnnMethod::kHnsw) {
      HnswOptions hnsw;
      hnsw.k = knn_options.k;
      hnsw.num_threads = options.num_threads;
      KLS_ASSIGN_OR_RETURN(graph.knn, HnswKnn(points, hnsw));
    } else {
      KLS_ASSIGN_OR_RETURN(graph.knn, ExactKnn(points, knn_options));
    }
    graph.knn_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (graph.knn_method != KnnMethod::kExact && options.recall_sample > 0) {
      KLS_ASSIGN_OR_RETURN(graph.recall, MeasureKnnRecall(points, graph.knn, options.recall_sample,
                                                          options.recall_seed, options.num_threads));
    }
    if (options.weight == EdgeWeight::kGaussian) {
      graph.sigma = auto_sigma ? AutomaticSigma(graph.knn, options.sigma_neighbors) : options.sigma;
      if (!(graph.sigma > 0.0)) {
        return InvalidArgumentError("graph.sigma: the automatic width is 0 (all neighbours coincide); set sigma explicitly");
      }
    }
    graph.adjacency = SymmetricAdjacency(graph.knn, options.k, options.weight, graph.sigma);
    graph.laplacian = NormalizedLaplacian(graph.adjacency, options.delta);
    return graph;
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("graph: out of memory for n = " + std::to_string(n));
  }
}

}  // namespace kls
