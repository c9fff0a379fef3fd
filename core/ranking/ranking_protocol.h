// The evaluation protocol of the re-ranking experiments (thesis §6.4.3,
// Table 6.3; kls-bench rerank): Top-N accuracy of a ranked list, the seeded
// split of the queries into disjoint validation and test sets, and the choice
// of a hyper-parameter grid point on the validation queries alone.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/common/status.h"

namespace kls {

/// Top-N accuracy (§6.4.3, [JB08]): the fraction of the first min(N, |order|)
/// ranked items that are relevant (0 for an empty order).
double TopNAccuracy(const std::vector<int>& order, const std::vector<char>& relevant, int n);

/// Disjoint validation / test query sets (thesis protocol: hyper-parameters are
/// chosen on queries that are never scored as test queries).
struct QuerySplit {
  std::vector<int> validation;  ///< ascending query ids
  std::vector<int> test;        ///< ascending query ids; validation ∩ test = ∅, union = [0, num_queries)
};

/// Splits queries 0..num_queries−1 by a seeded shuffle into `num_validation`
/// validation queries and the rest as test queries. Deterministic for a seed.
/// Errors: num_queries < 2, num_validation outside [1, num_queries − 1].
StatusOr<QuerySplit> SplitQueries(int num_queries, int num_validation, uint64_t seed);

/// Model selection on validation queries: the grid point p in [0, grid_size)
/// with the highest mean of score(p, q) over q ∈ validation (ties: smaller p).
/// `score` is called only with queries of `validation` — never a test query.
/// mean_score[p] is the validation mean of point p. Errors: empty grid or
/// validation set, a failing or non-finite score.
struct GridChoice {
  int best = -1;
  std::vector<double> mean_score;
};
StatusOr<GridChoice> ChooseOnValidation(int grid_size, const std::vector<int>& validation,
                                        const std::function<StatusOr<double>(int point, int query)>& score);

}  // namespace kls
