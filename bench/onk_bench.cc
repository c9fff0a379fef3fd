// kls-bench onk: the onk paper's classification protocol (§5, Table 2) —
// random 20 % training / 80 % test splits, the kernel exp(−‖x − z‖²/σ_k) with
// σ_k = 4^{k−1}·mean pairwise squared distance of the training points, C and
// ρ chosen by repeated 5-fold cross-validation on the training part (--cv-repeats,
// default 20 fold splits; the base SVM's C on the same splits), an SVM on the
// learned kernel G = K + (Yα)(Yα)ᵀ/(2ρ) (eq. 5) against an SVM on K (C by
// cross-validation), test points through φ̃(x) = (φ(x), 0).
//
// kls-bench onk-scale: seconds to learn the kernel (eq. 7) at the paper's
// convergence setting (C = 1, ρ = 100, σ_2) on an adult-like n × 123 set.
// kls-bench onk-projection: seconds of the exact projection onto P vs n.
#include <algorithm>
#include <cmath>
#include <random>

#include "bench/bench_options.h"
#include "bench/bench_util.h"
#include "core/common/solve_control.h"
#include "core/mkl/box_projection.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/onk.h"
#include "core/mkl/svm.h"

namespace kls::bench {
namespace {

std::vector<double> ParseGrid(const std::string& text) {
  std::vector<double> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t next = text.find(',', pos);
    if (next == std::string::npos) next = text.size();
    out.push_back(std::stod(text.substr(pos, next - pos)));
    pos = next + 1;
  }
  return out;
}

// Test accuracy of ONK(C, ρ) + SVM trained on (k_train, y_train), predicted on k_test.
StatusOr<double> OnkAccuracy(const Eigen::MatrixXd& k_train, const Eigen::VectorXd& y_train,
                             const Eigen::MatrixXd& k_test, const Eigen::VectorXd& y_test, double c, double rho,
                             OnkMethod method, double* learn_seconds = nullptr) {
  OnkOptions opt;
  opt.c = c;
  opt.rho = rho;
  opt.method = method;
  Stopwatch watch;
  KLS_ASSIGN_OR_RETURN(OnkResult onk, SolveOnk(k_train, y_train, opt));
  if (learn_seconds) *learn_seconds = watch.Seconds();
  SvmOptions so;
  so.c = c;
  KLS_ASSIGN_OR_RETURN(SvmSolution svm, TrainSvm(OnkLearnedKernel(k_train, y_train, onk.alpha, rho), y_train, so));
  return SignAccuracy(SvmDecision(k_test, y_train, svm), y_test);
}

}  // namespace

