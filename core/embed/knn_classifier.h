// k-nearest-neighbour classification on an embedding with a held-out split:
// the evaluation of thesis §3.5.5.2 (Table 3.8), where k-NN is trained on the
// training points of the 2-D embedding, k is chosen on the validation points
// and accuracy is reported on the test points. (core/eval's KnnAccuracy is the
// leave-one-out variant over all points.)
//
// Thread safety: re-entrant.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/status.h"

namespace kls {

/// Predicted class of each `query` row of `points` (n × r) by a majority vote
/// of its k nearest `train` rows (Euclidean; ties in distance by smaller
/// index). A tied vote goes to the class of the nearest neighbour among the
/// tied classes. O(|query| · |train| · r).
/// Errors: k < 1 or k > |train|, indices out of range, labels.size() != n,
/// negative training labels.
StatusOr<std::vector<int>> KnnPredict(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                      const std::vector<int>& train, const std::vector<int>& query, int k);

/// Fraction of `query` points whose KnnPredict label equals labels[q].
StatusOr<double> SplitKnnAccuracy(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                  const std::vector<int>& train, const std::vector<int>& query, int k);

/// One embedding scored as thesis §3.5.5.2 does: the odd k in 1…min(k_max,
/// |train|) with the best validation accuracy (ties: the smaller k), and the
/// test accuracy at that k (0 when `test` is empty).
struct SplitScore {
  int k = 0;
  double validation_accuracy = -1.0;
  double test_accuracy = 0.0;
};
StatusOr<SplitScore> ScoreOnSplit(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                  const std::vector<int>& train, const std::vector<int>& validation,
                                  const std::vector<int>& test, int k_max);

/// Leave-one-out k-NN accuracy over `subset`: each of its points classified
/// by KnnPredict from the other points of `subset`. Errors: k < 1 or
/// k >= |subset|, or any KnnPredict error.
StatusOr<double> LeaveOneOutKnnAccuracy(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                        const std::vector<int>& subset, int k);

/// Index of the candidate embedding (same points and split) with the best
/// validation accuracy under ScoreOnSplit; ties go to the earlier candidate.
/// Put the embedding the others must improve on first (issue 23: MVE's start,
/// the input kernel's top-d coordinates, i.e. linear kernel PCA), so a
/// candidate replaces it only by scoring strictly better on validation.
/// `scores` (optional) receives every candidate's score.
/// Errors: no candidates, or any ScoreOnSplit error.
StatusOr<int> ChooseOnValidation(const std::vector<Eigen::MatrixXd>& candidates, const std::vector<int>& labels,
                                 const std::vector<int>& train, const std::vector<int>& validation,
                                 const std::vector<int>& test, int k_max, std::vector<SplitScore>* scores = nullptr);

}  // namespace kls
