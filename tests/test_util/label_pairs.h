// Random must-link / cannot-link pairs drawn from labels, for the tests of
// the pairwise solvers, ITML and the baseline guard. No gtest dependency.
#pragma once

#include <cstdint>
#include <vector>

#include "core/data/constraints.h"

namespace kls::test_util {

/// `count` distinct unordered pairs (i ≠ j) drawn uniformly with a seeded
/// mt19937_64, must-link when the labels agree, cannot-link otherwise.
/// Aborts if fewer than `count` distinct pairs exist.
PairwiseConstraints RandomLabelPairs(const std::vector<int>& labels, int count, uint64_t seed);

}  // namespace kls::test_util