Runner RegisterOnk(CLI::App& app, bool* json) {
  struct Args {
    SplitFlags split{0.2};
    std::string method = "gradient", c_grid = "0.1,1,10,100", rho_grid = "0.01,0.1,1,10,100,1000,10000,100000,1000000";
    int sigma_k = 2, cv_repeats = 20;
    bool raw = false;
  };
  auto a = std::make_shared<Args>();
  a->split.Add(app, {"training fraction (paper: 0.2)", "random splits (paper: 20)",
                     "seed of the first split (runs use seed, seed+1, ...)", "cross-validation folds"});
  app.add_option("--sigma-k", a->sigma_k, "k of the width rule sigma_k (1, 2, 3)");
  app.add_option("--method", a->method, "gradient | accelerated | level");
  app.add_option("--c-grid", a->c_grid, "C values for cross-validation");
  app.add_option("--rho-grid", a->rho_grid, "rho values for cross-validation");
  app.add_option("--cv-repeats", a->cv_repeats,
                 "repeated k-fold CV: fold splits per selection (same splits for G and K; default 20); 1 = plain k-fold");
  app.add_flag("--raw", a->raw, "do not z-score features (default: z-score with training statistics)");
  return [a, json]() -> int {
    auto method = ParseOnkMethod(a->method);
    if (!method.ok()) return Fail(method.status());
    if (a->sigma_k < 1 || a->sigma_k > 3) return Fail(InvalidArgumentError("--sigma-k must be 1, 2 or 3"));
    const SplitFlags& sp = a->split;
    auto labeled = sp.Load();
    if (!labeled.ok()) return Fail(labeled.status());
    std::vector<double> cs, rhos;
    try {
      cs = ParseGrid(a->c_grid);
      rhos = ParseGrid(a->rho_grid);
    } catch (const std::exception&) {
      return Fail(InvalidArgumentError("--c-grid / --rho-grid: comma-separated numbers expected"));
    }
    MeanStd learned, base, learn_secs, chosen_rho, chosen_c, base_c;
    Stopwatch total;
    for (int r = 0; r < sp.runs; ++r) {
      auto split = sp.Draw(*labeled, r);
      if (!split.ok()) return Fail(split.status());
      const uint64_t seed = split->seed;
      Eigen::MatrixXd& xtr = split->x_train;
      Eigen::MatrixXd& xte = split->x_test;
      if (!a->raw) {
        const Standardizer st = Standardizer::Fit(xtr);
        xtr = st.Apply(xtr);
        xte = st.Apply(xte);
      }
      const Eigen::VectorXd &ytr = split->y_train, &yte = split->y_test;
      BaseKernelSpec spec;
      spec.gamma = 1.0 / OnkSigma(xtr, a->sigma_k);  // exp(−‖x − z‖²/σ_k)
      const Eigen::MatrixXd ktr = EvaluateKernel(spec, xtr, xtr), kte = EvaluateKernel(spec, xte, xtr);

      // C and ρ by k-fold cross-validation on the training part.
      // Repeated k-fold: r = 0 is the plain k-fold split; more repeats average the selection noise.
      std::vector<std::vector<int>> folds;
      for (int r = 0; r < std::max(1, a->cv_repeats); ++r) {
        for (auto& f : StratifiedFolds(ytr, sp.folds, seed * 7919 + 1 + r * 104729)) folds.push_back(std::move(f));
      }
      // Ties go to the larger ρ (the kernel closer to K) and then the smaller C.
      std::vector<double> rhos_desc = rhos;
      std::sort(rhos_desc.rbegin(), rhos_desc.rend());
      double best = -1, best_c = cs[0], best_rho = rhos_desc[0];
      for (double rho : rhos_desc) {
        for (double c : cs) {
          double correct = 0;
          for (const auto& f : folds) {
            const auto rest = Complement(f, static_cast<int>(ytr.size()));
            auto acc = OnkAccuracy(SubMatrix(ktr, rest, rest), SubVector(ytr, rest), SubMatrix(ktr, f, rest),
                                   SubVector(ytr, f), c, rho, *method);
            if (!acc.ok()) return Fail(acc.status());
            correct += *acc * f.size();
          }
          if (correct > best + 1e-9) {
            best = correct;
            best_c = c;
            best_rho = rho;
          }
        }
      }
      double secs = 0;
      auto acc_g = OnkAccuracy(ktr, ytr, kte, yte, best_c, best_rho, *method, &secs);
      if (!acc_g.ok()) return Fail(acc_g.status());
      // The base SVM's C on the same fold splits (ties → smaller C, as for G).
      StatusOr<double> c_base = cs[0];
      {
        double best_base = -1;
        for (double c : cs) {
          double correct = 0;
          for (int r = 0; r < std::max(1, a->cv_repeats); ++r) {
            auto acc = CrossValidateSvm(ktr, ytr, c, sp.folds, seed * 7919 + 1 + r * 104729);
            if (!acc.ok()) return Fail(acc.status());
            correct += *acc;
          }
          if (correct > best_base + 1e-9) {
            best_base = correct;
            c_base = c;
          }
        }
      }
      SvmOptions so;
      so.c = *c_base;
      auto svm = TrainSvm(ktr, ytr, so);
      if (!svm.ok()) return Fail(svm.status());
      learned.Add(100 * *acc_g);
      base.Add(100 * SignAccuracy(SvmDecision(kte, ytr, *svm), yte));
      learn_secs.Add(secs);
      chosen_rho.Add(std::log10(best_rho));
      chosen_c.Add(std::log10(best_c));
      base_c.Add(std::log10(*c_base));
    }
    nlohmann::json out = {{"benchmark", "onk"},
                          {"sigma_k", a->sigma_k},
                          {"cv_repeats", a->cv_repeats},
                          {"method", a->method},
                          {"accuracy_learned", learned.mean()},
                          {"accuracy_learned_std", learned.std()},
                          {"accuracy_base", base.mean()},
                          {"accuracy_base_std", base.std()},
                          {"seconds_learn", learn_secs.mean()},
                          {"mean_log10_rho", chosen_rho.mean()},
                          {"mean_log10_c", chosen_c.mean()},
                          {"mean_log10_c_base", base_c.mean()},
                          {"seconds_total", total.Seconds()},
                          {"machine", MachineInfo()}};
    out.update(sp.Record(labeled->data));
    Emit(out, *json);
    return 0;
  };
}

