// The toy query's servable method (test builds only, KLS_TEST_FAMILIES): core
// code over the stored kernel's KernelServable, with no gRPC and no protobuf,
// taking the call's SolveControl like every KernelServable method. A query of
// kls.v1 puts this method on KernelServable itself (core/serving).
#pragma once

#include <string>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/serving/kernel_servable.h"

namespace kls::toy {

/// K(i, i) = ‖v_i‖² for each of `items` (rows of V, K = V Vᵀ), in order.
/// INVALID_ARGUMENT naming items[t] for an index out of range; CANCELLED /
/// DEADLINE_EXCEEDED from `control`, checked before the first item and every
/// kCheckEvery items.
inline StatusOr<std::vector<double>> Diagonal(const KernelServable& servable, const std::vector<int>& items,
                                              const SolveControl& control) {
  constexpr size_t kCheckEvery = 4096;
  const LearnedKernel::Embedding& v = servable.kernel().embedding();
  std::vector<double> out;
  out.reserve(items.size());
  KLS_RETURN_IF_ERROR(control.CheckStop("Diagonal"));
  for (size_t t = 0; t < items.size(); ++t) {
    if (t > 0 && t % kCheckEvery == 0) KLS_RETURN_IF_ERROR(control.CheckStop("Diagonal"));
    const int i = items[t];
    if (i < 0 || i >= v.rows()) {
      return InvalidArgumentError("items[" + std::to_string(t) + "] = " + std::to_string(i) +
                                  " is out of range for a kernel over " + std::to_string(v.rows()) + " points");
    }
    out.push_back(v.row(i).squaredNorm());
  }
  return out;
}

}  // namespace kls::toy
