// Parametric kernels on feature vectors: the linear, polynomial and RBF
// baselines of the re-ranking experiments (thesis §6.4.3, Table 6.3), as dense
// kernel matrices on the rows of a feature matrix (e.g. the images' visual
// features).
#pragma once

#include <Eigen/Core>

#include "core/common/status.h"

namespace kls {

enum class ParametricKernel {
  kLinear,      ///< x·y
  kPolynomial,  ///< (1 + x·y)^degree
  kRbf,         ///< exp(−‖x − y‖² / width)
};

/// Dense kernel matrix on the rows of `x`. width <= 0 for RBF means the mean
/// squared pairwise distance. Errors: degree < 1, empty or non-finite x.
StatusOr<Eigen::MatrixXd> ParametricKernelMatrix(const Eigen::MatrixXd& x, ParametricKernel kind, int degree = 2,
                                                 double width = 0.0);

}  // namespace kls
