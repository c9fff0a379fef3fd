#include "core/data/constraint_generators.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <unordered_set>

#include "core/data/dataset.h"

namespace kls {
namespace {

uint64_t PairKey(int i, int j) {
  const uint64_t a = static_cast<uint64_t>(std::min(i, j));
  const uint64_t b = static_cast<uint64_t>(std::max(i, j));
  return (a << 32) | b;
}

// Number of unordered pairs i<j within the same class and across classes.
void CountAdmissible(const std::vector<int>& labels, long double* same, long double* different) {
  std::vector<long long> counts;
  for (int l : labels) {
    if (l >= static_cast<int>(counts.size())) counts.resize(l + 1, 0);
    ++counts[l];
  }
  const long double n = static_cast<long double>(labels.size());
  long double s = 0;
  for (long long c : counts) s += static_cast<long double>(c) * (c - 1) / 2;
  *same = s;
  *different = n * (n - 1) / 2 - s;
}

Status CheckLabels(const std::vector<int>& labels) {
  if (labels.size() < 2) {
    return InvalidArgumentError("labels: constraint generation needs at least 2 labeled points, got " +
                                std::to_string(labels.size()));
  }
  return ValidateLabels(labels, static_cast<int>(labels.size()), "labels");
}

// Draws `want_must` must-link and `want_cannot` cannot-link distinct pairs
// i≠j by rejection from uniform pairs: each admissible pair is equally likely.
Status DrawPairs(const std::vector<int>& labels, long long want_must, long long want_cannot,
                 std::mt19937_64& rng, PairwiseConstraints* out) {
  long double same, different;
  CountAdmissible(labels, &same, &different);
  if (want_must > same) {
    return InvalidArgumentError("labels: " + std::to_string(want_must) +
                                " must-link pairs requested but only " +
                                std::to_string(static_cast<long long>(same)) + " same-class pairs exist");
  }
  if (want_cannot > different) {
    return InvalidArgumentError("labels: " + std::to_string(want_cannot) +
                                " cannot-link pairs requested but only " +
                                std::to_string(static_cast<long long>(different)) +
                                " different-class pairs exist");
  }
  const int n = static_cast<int>(labels.size());
  std::uniform_int_distribution<int> pick(0, n - 1);
  std::unordered_set<uint64_t> used;
  long long have_must = 0, have_cannot = 0;
  while (have_must < want_must || have_cannot < want_cannot) {
    const int i = pick(rng), j = pick(rng);
    if (i == j) continue;
    const bool must = labels[i] == labels[j];
    if (must ? have_must >= want_must : have_cannot >= want_cannot) continue;
    if (!used.insert(PairKey(i, j)).second) continue;
    out->pairs.push_back({std::min(i, j), std::max(i, j), must ? PairKind::kMustLink : PairKind::kCannotLink});
    (must ? have_must : have_cannot)++;
  }
  return OkStatus();
}

struct UnionFind {
  std::vector<int> parent;
  int components;
  explicit UnionFind(int n) : parent(n), components(n) { std::iota(parent.begin(), parent.end(), 0); }
  int Find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void Unite(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) {
      parent[a] = b;
      --components;
    }
  }
};

}  // namespace

StatusOr<PairwiseConstraints> GenerateBcdProtocol(const std::vector<int>& labels, double fraction,
                                                  uint64_t seed) {
  KLS_RETURN_IF_ERROR(CheckLabels(labels));
  if (!(fraction > 0.0) || !std::isfinite(fraction)) {
    return InvalidArgumentError("fraction = " + std::to_string(fraction) + " must be positive");
  }
  const long long total = std::llround(4.0 * labels.size() * fraction);
  const long long must = total / 2;
  std::mt19937_64 rng(seed);
  PairwiseConstraints out;
  KLS_RETURN_IF_ERROR(DrawPairs(labels, must, total - must, rng, &out));
  return out;
}

StatusOr<PairwiseConstraints> GenerateAdmmProtocol(const std::vector<int>& labels, uint64_t seed,
                                                   double must_fraction, double cannot_fraction,
                                                   bool self_pairs) {
  KLS_RETURN_IF_ERROR(CheckLabels(labels));
  if (!(must_fraction >= 0.0) || !std::isfinite(must_fraction)) {
    return InvalidArgumentError("must_fraction = " + std::to_string(must_fraction) + " must be >= 0");
  }
  if (!(cannot_fraction >= 0.0) || !std::isfinite(cannot_fraction)) {
    return InvalidArgumentError("cannot_fraction = " + std::to_string(cannot_fraction) + " must be >= 0");
  }
  const double n = static_cast<double>(labels.size());
  std::mt19937_64 rng(seed);
  PairwiseConstraints out;
  KLS_RETURN_IF_ERROR(DrawPairs(labels, std::llround(must_fraction * n),
                                std::llround(cannot_fraction * n), rng, &out));
  if (self_pairs) {
    for (int i = 0; i < static_cast<int>(labels.size()); ++i) out.pairs.push_back({i, i, PairKind::kMustLink});
  }
  return out;
}