Runner RegisterOnkScale(CLI::App& app, bool* json) {
  struct Args {
    DataFlags source;
    std::string method = "gradient";
    int n = 4781;
    double c = 1, rho = 100, tolerance = 1e-6;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  a->source.default_synthetic = "adult_like";
  a->source.csv_only = true;
  a->source.AddData(app, "labeled CSV (default: adult-like synthetic, 123 binary features)");
  app.add_option("--n", a->n, "points of the synthetic set (a4a: 4781)");
  app.add_option("--method", a->method, "gradient | accelerated | level");
  app.add_option("--C", a->c, "C (paper: 1)");
  app.add_option("--rho", a->rho, "rho (paper: 100)");
  app.add_option("--tolerance", a->tolerance, "relative step / gap tolerance");
  app.add_option("--seed", a->seed, "synthetic seed");
  return [a, json]() -> int {
    auto method = ParseOnkMethod(a->method);
    if (!method.ok()) return Fail(method.status());
    auto data = a->source.LoadLabeled(a->n, a->seed);
    if (!data.ok()) return Fail(data.status());
    const Eigen::VectorXd y = SignLabels(data->labels, 1);
    Stopwatch kw;
    BaseKernelSpec spec;
    spec.gamma = 1.0 / OnkSigma(data->features, 2);
    const Eigen::MatrixXd k = EvaluateKernel(spec, data->features, data->features);
    const double kernel_seconds = kw.Seconds();
    OnkOptions opt;
    opt.c = a->c;
    opt.rho = a->rho;
    opt.method = *method;
    opt.tolerance = a->tolerance;
    Stopwatch lw;
    auto r = SolveOnk(k, y, opt);
    if (!r.ok()) return Fail(r.status());
    Emit({{"benchmark", "onk-scale"},
          {"data", a->source.Name()},
          {"n", data->num_points()},
          {"method", a->method},
          {"C", a->c},
          {"rho", a->rho},
          {"kernel_seconds", kernel_seconds},
          {"seconds_learn", lw.Seconds()},
          {"iterations", r->stats.iterations},
          {"kernel_products", r->function_evaluations},
          {"objective", r->objective},
          {"lower_bound", r->lower_bound},
          {"termination", TerminationName(r->stats.termination)},
          {"machine", MachineInfo()}},
         *json);
    return 0;
  };
}

Runner RegisterOnkProjection(CLI::App& app, bool* json) {
  struct Args {
    std::string sizes = "1000,10000,100000,1000000";
    int repeats = 10;
    double c = 1;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--n", a->sizes, "comma-separated sizes");
  app.add_option("--repeats", a->repeats, "projections per size (median time reported)");
  app.add_option("--C", a->c, "box bound");
  app.add_option("--seed", a->seed, "seed");
  return [a, json]() -> int {
    nlohmann::json rows = nlohmann::json::array();
    std::mt19937_64 rng(a->seed);
    std::normal_distribution<double> g;
    std::vector<double> sizes;
    try {
      sizes = ParseGrid(a->sizes);
    } catch (const std::exception&) {
      return Fail(InvalidArgumentError("--n: comma-separated sizes expected"));
    }
    for (double dn : sizes) {
      const int n = static_cast<int>(dn);
      if (n < 2) return Fail(InvalidArgumentError("--n: sizes must be >= 2"));
      std::vector<double> times;
      int rounds = 0;
      for (int t = 0; t < a->repeats; ++t) {
        Eigen::VectorXd v(n), y(n);
        for (int i = 0; i < n; ++i) {
          v[i] = g(rng);
          y[i] = (i % 2) ? 1.0 : -1.0;
        }
        Stopwatch w;
        auto p = ProjectOntoBoxHyperplane(v, y, a->c);
        times.push_back(w.Seconds());
        if (!p.ok()) return Fail(p.status());
        rounds = p->rounds;
      }
      std::sort(times.begin(), times.end());
      const double med = times[times.size() / 2];
      rows.push_back({{"n", n}, {"median_seconds", med}, {"ns_per_element", 1e9 * med / n}, {"rounds", rounds}});
    }
    Emit({{"benchmark", "onk-projection"}, {"C", a->c}, {"results", rows}, {"machine", MachineInfo()}}, *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("onk", "ONK paper Table 2 protocol: learned kernel G vs base kernel K", RegisterOnk);
KLS_BENCH_SUBCOMMAND("onk-scale", "ONK kernel-learning seconds at n = 4781 (paper Fig. 2)", RegisterOnkScale);
KLS_BENCH_SUBCOMMAND("onk-projection", "seconds of the exact projection onto P vs n", RegisterOnkProjection);

}  // namespace kls::bench
