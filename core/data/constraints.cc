#include "core/data/constraints.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace kls {

int PairwiseConstraints::CountMustLinks() const {
  return static_cast<int>(std::count_if(pairs.begin(), pairs.end(),
                                        [](const Pair& p) { return p.kind == PairKind::kMustLink; }));
}

int PairwiseConstraints::CountCannotLinks() const { return size() - CountMustLinks(); }

namespace {

// The earliest position that repeats an earlier pair (either order) and the
// position of that earlier pair; {size, 0} when none does. Sorting (pair,
// position) takes 16 bytes a pair — a hash map of the pairs took ~50, which
// at 4,000,000 pairs was 200 MB of an upload's peak.
std::pair<size_t, size_t> FirstRepeat(const std::vector<Pair>& pairs) {
  std::vector<std::pair<uint64_t, uint32_t>> keyed(pairs.size());
  for (size_t k = 0; k < pairs.size(); ++k) {
    const uint64_t a = static_cast<uint32_t>(std::min(pairs[k].i, pairs[k].j));
    const uint64_t b = static_cast<uint32_t>(std::max(pairs[k].i, pairs[k].j));
    keyed[k] = {(a << 32) | b, static_cast<uint32_t>(k)};
  }
  std::sort(keyed.begin(), keyed.end());
  std::pair<size_t, size_t> first{pairs.size(), 0};
  for (size_t t = 1; t < keyed.size(); ++t) {
    // The second of a run of equal pairs is the run's earliest repeat.
    if (keyed[t].first != keyed[t - 1].first || (t >= 2 && keyed[t - 2].first == keyed[t].first)) continue;
    if (keyed[t].second < first.first) first = {keyed[t].second, keyed[t - 1].second};
  }
  return first;
}

}  // namespace

Status PairwiseConstraints::Validate(int num_points) const {
  if (num_points < 1) {
    return InvalidArgumentError("constraints: the data set has " + std::to_string(num_points) + " points");
  }
  const auto [repeat, earlier] = FirstRepeat(pairs);
  for (size_t k = 0; k < pairs.size(); ++k) {
    const Pair& p = pairs[k];
    const auto at = [k] { return "constraints[" + std::to_string(k) + "]"; };
    if (p.kind != PairKind::kMustLink && p.kind != PairKind::kCannotLink) {
      return InvalidArgumentError(at() + ": kind = " + std::to_string(static_cast<int>(p.kind)) +
                                  " is neither must-link (+1) nor cannot-link (-1)");
    }
    if (p.i < 0 || p.i >= num_points) {
      return InvalidArgumentError(at() + ": i = " + std::to_string(p.i) + " is out of range for " +
                                  std::to_string(num_points) + " points");
    }
    if (p.j < 0 || p.j >= num_points) {
      return InvalidArgumentError(at() + ": j = " + std::to_string(p.j) + " is out of range for " +
                                  std::to_string(num_points) + " points");
    }
    if (p.i == p.j && p.kind == PairKind::kCannotLink) {
      return InvalidArgumentError(at() + ": cannot-link (" + std::to_string(p.i) + ", " +
                                  std::to_string(p.j) + ") joins a point to itself");
    }
    if (k == repeat) {
      const Pair& q = pairs[earlier];
      const std::string pair_text = "(" + std::to_string(p.i) + ", " + std::to_string(p.j) + ")";
      if (q.kind != p.kind) {
        return InvalidArgumentError(at() + ": pair " + pair_text + " contradicts constraints[" +
                                    std::to_string(earlier) + "]: the same pair is both must-link and cannot-link");
      }
      return InvalidArgumentError(at() + ": pair " + pair_text + " duplicates constraints[" +
                                  std::to_string(earlier) + "]");
    }
  }
  return OkStatus();
}

int RankBound(int m) {
  if (m <= 0) return 1;
  // r(r+1)/2 <= m  <=>  r <= (sqrt(8m+1) - 1) / 2
  int r = static_cast<int>(std::floor((std::sqrt(8.0 * m + 1.0) - 1.0) / 2.0));
  while (static_cast<long long>(r + 1) * (r + 2) / 2 <= m) ++r;
  while (r > 1 && static_cast<long long>(r) * (r + 1) / 2 > m) --r;
  return std::max(1, r);
}

}  // namespace kls
