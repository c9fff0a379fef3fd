#include "core/data/constraints.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

namespace kls {

int PairwiseConstraints::CountMustLinks() const {
  return static_cast<int>(std::count_if(pairs.begin(), pairs.end(),
                                        [](const Pair& p) { return p.kind == PairKind::kMustLink; }));
}

int PairwiseConstraints::CountCannotLinks() const { return size() - CountMustLinks(); }

Status PairwiseConstraints::Validate(int num_points) const {
  if (num_points < 1) {
    return InvalidArgumentError("constraints: the data set has " + std::to_string(num_points) + " points");
  }
  std::unordered_map<uint64_t, int> first_seen;
  first_seen.reserve(pairs.size() * 2);
  for (size_t k = 0; k < pairs.size(); ++k) {
    const Pair& p = pairs[k];
    const std::string at = "constraints[" + std::to_string(k) + "]";
    if (p.kind != PairKind::kMustLink && p.kind != PairKind::kCannotLink) {
      return InvalidArgumentError(at + ": kind = " + std::to_string(static_cast<int>(p.kind)) +
                                  " is neither must-link (+1) nor cannot-link (-1)");
    }
    if (p.i < 0 || p.i >= num_points) {
      return InvalidArgumentError(at + ": i = " + std::to_string(p.i) + " is out of range for " +
                                  std::to_string(num_points) + " points");
    }
    if (p.j < 0 || p.j >= num_points) {
      return InvalidArgumentError(at + ": j = " + std::to_string(p.j) + " is out of range for " +
                                  std::to_string(num_points) + " points");
    }
    if (p.i == p.j && p.kind == PairKind::kCannotLink) {
      return InvalidArgumentError(at + ": cannot-link (" + std::to_string(p.i) + ", " +
                                  std::to_string(p.j) + ") joins a point to itself");
    }
    const uint64_t a = static_cast<uint64_t>(std::min(p.i, p.j));
    const uint64_t b = static_cast<uint64_t>(std::max(p.i, p.j));
    auto [it, inserted] = first_seen.emplace((a << 32) | b, static_cast<int>(k));
    if (!inserted) {
      const Pair& q = pairs[it->second];
      const std::string pair_text = "(" + std::to_string(p.i) + ", " + std::to_string(p.j) + ")";
      if (q.kind != p.kind) {
        return InvalidArgumentError(at + ": pair " + pair_text + " contradicts constraints[" +
                                    std::to_string(it->second) +
                                    "]: the same pair is both must-link and cannot-link");
      }
      return InvalidArgumentError(at + ": pair " + pair_text + " duplicates constraints[" +
                                  std::to_string(it->second) + "]");
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
