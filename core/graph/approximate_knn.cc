#include "core/graph/approximate_knn.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/common/parallel.h"
#include "core/graph/knn_candidates.h"

#ifdef KLS_HAVE_FAISS
#include <faiss/IndexHNSW.h>
#include <omp.h>
#endif

namespace kls {

const char* KnnMethodName(KnnMethod m) {
  switch (m) {
    case KnnMethod::kAuto: return "auto";
    case KnnMethod::kExact: return "exact";
    case KnnMethod::kIvf: return "ivf";
    case KnnMethod::kHnsw: return "hnsw";
  }
  return "auto";
}

StatusOr<KnnMethod> ParseKnnMethod(const std::string& name) {
  for (KnnMethod m : {KnnMethod::kAuto, KnnMethod::kExact, KnnMethod::kIvf, KnnMethod::kHnsw}) {
    if (name == KnnMethodName(m)) return m;
  }
  return InvalidArgumentError("knn method = \"" + name + "\" is not one of auto, exact, ivf, hnsw");
}

bool HaveHnsw() {
#ifdef KLS_HAVE_FAISS
  return true;
#else
  return false;
#endif
}

KnnMethod ResolveKnnMethod(KnnMethod m, int num_points, int approximate_above) {
  if (m != KnnMethod::kAuto) return m;
  return num_points > approximate_above ? KnnMethod::kIvf : KnnMethod::kExact;
}

Status IvfOptions::Validate(int num_points) const {
  KnnOptions knn;
  knn.k = k;
  knn.num_threads = num_threads;
  KLS_RETURN_IF_ERROR(knn.Validate(num_points));
  if (cell_size < 16) return InvalidArgumentError("ivf.cell_size = " + std::to_string(cell_size) + " must be >= 16");
  if (probes < 0) return InvalidArgumentError("ivf.probes = " + std::to_string(probes) + " must be >= 0 (0 = automatic)");
  if (!(probe_recall_target > 0.0 && probe_recall_target <= 1.0)) {
    return InvalidArgumentError("ivf.probe_recall_target = " + std::to_string(probe_recall_target) +
                                " must be in (0, 1]");
  }
  if (probe_sample < 1) {
    return InvalidArgumentError("ivf.probe_sample = " + std::to_string(probe_sample) + " must be >= 1");
  }
  if (runner_ups < 0) return InvalidArgumentError("ivf.runner_ups = " + std::to_string(runner_ups) + " must be >= 0");
  if (kmeans_iterations < 0) {
    return InvalidArgumentError("ivf.kmeans_iterations = " + std::to_string(kmeans_iterations) + " must be >= 0");
  }
  if (sample_per_cell < 1) {
    return InvalidArgumentError("ivf.sample_per_cell = " + std::to_string(sample_per_cell) + " must be >= 1");
  }
  return OkStatus();
}

namespace {

using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;
// Row-major float64 copy of the points: the exact distance recomputations
// read whole rows (a column-major row is d cache lines apart).
using RowsD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using knn_detail::Candidate;
using knn_detail::Offer;

// The `r` nearest centroids of every row of `x`, nearest first (ties to the
// smaller index): out[i * r + t]. Blocked GEMM.
std::vector<int> NearestCentroids(const MatrixF& x, const MatrixF& centroids, int r, int threads) {
  const int n = static_cast<int>(x.rows());
  const int cells = static_cast<int>(centroids.rows());
  r = std::min(r, cells);
  const Eigen::VectorXf c2 = centroids.rowwise().squaredNorm();
  std::vector<int> out(static_cast<size_t>(n) * r);
  constexpr int kBlock = 2048;
  ParallelFor((n + kBlock - 1) / kBlock, threads, [&](int b0, int b1) {
    MatrixF dots;
    std::vector<std::pair<float, int>> best;
    for (int b = b0; b < b1; ++b) {
      const int r0 = b * kBlock, nr = std::min(kBlock, n - r0);
      dots.noalias() = centroids * x.middleRows(r0, nr).transpose();  // cells × nr
      for (int t = 0; t < nr; ++t) {
        best.clear();
        for (int c = 0; c < cells; ++c) {
          Offer(best, r, std::pair<float, int>{c2[c] - 2.0f * dots(c, t), c});
        }
        std::sort(best.begin(), best.end());
        for (int s = 0; s < r; ++s) out[static_cast<size_t>(r0 + t) * r + s] = best[s].second;
      }
    }
  });
  return out;
}

// 0..n−1 with its first m entries a seeded uniform sample without replacement
// (a partial Fisher–Yates shuffle); m <= n.
std::vector<int> ShuffledPrefix(int n, int m, uint64_t seed) {
  std::vector<int> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  std::mt19937_64 rng(seed);
  for (int t = 0; t < m; ++t) std::swap(rows[t], rows[std::uniform_int_distribution<int>(t, n - 1)(rng)]);
  return rows;
}

// Lloyd's k-means on a seeded sample; centroids start at distinct sampled points.
MatrixF SampleKMeans(const MatrixF& x, int cells, const IvfOptions& o, int threads) {
  const int n = static_cast<int>(x.rows());
  const int m = static_cast<int>(std::min<int64_t>(n, static_cast<int64_t>(cells) * o.sample_per_cell));
  const std::vector<int> rows = ShuffledPrefix(n, m, o.seed);
  MatrixF sample(m, x.cols());
  for (int t = 0; t < m; ++t) sample.row(t) = x.row(rows[t]);
  MatrixF centroids = sample.topRows(cells);
  for (int it = 0; it < o.kmeans_iterations; ++it) {
    const std::vector<int> owner = NearestCentroids(sample, centroids, 1, threads);
    MatrixF sums = MatrixF::Zero(cells, x.cols());
    std::vector<int> count(cells, 0);
    for (int t = 0; t < m; ++t) {
      sums.row(owner[t]) += sample.row(t);
      ++count[owner[t]];
    }
    for (int c = 0; c < cells; ++c) {
      if (count[c] > 0) centroids.row(c) = sums.row(c) / static_cast<float>(count[c]);  // empty: kept
    }
  }
  return centroids;
}

// For every cell c: itself, then the cells its own points most often have
// among their runner-up centroids (`nearest` holds each point's `r` nearest
// cells, its own first) — the cells across c's boundaries where its points'
// neighbours live — then cells by centroid distance, until there are `probes`
// cells holding at least k + 1 points. The list for `probes` = p is the
// first max(p, p_k) cells of the list for `probes` = cells (every non-empty
// cell, ranked), p_k the shortest prefix holding k + 1 points. With `only`,
// lists are built for the cells it marks (the others stay empty).
std::vector<std::vector<int>> ProbeLists(const MatrixF& centroids, const std::vector<int>& size,
                                         const std::vector<int>& nearest, int r, int probes, int k,
                                         const std::vector<char>* only = nullptr) {
  const int cells = static_cast<int>(centroids.rows());
  const size_t n = nearest.size() / static_cast<size_t>(r);
  std::vector<std::pair<int, int>> votes;  // (own cell, runner-up cell), one per point and runner-up
  votes.reserve(n * static_cast<size_t>(r - 1));
  for (size_t i = 0; i < n; ++i) {
    for (int t = 1; t < r; ++t) votes.emplace_back(nearest[i * r], nearest[i * r + t]);
  }
  std::sort(votes.begin(), votes.end());
  const Eigen::VectorXf c2 = centroids.rowwise().squaredNorm();
  const MatrixF dots = centroids * centroids.transpose();
  std::vector<std::vector<int>> lists(cells);
  std::vector<std::pair<float, int>> by_distance(cells);
  std::vector<std::pair<int, int>> by_votes;  // (−count, cell)
  size_t v = 0;
  for (int c = 0; c < cells; ++c) {
    by_votes.clear();
    for (; v < votes.size() && votes[v].first == c;) {
      const int e = votes[v].second;
      int count = 0;
      for (; v < votes.size() && votes[v].first == c && votes[v].second == e; ++v) ++count;
      by_votes.emplace_back(-count, e);
    }
    if (size[c] == 0 || (only != nullptr && !(*only)[c])) continue;
    std::sort(by_votes.begin(), by_votes.end());
    std::vector<char> taken(cells, 0);
    int points = 0;
    auto take = [&](int e) {
      if (taken[e] || size[e] == 0) return;
      taken[e] = 1;
      lists[c].push_back(e);
      points += size[e];
    };
    auto enough = [&] { return static_cast<int>(lists[c].size()) >= probes && points > k; };
    take(c);
    for (size_t t = 0; t < by_votes.size() && !enough(); ++t) take(by_votes[t].second);
    if (enough()) continue;
    for (int e = 0; e < cells; ++e) by_distance[e] = {c2[c] + c2[e] - 2.0f * dots(c, e), e};
    std::sort(by_distance.begin(), by_distance.end());
    for (int t = 0; t < cells && !enough(); ++t) take(by_distance[t].second);
  }
  return lists;
}

// For sampled point t: the k smallest ranks, in its cell's full probe list,
// of the cells holding its true neighbours — every point no farther than its
// k-th nearest (ties included: any of them is a correct neighbour for the
// distance recall). `sample` holds positions in xs (cell-sorted), `rank` maps
// (sampled cell slot, cell) to the rank. One float32 GEMM per (sample group,
// cell block); groups are fixed, so the result does not depend on threads.
std::vector<int> NeighbourRanks(const MatrixF& xs, const Eigen::VectorXf& sq, const std::vector<int>& start,
                                const std::vector<int>& sample, const std::vector<int>& slot_of,
                                const std::vector<int>& rank, int k, int threads) {
  const int m = static_cast<int>(sample.size());
  const int cells = static_cast<int>(start.size()) - 1;
  constexpr int kGroup = 32, kReferenceBlock = 4096;
  const size_t keep = std::max<size_t>(8 * static_cast<size_t>(k), 256);
  std::vector<int> out(static_cast<size_t>(m) * k);
  ParallelFor((m + kGroup - 1) / kGroup, threads, [&](int g0, int g1) {
    MatrixF q, tile;
    std::vector<std::vector<std::pair<float, int>>> found(kGroup);  // (distance², rank)
    std::vector<float> bound(kGroup);
    std::vector<size_t> limit(kGroup);  // prune at this size; doubles past ties of the k-th
    // Float32 slack for equal distances computed through different products.
    auto slack = [&](int t0, float kth) { return kth + 1e-5f * (kth + sq[sample[t0]]) + 1e-30f; };
    auto prune = [&](int t, int t0) {
      auto& f = found[t];
      std::nth_element(f.begin(), f.begin() + (k - 1), f.end());
      bound[t] = slack(t0, f[k - 1].first);
      f.erase(std::remove_if(f.begin(), f.end(), [&](const auto& e) { return e.first > bound[t]; }), f.end());
      limit[t] = std::max(keep, 2 * f.size());
    };
    for (int g = g0; g < g1; ++g) {
      const int s0 = g * kGroup, ng = std::min(kGroup, m - s0);
      q.resize(ng, xs.cols());
      for (int t = 0; t < ng; ++t) {
        q.row(t) = xs.row(sample[s0 + t]);
        found[t].clear();
        bound[t] = std::numeric_limits<float>::infinity();
        limit[t] = keep;
      }
      for (int e = 0; e < cells; ++e) {
        for (int r0 = start[e]; r0 < start[e + 1]; r0 += kReferenceBlock) {
          const int nr = std::min(kReferenceBlock, start[e + 1] - r0);
          tile.noalias() = xs.middleRows(r0, nr) * q.transpose();
          for (int t = 0; t < ng; ++t) {
            const int self = sample[s0 + t];
            const float qi = sq[self];
            const int re = rank[static_cast<size_t>(slot_of[s0 + t]) * cells + e];
            const float* col = tile.col(t).data();
            for (int s = 0; s < nr; ++s) {
              const float d2 = std::max(0.0f, qi + sq[r0 + s] - 2.0f * col[s]);
              if (d2 > bound[t] || r0 + s == self) continue;
              found[t].emplace_back(d2, re);
              if (found[t].size() >= limit[t]) prune(t, s0 + t);
            }
          }
        }
      }
      for (int t = 0; t < ng; ++t) {
        prune(t, s0 + t);  // at least k remain: the k nearest, and any ties of the k-th
        auto& f = found[t];
        std::partial_sort(f.begin(), f.begin() + k, f.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; });
        for (int s = 0; s < k; ++s) out[static_cast<size_t>(s0 + t) * k + s] = f[s].second;
      }
    }
  });
  return out;
}

// Automatic probes (IvfOptions::probes = 0): the smallest probe count whose
// distance recall on a seeded sample reaches the target. A sampled point's
// search finds its true neighbours held by the first `probes` cells of its
// cell's list (the search keeps the k nearest of those cells), so its recall
// at p probes is the share of its k smallest neighbour ranks below p — the
// sample's recall for every p from one pass, exact for this search (up to
// float32 ranking) and never above it (a list longer than p only finds more).
IvfReport MeasuredProbes(const MatrixF& xs, const Eigen::VectorXf& sq, const std::vector<int>& start,
                         const MatrixF& centroids, const std::vector<int>& size, const std::vector<int>& nearest,
                         int r, const IvfOptions& o, int threads) {
  const auto clock = std::chrono::steady_clock::now();
  const int n = static_cast<int>(xs.rows());
  const int cells = static_cast<int>(size.size());
  const int k = o.k;
  const int m = std::min(n, o.probe_sample);
  std::vector<int> sample = ShuffledPrefix(n, m, o.seed ^ 0x5DEECE66DULL);
  sample.resize(m);
  std::sort(sample.begin(), sample.end());
  // Each sampled cell's full probe list, as cell → rank.
  std::vector<char> wanted(cells, 0);
  std::vector<int> cell_of(m), slot(cells, -1), slot_of(m);
  for (int t = 0; t < m; ++t) {
    cell_of[t] = static_cast<int>(std::upper_bound(start.begin(), start.end(), sample[t]) - start.begin()) - 1;
    wanted[cell_of[t]] = 1;
  }
  const std::vector<std::vector<int>> full = ProbeLists(centroids, size, nearest, r, cells, k, &wanted);
  int slots = 0;
  for (int c = 0; c < cells; ++c) slot[c] = wanted[c] ? slots++ : -1;
  std::vector<int> rank(static_cast<size_t>(slots) * cells, cells);  // empty cells: never probed, hold no points
  for (int c = 0; c < cells; ++c) {
    if (!wanted[c]) continue;
    for (size_t p = 0; p < full[c].size(); ++p) rank[static_cast<size_t>(slot[c]) * cells + full[c][p]] = static_cast<int>(p);
  }
  for (int t = 0; t < m; ++t) slot_of[t] = slot[cell_of[t]];
  const std::vector<int> ranks = NeighbourRanks(xs, sq, start, sample, slot_of, rank, k, threads);
  // Hits at p probes = neighbours with rank < p; the smallest p reaching the target.
  std::vector<int64_t> at(cells + 1, 0);
  for (int v : ranks) ++at[std::min(v, cells)];
  const double total = static_cast<double>(ranks.size());
  const double want = std::ceil(o.probe_recall_target * total - 1e-9);
  IvfReport rep;
  rep.cells = cells;
  rep.probe_sample = m;
  int64_t hits = 0;
  int p = 0;
  while (p < cells && static_cast<double>(hits) < want) hits += at[p++];
  rep.probes = std::max(1, p);
  rep.probe_sample_recall = static_cast<double>(hits) / total;
  rep.probe_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock).count();
  return rep;
}

}  // namespace

