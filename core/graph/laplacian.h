// Similarity graphs and the normalized graph Laplacian every NPKL solver uses
// (BCDNPKL paper §2):
//     Δ = (1+δ) I − D^{-1/2} S D^{-1/2},   D = diag(Σ_j S_ij).
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include "core/common/status.h"
#include "core/graph/approximate_knn.h"
#include "core/graph/knn.h"

namespace kls {

enum class EdgeWeight {
  kBinary,    ///< S_ij = 1 on k-NN edges
  kGaussian,  ///< S_ij = exp(−‖x_i − x_j‖² / 2σ²) on k-NN edges
};

struct GraphOptions {
  int k = 5;                               ///< neighbours per point (5 small sets, 50 adult)
  EdgeWeight weight = EdgeWeight::kBinary; ///< edge weights
  /// Gaussian width; <= 0 means automatic: half the mean distance of each
  /// point to its `sigma_neighbors` nearest neighbours (KL-ADMM §4, BCDNPKL §4.2).
  double sigma = 0.0;
  int sigma_neighbors = 10;                ///< neighbours used for the automatic σ
  double delta = 0.0;                      ///< δ >= 0 in Δ = (1+δ)I − D^{-1/2}SD^{-1/2}
  int num_threads = 0;                     ///< for the k-NN search; 0 = all cores
  /// Exact search up to `approximate_above` points, HNSW above (auto); or forced.
  KnnMethod knn_method = KnnMethod::kAuto;
  int approximate_above = kApproximateKnnAbove;
  /// Approximate graphs only: points whose exact neighbours are computed to
  /// report the graph's recall (0 = no check). 1,000 costs one 1,000 × n × d
  /// product (≈ 1 s at n = 100,000 × 123, ≈ 10 s at a million).
  int recall_sample = 1000;
  uint64_t recall_seed = 1;
  Status Validate(int num_points) const;
};

/// σ = ½ · mean_i mean_{t < m} dist(i, neighbour t), m = min(neighbors, g.k).
double AutomaticSigma(const KnnGraph& g, int neighbors);

/// Symmetric adjacency: S_ij = S_ji = w(i,j) when j is among i's first
/// `k` neighbours or i among j's (k <= g.k). Zero diagonal.
Eigen::SparseMatrix<double> SymmetricAdjacency(const KnnGraph& g, int k, EdgeWeight weight, double sigma);

/// Δ = (1+δ)I − D^{-1/2} S D^{-1/2}. A point with no edge (d_i = 0) gets the
/// row (1+δ)e_i: it is its own component, and Δ stays symmetric PSD (PD for δ > 0).
Eigen::SparseMatrix<double> NormalizedLaplacian(const Eigen::SparseMatrix<double>& adjacency, double delta);

struct Graph {
  KnnGraph knn;                          ///< max(k, sigma_neighbors) neighbours per point
  KnnMethod knn_method = KnnMethod::kExact;  ///< the search used (never kAuto)
  KnnRecall recall;                      ///< approximate graphs with recall_sample > 0; sample 0 otherwise
  double knn_seconds = 0.0;              ///< time of the neighbour search (without the recall check)
  IvfReport ivf;                         ///< IVF searches: the cells and probes used (cells 0 otherwise)
  double sigma = 0.0;                    ///< the width used (0 for binary weights)
  Eigen::SparseMatrix<double> adjacency; ///< S
  Eigen::SparseMatrix<double> laplacian; ///< Δ
};

/// k-NN search + weights + Laplacian in one call. Errors name the field.
StatusOr<Graph> BuildGraph(const Eigen::MatrixXd& points, const GraphOptions& options);

}  // namespace kls
