#include "core/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <unordered_map>

#include "core/graph/knn.h"

namespace kls {
namespace {

// Renames arbitrary labels to dense ids 0..num_ids-1 in order of first
// appearance, so every table below is sized by the number of clusters actually
// present rather than by the largest label value.
int CompactLabels(const std::vector<int>& labels, std::vector<int>* ids) {
  std::unordered_map<int, int> index;
  index.reserve(labels.size());
  ids->resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto it = index.emplace(labels[i], static_cast<int>(index.size())).first;
    (*ids)[i] = it->second;
  }
  return static_cast<int>(index.size());
}

Status CheckNonNegative(const std::vector<int>& labels, const char* what) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0) {
      return InvalidArgumentError(std::string(what) + "[" + std::to_string(i) + "] = " +
                                  std::to_string(labels[i]) + " is negative");
    }
  }
  return OkStatus();
}

Status ValidatePartitions(const std::vector<int>& truth, const std::vector<int>& predicted,
                          size_t min_points) {
  if (predicted.size() != truth.size()) {
    return InvalidArgumentError("predicted: has " + std::to_string(predicted.size()) +
                                " entries but truth has " + std::to_string(truth.size()));
  }
  if (truth.size() < min_points) {
    return InvalidArgumentError("truth: has " + std::to_string(truth.size()) +
                                " entries but at least " + std::to_string(min_points) +
                                " are required");
  }
  KLS_RETURN_IF_ERROR(CheckNonNegative(truth, "truth"));
  return CheckNonNegative(predicted, "predicted");
}

// The contingency table of two partitions, keeping only its non-zero cells
// (at most n of them, however many clusters there are).
struct Contingency {
  struct Cell {
    int truth = 0;        ///< compact truth cluster id
    int predicted = 0;    ///< compact predicted cluster id
    int64_t count = 0;    ///< n_ab > 0
  };
  int64_t num_points = 0;
  std::vector<int64_t> truth_sizes;      ///< |a| per compact truth cluster
  std::vector<int64_t> predicted_sizes;  ///< |b| per compact predicted cluster
  std::vector<Cell> cells;
};

// O(n + K1 + K2): a counting sort of the points by truth cluster, then one
// pass per truth cluster with a scratch counter per predicted cluster that is
// reset through the list of touched entries. The cell order depends only on
// the input, so floating-point sums over cells are reproducible.
Contingency BuildContingency(const std::vector<int>& truth, const std::vector<int>& predicted) {
  std::vector<int> t, p;
  const int k1 = CompactLabels(truth, &t);
  const int k2 = CompactLabels(predicted, &p);
  const int n = static_cast<int>(truth.size());

  Contingency table;
  table.num_points = n;
  table.truth_sizes.assign(k1, 0);
  table.predicted_sizes.assign(k2, 0);
  for (int i = 0; i < n; ++i) {
    ++table.truth_sizes[t[i]];
    ++table.predicted_sizes[p[i]];
  }
  std::vector<int> offset(k1 + 1, 0);
  for (int a = 0; a < k1; ++a) offset[a + 1] = offset[a] + static_cast<int>(table.truth_sizes[a]);
  std::vector<int> by_truth(n);
  {
    std::vector<int> next(offset.begin(), offset.end() - 1);
    for (int i = 0; i < n; ++i) by_truth[next[t[i]]++] = i;
  }
  std::vector<int64_t> count(k2, 0);
  std::vector<int> touched;
  for (int a = 0; a < k1; ++a) {
    touched.clear();
    for (int s = offset[a]; s < offset[a + 1]; ++s) {
      const int b = p[by_truth[s]];
      if (count[b]++ == 0) touched.push_back(b);
    }
    for (int b : touched) {
      table.cells.push_back({a, b, count[b]});
      count[b] = 0;
    }
  }
  return table;
}

inline int64_t Choose2(int64_t m) { return m * (m - 1) / 2; }

// x log x with 0 log 0 = 0.
inline double XLogX(double x) { return x > 0.0 ? x * std::log(x) : 0.0; }

}  // namespace

StatusOr<double> PairAccuracy(const std::vector<int>& truth, const std::vector<int>& predicted) {
  KLS_RETURN_IF_ERROR(ValidatePartitions(truth, predicted, 2));
  try {
    const Contingency table = BuildContingency(truth, predicted);
    int64_t same_truth = 0, same_predicted = 0, same_both = 0;
    for (int64_t m : table.truth_sizes) same_truth += Choose2(m);
    for (int64_t m : table.predicted_sizes) same_predicted += Choose2(m);
    for (const auto& cell : table.cells) same_both += Choose2(cell.count);
    // Pairs together in exactly one partition are the disagreements.
    const int64_t disagreements = same_truth + same_predicted - 2 * same_both;
    const int64_t pairs = Choose2(table.num_points);
    return 1.0 - static_cast<double>(disagreements) / static_cast<double>(pairs);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("pair accuracy: out of memory for n = " +
                                  std::to_string(truth.size()));
  } catch (const std::exception& e) {
    return InternalError(std::string("pair accuracy: ") + e.what());
  }
}

