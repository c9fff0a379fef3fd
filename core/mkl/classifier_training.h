// Training one KernelClassifier end to end from raw labelled features — the
// entry point the service's classifier jobs call (ONK and MKL families) — and
// the classifier's binary encoding for storage.
//
// Protocol (thesis §4.5.1 / §5.3.1, onk paper §5), on all rows given:
//   1. standardize the features (Standardizer fitted on these rows);
//   2. the kernel:
//        kSvm: one Gaussian kernel, width σ ∈ {2⁻³ … 2⁶} chosen with C by
//              k-fold cross-validation (as `kls-bench mkl --method svm`);
//        kKta: the standard bank (kernel_bank.h), unit trace, weights by
//              centered kernel-target alignment with θ >= 0 (kta.h);
//        kOnk: the Gaussian base kernel exp(−‖x − z‖²/σ_k), σ_k by the onk
//              paper's rule (OnkSigma), then the optimal neighborhood kernel
//              G = K + (Yα)(Yα)ᵀ/(2ρ) of eq. (5) from SolveOnk;
//        kTwoLayer / kTwoLayerInfinite / kUnsupervised: thesis Protocols 2, 3
//              and 4 (two_layer_mkl.h, unsupervised_mkl.h), which choose C by
//              their own (nested) cross-validation;
//   3. C by k-fold cross-validation over ThesisCGrid() (unless options.c > 0);
//   4. an SVM (libsvm, precomputed kernel) on the training kernel; the model
//      keeps the support vectors and predicts unseen points (ONK through
//      φ̃(x) = (φ(x), 0), onk paper §2.2).
// Labels: class ids >= 0; `positive_class` against the rest (one-vs-rest when
// there are more than two classes).
//
// Thread safety: re-entrant.
#pragma once

#include <Eigen/Core>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/mkl/kernel_classifier.h"
#include "core/mkl/onk.h"

namespace kls {

enum class ClassifierMethod { kSvm, kKta, kOnk, kTwoLayer, kTwoLayerInfinite, kUnsupervised };

/// "svm", "kta", "onk", "2lmkl", "2lmkl-inf", "umkl".
const char* ClassifierMethodName(ClassifierMethod m);

struct ClassifierTrainingOptions {
  ClassifierMethod method = ClassifierMethod::kKta;
  /// SVM C > 0; unset = k-fold cross-validation over ThesisCGrid().
  std::optional<double> c;
  int folds = 5;                 ///< cross-validation folds (>= 2)
  uint64_t seed = 1;             ///< fold assignment
  bool single_features = true;   ///< kKta: include the per-feature kernels of the bank
  int sigma_k = 1;               ///< kOnk: k of the σ_k = 4^{k−1}·mean ‖x_i − x_j‖² rule (>= 1)
  OnkOptions onk;                ///< kOnk: ρ, method, tolerance (onk.c is set to C)
  int positive_class = -1;       ///< class predicted for f(x) > 0; −1 = the largest class id
  /// INVALID_ARGUMENT "<path>.<field> = <value> <rule>": "<path>.c", "<path>.folds",
  /// "<path>.sigma_k"; for kOnk the ONK options under the same path, as the
  /// service's onk family spells them ("<path>.rho", "<path>.tolerance", ...).
  Status Validate(std::string_view path = "options") const;
};

struct ClassifierTrainingResult {
  KernelClassifier model;
  Eigen::MatrixXd train_kernel;  ///< the learned kernel on the training rows (n × n, PSD)
  double c = 0.0;                ///< the C used
  double training_accuracy = 0.0;  ///< fraction of training rows classified correctly
  SolveReport stats;              ///< ONK: its solver stats; otherwise one "iteration"
};

/// Trains on the rows of `features` with class ids `labels` (one per row).
/// Errors: INVALID_ARGUMENT for bad options, fewer than 2·folds rows, a
/// positive_class absent from the labels, or only one class present.
StatusOr<ClassifierTrainingResult> TrainClassifier(const Eigen::MatrixXd& features, const std::vector<int>& labels,
                                                   const ClassifierTrainingOptions& options,
                                                   const SolveControl& control = SolveControl());

/// Versioned binary encoding (byte_io.h). Parse fails with DATA_LOSS on a
/// malformed or unknown-version input and checks the result with Validate().
std::string SerializeClassifier(const KernelClassifier& model);
StatusOr<KernelClassifier> ParseClassifier(const std::string& bytes);

}  // namespace kls
