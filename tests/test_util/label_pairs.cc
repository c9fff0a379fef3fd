#include "label_pairs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <utility>

namespace kls::test_util {

PairwiseConstraints RandomLabelPairs(const std::vector<int>& labels, int count, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(labels.size());
  if (count < 0 || count > n * (n - 1) / 2) {
    std::fprintf(stderr, "RandomLabelPairs: %d pairs asked of %lld points\n", count, static_cast<long long>(n));
    std::abort();
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(n) - 1);
  PairwiseConstraints c;
  std::set<std::pair<int, int>> seen;
  while (static_cast<int>(c.pairs.size()) < count) {
    const int i = pick(rng), j = pick(rng);
    if (i == j || !seen.insert({std::min(i, j), std::max(i, j)}).second) continue;
    c.pairs.push_back({i, j, labels[i] == labels[j] ? PairKind::kMustLink : PairKind::kCannotLink});
  }
  return c;
}

LabelledPoints TwoBlobs(int n, uint64_t seed, double spread) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.7);
  LabelledPoints d;
  d.x.resize(n, 2);
  for (int i = 0; i < n; ++i) {
    const int c = i % 2;
    d.labels.push_back(c);
    d.x(i, 0) = (c ? 3.0 : -3.0) + noise(rng);
    d.x(i, 1) = spread * noise(rng);
  }
  return d;
}

}  // namespace kls::test_util
