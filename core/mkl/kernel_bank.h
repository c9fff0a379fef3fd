// Base kernels for ONK and MKL, described by small specs so that a model can
// re-evaluate them on unseen points (a parametric recipe).
//
// The standard MKL bank (thesis §4.5.1 and §5.3.1, following [XJKL08]):
// Gaussian kernels with widths σ ∈ {2⁻³, 2⁻², …, 2⁶} and polynomial kernels of
// degree 1–3, each on all features and on every single feature, every kernel
// normalized to unit trace on the training points. We read "width" as σ in
// k(x, z) = exp(−‖x − z‖² / (2σ²)) (the SimpleMKL/[XJKL08] convention) and the
// polynomial kernel as (1 + xᵀz)^p.
//
// Memory: a bank is a list of specs (a few bytes each); kernel matrices are
// evaluated on demand, so a method holds only the matrices it needs.
#pragma once

#include <Eigen/Core>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace kls {

enum class BaseKernelType {
  kGaussian,    ///< exp(−gamma ‖x − z‖²)
  kPolynomial,  ///< (1 + xᵀz)^degree
};

/// One base kernel: scale · k(x, z) on all features or on one feature.
struct BaseKernelSpec {
  BaseKernelType type = BaseKernelType::kGaussian;
  int feature = -1;     ///< −1: all features; otherwise the single feature used (0-based)
  double gamma = 1.0;   ///< Gaussian: exp(−gamma ‖x − z‖²), gamma > 0
  int degree = 1;       ///< polynomial degree >= 1
  double scale = 1.0;   ///< positive multiplier (1/trace for unit-trace normalization)

  /// "gauss(gamma=0.5)[all]", "poly(degree=2)[f3]" — for logs and JSON.
  std::string Name() const;
  /// Checks gamma, degree, scale and that feature < dim.
  Status Validate(int dim) const;
};

/// Gaussian spec with width σ: gamma = 1/(2σ²).
BaseKernelSpec GaussianWidthKernel(double width, int feature = -1);

/// The thesis bank: 10 Gaussian widths 2⁻³…2⁶ and polynomial degrees 1–3 on
/// all features, then (if `single_features`) the same 13 on each of the dim
/// features: 13·(dim + 1) specs, unnormalized (scale 1).
std::vector<BaseKernelSpec> StandardKernelBank(int dim, bool single_features = true);

/// Kernel matrix scale·k(a_i, b_j), |a| × |b|. O(|a||b|·d).
Eigen::MatrixXd EvaluateKernel(const BaseKernelSpec& spec, const Eigen::MatrixXd& a, const Eigen::MatrixXd& b);

/// Trace of the unscaled kernel on the rows of x, in O(n·d) (no matrix).
double KernelTrace(const BaseKernelSpec& spec, const Eigen::MatrixXd& x);

/// Sets every spec's scale to 1 / trace on x, so each training kernel has
/// unit trace (thesis §4.5.1). Errors if a trace is not positive and finite.
Status NormalizeToUnitTrace(std::vector<BaseKernelSpec>* specs, const Eigen::MatrixXd& x);

/// Per-feature mean and standard deviation of x (sd 0 → 1), for the thesis's
/// z-scoring of training data (test data uses the training statistics).
struct Standardizer {
  Eigen::RowVectorXd mean;
  Eigen::RowVectorXd scale;
  static Standardizer Fit(const Eigen::MatrixXd& x);
  Eigen::MatrixXd Apply(const Eigen::MatrixXd& x) const;
};

/// Squared Euclidean distances between the rows of a and b (|a| × |b|).
Eigen::MatrixXd SquaredDistances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b);

}  // namespace kls
