#include "core/mkl/classifier_training.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/common/byte_io.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/kta.h"
#include "core/mkl/svm.h"
#include "core/mkl/two_layer_mkl.h"
#include "core/mkl/unsupervised_mkl.h"

namespace kls {

const char* ClassifierMethodName(ClassifierMethod m) {
  switch (m) {
    case ClassifierMethod::kSvm: return "svm";
    case ClassifierMethod::kKta: return "kta";
    case ClassifierMethod::kOnk: return "onk";
    case ClassifierMethod::kTwoLayer: return "2lmkl";
    case ClassifierMethod::kTwoLayerInfinite: return "2lmkl-inf";
    case ClassifierMethod::kUnsupervised: return "umkl";
  }
  return "unknown";
}

Status ClassifierTrainingOptions::Validate(std::string_view path) const {
  const std::string p(path);
  if (c && !(std::isfinite(*c) && *c > 0.0)) {
    return InvalidArgumentError(p + ".c = " + FormatNumber(*c) + " must be finite and > 0 (unset = cross-validation)");
  }
  if (folds < 2) return InvalidArgumentError(p + ".folds = " + std::to_string(folds) + " must be >= 2");
  if (sigma_k < 1) return InvalidArgumentError(p + ".sigma_k = " + std::to_string(sigma_k) + " must be >= 1");
  if (method == ClassifierMethod::kOnk) {
    OnkOptions o = onk;
    o.c = 1.0;  // C is chosen here, not by the caller's onk.c
    KLS_RETURN_IF_ERROR(o.Validate(path));
  }
  return OkStatus();
}

namespace {

// C from the options or by cross-validation on the training kernel.
StatusOr<double> ChooseC(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const ClassifierTrainingOptions& o) {
  if (o.c) return *o.c;
  return SelectCByCrossValidation(k, y, ThesisCGrid(), o.folds, o.seed * 7919 + 1);
}

// Protocols 2–4 train the whole classifier themselves; the learned kernel on
// the training rows is recomputed from the model for storage.
StatusOr<ClassifierTrainingResult> TrainProtocolClassifier(const Eigen::MatrixXd& features, const Eigen::VectorXd& y,
                                                           int positive, int negative,
                                                           const ClassifierTrainingOptions& o,
                                                           const SolveControl& control) {
  MklProtocolOptions protocol;
  protocol.single_feature_kernels = o.single_features;
  if (o.c) protocol.c_grid = {*o.c};
  protocol.cv_folds = o.folds;
  protocol.cv_seed = o.seed;
  protocol.positive_class = positive;
  protocol.negative_class = negative;
  StatusOr<MklClassifierResult> r = InternalError("unset");
  if (o.method == ClassifierMethod::kTwoLayer) {
    TwoLayerMklClassifierOptions t;
    t.protocol = protocol;
    r = TrainTwoLayerMklClassifier(features, y, t, control);
  } else if (o.method == ClassifierMethod::kTwoLayerInfinite) {
    InfiniteTwoLayerMklClassifierOptions t;
    t.protocol = protocol;
    r = TrainInfiniteTwoLayerMklClassifier(features, y, t, control);
  } else {
    UmklClassifierOptions t;
    t.protocol = protocol;
    r = TrainUmklClassifier(features, y, t, control);
  }
  ClassifierTrainingResult result;
  if (!r.ok()) {
    // A stop request is an outcome, not an error: no model, the termination says why.
    if (r.status().code() == StatusCode::kCancelled) {
      result.stats.termination = Termination::kCancelled;
      return result;
    }
    if (r.status().code() == StatusCode::kDeadlineExceeded) {
      result.stats.termination = Termination::kTimeLimit;
      return result;
    }
    return r.status();
  }
  result.model = std::move(r->classifier);
  result.model.positive_class = positive;
  result.model.negative_class = negative;
  result.c = r->c;
  result.stats = r->stats;
  const Eigen::MatrixXd xs = result.model.standardizer.Apply(features);
  result.train_kernel = result.model.Kernel(xs, xs);
  KLS_ASSIGN_OR_RETURN(Eigen::VectorXd f, result.model.DecisionValues(features));
  result.training_accuracy = SignAccuracy(f, y);
  return result;
}

}  // namespace

StatusOr<ClassifierTrainingResult> TrainClassifier(const Eigen::MatrixXd& features, const std::vector<int>& labels,
                                                   const ClassifierTrainingOptions& options,
                                                   const SolveControl& control) {
  return GuardExceptions("TrainClassifier", [&]() -> StatusOr<ClassifierTrainingResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const int n = static_cast<int>(features.rows());
    if (static_cast<int>(labels.size()) != n) {
      return InvalidArgumentError("labels: " + std::to_string(labels.size()) + " labels for " + std::to_string(n) +
                                  " rows");
    }
    if (n < 2 * options.folds) {
      return InvalidArgumentError("the data set has " + std::to_string(n) + " rows; training needs at least " +
                                  std::to_string(2 * options.folds) + " (2 per cross-validation fold)");
    }
    if (!features.allFinite()) return InvalidArgumentError("features contain a non-finite value");
    const std::set<int> classes(labels.begin(), labels.end());
    if (*classes.begin() < 0) {
      return InvalidArgumentError("labels: class id " + std::to_string(*classes.begin()) + " is negative");
    }
    if (classes.size() < 2) return InvalidArgumentError("labels: only one class present; a classifier needs two");
    const int positive = options.positive_class >= 0 ? options.positive_class : *classes.rbegin();
    if (!classes.count(positive)) {
      return InvalidArgumentError("positive_class = " + std::to_string(positive) + " is not a class of the data set");
    }
    int negative = -1;  // one-vs-rest: "not the positive class"
    if (classes.size() == 2) negative = positive == *classes.begin() ? *classes.rbegin() : *classes.begin();
    const Eigen::VectorXd y = SignLabels(labels, positive);
    if (options.method == ClassifierMethod::kTwoLayer || options.method == ClassifierMethod::kTwoLayerInfinite ||
        options.method == ClassifierMethod::kUnsupervised) {
      return TrainProtocolClassifier(features, y, positive, negative, options, control);
    }

    Termination why;
    if (control.ShouldStop(&why)) {
      ClassifierTrainingResult r;
      r.stats.termination = why;
      return r;
    }
    Stopwatch watch;
    const Standardizer st = Standardizer::Fit(features);
    const Eigen::MatrixXd x = st.Apply(features);
    std::vector<BaseKernelSpec> kernels;
    Eigen::VectorXd weights = Eigen::VectorXd::Ones(1);
    ClassifierTrainingResult result;
    result.stats.iterations = 1;
    Eigen::MatrixXd ktr;
    double c = options.c.value_or(0.0);  // set below when cross-validated
    SvmOptions so;

    switch (options.method) {
      case ClassifierMethod::kKta: {
        std::vector<BaseKernelSpec> bank = StandardKernelBank(static_cast<int>(x.cols()), options.single_features);
        KLS_RETURN_IF_ERROR(NormalizeToUnitTrace(&bank, x));
        KLS_ASSIGN_OR_RETURN(KtaResult kta, LearnKtaWeights(x, y, bank));
        kernels = kta.kernels;
        weights = kta.weights;
        ktr = CombinedKernel(kernels, weights, KernelCombination::kLinear, x, x);
        KLS_ASSIGN_OR_RETURN(c, ChooseC(ktr, y, options));
        result.stats.final_objective = kta.alignment;
        break;
      }
      case ClassifierMethod::kSvm: {
        // Gaussian width and C jointly by cross-validation (thesis baseline).
        double best = -1;
        for (int e = -3; e <= 6; ++e) {
          const BaseKernelSpec spec = GaussianWidthKernel(std::ldexp(1.0, e));
          const Eigen::MatrixXd k = EvaluateKernel(spec, x, x);
          const std::vector<double> cs = options.c ? std::vector<double>{*options.c} : ThesisCGrid();
          for (double cc : cs) {
            KLS_ASSIGN_OR_RETURN(double cv, CrossValidateSvm(k, y, cc, options.folds, options.seed * 7919 + 1));
            if (cv > best + 1e-12) {
              best = cv;
              kernels = {spec};
              c = cc;
            }
          }
          if (control.ShouldStop(&why)) {
            result.stats.termination = why;
            return result;
          }
        }
        ktr = EvaluateKernel(kernels[0], x, x);
        result.stats.final_objective = best;
        break;
      }
      case ClassifierMethod::kOnk: {
        BaseKernelSpec spec;
        spec.gamma = 1.0 / OnkSigma(x, options.sigma_k);  // exp(−‖x − z‖²/σ_k), onk paper §5
        kernels = {spec};
        const Eigen::MatrixXd k = EvaluateKernel(spec, x, x);
        KLS_ASSIGN_OR_RETURN(c, ChooseC(k, y, options));
        OnkOptions oo = options.onk;
        oo.c = c;
        KLS_ASSIGN_OR_RETURN(OnkResult onk, SolveOnk(k, y, oo, control));
        result.stats = onk.stats;
        if (onk.stats.termination == Termination::kCancelled) return result;
        ktr = OnkLearnedKernel(k, y, onk.alpha, oo.rho);  // G of eq. (5)
        break;
      }
    }
    so.c = c;
    KLS_ASSIGN_OR_RETURN(SvmSolution svm, TrainSvm(ktr, y, so));
    // ONK predicts through φ̃(x) = (φ(x), 0): the base kernel's rows with the α, b trained on G.
    result.model = MakeKernelClassifier(kernels, weights, KernelCombination::kLinear, st, x, y, svm);
    result.model.positive_class = positive;
    result.model.negative_class = negative;
    result.c = c;
    result.training_accuracy = SignAccuracy(SvmDecision(ktr, y, svm), y);
    result.train_kernel = std::move(ktr);
    if (options.method != ClassifierMethod::kOnk) {
      result.stats.solve_seconds = watch.Seconds();
      result.stats.termination = Termination::kConverged;
    }
    return result;
  });
}

