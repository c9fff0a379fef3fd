#include "server/jobs/solver_dispatch.h"

#include <type_traits>
#include <variant>

#include "core/graph/laplacian.h"
#include "core/npkl/bcd_npkl.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/simple_npkl.h"

namespace kls::server {

StatusOr<NpklResult> RunNpklJob(const JobSpec& spec, const store::StoredDataset& data,
                                const SolveControl& control) {
  if (data.constraints.size() == 0) {
    return FailedPreconditionError("the data set has no pairwise constraints; " + spec.method +
                                   " learns from must-link / cannot-link pairs, upload some first");
  }
  KLS_ASSIGN_OR_RETURN(Graph graph, BuildGraph(data.data.features, spec.graph));
  NpklProblem problem;
  problem.laplacian = std::move(graph.laplacian);
  problem.constraints = data.constraints;
  return std::visit(
      [&](const auto& options) -> StatusOr<NpklResult> {
        using T = std::decay_t<decltype(options)>;
        if constexpr (std::is_same_v<T, KlAdmmOptions>) {
          return SolveKlAdmm(problem, options, control);
        } else if constexpr (std::is_same_v<T, BcdNpklOptions>) {
          return SolveBcdNpkl(problem, options, control);
        } else {
          return SolveSimpleNpkl(problem, options, control);
        }
      },
      spec.options);
}

}  // namespace kls::server
