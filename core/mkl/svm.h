// C-SVM on a precomputed kernel, through libsvm (Debian libsvm-dev), plus
// the fold splitting and C selection by cross-validation that the ONK and MKL
// protocols use.
//
// Convention (onk paper eq. (1)–(2), thesis (4.3)): labels y ∈ {±1}; the dual
//     max_α  αᵀe − ½ αᵀ Y K Y α   s.t. 0 <= α <= C, αᵀy = 0
// and the decision function f(x) = Σ_i α_i y_i k(x_i, x) + b.
// libsvm's own sign convention (the first label it meets is "+") is undone
// here, so α >= 0 and b refer to y as given.
//
// Thread safety: TrainSvm may run concurrently on different inputs (libsvm
// keeps no global state besides its print hook, which is set once to silence).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/common/status.h"

namespace kls {

struct SvmOptions {
  double c = 1.0;            ///< box bound C > 0
  double tolerance = 1e-3;   ///< libsvm's eps (KKT violation); 1e-3 is libsvm's default
  double cache_mb = 100.0;   ///< libsvm kernel cache (unused for precomputed rows beyond the copy)
  Status Validate() const;
};

struct SvmSolution {
  Eigen::VectorXd alpha;      ///< n dual variables in [0, C]
  double bias = 0.0;          ///< b of f(x) = Σ α_i y_i k(x_i, x) + b
  int num_support = 0;        ///< #{α_i > 0}
  double dual_objective = 0;  ///< αᵀe − ½ αᵀYKYα at the solution
};

/// Trains on the n × n kernel `kernel` (symmetric PSD) with labels y ∈ {±1}
/// (both present). Memory: a copy of K in libsvm's node format (16n² bytes).
StatusOr<SvmSolution> TrainSvm(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, const SvmOptions& options);

/// f(x_j) for test points from the |test| × n kernel block k(x_j, x_i).
Eigen::VectorXd SvmDecision(const Eigen::MatrixXd& test_train_kernel, const Eigen::VectorXd& y_train,
                            const SvmSolution& svm);

/// Fraction of sign(decision) == y.
double SignAccuracy(const Eigen::VectorXd& decision, const Eigen::VectorXd& y);

/// `folds` disjoint test folds covering 0..n−1, stratified by the sign of y
/// (each class dealt round-robin after a seeded shuffle).
std::vector<std::vector<int>> StratifiedFolds(const Eigen::VectorXd& y, int folds, uint64_t seed);

/// Complement of a fold in 0..n−1.
std::vector<int> Complement(const std::vector<int>& fold, int n);

/// Rows/cols `rows` × `cols` of m.
Eigen::MatrixXd SubMatrix(const Eigen::MatrixXd& m, const std::vector<int>& rows, const std::vector<int>& cols);
Eigen::VectorXd SubVector(const Eigen::VectorXd& v, const std::vector<int>& idx);

/// Mean k-fold accuracy of an SVM with box bound c on a precomputed kernel.
StatusOr<double> CrossValidateSvm(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, double c, int folds,
                                  uint64_t seed);

/// The C of `grid` with the best k-fold accuracy (ties → the smaller C).
StatusOr<double> SelectCByCrossValidation(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y,
                                          const std::vector<double>& grid, int folds, uint64_t seed);

/// Binary ±1 labels from class ids: +1 for `positive_class`, −1 otherwise.
Eigen::VectorXd SignLabels(const std::vector<int>& labels, int positive_class);

/// A seeded random split of 0..n−1 into ⌊fraction·n⌉ training and the rest
/// test indices (each sorted), redrawn until both parts hold both signs of y.
struct TrainTestSplit {
  std::vector<int> train, test;
};
StatusOr<TrainTestSplit> RandomSplit(const Eigen::VectorXd& y, double train_fraction, uint64_t seed);

/// Rows `idx` of x.
Eigen::MatrixXd SubRows(const Eigen::MatrixXd& x, const std::vector<int>& idx);

/// {10⁻², 10⁻¹, …, 10²}: the thesis's C grid (§4.5.1, §5.3.2).
std::vector<double> ThesisCGrid();

}  // namespace kls
