// kls-bench mkl: the thesis's MKL protocol (§4.5.1, §5.3.1–5.3.2): random
// 50 % / 50 % splits, features z-scored with training statistics, C chosen by
// 5-fold cross-validation on the training part over {10⁻², …, 10²}, mean and
// standard deviation of test accuracy over the runs.
//   --method kta : two-stage centered kernel-target alignment (thesis §7.3;
//                  Table 5.2 column KTA) on the bank of kernel_bank.h
//                  (Gaussian widths 2⁻³…2⁶, polynomial degrees 1–3, all
//                  features and each single feature, unit trace);
//   --method svm : one Gaussian kernel on all features, width from the same
//                  10 values and C both by 5-fold cross-validation (Table 4.2
//                  column SVM);
//   --method 2lmkl : two-layer MKL, Protocol 2 (thesis §4.2.2, Table 4.2),
//                  same bank, C by nested 5-fold CV (TrainTwoLayerMklClassifier);
//   --method 2lmkl-inf : infinite two-layer MKL, Protocol 3 (§4.3): Θ₀ = the
//                  13 kernels on all features, one Gaussian added per outer
//                  iteration (TrainInfiniteTwoLayerMklClassifier);
//   --method umkl : unsupervised MKL, Protocol 4 (§5.2, Table 5.2): μ learned
//                  without labels, then C by 5-fold CV (TrainUmklClassifier).
// Predictions go through the KernelClassifier model (support vectors, α, b,
// kernel specs and weights), as a client of the service would use it.
#include <cmath>

#include "bench/bench_options.h"
#include "bench/bench_util.h"
#include "core/common/solve_control.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/kernel_classifier.h"
#include "core/mkl/kta.h"
#include "core/mkl/svm.h"
#include "core/mkl/two_layer_mkl.h"
#include "core/mkl/unsupervised_mkl.h"

