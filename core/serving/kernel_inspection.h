// What a console shows of a learned kernel K = V Vᵀ (kls.v1.Kernels.Inspect):
// its leading eigenvalues, a scatter sample of items at their first two
// principal coordinates, and a heat map of K over a smaller sub-sample, the
// items sorted by label so that classes show as blocks.
//
// Never forms the n × n K. The spectrum comes from the Gram matrix of the
// factor on its smaller side — VᵀV (r × r) when r ≤ n, else V Vᵀ (n × n) —
// whose non-zero eigenvalues are K's: O(n·r·min(n, r) + min(n, r)³). The
// principal coordinates of item i are row i of V projected on the leading
// eigenvectors u₁, u₂ of VᵀV (V u_k = √λ_k w_k with w_k K's eigenvector), so
// the (x, y) rows give K's best rank-2 approximation λ₁w₁w₁ᵀ + λ₂w₂w₂ᵀ; only
// the sampled rows are projected (O(s·r)). The heat map is V_h V_hᵀ over the
// m heat-map rows (O(m²·r)).
//
// Sampling is uniform without replacement from a std::mt19937_64 seeded with
// `seed` (Floyd's algorithm), so the same seed gives the same sample; the
// heat-map items are a sub-sample of the scatter sample drawn from the same
// stream. Signs of the coordinates are fixed (the largest-magnitude entry of
// each eigenvector is positive), so repeated calls draw the same picture.
//
// Thread safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"

namespace kls {

struct InspectionOptions {
  int sample = 1000;   ///< items in the scatter sample, >= 1 (all n when n <= sample)
  int heatmap = 200;   ///< items in the heat map, >= 1 (a sub-sample of the scatter sample)
  int spectrum = 64;   ///< leading eigenvalues to return, >= 0 (at most min(n, r) are)
  uint64_t seed = 1;   ///< sampling seed
};

struct KernelInspection {
  std::vector<double> eigenvalues;  ///< leading eigenvalues of K, descending, clamped at 0
  double trace = 0.0;               ///< trace of K = ‖V‖²_F
  std::vector<int> items;           ///< the scatter sample, sorted by label, then index
  std::vector<double> x, y;         ///< principal coordinates of `items` (y = 0 when r = 1 or n = 1)
  std::vector<int> heatmap_items;   ///< sub-sample of `items`, sorted by label, then index
  Eigen::MatrixXd heatmap;          ///< K over heatmap_items (m × m, symmetric)
};

/// Inspects K = V Vᵀ. `labels` is empty or holds one label per row of `v`
/// (the sort key; items without labels sort by index). INVALID_ARGUMENT for an
/// empty `v`, a labels size other than 0 or n, or options out of range (naming
/// the option). The Gram product checks `control` every 4096 rows and returns
/// its CANCELLED / DEADLINE_EXCEEDED.
StatusOr<KernelInspection> InspectKernel(const LearnedKernel::Embedding& v, const std::vector<int>& labels,
                                         const InspectionOptions& options, const SolveControl& control = {});

/// `k` distinct indices of [0, n), ascending, drawn uniformly (Floyd's
/// algorithm) from a std::mt19937_64 seeded with `seed`; all of [0, n) when
/// k >= n. The scatter sample of InspectKernel.
std::vector<int> SampleIndices(int n, int k, uint64_t seed);

}  // namespace kls
