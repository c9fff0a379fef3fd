#include "core/mkl/kernel_classifier.h"

#include <cmath>
#include <string>

namespace kls {

Eigen::MatrixXd CombinedKernel(const std::vector<BaseKernelSpec>& kernels, const Eigen::VectorXd& weights,
                               KernelCombination combination, const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  Eigen::MatrixXd k = Eigen::MatrixXd::Zero(a.rows(), b.rows());
  for (std::size_t t = 0; t < kernels.size(); ++t) {
    if (weights[t] == 0.0) continue;
    k.noalias() += weights[t] * EvaluateKernel(kernels[t], a, b);
  }
  if (combination == KernelCombination::kExponential) k = k.array().exp().matrix();
  return k;
}

Eigen::MatrixXd KernelClassifier::Kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) const {
  return CombinedKernel(kernels, weights, combination, a, b);
}

Status KernelClassifier::Validate() const {
  if (weights.size() != static_cast<Eigen::Index>(kernels.size())) {
    return InvalidArgumentError("classifier: " + std::to_string(weights.size()) + " weights for " +
                                std::to_string(kernels.size()) + " kernels");
  }
  for (Eigen::Index t = 0; t < weights.size(); ++t) {
    if (!(weights[t] >= 0 && std::isfinite(weights[t]))) {
      return InvalidArgumentError("classifier weights[" + std::to_string(t) + "] = " + FormatNumber(weights[t]) +
                                  ": must be finite and >= 0");
    }
    KLS_RETURN_IF_ERROR(kernels[t].Validate(static_cast<int>(support_vectors.cols())));
  }
  if (coefficients.size() != support_vectors.rows()) {
    return InvalidArgumentError("classifier: " + std::to_string(coefficients.size()) + " coefficients for " +
                                std::to_string(support_vectors.rows()) + " support vectors");
  }
  return OkStatus();
}

StatusOr<Eigen::VectorXd> KernelClassifier::DecisionValues(const Eigen::MatrixXd& x) const {
  return GuardExceptions("KernelClassifier::DecisionValues", [&]() -> StatusOr<Eigen::VectorXd> {
    KLS_RETURN_IF_ERROR(Validate());
    if (x.cols() != support_vectors.cols()) {
      return InvalidArgumentError("classifier input has " + std::to_string(x.cols()) + " features, the model " +
                                  std::to_string(support_vectors.cols()));
    }
    if (!x.allFinite()) return InvalidArgumentError("classifier input has a non-finite feature");
    const Eigen::MatrixXd xs = standardizer.Apply(x);
    Eigen::VectorXd f = Kernel(xs, support_vectors) * coefficients;
    f.array() += bias;
    return f;
  });
}

StatusOr<std::vector<int>> KernelClassifier::Predict(const Eigen::MatrixXd& x) const {
  KLS_ASSIGN_OR_RETURN(Eigen::VectorXd f, DecisionValues(x));
  std::vector<int> out(f.size());
  for (Eigen::Index i = 0; i < f.size(); ++i) out[i] = f[i] > 0 ? positive_class : negative_class;
  return out;
}

KernelClassifier MakeKernelClassifier(std::vector<BaseKernelSpec> kernels, Eigen::VectorXd weights,
                                      KernelCombination combination, Standardizer standardizer,
                                      const Eigen::MatrixXd& x_std, const Eigen::VectorXd& y,
                                      const SvmSolution& svm) {
  KernelClassifier m;
  m.kernels = std::move(kernels);
  m.weights = std::move(weights);
  m.combination = combination;
  m.standardizer = std::move(standardizer);
  std::vector<int> sv;
  for (Eigen::Index i = 0; i < svm.alpha.size(); ++i)
    if (svm.alpha[i] > 0) sv.push_back(static_cast<int>(i));
  m.support_vectors = SubRows(x_std, sv);
  m.coefficients.resize(sv.size());
  for (std::size_t p = 0; p < sv.size(); ++p) m.coefficients[p] = svm.alpha[sv[p]] * y[sv[p]];
  m.bias = svm.bias;
  return m;
}

}  // namespace kls
