// Random must-link / cannot-link pairs drawn from labels, and labelled blobs,
// for the tests of the pairwise solvers, ITML, the baseline guard and auto.
// No gtest dependency.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "core/data/constraints.h"

namespace kls::test_util {

/// `count` distinct unordered pairs (i ≠ j) drawn uniformly with a seeded
/// mt19937_64, must-link when the labels agree, cannot-link otherwise.
/// Aborts if fewer than `count` distinct pairs exist.
PairwiseConstraints RandomLabelPairs(const std::vector<int>& labels, int count, uint64_t seed);

struct LabelledPoints {
  Eigen::MatrixXd x;
  std::vector<int> labels;
};

/// n points in 2-d, label i % 2, in two Gaussian blobs centred at (±3, 0):
/// feature 0 = ±3 + N(0, 0.7²), feature 1 = `spread` · N(0, 0.7²) (drawn in
/// that order from a seeded mt19937_64). Linearly separable along feature 0.
LabelledPoints TwoBlobs(int n, uint64_t seed, double spread = 1.0);

}  // namespace kls::test_util