StatusOr<PairwiseConstraints> GenerateComponentProtocol(const std::vector<int>& labels,
                                                        double component_ratio, uint64_t seed) {
  KLS_RETURN_IF_ERROR(CheckLabels(labels));
  if (!(component_ratio > 0.0 && component_ratio <= 1.0)) {
    return InvalidArgumentError("component_ratio = " + std::to_string(component_ratio) +
                                " must be in (0, 1]");
  }
  const int n = static_cast<int>(labels.size());
  const int target = std::max(1, static_cast<int>(std::lround(component_ratio * n)));
  // Must-links only join points of one class: fewer chunklets than classes
  // can never be reached (the draw below would not end).
  const int classes = static_cast<int>(std::unordered_set<int>(labels.begin(), labels.end()).size());
  if (target < classes) {
    return InvalidArgumentError("component_ratio = " + std::to_string(component_ratio) + " asks for " +
                                std::to_string(target) + " chunklets but the labels have " + std::to_string(classes) +
                                " classes; must-links cannot join fewer");
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, n - 1);
  std::unordered_set<uint64_t> used;
  UnionFind uf(n);
  PairwiseConstraints out;
  while (uf.components > target) {
    const int i = pick(rng), j = pick(rng);
    if (i == j || !used.insert(PairKey(i, j)).second) continue;
    const bool must = labels[i] == labels[j];
    out.pairs.push_back({std::min(i, j), std::max(i, j), must ? PairKind::kMustLink : PairKind::kCannotLink});
    if (must) uf.Unite(i, j);
  }
  return out;
}

Status ConstraintProtocol::Validate(const std::string& field) const {
  const auto range = [&](const std::optional<double>& v, const char* name, double lo, bool lo_open, double hi,
                         bool allowed) -> Status {
    if (!v) return OkStatus();
    if (!allowed) {
      return InvalidArgumentError(field + "." + name + " does not apply to protocol '" + this->name + "'");
    }
    if (!std::isfinite(*v) || (lo_open ? !(*v > lo) : !(*v >= lo)) || *v > hi) {
      return InvalidArgumentError(field + "." + name + " = " + std::to_string(*v) + " must be in " +
                                  (lo_open ? "(" : "[") + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return OkStatus();
  };
  const bool admm = name == "admm", bcd = name == "bcd", npkl = name == "simplenpkl";
  if (!admm && !bcd && !npkl) {
    return InvalidArgumentError(field + ".name = '" + name + "' is not one of admm, bcd, simplenpkl");
  }
  KLS_RETURN_IF_ERROR(range(fraction, "fraction", 0, true, 10, bcd));
  KLS_RETURN_IF_ERROR(range(must_fraction, "must_fraction", 0, false, 100, admm));
  KLS_RETURN_IF_ERROR(range(cannot_fraction, "cannot_fraction", 0, false, 100, admm));
  KLS_RETURN_IF_ERROR(range(component_ratio, "component_ratio", 0, true, 1, npkl));
  if (self_pairs && !admm) {
    return InvalidArgumentError(field + ".self_pairs does not apply to protocol '" + name + "'");
  }
  return OkStatus();
}

StatusOr<PairwiseConstraints> GenerateProtocol(const ConstraintProtocol& protocol, const std::vector<int>& labels,
                                               const std::string& field) {
  KLS_RETURN_IF_ERROR(protocol.Validate(field));
  StatusOr<PairwiseConstraints> out = InvalidArgumentError("unset");
  if (protocol.name == "admm") {
    out = GenerateAdmmProtocol(labels, protocol.seed, protocol.must_fraction.value_or(0.6),
                               protocol.cannot_fraction.value_or(0.6), protocol.self_pairs.value_or(true));
  } else if (protocol.name == "bcd") {
    out = GenerateBcdProtocol(labels, protocol.fraction.value_or(0.3), protocol.seed);
  } else {
    out = GenerateComponentProtocol(labels, protocol.component_ratio.value_or(0.7), protocol.seed);
  }
  if (!out.ok()) return Status(out.status().code(), field + " '" + protocol.name + "': " + out.status().message());
  return out;
}

int CountConstraintComponents(const PairwiseConstraints& constraints, int num_points) {
  UnionFind uf(num_points);
  for (const Pair& p : constraints.pairs) {
    if (p.kind == PairKind::kMustLink && p.i >= 0 && p.i < num_points && p.j >= 0 && p.j < num_points) {
      uf.Unite(p.i, p.j);
    }
  }
  return uf.components;
}

}  // namespace kls
