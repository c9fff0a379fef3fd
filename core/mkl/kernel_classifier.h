// One classifier model for ONK and MKL results (a parametric
// recipe): base-kernel specs, their weights and combination, the feature
// standardization, the support vectors with their α and labels, and b. It
// predicts for new points by re-evaluating the base kernels against the
// support vectors:
//     f(x) = Σ_i α_i y_i k(x_i, x) + b,
//     k = Σ_t w_t k_t (kLinear: KTA, UMKL, ONK with one kernel)  or
//     k = exp(Σ_t w_t k_t) (kExponential: two-layer MKL, thesis (4.2)).
// For ONK the learned kernel G's extension to unseen points is K's row
// (φ̃(x) = (φ(x), 0), onk paper §2.2), so the ONK model is the base kernel
// with the α and b of the SVM trained on G.
//
// Thread safety: const methods are safe to call concurrently.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/status.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/svm.h"

namespace kls {

enum class KernelCombination {
  kLinear,       ///< Σ_t w_t k_t
  kExponential,  ///< exp(Σ_t w_t k_t), thesis (4.2)
};

struct KernelClassifier {
  std::vector<BaseKernelSpec> kernels;  ///< base kernels (with their unit-trace scales)
  Eigen::VectorXd weights;              ///< one weight per kernel, >= 0
  KernelCombination combination = KernelCombination::kLinear;
  Standardizer standardizer;            ///< applied to inputs first (empty mean: none)
  Eigen::MatrixXd support_vectors;      ///< s × d, already standardized
  Eigen::VectorXd coefficients;         ///< α_i y_i for each support vector
  double bias = 0.0;                    ///< b
  int positive_class = 1;               ///< class id predicted for f(x) > 0
  int negative_class = 0;               ///< class id predicted for f(x) <= 0

  /// Combined kernel between standardized rows of a and b.
  Eigen::MatrixXd Kernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) const;
  /// f(x) for raw (unstandardized) rows of x. Errors on a dimension mismatch.
  StatusOr<Eigen::VectorXd> DecisionValues(const Eigen::MatrixXd& x) const;
  /// Class ids for the rows of x.
  StatusOr<std::vector<int>> Predict(const Eigen::MatrixXd& x) const;
  /// Checks shapes and weights.
  Status Validate() const;
};

/// Builds the model from an SVM trained on the combined kernel of the
/// standardized training points `x_std` (only support vectors are kept).
KernelClassifier MakeKernelClassifier(std::vector<BaseKernelSpec> kernels, Eigen::VectorXd weights,
                                      KernelCombination combination, Standardizer standardizer,
                                      const Eigen::MatrixXd& x_std, const Eigen::VectorXd& y,
                                      const SvmSolution& svm);

/// Combined training kernel Σ w_t K_t or exp(Σ w_t K_t) on the rows of x
/// (one base matrix in memory at a time).
Eigen::MatrixXd CombinedKernel(const std::vector<BaseKernelSpec>& kernels, const Eigen::VectorXd& weights,
                               KernelCombination combination, const Eigen::MatrixXd& a, const Eigen::MatrixXd& b);

}  // namespace kls