StatusOr<KnnGraph> IvfKnn(const Eigen::MatrixXd& points, const IvfOptions& options, IvfReport* report) {
  const int n = static_cast<int>(points.rows());
  const int d = static_cast<int>(points.cols());
  KLS_RETURN_IF_ERROR(knn_detail::CheckKnnInput(points, options.Validate(n)));
  const int k = options.k;
  const int threads = ResolveThreadCount(options.num_threads);
  const int cells = std::max(1, static_cast<int>((static_cast<int64_t>(n) + options.cell_size - 1) / options.cell_size));
  try {
    // Centered float32 rows (distances are translation invariant; centering
    // keeps float32's digits for the differences).
    const Eigen::RowVectorXd mean = points.colwise().mean();
    MatrixF x = (points.rowwise() - mean).cast<float>();
    const MatrixF centroids = SampleKMeans(x, cells, options, threads);
    // Each point's own cell and runner-up cells (they choose the probes).
    const int r = std::min(cells, std::max(2, options.runner_ups + 1));
    const std::vector<int> nearest = NearestCentroids(x, centroids, r, threads);
    std::vector<int> owner(n);
    for (int i = 0; i < n; ++i) owner[i] = nearest[static_cast<size_t>(i) * r];
    // Points sorted by cell: cell c is rows [start[c], start[c + 1]) of xs.
    std::vector<int> size(cells, 0), start(cells + 1, 0), order(n);
    for (int o : owner) ++size[o];
    for (int c = 0; c < cells; ++c) start[c + 1] = start[c] + size[c];
    {
      std::vector<int> fill(start.begin(), start.end() - 1);
      for (int i = 0; i < n; ++i) order[fill[owner[i]]++] = i;
    }
    MatrixF xs(n, d);
    for (int t = 0; t < n; ++t) xs.row(t) = x.row(order[t]);
    x.resize(0, 0);
    const RowsD rows = points;
    const Eigen::VectorXf sq = xs.rowwise().squaredNorm();
    IvfReport rep;
    rep.cells = cells;
    rep.probes = options.probes;
    if (options.probes == 0) rep = MeasuredProbes(xs, sq, start, centroids, size, nearest, r, options, threads);
    if (report != nullptr) *report = rep;
    const std::vector<std::vector<int>> probes = ProbeLists(centroids, size, nearest, r, rep.probes, k);

    KnnGraph g;
    g.num_points = n;
    g.k = k;
    g.indices.resize(static_cast<size_t>(n) * k);
    g.distances.resize(static_cast<size_t>(n) * k);
    constexpr int kQueryBlock = 1024, kReferenceBlock = 4096;
    std::atomic<int> next{0};
    // Work items: (cell, query block); taken dynamically, written per point.
    std::vector<std::pair<int, int>> items;
    for (int c = 0; c < cells; ++c) {
      for (int q0 = start[c]; q0 < start[c + 1]; q0 += kQueryBlock) items.emplace_back(c, q0);
    }
    ParallelFor(threads, threads, [&](int, int) {
      MatrixF tile;
      std::vector<std::vector<Candidate>> heaps(kQueryBlock);
      for (int w = next++; w < static_cast<int>(items.size()); w = next++) {
        const auto [c, q0] = items[w];
        const int nq = std::min(kQueryBlock, start[c + 1] - q0);
        for (int t = 0; t < nq; ++t) {
          heaps[t].clear();
          heaps[t].reserve(k + 1);
        }
        for (int p : probes[c]) {
          for (int r0 = start[p]; r0 < start[p + 1]; r0 += kReferenceBlock) {
            const int nr = std::min(kReferenceBlock, start[p + 1] - r0);
            tile.noalias() = xs.middleRows(r0, nr) * xs.middleRows(q0, nq).transpose();
            for (int t = 0; t < nq; ++t) {
              const float qi = sq[q0 + t];
              const float* col = tile.col(t).data();
              auto& heap = heaps[t];
              for (int s = 0; s < nr; ++s) {
                if (r0 + s == q0 + t) continue;
                const double d2 = std::max(0.0f, qi + sq[r0 + s] - 2.0f * col[s]);
                // Ties with the current k-th are skipped (any of them is a
                // correct neighbour; equal distances abound on binary data).
                if (static_cast<int>(heap.size()) == k && d2 >= heap.front().first) continue;
                Offer(heap, k, {d2, order[r0 + s]});
              }
            }
          }
        }
        for (int t = 0; t < nq; ++t) {
          const int i = order[q0 + t];
          auto& heap = heaps[t];
          for (auto& cand : heap) cand.first = (rows.row(i) - rows.row(cand.second)).squaredNorm();
          knn_detail::StoreRow(g, i, heap);
        }
      }
    });
    return g;
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("knn: out of memory for the IVF graph of n = " + std::to_string(n) + " x d = " +
                                  std::to_string(d));
  }
}