StatusOr<double> NormalizedMutualInformation(const std::vector<int>& truth,
                                             const std::vector<int>& predicted) {
  KLS_RETURN_IF_ERROR(ValidatePartitions(truth, predicted, 1));
  try {
    const Contingency table = BuildContingency(truth, predicted);
    const double n = static_cast<double>(table.num_points);
    // With counts m, H = log n − (1/n) Σ m log m, and
    // I = log n + (1/n) (Σ_ab n_ab log n_ab − Σ_a |a| log |a| − Σ_b |b| log |b|):
    // integer-count forms that avoid forming small ratios.
    double sum_truth = 0.0, sum_predicted = 0.0, sum_cells = 0.0;
    for (int64_t m : table.truth_sizes) sum_truth += XLogX(static_cast<double>(m));
    for (int64_t m : table.predicted_sizes) sum_predicted += XLogX(static_cast<double>(m));
    for (const auto& cell : table.cells) sum_cells += XLogX(static_cast<double>(cell.count));
    const double log_n = std::log(n);
    const double h_truth = table.truth_sizes.size() == 1 ? 0.0 : log_n - sum_truth / n;
    const double h_predicted = table.predicted_sizes.size() == 1 ? 0.0 : log_n - sum_predicted / n;
    if (h_truth + h_predicted <= 0.0) return 1.0;  // both partitions are one cluster
    const double mutual = log_n + (sum_cells - sum_truth - sum_predicted) / n;
    return std::clamp(2.0 * mutual / (h_truth + h_predicted), 0.0, 1.0);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("NMI: out of memory for n = " + std::to_string(truth.size()));
  } catch (const std::exception& e) {
    return InternalError(std::string("NMI: ") + e.what());
  }
}

StatusOr<double> KnnAccuracy(const Eigen::MatrixXd& embedding, const std::vector<int>& labels,
                             int k, int num_threads) {
  const Eigen::Index n = embedding.rows();
  if (n == 0 || embedding.cols() == 0) {
    return InvalidArgumentError("embedding: empty (" + std::to_string(n) + " x " +
                                std::to_string(embedding.cols()) + ")");
  }
  if (static_cast<Eigen::Index>(labels.size()) != n) {
    return InvalidArgumentError("labels: has " + std::to_string(labels.size()) +
                                " entries but the embedding has " + std::to_string(n) + " rows");
  }
  if (k < 1) return InvalidArgumentError("k = " + std::to_string(k) + " must be at least 1");
  if (k >= n) {
    return InvalidArgumentError("k = " + std::to_string(k) +
                                " must be less than the number of points n = " + std::to_string(n));
  }
  if (num_threads < 0) {
    return InvalidArgumentError("num_threads = " + std::to_string(num_threads) + " must be >= 0");
  }
  KLS_RETURN_IF_ERROR(CheckNonNegative(labels, "labels"));
  for (Eigen::Index j = 0; j < embedding.cols(); ++j) {
    for (Eigen::Index i = 0; i < n; ++i) {
      if (!std::isfinite(embedding(i, j))) {
        return InvalidArgumentError("embedding[" + std::to_string(i) + "][" + std::to_string(j) +
                                    "] = " + std::to_string(embedding(i, j)) + " is not finite");
      }
    }
  }
  try {
    KnnOptions knn_options;
    knn_options.k = k;
    knn_options.num_threads = num_threads;
    KLS_ASSIGN_OR_RETURN(const KnnGraph graph, ExactKnn(embedding, knn_options));

    std::vector<int> ids;
    const int num_classes = CompactLabels(labels, &ids);
    std::vector<int> votes(num_classes, 0);
    int64_t correct = 0;
    for (int i = 0; i < static_cast<int>(n); ++i) {
      int best = 0;
      for (int t = 0; t < k; ++t) best = std::max(best, ++votes[ids[graph.neighbor(i, t)]]);
      // The nearest neighbour whose class reached the top count breaks ties.
      int winner = -1;
      for (int t = 0; t < k; ++t) {
        const int c = ids[graph.neighbor(i, t)];
        if (winner < 0 && votes[c] == best) winner = c;
      }
      for (int t = 0; t < k; ++t) votes[ids[graph.neighbor(i, t)]] = 0;
      if (winner == ids[i]) ++correct;
    }
    return static_cast<double>(correct) / static_cast<double>(n);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("k-NN accuracy: out of memory for n = " + std::to_string(n) +
                                  ", k = " + std::to_string(k));
  } catch (const std::exception& e) {
    return InternalError(std::string("k-NN accuracy: ") + e.what());
  }
}

}  // namespace kls