// ---- Encoding ----------------------------------------------------------------

namespace {
constexpr uint32_t kClassifierMagic = 0x4B4C5343;  // "KLSC"
constexpr uint32_t kClassifierVersion = 1;
}  // namespace

std::string SerializeClassifier(const KernelClassifier& m) {
  ByteWriter w;
  w.PutHeader(kClassifierMagic, kClassifierVersion);
  w.Put<uint32_t>(m.combination == KernelCombination::kLinear ? 0 : 1);
  w.Put<uint64_t>(m.kernels.size());
  for (const BaseKernelSpec& k : m.kernels) {
    w.Put<uint32_t>(k.type == BaseKernelType::kGaussian ? 0 : 1);
    w.Put<int32_t>(k.feature);
    w.Put<double>(k.gamma);
    w.Put<int32_t>(k.degree);
    w.Put<double>(k.scale);
  }
  w.PutVector(m.weights);
  w.PutMatrix(m.standardizer.mean);
  w.PutMatrix(m.standardizer.scale);
  w.PutMatrix(m.support_vectors);
  w.PutVector(m.coefficients);
  w.Put<double>(m.bias);
  w.Put<int32_t>(m.positive_class);
  w.Put<int32_t>(m.negative_class);
  return w.Take();
}

StatusOr<KernelClassifier> ParseClassifier(const std::string& bytes) {
  ByteReader r(bytes, "classifier");
  KLS_RETURN_IF_ERROR(r.ReadHeader(kClassifierMagic, kClassifierVersion));
  uint32_t combination = 0;
  KernelClassifier m;
  KLS_RETURN_IF_ERROR(r.Get(&combination));
  if (combination > 1) return DataLossError("classifier: unknown combination " + std::to_string(combination));
  m.combination = combination == 0 ? KernelCombination::kLinear : KernelCombination::kExponential;
  uint64_t count = 0;
  KLS_RETURN_IF_ERROR(r.Get(&count));
  if (count > bytes.size()) return DataLossError("classifier: kernel count " + std::to_string(count) + " is absurd");
  for (uint64_t t = 0; t < count; ++t) {
    BaseKernelSpec k;
    uint32_t type = 0;
    int32_t feature = 0, degree = 0;
    KLS_RETURN_IF_ERROR(r.Get(&type));
    if (type > 1) return DataLossError("classifier: unknown kernel type " + std::to_string(type));
    k.type = type == 0 ? BaseKernelType::kGaussian : BaseKernelType::kPolynomial;
    KLS_RETURN_IF_ERROR(r.Get(&feature));
    KLS_RETURN_IF_ERROR(r.Get(&k.gamma));
    KLS_RETURN_IF_ERROR(r.Get(&degree));
    KLS_RETURN_IF_ERROR(r.Get(&k.scale));
    k.feature = feature;
    k.degree = degree;
    m.kernels.push_back(k);
  }
  Eigen::MatrixXd mean, scale;
  KLS_RETURN_IF_ERROR(r.GetVector(&m.weights));
  KLS_RETURN_IF_ERROR(r.GetMatrix(&mean));
  KLS_RETURN_IF_ERROR(r.GetMatrix(&scale));
  if (mean.size() != 0) {
    if (mean.rows() != 1 || scale.rows() != 1 || scale.cols() != mean.cols()) {
      return DataLossError("classifier: standardizer shapes " + std::to_string(mean.rows()) + "x" +
                           std::to_string(mean.cols()) + " / " + std::to_string(scale.rows()) + "x" +
                           std::to_string(scale.cols()));
    }
    m.standardizer.mean = mean.row(0);
    m.standardizer.scale = scale.row(0);
  }
  KLS_RETURN_IF_ERROR(r.GetMatrix(&m.support_vectors));
  KLS_RETURN_IF_ERROR(r.GetVector(&m.coefficients));
  KLS_RETURN_IF_ERROR(r.Get(&m.bias));
  int32_t pos = 0, neg = 0;
  KLS_RETURN_IF_ERROR(r.Get(&pos));
  KLS_RETURN_IF_ERROR(r.Get(&neg));
  m.positive_class = pos;
  m.negative_class = neg;
  KLS_RETURN_IF_ERROR(r.ExpectEnd());
  if (Status s = m.Validate(); !s.ok()) return DataLossError("classifier: " + s.message());
  if (m.standardizer.mean.size() != 0 && m.standardizer.mean.size() != m.support_vectors.cols()) {
    return DataLossError("classifier: standardizer has " + std::to_string(m.standardizer.mean.size()) +
                         " features, the support vectors " + std::to_string(m.support_vectors.cols()));
  }
  return m;
}

}  // namespace kls
