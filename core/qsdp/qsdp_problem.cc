#include "core/qsdp/qsdp_problem.h"

#include <cmath>
#include <string>

namespace kls {

Status QsdpProblem::Validate() const {
  const Eigen::Index k = left.rows(), m = left.cols();
  if (m < 1) return InvalidArgumentError("left: has " + std::to_string(m) + " columns; the basis needs m >= 1");
  if (right.rows() != k || right.cols() != m) {
    return InvalidArgumentError("right: is " + std::to_string(right.rows()) + " × " + std::to_string(right.cols()) +
                                " but left is " + std::to_string(k) + " × " + std::to_string(m));
  }
  if (target.size() != k) {
    return InvalidArgumentError("target: has " + std::to_string(target.size()) + " entries for " +
                                std::to_string(k) + " terms");
  }
  if (weight.size() != k) {
    return InvalidArgumentError("weight: has " + std::to_string(weight.size()) + " entries for " +
                                std::to_string(k) + " terms");
  }
  if (!left.allFinite() || !right.allFinite()) return InvalidArgumentError("left/right: non-finite entries");
  for (Eigen::Index i = 0; i < k; ++i) {
    if (!std::isfinite(target[i])) {
      return InvalidArgumentError("target[" + std::to_string(i) + "] = " + FormatNumber(target[i]) + " is not finite");
    }
    if (!(weight[i] > 0.0) || !std::isfinite(weight[i])) {
      return InvalidArgumentError("weight[" + std::to_string(i) + "] = " + FormatNumber(weight[i]) +
                                  " must be finite and > 0");
    }
  }
  if (linear.size() != 0 && (linear.rows() != m || linear.cols() != m || !linear.allFinite())) {
    return InvalidArgumentError("linear: must be empty or a finite " + std::to_string(m) + " × " +
                                std::to_string(m) + " matrix");
  }
  if (!(trace_weight >= 0.0) || !std::isfinite(trace_weight)) {
    return InvalidArgumentError("trace_weight = " + FormatNumber(trace_weight) + " must be finite and >= 0");
  }
  return OkStatus();
}

Eigen::VectorXd QsdpProblem::Apply(const Eigen::MatrixXd& y) const {
  Eigen::MatrixXd ly = left * y;  // row k = a_kᵀ Y
  return ly.cwiseProduct(right).rowwise().sum();
}

Eigen::MatrixXd QsdpProblem::Adjoint(const Eigen::VectorXd& lambda) const {
  Eigen::MatrixXd s = left.transpose() * (lambda.asDiagonal() * right);  // Σ λ_k a_k b_kᵀ
  return 0.5 * (s + s.transpose());
}

double QsdpProblem::LinearTerm(const Eigen::MatrixXd& y) const {
  double v = trace_weight * y.trace();
  if (linear.size() != 0) v += linear.cwiseProduct(y).sum();
  return v;
}

double QsdpProblem::ObjectiveFromApplied(const Eigen::VectorXd& applied, double linear_term) const {
  return (weight.array() * (applied - target).array().square()).sum() - linear_term;
}

double QsdpProblem::Objective(const Eigen::MatrixXd& y) const { return ObjectiveFromApplied(Apply(y), LinearTerm(y)); }

Eigen::MatrixXd QsdpProblem::Gradient(const Eigen::MatrixXd& y) const {
  Eigen::VectorXd lambda = 2.0 * weight.cwiseProduct(Apply(y) - target);
  Eigen::MatrixXd g = Adjoint(lambda);
  g.diagonal().array() -= trace_weight;
  if (linear.size() != 0) g -= linear;
  return g;
}

double QsdpProblem::Constant() const { return (weight.array() * target.array().square()).sum(); }

namespace {
// vec(G_k), column-major m² values.
Eigen::VectorXd VecTerm(const QsdpProblem& p, int k) {
  const int m = p.dim();
  Eigen::MatrixXd g = 0.5 * (p.left.row(k).transpose() * p.right.row(k) + p.right.row(k).transpose() * p.left.row(k));
  return Eigen::Map<const Eigen::VectorXd>(g.data(), static_cast<Eigen::Index>(m) * m);
}
}  // namespace

Eigen::MatrixXd QsdpProblem::DenseQuadratic() const {
  const Eigen::Index mm = static_cast<Eigen::Index>(dim()) * dim();
  Eigen::MatrixXd g(mm, num_terms());
  for (int k = 0; k < num_terms(); ++k) g.col(k) = std::sqrt(weight[k]) * VecTerm(*this, k);
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(mm, mm);
  a.selfadjointView<Eigen::Lower>().rankUpdate(g);
  return a.selfadjointView<Eigen::Lower>();
}

Eigen::VectorXd QsdpProblem::DenseLinear() const {
  const int m = dim();
  Eigen::VectorXd b = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(m) * m);
  for (int k = 0; k < num_terms(); ++k) b -= 2.0 * weight[k] * target[k] * VecTerm(*this, k);
  for (int i = 0; i < m; ++i) b[static_cast<Eigen::Index>(i) * m + i] -= trace_weight;
  if (linear.size() != 0) b -= Eigen::Map<const Eigen::VectorXd>(linear.data(), static_cast<Eigen::Index>(m) * m);
  return b;
}

}  // namespace kls
