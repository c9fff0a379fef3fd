// Pairwise side information: must-link (T_ij = +1) and cannot-link
// (T_ij = -1) pairs, the input of every NPKL solver, and
// the seeded generators of each paper's experimental protocol.
#pragma once

#include <cstdint>
#include <vector>

#include "core/common/status.h"

namespace kls {

enum class PairKind : int8_t {
  kMustLink = 1,     ///< T_ij = +1: i and j belong together
  kCannotLink = -1,  ///< T_ij = -1: i and j belong apart
};

struct Pair {
  int i = 0;
  int j = 0;
  PairKind kind = PairKind::kMustLink;
  /// +1 or -1, the T_ij of the papers.
  double sign() const { return static_cast<double>(static_cast<int>(kind)); }
};

struct PairwiseConstraints {
  std::vector<Pair> pairs;

  int size() const { return static_cast<int>(pairs.size()); }
  int CountMustLinks() const;
  int CountCannotLinks() const;

  /// Checks, for a data set of `num_points` points: indices in range; no pair
  /// listed twice ((i,j) and (j,i) are the same pair); no pair both must and
  /// cannot; no cannot-link (i,i). Self must-links (i,i) are allowed (KL-ADMM's
  /// protocol uses them). Errors name the constraint index and the values:
  /// "constraints[17]: j = 2040 is out of range for 1500 points". O(m log m).
  Status Validate(int num_points) const;
};

/// Largest r with r(r+1)/2 <= m (BCDNPKL Prop. 3; thesis Prop. 3.27), at least 1.
int RankBound(int num_constraints);

}  // namespace kls
