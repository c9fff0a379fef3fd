// The thesis's MKL classification protocol shared by two-layer MKL
// (two_layer_mkl.h) and unsupervised MKL (unsupervised_mkl.h): z-scored
// features (training statistics), the base-kernel bank of kernel_bank.h with
// unit trace on the training points, C chosen by k-fold cross-validation over
// {10⁻², …, 10²} (thesis §4.5.1, §5.3.1–5.3.2), and one result type carrying
// the KernelClassifier that the service stores and predicts with.
//
// Thread safety: pure functions.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/kernel_classifier.h"
#include "core/mkl/svm.h"

namespace kls {

struct MklProtocolOptions {
  bool standardize = true;             ///< z-score features with the training mean / sd (thesis §4.5.1)
  bool single_feature_kernels = true;  ///< bank: also the 13 kernels on every single feature
  std::vector<double> c_grid = ThesisCGrid();  ///< candidate C (> 0); one entry = no cross-validation
  int cv_folds = 5;                    ///< stratified folds for choosing C (>= 2)
  uint64_t cv_seed = 1;                ///< seed of the fold assignment
  int positive_class = 1;              ///< class id the classifier predicts for f(x) > 0
  int negative_class = 0;              ///< class id the classifier predicts for f(x) <= 0
  Status Validate() const;
};

/// Training data after the protocol's preprocessing.
struct PreparedMklData {
  Standardizer standardizer;          ///< empty mean when standardize = false
  Eigen::MatrixXd x;                  ///< n × d standardized training points
  std::vector<BaseKernelSpec> bank;   ///< unit trace on x
};

/// Standardizes x_raw and builds the unit-trace bank (StandardKernelBank with
/// `single_features`). Errors: empty or non-finite x.
StatusOr<PreparedMklData> PrepareMklData(const Eigen::MatrixXd& x_raw, bool standardize, bool single_features);

/// The base kernel matrices k_t(a_i, b_j), one |a| × |b| matrix per spec.
/// Memory: m·|a|·|b| doubles.
std::vector<Eigen::MatrixXd> EvaluateKernels(const std::vector<BaseKernelSpec>& specs, const Eigen::MatrixXd& a,
                                             const Eigen::MatrixXd& b);

/// What every Train*Classifier returns.
struct MklClassifierResult {
  KernelClassifier classifier;       ///< predicts for raw (unstandardized) points
  double c = 0.0;                    ///< the C used for the final fit
  std::vector<double> cv_accuracy;   ///< mean fold accuracy per c_grid entry (empty: no CV)
  int bank_size = 0;                 ///< base kernels the method started from
  SolveReport stats;                  ///< of the final kernel-learning solve
};

/// Index of the best accuracy (ties → the earliest, i.e. the smaller C for an
/// ascending grid).
int ArgBestAccuracy(const std::vector<double>& accuracy);

}  // namespace kls
