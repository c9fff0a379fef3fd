#include "core/embed/knn_classifier.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace kls {
namespace {

Status CheckIndices(const std::vector<int>& idx, int n, const char* field) {
  for (size_t t = 0; t < idx.size(); ++t)
    if (idx[t] < 0 || idx[t] >= n) {
      return InvalidArgumentError(std::string(field) + "[" + std::to_string(t) + "] = " + std::to_string(idx[t]) +
                                  " is not a point in [0, " + std::to_string(n) + ")");
    }
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<int>> KnnPredict(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                      const std::vector<int>& train, const std::vector<int>& query, int k) {
  const int n = static_cast<int>(points.rows());
  if (static_cast<int>(labels.size()) != n) {
    return InvalidArgumentError("labels: has " + std::to_string(labels.size()) + " entries but there are " +
                                std::to_string(n) + " points");
  }
  if (!points.allFinite()) return InvalidArgumentError("points: contains a non-finite value");
  KLS_RETURN_IF_ERROR(CheckIndices(train, n, "train"));
  KLS_RETURN_IF_ERROR(CheckIndices(query, n, "query"));
  if (k < 1 || k > static_cast<int>(train.size())) {
    return InvalidArgumentError("k = " + std::to_string(k) + " must be in [1, " + std::to_string(train.size()) +
                                "] (the number of training points)");
  }
  int classes = 0;
  for (int t : train) {
    if (labels[t] < 0) {
      return InvalidArgumentError("labels[" + std::to_string(t) + "] = " + std::to_string(labels[t]) +
                                  " is negative for a training point");
    }
    classes = std::max(classes, labels[t] + 1);
  }
  std::vector<int> out(query.size());
  std::vector<int> order(train.size());
  std::vector<double> dist(train.size());
  std::vector<int> votes(classes);
  for (size_t q = 0; q < query.size(); ++q) {
    for (size_t t = 0; t < train.size(); ++t) dist[t] = (points.row(query[q]) - points.row(train[t])).squaredNorm();
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return dist[a] != dist[b] ? dist[a] < dist[b] : train[a] < train[b];
    });
    std::fill(votes.begin(), votes.end(), 0);
    for (int t = 0; t < k; ++t) ++votes[labels[train[order[t]]]];
    const int best = *std::max_element(votes.begin(), votes.end());
    // Tie: the nearest neighbour whose class has the top vote count.
    for (int t = 0; t < k; ++t) {
      const int c = labels[train[order[t]]];
      if (votes[c] == best) {
        out[q] = c;
        break;
      }
    }
  }
  return out;
}

StatusOr<double> SplitKnnAccuracy(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                  const std::vector<int>& train, const std::vector<int>& query, int k) {
  if (query.empty()) return InvalidArgumentError("query: is empty");
  KLS_ASSIGN_OR_RETURN(std::vector<int> pred, KnnPredict(points, labels, train, query, k));
  int correct = 0;
  for (size_t q = 0; q < query.size(); ++q) correct += pred[q] == labels[query[q]];
  return static_cast<double>(correct) / static_cast<double>(query.size());
}

StatusOr<double> LeaveOneOutKnnAccuracy(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                        const std::vector<int>& subset, int k) {
  if (k < 1 || k >= static_cast<int>(subset.size())) {
    return InvalidArgumentError("k = " + std::to_string(k) + " must be in [1, " + std::to_string(subset.size()) +
                                ") (the subset size minus one)");
  }
  std::vector<int> others;
  others.reserve(subset.size());
  int correct = 0;
  for (size_t q = 0; q < subset.size(); ++q) {
    others.clear();
    for (size_t t = 0; t < subset.size(); ++t)
      if (t != q) others.push_back(subset[t]);
    KLS_ASSIGN_OR_RETURN(std::vector<int> pred, KnnPredict(points, labels, others, {subset[q]}, k));
    correct += pred[0] == labels[subset[q]];
  }
  return static_cast<double>(correct) / static_cast<double>(subset.size());
}

StatusOr<SplitScore> ScoreOnSplit(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                  const std::vector<int>& train, const std::vector<int>& validation,
                                  const std::vector<int>& test, int k_max) {
  if (k_max < 1) return InvalidArgumentError("k_max = " + std::to_string(k_max) + " must be >= 1");
  SplitScore score;
  const int top = std::min(k_max, static_cast<int>(train.size()));
  for (int k = 1; k <= top; k += 2) {
    KLS_ASSIGN_OR_RETURN(double v, SplitKnnAccuracy(points, labels, train, validation, k));
    if (v > score.validation_accuracy) {
      score.k = k;
      score.validation_accuracy = v;
      if (!test.empty()) {
        KLS_ASSIGN_OR_RETURN(score.test_accuracy, SplitKnnAccuracy(points, labels, train, test, k));
      }
    }
  }
  if (score.k == 0) return InvalidArgumentError("train: is empty");
  return score;
}

StatusOr<int> ChooseOnValidation(const std::vector<Eigen::MatrixXd>& candidates, const std::vector<int>& labels,
                                 const std::vector<int>& train, const std::vector<int>& validation,
                                 const std::vector<int>& test, int k_max, std::vector<SplitScore>* scores) {
  if (candidates.empty()) return InvalidArgumentError("candidates: is empty");
  if (scores) scores->clear();
  int best = 0;
  double best_val = -1.0;
  for (size_t c = 0; c < candidates.size(); ++c) {
    KLS_ASSIGN_OR_RETURN(SplitScore s, ScoreOnSplit(candidates[c], labels, train, validation, test, k_max));
    if (s.validation_accuracy > best_val) {
      best = static_cast<int>(c);
      best_val = s.validation_accuracy;
    }
    if (scores) scores->push_back(s);
  }
  return best;
}

}  // namespace kls
