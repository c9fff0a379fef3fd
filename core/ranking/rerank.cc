#include "core/ranking/rerank.h"

#include <algorithm>
#include <string>

namespace kls {

std::vector<int> TopCandidates(const Eigen::VectorXd& scores, int count) {
  std::vector<int> idx;
  for (Eigen::Index i = 0; i < scores.size(); ++i)
    if (scores[i] > 0.0) idx.push_back(static_cast<int>(i));
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  if (static_cast<int>(idx.size()) > count) idx.resize(std::max(0, count));
  return idx;
}

StatusOr<std::vector<ScoredItem>> ReRankCandidates(const LearnedKernel& kernel, const std::vector<int>& candidates,
                                                   const Eigen::VectorXd& prior, const VisualRankOptions& options,
                                                   int* iterations, const SolveControl& control) {
  const int c = static_cast<int>(candidates.size());
  if (c == 0) return InvalidArgumentError("candidates is empty");
  std::vector<char> seen(kernel.num_points(), 0);
  for (int t = 0; t < c; ++t) {
    const std::string field = "candidates[" + std::to_string(t) + "]";
    KLS_RETURN_IF_ERROR(kernel.CheckIndex(candidates[t], field.c_str()));
    if (seen[candidates[t]]) {
      return InvalidArgumentError(field + " = " + std::to_string(candidates[t]) + " is listed twice");
    }
    seen[candidates[t]] = 1;
  }
  if (prior.size() != 0 && prior.size() != c) {
    return InvalidArgumentError("prior has " + std::to_string(prior.size()) + " values for " + std::to_string(c) +
                                " candidates");
  }
  LearnedKernel::Embedding v(c, kernel.rank());
  for (int t = 0; t < c; ++t) v.row(t) = kernel.embedding().row(candidates[t]);
  Eigen::MatrixXd k = v * v.transpose();
  const double lo = k.minCoeff();
  if (lo < 0.0) k.array() -= lo;
  KLS_RETURN_IF_ERROR(control.CheckStop("ReRank"));
  KLS_ASSIGN_OR_RETURN(VisualRankResult vr, SolveVisualRank(k, prior, options, control));
  if (vr.stats.termination == Termination::kCancelled || vr.stats.termination == Termination::kTimeLimit) {
    return control.CheckStop("ReRank");  // a stop persists: the same CANCELLED / DEADLINE_EXCEEDED
  }
  if (iterations) *iterations = vr.stats.iterations;
  std::vector<ScoredItem> out;
  out.reserve(c);
  for (int t : RankByScore(vr.scores)) out.push_back({candidates[t], vr.scores[t]});
  return out;
}

}  // namespace kls
