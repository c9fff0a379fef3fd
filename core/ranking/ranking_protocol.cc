#include "core/ranking/ranking_protocol.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

namespace kls {

double TopNAccuracy(const std::vector<int>& order, const std::vector<char>& relevant, int n) {
  const int m = std::min<int>(n, static_cast<int>(order.size()));
  if (m <= 0) return 0.0;
  int hits = 0;
  for (int t = 0; t < m; ++t) hits += relevant[order[t]] ? 1 : 0;
  return static_cast<double>(hits) / m;
}

StatusOr<QuerySplit> SplitQueries(int num_queries, int num_validation, uint64_t seed) {
  if (num_queries < 2) return InvalidArgumentError("num_queries = " + std::to_string(num_queries) + " must be >= 2");
  if (num_validation < 1 || num_validation > num_queries - 1)
    return InvalidArgumentError("num_validation = " + std::to_string(num_validation) + " must be in [1, " +
                                std::to_string(num_queries - 1) + "]");
  std::vector<int> perm(num_queries);
  std::iota(perm.begin(), perm.end(), 0);
  // Fisher–Yates with an explicit draw (std::shuffle's sequence is not specified across standard libraries).
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  for (int i = num_queries - 1; i > 0; --i) {
    const int j = static_cast<int>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  QuerySplit split;
  split.validation.assign(perm.begin(), perm.begin() + num_validation);
  split.test.assign(perm.begin() + num_validation, perm.end());
  std::sort(split.validation.begin(), split.validation.end());
  std::sort(split.test.begin(), split.test.end());
  return split;
}

StatusOr<GridChoice> ChooseOnValidation(int grid_size, const std::vector<int>& validation,
                                        const std::function<StatusOr<double>(int point, int query)>& score) {
  if (grid_size < 1) return InvalidArgumentError("grid_size = " + std::to_string(grid_size) + " must be >= 1");
  if (validation.empty()) return InvalidArgumentError("validation query set is empty");
  GridChoice choice;
  choice.mean_score.assign(grid_size, 0.0);
  for (int p = 0; p < grid_size; ++p) {
    double sum = 0.0;
    for (int q : validation) {
      KLS_ASSIGN_OR_RETURN(double v, score(p, q));
      if (!std::isfinite(v))
        return InvalidArgumentError("score(" + std::to_string(p) + ", " + std::to_string(q) + ") is not finite");
      sum += v;
    }
    choice.mean_score[p] = sum / static_cast<double>(validation.size());
    if (choice.best < 0 || choice.mean_score[p] > choice.mean_score[choice.best]) choice.best = p;
  }
  return choice;
}

}  // namespace kls
