#include "core/social/harmonic_classifier.h"

#include "core/common/spd_solve.h"

#include <Eigen/Cholesky>
#include <algorithm>
#include <cmath>
#include <string>

namespace kls {

Status HarmonicOptions::Validate() const {
  if (!(edge_threshold >= 0.0) || !std::isfinite(edge_threshold))
    return InvalidArgumentError("options.edge_threshold = " + FormatNumber(edge_threshold) +
                                " must be finite and >= 0");
  return OkStatus();
}

StatusOr<HarmonicResult> HarmonicClassify(const Eigen::MatrixXd& w, const std::vector<int>& labelled,
                                          const std::vector<int>& labels, int num_classes,
                                          const HarmonicOptions& options, const SolveControl& control) {
  return GuardExceptions("HarmonicClassify", [&]() -> StatusOr<HarmonicResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const int n = static_cast<int>(w.rows());
    if (n == 0 || w.cols() != n)
      return InvalidArgumentError("weights is " + std::to_string(w.rows()) + " x " + std::to_string(w.cols()) +
                                  "; it must be square and non-empty");
    double scale = 1.0;
    for (int j = 0; j < n; j += 256) {
      KLS_RETURN_IF_ERROR(control.CheckStop("HarmonicClassify"));
      const auto block = w.middleCols(j, std::min(256, n - j));
      if (!block.allFinite()) return InvalidArgumentError("weights has a non-finite entry");
      scale = std::max(scale, block.cwiseAbs().maxCoeff());
    }
    for (int j = 0; j < n; ++j) {
      if (j % 256 == 0) KLS_RETURN_IF_ERROR(control.CheckStop("HarmonicClassify"));
      for (int i = 0; i < n; ++i) {
        if (w(i, j) < 0.0)
          return InvalidArgumentError("weights(" + std::to_string(i) + ", " + std::to_string(j) +
                                      ") = " + FormatNumber(w(i, j)) + " must be >= 0");
        if (std::abs(w(i, j) - w(j, i)) > 1e-9 * scale)
          return InvalidArgumentError("weights is not symmetric at (" + std::to_string(i) + ", " +
                                      std::to_string(j) + ")");
      }
    }
    if (labelled.size() != labels.size())
      return InvalidArgumentError("labelled has " + std::to_string(labelled.size()) + " nodes but labels has " +
                                  std::to_string(labels.size()) + " values");
    if (labelled.empty()) return InvalidArgumentError("labelled is empty; at least one labelled node is needed");
    int c = num_classes;
    if (c < 0) return InvalidArgumentError("num_classes = " + std::to_string(c) + " must be >= 0");
    std::vector<int> slot(n, -1);  // position in `labelled`, −1 for unlabelled
    for (size_t t = 0; t < labelled.size(); ++t) {
      const int i = labelled[t];
      if (i < 0 || i >= n)
        return InvalidArgumentError("labelled[" + std::to_string(t) + "] = " + std::to_string(i) +
                                    " is not a node index in [0, " + std::to_string(n) + ")");
      if (slot[i] >= 0)
        return InvalidArgumentError("labelled[" + std::to_string(t) + "] = " + std::to_string(i) +
                                    " repeats an earlier node");
      if (labels[t] < 0 || (num_classes > 0 && labels[t] >= num_classes))
        return InvalidArgumentError("labels[" + std::to_string(t) + "] = " + std::to_string(labels[t]) +
                                    " is outside [0, num_classes)");
      slot[i] = static_cast<int>(t);
      if (num_classes == 0) c = std::max(c, labels[t] + 1);
    }
    if (c < 2) c = 2;

    KLS_RETURN_IF_ERROR(control.CheckStop("HarmonicClassify"));
    // Every unlabelled node must reach a labelled one (else D_uu − W_uu is singular).
    std::vector<char> reached(n, 0);
    std::vector<int> stack(labelled.begin(), labelled.end());
    for (int i : labelled) reached[i] = 1;
    for (int visited = 0; !stack.empty(); ++visited) {
      if (visited % 256 == 0) KLS_RETURN_IF_ERROR(control.CheckStop("HarmonicClassify"));
      const int i = stack.back();
      stack.pop_back();
      for (int j = 0; j < n; ++j)
        if (!reached[j] && j != i && w(i, j) > options.edge_threshold) {
          reached[j] = 1;
          stack.push_back(j);
        }
    }
    for (int i = 0; i < n; ++i)
      if (!reached[i])
        return FailedPreconditionError("node " + std::to_string(i) +
                                       " is in a component with no labelled node; its harmonic value is undefined");

    KLS_RETURN_IF_ERROR(control.CheckStop("HarmonicClassify"));
    std::vector<int> unl;
    for (int i = 0; i < n; ++i)
      if (slot[i] < 0) unl.push_back(i);
    const int nu = static_cast<int>(unl.size());
    HarmonicResult result;
    result.scores = Eigen::MatrixXd::Zero(n, c);
    for (size_t t = 0; t < labelled.size(); ++t) result.scores(labelled[t], labels[t]) = 1.0;
    if (nu > 0) {
      // (D_uu − W_uu) F_u = W_ul Y_l; self-loops cancel, so they are dropped.
      Eigen::MatrixXd a(nu, nu);
      Eigen::MatrixXd rhs = Eigen::MatrixXd::Zero(nu, c);
      for (int p = 0; p < nu; ++p) {
        if (p % 256 == 0) KLS_RETURN_IF_ERROR(control.CheckStop("HarmonicClassify"));
        const int i = unl[p];
        double degree = 0.0;
        for (int j = 0; j < n; ++j)
          if (j != i) degree += w(i, j);
        for (int q = 0; q < nu; ++q) a(p, q) = p == q ? degree : -w(i, unl[q]);
        for (size_t t = 0; t < labelled.size(); ++t) rhs(p, labels[t]) += w(i, labelled[t]);
      }
      StatusOr<Eigen::MatrixXd> solved = SolveSpd(std::move(a), rhs, control, "HarmonicClassify");
      if (solved.status().code() == StatusCode::kFailedPrecondition)
        return InternalError("Cholesky of D_uu - W_uu failed although every node reaches a label");
      if (!solved.ok()) return solved.status();
      const Eigen::MatrixXd fu = std::move(solved).value();
      for (int p = 0; p < nu; ++p) result.scores.row(unl[p]) = fu.row(p);
    }
    Eigen::RowVectorXd weight = Eigen::RowVectorXd::Ones(c);
    if (options.class_mass_normalization && nu > 0) {
      Eigen::RowVectorXd q = Eigen::RowVectorXd::Zero(c);
      for (int l : labels) q[l] += 1.0 / labels.size();
      Eigen::RowVectorXd mass = Eigen::RowVectorXd::Zero(c);
      for (int i : unl) mass += result.scores.row(i);
      for (int k = 0; k < c; ++k) weight[k] = mass[k] > 0 ? q[k] / mass[k] : 0.0;
    }
    result.labels.assign(n, 0);
    for (int i = 0; i < n; ++i) {
      if (slot[i] >= 0) {
        result.labels[i] = labels[slot[i]];
        continue;
      }
      Eigen::Index best;
      result.scores.row(i).cwiseProduct(weight).maxCoeff(&best);
      result.labels[i] = static_cast<int>(best);
    }
    return result;
  });
}

}  // namespace kls