Status HnswOptions::Validate(int num_points) const {
  KnnOptions knn;
  knn.k = k;
  knn.num_threads = num_threads;
  KLS_RETURN_IF_ERROR(knn.Validate(num_points));
  if (m < 4 || m > 256) return InvalidArgumentError("hnsw.m = " + std::to_string(m) + " must be in 4..256");
  if (ef_construction < 8) {
    return InvalidArgumentError("hnsw.ef_construction = " + std::to_string(ef_construction) + " must be >= 8");
  }
  if (ef_search != 0 && ef_search <= k) {
    return InvalidArgumentError("hnsw.ef_search = " + std::to_string(ef_search) + " must exceed k = " +
                                std::to_string(k) + " (or be 0: automatic)");
  }
  return OkStatus();
}

#ifdef KLS_HAVE_FAISS
namespace {

// Sets OpenMP's thread count for the parallel regions this thread starts and
// restores it on exit (FAISS parallelizes with OpenMP; the setting is per thread).
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(std::max(1, n)); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

}  // namespace
#endif

StatusOr<KnnGraph> HnswKnn(const Eigen::MatrixXd& points, const HnswOptions& options) {
  const int n = static_cast<int>(points.rows());
  const int d = static_cast<int>(points.cols());
  KLS_RETURN_IF_ERROR(knn_detail::CheckKnnInput(points, options.Validate(n)));
#ifndef KLS_HAVE_FAISS
  return FailedPreconditionError("knn method = hnsw: this build has no FAISS (install libfaiss-dev and rebuild)");
#else
  const int k = options.k;
  const int threads = ResolveThreadCount(options.num_threads);
  const int ef_search = options.ef_search > 0 ? options.ef_search : std::max(2 * k + 16, 64);
  try {
    // FAISS stores float32 rows, row-major; center the data first so float32
    // keeps the differences' digits (distances are translation invariant).
    const Eigen::RowVectorXd mean = points.colwise().mean();
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rows =
        (points.rowwise() - mean).cast<float>();
    faiss::IndexHNSWFlat index(d, options.m);
    index.hnsw.efConstruction = options.ef_construction;
    index.hnsw.efSearch = ef_search;
    {
      OmpThreads omp(options.deterministic ? 1 : threads);
      index.add(n, rows.data());
    }
    KnnGraph g;
    g.num_points = n;
    g.k = k;
    g.indices.resize(static_cast<size_t>(n) * k);
    g.distances.resize(static_cast<size_t>(n) * k);
    const int kq = k + 1;  // the point itself is (almost always) its own nearest
    const int chunk = 16384;
    std::vector<float> dist(static_cast<size_t>(chunk) * kq);
    std::vector<faiss::Index::idx_t> ids(static_cast<size_t>(chunk) * kq);
    OmpThreads omp(threads);
    for (int q0 = 0; q0 < n; q0 += chunk) {
      const int nq = std::min(chunk, n - q0);
      index.search(nq, rows.data() + static_cast<size_t>(q0) * d, kq, dist.data(), ids.data());
      ParallelFor(nq, threads, [&](int t0, int t1) {
        std::vector<std::pair<double, int>> found;
        for (int t = t0; t < t1; ++t) {
          const int i = q0 + t;
          found.clear();
          for (int s = 0; s < kq; ++s) {
            const faiss::Index::idx_t j = ids[static_cast<size_t>(t) * kq + s];
            if (j < 0 || j == i) continue;  // -1: fewer results than asked
            found.emplace_back((points.row(i) - points.row(static_cast<int>(j))).squaredNorm(), static_cast<int>(j));
          }
          // Rarely (duplicate-heavy data, tiny ef) fewer than k came back:
          // fill with the nearest of a short exact scan over the next indices
          // so that every row has k distinct neighbours.
          for (int j = (i + 1) % n; static_cast<int>(found.size()) < k; j = (j + 1) % n) {
            if (j == i) continue;
            bool seen = false;
            for (const auto& f : found) seen = seen || f.second == j;
            if (!seen) found.emplace_back((points.row(i) - points.row(j)).squaredNorm(), j);
          }
          knn_detail::StoreRow(g, i, found);
        }
      });
    }
    return g;
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("knn: out of memory for the HNSW index of n = " + std::to_string(n) + " x d = " +
                                  std::to_string(d));
  } catch (const std::exception& e) {
    return InternalError(std::string("knn: FAISS HNSW failed: ") + e.what());
  }
#endif
}

