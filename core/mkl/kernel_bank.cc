#include "core/mkl/kernel_bank.h"

#include <cmath>
#include <string>

namespace kls {

std::string BaseKernelSpec::Name() const {
  std::string s = type == BaseKernelType::kGaussian ? "gauss(gamma=" + FormatNumber(gamma) + ")"
                                                     : "poly(degree=" + std::to_string(degree) + ")";
  s += feature < 0 ? "[all]" : "[f" + std::to_string(feature) + "]";
  return s;
}

Status BaseKernelSpec::Validate(int dim) const {
  if (feature < -1 || feature >= dim) {
    return InvalidArgumentError("kernel " + Name() + ": feature = " + std::to_string(feature) +
                                " is outside [-1, " + std::to_string(dim) + ")");
  }
  if (type == BaseKernelType::kGaussian && !(gamma > 0 && std::isfinite(gamma))) {
    return InvalidArgumentError("kernel gamma = " + FormatNumber(gamma) + ": must be finite and > 0");
  }
  if (type == BaseKernelType::kPolynomial && (degree < 1 || degree > 20)) {
    return InvalidArgumentError("kernel degree = " + std::to_string(degree) + ": must be in [1, 20]");
  }
  if (!(scale > 0 && std::isfinite(scale))) {
    return InvalidArgumentError("kernel " + Name() + ": scale = " + FormatNumber(scale) + " must be finite and > 0");
  }
  return OkStatus();
}

BaseKernelSpec GaussianWidthKernel(double width, int feature) {
  BaseKernelSpec s;
  s.type = BaseKernelType::kGaussian;
  s.gamma = 1.0 / (2.0 * width * width);
  s.feature = feature;
  return s;
}

std::vector<BaseKernelSpec> StandardKernelBank(int dim, bool single_features) {
  std::vector<BaseKernelSpec> bank;
  const int last = single_features ? dim : 0;
  for (int f = -1; f < last; ++f) {
    for (int e = -3; e <= 6; ++e) bank.push_back(GaussianWidthKernel(std::ldexp(1.0, e), f));
    for (int p = 1; p <= 3; ++p) {
      BaseKernelSpec s;
      s.type = BaseKernelType::kPolynomial;
      s.degree = p;
      s.feature = f;
      bank.push_back(s);
    }
  }
  return bank;
}

Eigen::MatrixXd SquaredDistances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  const Eigen::VectorXd na = a.rowwise().squaredNorm();
  const Eigen::VectorXd nb = b.rowwise().squaredNorm();
  Eigen::MatrixXd d = -2.0 * a * b.transpose();
  d.colwise() += na;
  d.rowwise() += nb.transpose();
  return d.cwiseMax(0.0);
}

Eigen::MatrixXd EvaluateKernel(const BaseKernelSpec& spec, const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  Eigen::MatrixXd k;
  if (spec.feature >= 0) {
    const Eigen::VectorXd fa = a.col(spec.feature), fb = b.col(spec.feature);
    if (spec.type == BaseKernelType::kGaussian) {
      k.resize(a.rows(), b.rows());
      for (Eigen::Index j = 0; j < b.rows(); ++j)
        k.col(j) = (-spec.gamma * (fa.array() - fb[j]).square()).exp();
    } else {
      k = ((fa * fb.transpose()).array() + 1.0).pow(spec.degree);
    }
  } else if (spec.type == BaseKernelType::kGaussian) {
    k = (-spec.gamma * SquaredDistances(a, b)).array().exp();
  } else {
    k = ((a * b.transpose()).array() + 1.0).pow(spec.degree);
  }
  if (spec.scale != 1.0) k *= spec.scale;
  return k;
}

double KernelTrace(const BaseKernelSpec& spec, const Eigen::MatrixXd& x) {
  if (spec.type == BaseKernelType::kGaussian) return static_cast<double>(x.rows());
  const Eigen::VectorXd sq =
      spec.feature >= 0 ? Eigen::VectorXd(x.col(spec.feature).array().square()) : Eigen::VectorXd(x.rowwise().squaredNorm());
  return (sq.array() + 1.0).pow(spec.degree).sum();
}

Status NormalizeToUnitTrace(std::vector<BaseKernelSpec>* specs, const Eigen::MatrixXd& x) {
  for (auto& s : *specs) {
    KLS_RETURN_IF_ERROR(s.Validate(static_cast<int>(x.cols())));
    const double t = KernelTrace(s, x);
    if (!(t > 0 && std::isfinite(t))) {
      return InvalidArgumentError("kernel " + s.Name() + " has trace " + FormatNumber(t) + " on the training points");
    }
    s.scale = 1.0 / t;
  }
  return OkStatus();
}

Standardizer Standardizer::Fit(const Eigen::MatrixXd& x) {
  Standardizer s;
  s.mean = x.colwise().mean();
  const Eigen::MatrixXd c = x.rowwise() - s.mean;
  s.scale = (c.cwiseProduct(c).colwise().sum() / static_cast<double>(std::max<Eigen::Index>(1, x.rows() - 1))).cwiseSqrt();
  for (Eigen::Index j = 0; j < s.scale.size(); ++j)
    if (!(s.scale[j] > 0)) s.scale[j] = 1.0;
  return s;
}

Eigen::MatrixXd Standardizer::Apply(const Eigen::MatrixXd& x) const {
  if (mean.size() == 0) return x;
  return (x.rowwise() - mean).array().rowwise() / scale.array();
}

}  // namespace kls
