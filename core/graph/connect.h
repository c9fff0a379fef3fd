// Connected components of a k-NN graph and two standard repairs for a graph
// that falls apart into several components:
//
//   grow k:  use the (k+1)-, (k+2)-, … NN graph, up to a bound, until it is
//            connected (the k-NN lists are computed once, at the bound);
//   MST:     add the c − 1 shortest edges that join the c components: a
//            minimum spanning tree of the graph whose vertices are the
//            components and whose edge weights are the shortest Euclidean
//            distances between them (Borůvka's algorithm: every round joins
//            each component to its nearest other component, ties broken by
//            the smaller point indices, so the result is unique).
//
// Added edges get the weight the graph's own edges would have at that
// distance (1 for binary weights), so a consumer treats them like k-NN edges.
//
// Thread safety: free functions without shared state.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/graph/knn.h"
#include "core/graph/laplacian.h"

namespace kls {

enum class ConnectMode {
  kError,  ///< leave the graph as it is; the caller fails on > 1 component
  kGrowK,  ///< increase k until connected, at most to the bound
  kMst,    ///< add the shortest edges joining the components
};

/// "error", "grow_k", "mst".
const char* ConnectModeName(ConnectMode m);

/// One edge added between two components: points i < j at Euclidean distance `distance`.
struct ComponentEdge {
  int i = 0;
  int j = 0;
  double distance = 0.0;
  bool operator==(const ComponentEdge& o) const { return i == o.i && j == o.j && distance == o.distance; }
};

/// Labels every vertex of a symmetric adjacency with its component id
/// (0, 1, … in order of the smallest vertex) and returns the count. O(n + nnz).
int ConnectedComponents(const Eigen::SparseMatrix<double>& adjacency, std::vector<int>* labels);

/// The c − 1 shortest edges joining the components labelled by `labels`
/// (ids 0..num_components−1) of the rows of `points`, each with i < j, in the
/// order they were chosen. O(n² d · log c) time, O(n) memory.
std::vector<ComponentEdge> JoinComponents(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                          int num_components);

/// What MakeConnectedKnnGraph did.
struct ConnectReport {
  ConnectMode mode = ConnectMode::kError;
  int components = 1;   ///< components of the requested k-NN graph
  int k = 0;            ///< the k requested
  int k_used = 0;       ///< the k of the returned graph (> k only after grow_k)
  std::vector<ComponentEdge> added_edges;  ///< MST edges added (mst only)
  /// A JSON object for job summaries: {"mode","components","k","k_used","added_edges":[[i,j,d],…]}.
  std::string Json() const;
};

struct ConnectedKnnOptions {
  int k = 4;                               ///< neighbours per point
  ConnectMode mode = ConnectMode::kError;
  int max_k = 0;                           ///< grow_k bound; <= 0 = min(n − 1, 4k)
  EdgeWeight weight = EdgeWeight::kBinary;
  double sigma = 0.0;                      ///< Gaussian width (EdgeWeight::kGaussian), > 0
  int num_threads = 1;                     ///< k-NN search threads (0 = all cores)
};

/// The symmetric k-NN adjacency of `points` (SymmetricAdjacency), made
/// connected per `options.mode`. FAILED_PRECONDITION when it stays
/// disconnected: always for kError with > 1 component ("the 4-NN graph has 11
/// connected components; " + `why`), for kGrowK when the bound is reached.
/// `report` (may be null) says what was found and added.
StatusOr<Eigen::SparseMatrix<double>> MakeConnectedKnnGraph(const Eigen::MatrixXd& points,
                                                            const ConnectedKnnOptions& options, const std::string& why,
                                                            ConnectReport* report);

}  // namespace kls