namespace kls::bench {

Runner RegisterMkl(CLI::App& app, bool* json) {
  struct Args {
    SplitFlags split{0.5};
    std::string method = "kta";
    bool all_features_only = false;
    int max_new_kernels = 10, umkl_bases = 10;
    double umkl_gamma1 = 0.5;
    bool cv_protocol2_only = false;
  };
  auto a = std::make_shared<Args>();
  a->split.Add(app, {"training fraction (thesis: 0.5)", "random splits (thesis: 20)", "seed of the first split",
                     "cross-validation folds (thesis: 5)"});
  app.add_option("--method", a->method, "kta | 2lmkl | 2lmkl-inf | umkl | svm");
  app.add_option("--max-new-kernels", a->max_new_kernels, "2lmkl-inf: cap on added Gaussians");
  app.add_flag("--cv-protocol2-only", a->cv_protocol2_only,
               "2lmkl-inf: choose C by nested CV of Protocol 2 on the initial kernels (default: of Protocol 3)");
  app.add_option("--umkl-bases", a->umkl_bases, "umkl: B, local bases per point");
  app.add_option("--umkl-gamma1", a->umkl_gamma1, "umkl: gamma1 of (5.2)");
  app.add_flag("--all-features-only", a->all_features_only, "bank without the single-feature kernels");
  return [a, json]() -> int {
    const bool learned = a->method == "2lmkl" || a->method == "2lmkl-inf" || a->method == "umkl";
    if (a->method != "kta" && a->method != "svm" && !learned) {
      return Fail(InvalidArgumentError("--method = \"" + a->method + "\": expected kta, 2lmkl, 2lmkl-inf, umkl or svm"));
    }
    const SplitFlags& sp = a->split;
    auto labeled = sp.Load();
    if (!labeled.ok()) return Fail(labeled.status());
    const Dataset& data = labeled->data;
    const std::vector<double> cs = ThesisCGrid();
    MeanStd acc, secs, nker, chosen_c, iters;
    int bank_size = 0;
    std::vector<std::string> first_model;  // kernel names and weights of run 1 (learned methods)
    for (int r = 0; r < sp.runs; ++r) {
      auto split = sp.Draw(*labeled, r);
      if (!split.ok()) return Fail(split.status());
      const uint64_t seed = split->seed;
      const Eigen::MatrixXd& xtr_raw = split->x_train;
      const Eigen::MatrixXd& xte_raw = split->x_test;
      const Eigen::VectorXd &ytr = split->y_train, &yte = split->y_test;
      if (learned) {
        // The service's entry points: raw features in, KernelClassifier out.
        MklProtocolOptions pr;
        pr.single_feature_kernels = !a->all_features_only;
        pr.cv_folds = sp.folds;
        pr.cv_seed = seed * 7919 + 1;
        pr.positive_class = sp.positive_class;
        pr.negative_class = sp.positive_class == 0 ? 1 : 0;
        Stopwatch watch;
        StatusOr<MklClassifierResult> res = InternalError("unreachable");
        if (a->method == "2lmkl") {
          TwoLayerMklClassifierOptions o;
          o.protocol = pr;
          o.solver.seed = seed;
          res = TrainTwoLayerMklClassifier(xtr_raw, ytr, o);
        } else if (a->method == "2lmkl-inf") {
          InfiniteTwoLayerMklClassifierOptions o;
          o.protocol = pr;
          o.solver.inner.seed = seed;
          o.solver.seed = seed;
          o.solver.max_new_kernels = a->max_new_kernels;
          o.cross_validate_full_protocol = !a->cv_protocol2_only;
          res = TrainInfiniteTwoLayerMklClassifier(xtr_raw, ytr, o);
        } else {
          UmklClassifierOptions o;
          o.protocol = pr;
          o.solver.num_bases = a->umkl_bases;
          o.solver.gamma1 = a->umkl_gamma1;
          res = TrainUmklClassifier(xtr_raw, ytr, o);
        }
        if (!res.ok()) return Fail(res.status());
        secs.Add(watch.Seconds());
        auto f = res->classifier.DecisionValues(xte_raw);
        if (!f.ok()) return Fail(f.status());
        acc.Add(100 * SignAccuracy(*f, yte));
        nker.Add(static_cast<double>(res->classifier.kernels.size()));
        chosen_c.Add(std::log10(res->c));
        iters.Add(res->stats.iterations);
        bank_size = res->bank_size;
        if (r == 0)
          for (std::size_t t = 0; t < res->classifier.kernels.size(); ++t)
            first_model.push_back(res->classifier.kernels[t].Name() + "*" +
                                  FormatNumber(res->classifier.weights[static_cast<Eigen::Index>(t)]));
        continue;
      }
      const Standardizer st = Standardizer::Fit(xtr_raw);
      const Eigen::MatrixXd xtr = st.Apply(xtr_raw);
      Stopwatch watch;
      std::vector<BaseKernelSpec> kernels;
      Eigen::VectorXd weights;
      if (a->method == "kta") {
        std::vector<BaseKernelSpec> bank = StandardKernelBank(data.dim(), !a->all_features_only);
        if (auto s = NormalizeToUnitTrace(&bank, xtr); !s.ok()) return Fail(s);
        bank_size = static_cast<int>(bank.size());
        auto kta = LearnKtaWeights(xtr, ytr, bank);
        if (!kta.ok()) return Fail(kta.status());
        kernels = kta->kernels;
        weights = kta->weights;
      } else {
        // Gaussian width (and C) by cross-validation on the training part.
        double best = -1;
        for (int e = -3; e <= 6; ++e) {
          const BaseKernelSpec spec = GaussianWidthKernel(std::ldexp(1.0, e));
          const Eigen::MatrixXd k = EvaluateKernel(spec, xtr, xtr);
          for (double c : cs) {
            auto cv = CrossValidateSvm(k, ytr, c, sp.folds, seed * 7919 + 1);
            if (!cv.ok()) return Fail(cv.status());
            if (*cv > best + 1e-12) {
              best = *cv;
              kernels = {spec};
            }
          }
        }
        bank_size = 10;
        weights = Eigen::VectorXd::Ones(1);
      }
      const Eigen::MatrixXd ktr = CombinedKernel(kernels, weights, KernelCombination::kLinear, xtr, xtr);
      auto c = SelectCByCrossValidation(ktr, ytr, cs, sp.folds, seed * 7919 + 1);
      if (!c.ok()) return Fail(c.status());
      SvmOptions so;
      so.c = *c;
      auto svm = TrainSvm(ktr, ytr, so);
      if (!svm.ok()) return Fail(svm.status());
      KernelClassifier model = MakeKernelClassifier(kernels, weights, KernelCombination::kLinear, st, xtr, ytr, *svm);
      model.positive_class = sp.positive_class;
      secs.Add(watch.Seconds());
      auto f = model.DecisionValues(xte_raw);
      if (!f.ok()) return Fail(f.status());
      acc.Add(100 * SignAccuracy(*f, yte));
      nker.Add(static_cast<double>(kernels.size()));
      chosen_c.Add(std::log10(*c));
    }
    nlohmann::json out = {{"benchmark", "mkl"},
                          {"method", a->method},
                          {"bank_size", bank_size},
                          {"accuracy_mean", acc.mean()},
                          {"accuracy_std", acc.std()},
                          {"seconds", secs.mean()},
                          {"kernels_selected_mean", nker.mean()},
                          {"mean_log10_c", chosen_c.mean()},
                          {"iterations_mean", iters.mean()},
                          {"first_run_kernels", first_model},
                          {"machine", MachineInfo()}};
    out.update(sp.Record(data));
    Emit(out, *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("mkl", "thesis MKL protocol (Tables 4.2 / 5.2): kta | 2lmkl | 2lmkl-inf | umkl | svm", RegisterMkl);

}  // namespace kls::bench