StatusOr<KnnRecall> MeasureKnnRecall(const Eigen::MatrixXd& points, const KnnGraph& graph, int sample,
                                     uint64_t seed, int num_threads) {
  const int n = static_cast<int>(points.rows());
  if (graph.num_points != n) {
    return InvalidArgumentError("knn recall: the graph has " + std::to_string(graph.num_points) +
                                " points, the data " + std::to_string(n));
  }
  if (sample < 1) return InvalidArgumentError("knn recall: sample = " + std::to_string(sample) + " must be >= 1");
  const auto start = std::chrono::steady_clock::now();
  const int m = std::min(sample, n);
  std::vector<int> rows = ShuffledPrefix(n, m, seed);
  rows.resize(m);
  std::sort(rows.begin(), rows.end());
  KnnOptions ko;
  ko.k = graph.k;
  ko.num_threads = num_threads;
  KLS_ASSIGN_OR_RETURN(const KnnGraph truth, ExactKnnOfRows(points, rows, ko));
  KnnRecall r;
  r.sample = static_cast<int>(rows.size());
  r.min_recall = 1.0;
  double total = 0.0;
  const int k = graph.k;
  for (size_t t = 0; t < rows.size(); ++t) {
    const double kth = truth.distance(static_cast<int>(t), k - 1);
    const double bound = kth * (1.0 + 1e-12) + 1e-12;
    int hits = 0;
    for (int s = 0; s < k; ++s) hits += graph.distance(rows[t], s) <= bound ? 1 : 0;
    const double rt = static_cast<double>(hits) / k;
    total += rt;
    r.min_recall = std::min(r.min_recall, rt);
  }
  r.recall = total / static_cast<double>(rows.size());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace kls
