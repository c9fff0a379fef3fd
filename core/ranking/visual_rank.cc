#include "core/ranking/visual_rank.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace kls {

Status VisualRankOptions::Validate() const {
  if (!(damping >= 0.0 && damping < 1.0))
    return InvalidArgumentError("options.damping = " + FormatNumber(damping) + " must be in [0, 1)");
  if (!(tolerance > 0.0) || !std::isfinite(tolerance))
    return InvalidArgumentError("options.tolerance = " + FormatNumber(tolerance) + " must be finite and > 0");
  if (max_iterations < 1)
    return InvalidArgumentError("options.max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  return OkStatus();
}

namespace {

Status CheckKernelAndPrior(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& prior) {
  if (kernel.rows() == 0 || kernel.rows() != kernel.cols())
    return InvalidArgumentError("kernel is " + std::to_string(kernel.rows()) + " x " +
                                std::to_string(kernel.cols()) + "; it must be square and non-empty");
  if (!kernel.allFinite()) return InvalidArgumentError("kernel has a non-finite entry");
  if (prior.size() != kernel.rows())
    return InvalidArgumentError("prior has " + std::to_string(prior.size()) + " values but the kernel has " +
                                std::to_string(kernel.rows()) + " rows");
  for (Eigen::Index i = 0; i < prior.size(); ++i)
    if (!(prior[i] >= 0.0) || !std::isfinite(prior[i]))
      return InvalidArgumentError("prior[" + std::to_string(i) + "] = " + FormatNumber(prior[i]) +
                                  " must be finite and >= 0");
  if (!(prior.sum() > 0.0)) return InvalidArgumentError("prior sums to 0; it needs a positive entry");
  return OkStatus();
}

}  // namespace

StatusOr<Eigen::MatrixXd> ColumnStochastic(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& prior,
                                           bool zero_diagonal) {
  return GuardExceptions("ColumnStochastic", [&]() -> StatusOr<Eigen::MatrixXd> {
    KLS_RETURN_IF_ERROR(CheckKernelAndPrior(kernel, prior));
    Eigen::MatrixXd k = kernel.cwiseMax(0.0);
    if (zero_diagonal) k.diagonal().setZero();
    const Eigen::VectorXd p = prior / prior.sum();
    for (Eigen::Index j = 0; j < k.cols(); ++j) {
      const double s = k.col(j).sum();
      if (s > 0.0) {
        k.col(j) /= s;
      } else {
        k.col(j) = p;  // dangling item: jump by the prior (see header)
      }
    }
    return k;
  });
}

StatusOr<VisualRankResult> SolveVisualRank(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& prior_in,
                                           const VisualRankOptions& options, const SolveControl& control) {
  return GuardExceptions("SolveVisualRank", [&]() -> StatusOr<VisualRankResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const Eigen::Index n = kernel.rows();
    Eigen::VectorXd prior = prior_in.size() == 0 && n > 0 ? Eigen::VectorXd::Constant(n, 1.0 / n) : prior_in;
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd k_hat, ColumnStochastic(kernel, prior, options.zero_diagonal));
    Stopwatch watch;
    VisualRankResult result;
    const Eigen::VectorXd teleport = (1.0 - options.damping) * prior;
    Eigen::VectorXd vr = prior;
    Eigen::VectorXd next(n);
    result.stats.termination = Termination::kIterationLimit;
    for (int t = 1; t <= options.max_iterations; ++t) {
      next.noalias() = options.damping * (k_hat * vr);
      next += teleport;  // §6.2: VR = λ_d K̂ VR + (1 − λ_d) P
      const double change = (next - vr).lpNorm<1>();
      vr.swap(next);
      result.stats.iterations = t;
      result.stats.objective_history.push_back(change);
      result.stats.final_objective = change;
      IterationRow row;
      row.iteration = t;
      row.objective = change;
      row.seconds = watch.Seconds();
      ReportIteration(control, row, options.max_iterations, &result.stats);
      if (!std::isfinite(change)) {
        result.stats.termination = Termination::kNumericalIssue;
        break;
      }
      if (change <= options.tolerance) {
        result.stats.termination = Termination::kConverged;
        break;
      }
      Termination why;
      if (control.ShouldStop(&why)) {
        result.stats.termination = why;
        break;
      }
    }
    result.stats.solve_seconds = watch.Seconds();
    result.scores = std::move(vr);
    return result;
  });
}

std::vector<int> RankByScore(const Eigen::VectorXd& scores) {
  std::vector<int> order(static_cast<size_t>(scores.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  return order;
}

}  // namespace kls
