// Approximate k-nearest-neighbour graphs for large n, and the recall check
// that keeps them honest.
//
// The exact graph (core/graph/knn.h) is one n × n × d product: 47–80 s at
// n = 100,000 × 123 on two cores, hours at a million. Above
// `kApproximateKnnAbove` points the graph is built with HNSW (Malkov and
// Yashunin, "Efficient and robust approximate nearest neighbor search using
// Hierarchical Navigable Small World graphs", TPAMI 2018) from FAISS
// (IndexHNSWFlat, Debian's libfaiss-dev): every point is inserted once and then
// searched for its k + 1 nearest (itself dropped). Distances of the returned
// neighbours are recomputed in float64, so what a graph reports is exact; only
// *which* neighbours were found is approximate.
//
// Recall is measured, never assumed: `MeasureKnnRecall` takes a seeded sample of
// points, finds their exact k nearest among all n (the blocked product of
// knn.h, restricted to the sample's rows) and counts, per sampled point, the
// graph's neighbours that are at most as far as the true k-th neighbour. With
// ties (binary features have many equal distances) any of the tied points is a
// correct k-th neighbour, so this "distance recall" is the standard recall
// without ties and the only meaningful one with them.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string>

#include "core/common/status.h"
#include "core/graph/knn.h"

namespace kls {

/// How a k-NN graph is searched.
enum class KnnMethod {
  kAuto,   ///< exact up to `approximate_above` points, IVF above
  kExact,  ///< ExactKnn: the oracle, O(n² d)
  kIvf,    ///< IvfKnn: k-means cells, each cell against its nearest cells, O(n · probes · n/cells · d)
  kHnsw,   ///< FAISS IndexHNSWFlat (builds with FAISS only)
};

/// The size above which kAuto switches to HNSW. At 50,000 × 123 the exact graph
/// takes 15–21 s on two cores and HNSW about a fifth of that (docs/BENCHMARKS.md).
inline constexpr int kApproximateKnnAbove = 50000;

const char* KnnMethodName(KnnMethod m);
/// "auto" | "exact" | "hnsw"; errors name the value.
StatusOr<KnnMethod> ParseKnnMethod(const std::string& name);

/// True when this build links FAISS (HNSW available).
bool HaveHnsw();

/// The method kAuto resolves to for n points (kExact or kIvf).
KnnMethod ResolveKnnMethod(KnnMethod m, int num_points, int approximate_above = kApproximateKnnAbove);

/// The inverted-file graph: k-means splits the points into `cells` cells (from
/// a sample), and every cell's points are compared with the points of
/// `probes` cells: itself and the cells its points most often have among
/// their `runner_ups` next-nearest centroids (the far sides of its
/// boundaries), then the cells of the nearest centroids — one
/// float32 GEMM per (cell, probed cell) tile, so the work is the exact graph's
/// product restricted to probes / cells of the pairs, at GEMM speed. Candidates
/// are ranked on the float32 distances and the k winners' distances recomputed
/// in float64. Deterministic for a given input and seed (any thread count).
struct IvfOptions {
  int k = 5;                ///< neighbours per point; 1 <= k < n
  int num_threads = 0;      ///< 0 = all cores
  int cell_size = 1000;     ///< points per cell on average: cells = ceil(n / cell_size)
  /// Cells compared with each cell (its own included); 0 = automatic: the
  /// smallest count whose distance recall, measured on `probe_sample` points
  /// after the k-means (their exact neighbours, and the position of each
  /// neighbour's cell in the probe list the search gives their cell), reaches
  /// `probe_recall_target`. A fixed count or a formula in n fitted on one data
  /// set does not carry over: ⌈24 · (cells / 100)^¼⌉ gave recall 0.966 at a
  /// million adult-like points but 0.834 on 32-dimensional Gaussian classes.
  int probes = 0;
  /// Automatic probes: the recall the sample must reach. Above the issue's
  /// 0.95 bar by about three standard errors of a 512-point sample's mean
  /// recall (per-point recall spread ≈ 0.1–0.15 ⇒ standard error ≈ 0.005–0.007).
  double probe_recall_target = 0.97;
  int probe_sample = 512;   ///< automatic probes: sampled points (all when fewer)
  int runner_ups = 3;       ///< next-nearest centroids of each point that vote for its cell's probes
  int kmeans_iterations = 10;  ///< Lloyd iterations on the sample
  int sample_per_cell = 40; ///< k-means sample: cells × this many points (all when fewer)
  uint64_t seed = 1;
  Status Validate(int num_points) const;
};

/// What an IVF search did (optional output of IvfKnn).
struct IvfReport {
  int cells = 0;
  int probes = 0;                    ///< probes per cell the search used (given or measured)
  int probe_sample = 0;              ///< points of the measurement (0: probes were given)
  double probe_sample_recall = 0.0;  ///< their distance recall at `probes`, predicted exactly for this search
  double probe_seconds = 0.0;        ///< time of the measurement (part of the search's time)
};

/// Approximate k-NN of every row among the other rows, in ExactKnn's layout.
StatusOr<KnnGraph> IvfKnn(const Eigen::MatrixXd& points, const IvfOptions& options, IvfReport* report = nullptr);

struct HnswOptions {
  int k = 5;                 ///< neighbours per point; 1 <= k < n
  int num_threads = 0;       ///< 0 = all cores (search; insertion too unless deterministic)
  int m = 32;                ///< HNSW links per node (FAISS `M`)
  int ef_construction = 80;  ///< candidate list while inserting
  int ef_search = 0;         ///< candidate list while searching; 0 = max(2k + 16, 64)
  /// Insert points one thread at a time, in index order: the graph is then a
  /// function of the data alone (a resumed job rebuilds the same Laplacian its
  /// checkpoint was computed on). Search stays parallel (it is read-only).
  bool deterministic = true;
  Status Validate(int num_points) const;
};

/// Approximate k-NN of every row of `points` (n × d) among the other rows, in
/// the layout of ExactKnn (nearest first, ties by the smaller index, exact
/// float64 distances). Errors: as ExactKnn; FailedPrecondition when the build
/// has no FAISS.
StatusOr<KnnGraph> HnswKnn(const Eigen::MatrixXd& points, const HnswOptions& options);

struct KnnRecall {
  int sample = 0;        ///< points checked
  double recall = 0.0;   ///< mean over the sample of |found ∩ true| / k (distance recall, above)
  double min_recall = 0.0;  ///< the worst sampled point
  double seconds = 0.0;  ///< time of the check
};

/// Distance recall of `graph` (built on `points`) on `sample` points drawn
/// without replacement with `seed` (all points when sample >= n).
StatusOr<KnnRecall> MeasureKnnRecall(const Eigen::MatrixXd& points, const KnnGraph& graph, int sample,
                                     uint64_t seed, int num_threads = 0);

}  // namespace kls
