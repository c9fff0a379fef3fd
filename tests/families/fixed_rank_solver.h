// The registry's toy solver (test builds only): a "core" solver with no gRPC
// and no protobuf, as core/ solvers are. It returns the features' Gram
// matrix X Xᵀ truncated to its top `rank` eigenpairs and scaled.
#pragma once

#include <Eigen/Eigenvalues>
#include <cmath>
#include <string>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"

namespace kls::toy {

struct FixedRankOptions {
  int rank = 2;        ///< rank of the kernel, >= 1 and <= n
  double scale = 1.0;  ///< multiplies every entry, finite and > 0

  /// Errors name the fields as "<path>.<field>".
  Status Validate(const std::string& path = "options") const {
    if (rank < 1) return InvalidArgumentError(path + ".rank = " + std::to_string(rank) + " must be >= 1");
    if (!(std::isfinite(scale) && scale > 0)) {
      return InvalidArgumentError(path + ".scale = " + FormatNumber(scale) + " must be finite and > 0");
    }
    return OkStatus();
  }
};

struct FixedRankResult {
  LearnedKernel kernel;
  SolveReport stats;
};

/// K = scale · U_r Λ_r U_rᵀ of X Xᵀ = U Λ Uᵀ, as the factor V = √scale · U_r Λ_r^{1/2}.
inline StatusOr<FixedRankResult> SolveFixedRank(const Eigen::MatrixXd& x, const FixedRankOptions& o,
                                                const SolveControl& control) {
  KLS_RETURN_IF_ERROR(o.Validate());
  if (o.rank > x.rows()) {
    return InvalidArgumentError("options.rank = " + std::to_string(o.rank) + " exceeds n = " +
                                std::to_string(x.rows()));
  }
  FixedRankResult r;
  if (control.ShouldStop(&r.stats.termination)) return r;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(x * x.transpose());
  const Eigen::Index n = x.rows();
  LearnedKernel::Embedding v(n, o.rank);
  for (int c = 0; c < o.rank; ++c) {
    const Eigen::Index i = n - 1 - c;  // eigenvalues ascending
    v.col(c) = eig.eigenvectors().col(i) * std::sqrt(o.scale * std::max(0.0, eig.eigenvalues()[i]));
  }
  KLS_ASSIGN_OR_RETURN(r.kernel, LearnedKernel::FromEmbedding(std::move(v)));
  r.stats.iterations = 1;
  r.stats.termination = Termination::kConverged;
  return r;
}

}  // namespace kls::toy
