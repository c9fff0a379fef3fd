#include "core/mkl/two_layer_mkl.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include "core/mkl/box_projection.h"
#include "core/mkl/kernel_classifier.h"

namespace kls {
namespace {

// Reports iteration `iteration` with its objective (no residuals, gap or step).
void ReportObjective(const SolveControl& control, int iteration, double objective, const Stopwatch& watch,
                     int max_iterations, SolveReport* stats) {
  IterationRow row;
  row.iteration = iteration;
  row.objective = objective;
  row.seconds = watch.Seconds();
  ReportIteration(control, row, max_iterations, stats);
}

// One evaluation of F(μ) (4.3): the two-layer kernel, the SVM on it, and
// F = Σα − ½uᵀK⁽²⁾u + Σμ. `ok` is false when K⁽²⁾ overflowed (exp of a large
// combination) so that the line search can back off.
struct Evaluation {
  bool ok = false;
  Eigen::MatrixXd k2;
  SvmSolution svm;
  double objective = std::numeric_limits<double>::infinity();
};

StatusOr<Evaluation> Evaluate(const std::vector<Eigen::MatrixXd>& base, const Eigen::VectorXd& y,
                              const Eigen::VectorXd& mu, const SvmOptions& svm_options) {
  Evaluation e;
  e.k2 = TwoLayerKernel(base, mu);
  if (!e.k2.allFinite()) return e;
  KLS_ASSIGN_OR_RETURN(e.svm, TrainSvm(e.k2, y, svm_options));
  e.objective = e.svm.dual_objective + mu.sum();
  e.ok = std::isfinite(e.objective);
  return e;
}

// The error a classifier trainer returns when the control stops it between fits.
Status StopStatus(const SolveControl& control) {
  Termination why;
  if (!control.ShouldStop(&why)) return OkStatus();
  if (why == Termination::kCancelled) return CancelledError("mkl training cancelled");
  return DeadlineExceededError("mkl training passed its deadline");
}

Status StopStatus(Termination t) {
  if (t == Termination::kCancelled) return CancelledError("mkl training cancelled");
  if (t == Termination::kTimeLimit) return DeadlineExceededError("mkl training passed its deadline");
  return OkStatus();
}

std::vector<Eigen::MatrixXd> SubKernels(const std::vector<Eigen::MatrixXd>& k, const std::vector<int>& rows,
                                        const std::vector<int>& cols) {
  std::vector<Eigen::MatrixXd> out;
  out.reserve(k.size());
  for (const auto& m : k) out.push_back(SubMatrix(m, rows, cols));
  return out;
}

Status CheckLabels(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  if (y.size() != x.rows()) {
    return InvalidArgumentError("labels: " + std::to_string(y.size()) + " labels for " + std::to_string(x.rows()) +
                                " points");
  }
  return ValidateSignLabels(y, "labels");
}

// The model of a two-layer result: only kernels with μ_t > 0.
KernelClassifier ExponentialModel(const std::vector<BaseKernelSpec>& kernels, const Eigen::VectorXd& mu,
                                  const PreparedMklData& prep, const Eigen::VectorXd& y, const SvmSolution& svm,
                                  const MklProtocolOptions& protocol) {
  std::vector<BaseKernelSpec> kept;
  std::vector<double> w;
  for (std::size_t t = 0; t < kernels.size(); ++t)
    if (mu[static_cast<Eigen::Index>(t)] > 0) {
      kept.push_back(kernels[t]);
      w.push_back(mu[static_cast<Eigen::Index>(t)]);
    }
  Eigen::VectorXd weights = Eigen::Map<Eigen::VectorXd>(w.data(), static_cast<Eigen::Index>(w.size()));
  KernelClassifier model = MakeKernelClassifier(std::move(kept), std::move(weights), KernelCombination::kExponential,
                                                prep.standardizer, prep.x, y, svm);
  model.positive_class = protocol.positive_class;
  model.negative_class = protocol.negative_class;
  return model;
}

}  // namespace

Status TwoLayerMklOptions::Validate() const {
  KLS_RETURN_IF_ERROR(CheckPositiveOption("c", c));
  if (max_iterations < 1) {
    return InvalidArgumentError("options.max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("tolerance", tolerance));
  if (!(armijo_sigma > 0 && armijo_sigma < 1)) {
    return InvalidArgumentError("options.armijo_sigma = " + FormatNumber(armijo_sigma) + " must be in (0, 1)");
  }
  if (!(armijo_beta > 0 && armijo_beta < 1)) {
    return InvalidArgumentError("options.armijo_beta = " + FormatNumber(armijo_beta) + " must be in (0, 1)");
  }
  if (max_line_search_steps < 1) {
    return InvalidArgumentError("options.max_line_search_steps = " + std::to_string(max_line_search_steps) +
                                " must be >= 1");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("init_scale", init_scale));
  if (!(svm_tolerance > 0 && svm_tolerance < 1)) {
    return InvalidArgumentError("options.svm_tolerance = " + FormatNumber(svm_tolerance) + " must be in (0, 1)");
  }
  return OkStatus();
}

Eigen::MatrixXd TwoLayerKernel(const std::vector<Eigen::MatrixXd>& base_kernels, const Eigen::VectorXd& mu) {
  Eigen::MatrixXd s = Eigen::MatrixXd::Zero(base_kernels.front().rows(), base_kernels.front().cols());
  for (std::size_t t = 0; t < base_kernels.size(); ++t) {
    const double w = mu[static_cast<Eigen::Index>(t)];
    if (w != 0.0) s.noalias() += w * base_kernels[t];
  }
  return s.array().exp().matrix();  // (4.2)
}

Eigen::VectorXd TwoLayerGradient(const std::vector<Eigen::MatrixXd>& base_kernels, const Eigen::MatrixXd& k2,
                                 const Eigen::VectorXd& alpha, const Eigen::VectorXd& y) {
  const Eigen::VectorXd u = alpha.cwiseProduct(y);
  // G = (uuᵀ) ∘ K⁽²⁾, then [∇J]_d = ½⟨G, K_d⟩_F − 1 (4.5).
  const Eigen::MatrixXd g = (u * u.transpose()).cwiseProduct(k2);
  Eigen::VectorXd grad(static_cast<Eigen::Index>(base_kernels.size()));
  for (std::size_t d = 0; d < base_kernels.size(); ++d)
    grad[static_cast<Eigen::Index>(d)] = 0.5 * g.cwiseProduct(base_kernels[d]).sum() - 1.0;
  return grad;
}

StatusOr<TwoLayerMklResult> SolveTwoLayerMkl(const std::vector<Eigen::MatrixXd>& base_kernels,
                                             const Eigen::VectorXd& y, const TwoLayerMklOptions& options,
                                             const SolveControl& control, const Eigen::VectorXd& initial_weights) {
  return GuardExceptions("SolveTwoLayerMkl", [&]() -> StatusOr<TwoLayerMklResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const Eigen::Index n = y.size();
    const Eigen::Index m = static_cast<Eigen::Index>(base_kernels.size());
    if (m == 0) return InvalidArgumentError("two-layer mkl: no base kernels");
    for (Eigen::Index t = 0; t < m; ++t) {
      const auto& k = base_kernels[static_cast<std::size_t>(t)];
      if (k.rows() != n || k.cols() != n) {
        return InvalidArgumentError("base_kernels[" + std::to_string(t) + "] is " + std::to_string(k.rows()) + "x" +
                                    std::to_string(k.cols()) + " but there are " + std::to_string(n) + " labels");
      }
      if (!k.allFinite()) return InvalidArgumentError("base_kernels[" + std::to_string(t) + "] has a non-finite entry");
    }
    KLS_RETURN_IF_ERROR(ValidateSignLabels(y, "labels"));
    Eigen::VectorXd mu(m);
    if (initial_weights.size() > 0) {
      if (initial_weights.size() != m) {
        return InvalidArgumentError("initial_weights has " + std::to_string(initial_weights.size()) +
                                    " entries for " + std::to_string(m) + " kernels");
      }
      for (Eigen::Index t = 0; t < m; ++t)
        if (!(initial_weights[t] >= 0) || !std::isfinite(initial_weights[t])) {
          return InvalidArgumentError("initial_weights[" + std::to_string(t) + "] = " +
                                      FormatNumber(initial_weights[t]) + " must be finite and >= 0");
        }
      mu = initial_weights;
    } else {
      std::mt19937_64 rng(options.seed);  // Protocol 2, step 1
      std::uniform_real_distribution<double> unif(0.0, options.init_scale);
      for (Eigen::Index t = 0; t < m; ++t) mu[t] = unif(rng);
    }
    SvmOptions svm_options;
    svm_options.c = options.c;
    svm_options.tolerance = options.svm_tolerance;

    Stopwatch watch;
    TwoLayerMklResult r;
    KLS_ASSIGN_OR_RETURN(Evaluation cur, Evaluate(base_kernels, y, mu, svm_options));
    if (!cur.ok) {
      return InvalidArgumentError("two-layer mkl: exp(Σ μ_t K_t) overflows at the initial weights; lower init_scale");
    }
    r.stats.termination = Termination::kIterationLimit;
    double eta = -1;  // set on the first iteration
    for (int it = 1; it <= options.max_iterations; ++it) {
      Termination why;
      if (control.ShouldStop(&why)) {
        r.stats.termination = why;
        break;
      }
      const Eigen::VectorXd grad = TwoLayerGradient(base_kernels, cur.k2, cur.svm.alpha, y);  // ∇J = −∇F
      if (eta < 0) {
        // First trial moves the largest weight by max(1, max μ).
        const double gmax = grad.cwiseAbs().maxCoeff();
        eta = gmax > 0 ? std::max(1.0, mu.maxCoeff()) / gmax : 1.0;
      }
      bool accepted = false, stationary = false, numerical = false;
      Evaluation next;
      Eigen::VectorXd mu_next;
      for (int ls = 0; ls < options.max_line_search_steps; ++ls) {
        mu_next = (mu + eta * grad).cwiseMax(0.0);  // step 6: max(μ + η∇J, 0)
        const Eigen::VectorXd d = mu_next - mu;
        const double slope = grad.dot(d);  // = −∇Fᵀd >= 0
        if (d.cwiseAbs().maxCoeff() <= 1e-15 * (1.0 + mu.cwiseAbs().maxCoeff())) {
          stationary = true;  // the projected gradient vanishes: KKT point of min F over μ >= 0
          break;
        }
        KLS_ASSIGN_OR_RETURN(next, Evaluate(base_kernels, y, mu_next, svm_options));
        if (next.ok && next.objective <= cur.objective - options.armijo_sigma * slope) {
          accepted = true;
          if (ls == 0) eta /= options.armijo_beta;  // accepted at once: try a longer step next time
          break;
        }
        if (!next.ok) numerical = true;
        eta *= options.armijo_beta;
      }
      if (!accepted) {
        // No sufficient decrease along the arc: stationary to the accuracy of
        // the inner SVM (its α is exact only to svm_tolerance).
        r.stats.termination = (numerical && !stationary) ? Termination::kNumericalIssue : Termination::kConverged;
        break;
      }
      const double decrease = cur.objective - next.objective;
      mu = std::move(mu_next);
      cur = std::move(next);
      r.stats.iterations = it;
      r.stats.objective_history.push_back(cur.objective);
      ReportObjective(control, it, cur.objective, watch, options.max_iterations, &r.stats);
      if (decrease / std::max(1.0, std::abs(cur.objective)) < options.tolerance) {
        r.stats.termination = Termination::kConverged;
        break;
      }
    }
    r.weights = mu;
    r.svm = std::move(cur.svm);
    r.objective = cur.objective;
    r.stats.final_objective = cur.objective;
    r.stats.solve_seconds = watch.Seconds();
    return r;
  });
}

// ---------------------------------------------------------------- Protocol 3

Status InfiniteTwoLayerMklOptions::Validate() const {
  KLS_RETURN_IF_ERROR(inner.Validate());
  if (max_new_kernels < 0) {
    return InvalidArgumentError("options.max_new_kernels = " + std::to_string(max_new_kernels) + " must be >= 0");
  }
  if (new_kernel_max_iterations < 1) {
    return InvalidArgumentError("options.new_kernel_max_iterations = " + std::to_string(new_kernel_max_iterations) +
                                " must be >= 1");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("new_kernel_tolerance", new_kernel_tolerance));
  KLS_RETURN_IF_ERROR(CheckPositiveOption("min_initial_width", min_initial_width));
  KLS_RETURN_IF_ERROR(CheckPositiveOption("max_initial_width", max_initial_width));
  if (max_initial_width < min_initial_width) {
    return InvalidArgumentError("options.max_initial_width = " + FormatNumber(max_initial_width) +
                                " is below options.min_initial_width = " + FormatNumber(min_initial_width));
  }
  return OkStatus();
}

void NewKernelObjective(const Eigen::MatrixXd& squared_distances, const Eigen::VectorXd& u, double theta,
                        double* value, double* derivative) {
  // Symmetric sum over i < j twice plus the diagonal (k_ii = 1, d_ii = 0).
  const Eigen::Index n = u.size();
  double v = 0.5 * std::exp(1.0) * u.squaredNorm(), g = 0.0;
  for (Eigen::Index j = 0; j < n; ++j) {
    for (Eigen::Index i = 0; i < j; ++i) {
      const double d = squared_distances(i, j);
      const double k = std::exp(-theta * d);
      const double e = std::exp(k);
      const double uu = u[i] * u[j];
      v += uu * e;               // ½·2 for the pair (i, j) and (j, i)
      g -= uu * e * k * d;       // d/dθ e^{k} = e^{k}·k·(−d)
    }
  }
  *value = v;
  *derivative = g;
}

NewKernelResult FindNewKernel(const Eigen::MatrixXd& squared_distances, const Eigen::VectorXd& u,
                              double initial_theta, int max_iterations, double tolerance) {
  NewKernelResult r;
  r.initial_theta = initial_theta;
  double theta = initial_theta, j = 0, g = 0;
  NewKernelObjective(squared_distances, u, theta, &j, &g);
  r.history.push_back(j);
  double eta = g != 0 ? theta / std::abs(g) : 0.0;  // first trial: change θ by 100 %
  constexpr double kSigma = 1e-4;
  for (int it = 0; it < max_iterations && g != 0; ++it) {
    bool accepted = false;
    double theta_next = theta, j_next = j, g_next = g;
    for (int ls = 0; ls < 60; ++ls) {
      theta_next = theta + eta * g;  // line 15: θᵗ = θᵗ⁻¹ + ηᵗ∇J_θ
      if (theta_next > 0) {
        NewKernelObjective(squared_distances, u, theta_next, &j_next, &g_next);
        if (j_next >= j + kSigma * eta * g * g) {
          accepted = true;
          if (ls == 0) eta *= 2.0;
          break;
        }
      }
      eta *= 0.5;
    }
    if (!accepted) break;
    const double gain = j_next - j;
    theta = theta_next;
    j = j_next;
    g = g_next;
    r.iterations = it + 1;
    r.history.push_back(j);
    if (gain <= tolerance * std::max(std::abs(j), 1e-300)) break;  // line 13: "while J is improving"
  }
  r.theta = theta;
  r.objective = j;
  return r;
}

StatusOr<std::vector<BaseKernelSpec>> InfiniteInitialKernels(const Eigen::MatrixXd& x) {
  std::vector<BaseKernelSpec> k = StandardKernelBank(static_cast<int>(x.cols()), /*single_features=*/false);
  KLS_RETURN_IF_ERROR(NormalizeToUnitTrace(&k, x));
  return k;
}

StatusOr<InfiniteTwoLayerMklResult> SolveInfiniteTwoLayerMkl(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                                             std::vector<BaseKernelSpec> initial_kernels,
                                                             const InfiniteTwoLayerMklOptions& options,
                                                             const SolveControl& control) {
  return GuardExceptions("SolveInfiniteTwoLayerMkl", [&]() -> StatusOr<InfiniteTwoLayerMklResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    KLS_RETURN_IF_ERROR(CheckLabels(x, y));
    if (!x.allFinite()) return InvalidArgumentError("two-layer mkl: x has a non-finite entry");
    if (initial_kernels.empty()) return InvalidArgumentError("two-layer mkl: Θ₀ (initial_kernels) is empty");
    for (const auto& s : initial_kernels) KLS_RETURN_IF_ERROR(s.Validate(static_cast<int>(x.cols())));
    Stopwatch watch;
    InfiniteTwoLayerMklResult r;
    r.kernels = std::move(initial_kernels);
    std::vector<Eigen::MatrixXd> base = EvaluateKernels(r.kernels, x, x);
    const Eigen::MatrixXd sqdist = SquaredDistances(x, x);
    std::mt19937_64 rng(options.seed);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    std::uniform_real_distribution<double> init_mu(0.0, options.inner.init_scale);
    const double log_lo = std::log(options.min_initial_width), log_hi = std::log(options.max_initial_width);
    Eigen::VectorXd warm;
    TwoLayerMklOptions inner = options.inner;
    r.stats.termination = Termination::kIterationLimit;
    for (int call = 0;; ++call) {
      Termination why;
      if (control.ShouldStop(&why)) {
        r.stats.termination = why;
        break;
      }
      inner.seed = options.inner.seed + static_cast<uint64_t>(call);
      KLS_ASSIGN_OR_RETURN(TwoLayerMklResult p2, SolveTwoLayerMkl(base, y, inner, control, warm));  // line 3
      r.weights = p2.weights;
      r.svm = p2.svm;
      r.objective = p2.objective;
      r.inner_iterations += p2.stats.iterations;
      r.stats.iterations = call + 1;
      r.stats.objective_history.push_back(p2.objective);
      if (p2.stats.termination == Termination::kCancelled || p2.stats.termination == Termination::kTimeLimit) {
        r.stats.termination = p2.stats.termination;
        break;
      }
      if (call == options.max_new_kernels) break;  // cap: kIterationLimit
      // Line 4: θ = NewKernel(α) from a random θ⁰ (line 12).
      const Eigen::VectorXd u = p2.svm.alpha.cwiseProduct(y);
      const double width0 = std::exp(log_lo + (log_hi - log_lo) * unif(rng));
      const NewKernelResult nk = FindNewKernel(sqdist, u, 1.0 / (2.0 * width0 * width0),
                                               options.new_kernel_max_iterations, options.new_kernel_tolerance);
      const double j_mu = 0.5 * u.dot(TwoLayerKernel(base, p2.weights) * u);
      r.j_theta.push_back(nk.objective);
      r.j_mu.push_back(j_mu);
      // Line 5: stop when the new kernel does not beat the current combination.
      if (!(nk.objective > j_mu) || !(nk.theta > 0) || !std::isfinite(nk.theta)) {
        r.stats.termination = Termination::kConverged;
        break;
      }
      // A θ equal to one already in Θ adds nothing new: stop as well.
      bool duplicate = false;
      for (const auto& s : r.kernels)
        if (s.type == BaseKernelType::kGaussian && s.feature < 0 && std::abs(s.gamma - nk.theta) <= 1e-6 * s.gamma)
          duplicate = true;
      if (duplicate) {
        r.stats.termination = Termination::kConverged;
        break;
      }
      BaseKernelSpec spec;
      spec.type = BaseKernelType::kGaussian;
      spec.gamma = nk.theta;
      spec.scale = 1.0 / KernelTrace(spec, x);  // unit trace, like Θ₀
      r.kernels.push_back(spec);               // line 8: Θ = Θ ∪ θ
      r.added_theta.push_back(nk.theta);
      base.push_back(EvaluateKernel(spec, x, x));
      if (options.warm_start) {
        warm.resize(p2.weights.size() + 1);
        warm.head(p2.weights.size()) = p2.weights;
        warm[p2.weights.size()] = init_mu(rng);
      }
      ReportObjective(control, call + 1, p2.objective, watch, options.max_new_kernels + 1, &r.stats);
    }
    r.stats.final_objective = r.objective;
    r.stats.solve_seconds = watch.Seconds();
    return r;
  });
}

// ---------------------------------------------------------------- classifiers

Status TwoLayerMklClassifierOptions::Validate() const {
  KLS_RETURN_IF_ERROR(solver.Validate());
  return protocol.Validate();
}

Status InfiniteTwoLayerMklClassifierOptions::Validate() const {
  KLS_RETURN_IF_ERROR(solver.Validate());
  return protocol.Validate();
}

StatusOr<MklClassifierResult> TrainTwoLayerMklClassifier(const Eigen::MatrixXd& x_raw, const Eigen::VectorXd& y,
                                                         const TwoLayerMklClassifierOptions& options,
                                                         const SolveControl& control) {
  return GuardExceptions("TrainTwoLayerMklClassifier", [&]() -> StatusOr<MklClassifierResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    KLS_RETURN_IF_ERROR(CheckLabels(x_raw, y));
    const MklProtocolOptions& pr = options.protocol;
    KLS_ASSIGN_OR_RETURN(PreparedMklData prep, PrepareMklData(x_raw, pr.standardize, pr.single_feature_kernels));
    const std::vector<Eigen::MatrixXd> base = EvaluateKernels(prep.bank, prep.x, prep.x);
    MklClassifierResult out;
    out.bank_size = static_cast<int>(prep.bank.size());
    TwoLayerMklOptions solver = options.solver;
    solver.c = pr.c_grid.front();
    if (pr.c_grid.size() > 1) {
      // Nested CV: Protocol 2 on each fold's training part, for every C.
      SolveControl quiet = control;
      quiet.progress = nullptr;
      const int n = static_cast<int>(y.size());
      std::vector<double> correct(pr.c_grid.size(), 0.0);
      for (const auto& test : StratifiedFolds(y, pr.cv_folds, pr.cv_seed)) {
        if (test.empty()) continue;
        const std::vector<int> train = Complement(test, n);
        const Eigen::VectorXd ytr = SubVector(y, train), yte = SubVector(y, test);
        const std::vector<Eigen::MatrixXd> ktr = SubKernels(base, train, train);
        const std::vector<Eigen::MatrixXd> kte = SubKernels(base, test, train);
        for (std::size_t c = 0; c < pr.c_grid.size(); ++c) {
          KLS_RETURN_IF_ERROR(StopStatus(control));
          TwoLayerMklOptions o = options.solver;
          o.c = pr.c_grid[c];
          KLS_ASSIGN_OR_RETURN(TwoLayerMklResult fit, SolveTwoLayerMkl(ktr, ytr, o, quiet));
          KLS_RETURN_IF_ERROR(StopStatus(fit.stats.termination));
          const Eigen::VectorXd dec = SvmDecision(TwoLayerKernel(kte, fit.weights), ytr, fit.svm);
          correct[c] += SignAccuracy(dec, yte) * static_cast<double>(test.size());
        }
      }
      for (double& c : correct) c /= n;
      out.cv_accuracy = correct;
      solver.c = pr.c_grid[static_cast<std::size_t>(ArgBestAccuracy(correct))];
    }
    KLS_RETURN_IF_ERROR(StopStatus(control));
    KLS_ASSIGN_OR_RETURN(TwoLayerMklResult fit, SolveTwoLayerMkl(base, y, solver, control));
    KLS_RETURN_IF_ERROR(StopStatus(fit.stats.termination));
    out.c = solver.c;
    out.stats = fit.stats;
    out.classifier = ExponentialModel(prep.bank, fit.weights, prep, y, fit.svm, pr);
    return out;
  });
}

StatusOr<MklClassifierResult> TrainInfiniteTwoLayerMklClassifier(const Eigen::MatrixXd& x_raw,
                                                                 const Eigen::VectorXd& y,
                                                                 const InfiniteTwoLayerMklClassifierOptions& options,
                                                                 const SolveControl& control) {
  return GuardExceptions("TrainInfiniteTwoLayerMklClassifier", [&]() -> StatusOr<MklClassifierResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    KLS_RETURN_IF_ERROR(CheckLabels(x_raw, y));
    const MklProtocolOptions& pr = options.protocol;
    KLS_ASSIGN_OR_RETURN(PreparedMklData prep, PrepareMklData(x_raw, pr.standardize, /*single_features=*/false));
    MklClassifierResult out;
    out.bank_size = static_cast<int>(prep.bank.size());
    InfiniteTwoLayerMklOptions solver = options.solver;
    solver.inner.c = pr.c_grid.front();
    if (pr.c_grid.size() > 1) {
      SolveControl quiet = control;
      quiet.progress = nullptr;
      const std::vector<Eigen::MatrixXd> base = EvaluateKernels(prep.bank, prep.x, prep.x);
      const int n = static_cast<int>(y.size());
      std::vector<double> correct(pr.c_grid.size(), 0.0);
      for (const auto& test : StratifiedFolds(y, pr.cv_folds, pr.cv_seed)) {
        if (test.empty()) continue;
        const std::vector<int> train = Complement(test, n);
        const Eigen::VectorXd ytr = SubVector(y, train), yte = SubVector(y, test);
        const Eigen::MatrixXd xtr = SubRows(prep.x, train), xte = SubRows(prep.x, test);
        std::vector<Eigen::MatrixXd> ktr, kte;
        if (!options.cross_validate_full_protocol) {
          ktr = SubKernels(base, train, train);
          kte = SubKernels(base, test, train);
        }
        for (std::size_t c = 0; c < pr.c_grid.size(); ++c) {
          KLS_RETURN_IF_ERROR(StopStatus(control));
          Eigen::VectorXd dec;
          if (options.cross_validate_full_protocol) {
            InfiniteTwoLayerMklOptions o = options.solver;
            o.inner.c = pr.c_grid[c];
            KLS_ASSIGN_OR_RETURN(InfiniteTwoLayerMklResult fit, SolveInfiniteTwoLayerMkl(xtr, ytr, prep.bank, o, quiet));
            KLS_RETURN_IF_ERROR(StopStatus(fit.stats.termination));
            dec = SvmDecision(CombinedKernel(fit.kernels, fit.weights, KernelCombination::kExponential, xte, xtr), ytr,
                              fit.svm);
          } else {
            TwoLayerMklOptions o = options.solver.inner;
            o.c = pr.c_grid[c];
            KLS_ASSIGN_OR_RETURN(TwoLayerMklResult fit, SolveTwoLayerMkl(ktr, ytr, o, quiet));
            KLS_RETURN_IF_ERROR(StopStatus(fit.stats.termination));
            dec = SvmDecision(TwoLayerKernel(kte, fit.weights), ytr, fit.svm);
          }
          correct[c] += SignAccuracy(dec, yte) * static_cast<double>(test.size());
        }
      }
      for (double& c : correct) c /= n;
      out.cv_accuracy = correct;
      solver.inner.c = pr.c_grid[static_cast<std::size_t>(ArgBestAccuracy(correct))];
    }
    KLS_RETURN_IF_ERROR(StopStatus(control));
    KLS_ASSIGN_OR_RETURN(InfiniteTwoLayerMklResult fit, SolveInfiniteTwoLayerMkl(prep.x, y, prep.bank, solver, control));
    KLS_RETURN_IF_ERROR(StopStatus(fit.stats.termination));
    out.c = solver.inner.c;
    out.stats = fit.stats;
    out.classifier = ExponentialModel(fit.kernels, fit.weights, prep, y, fit.svm, pr);
    return out;
  });
}

}  // namespace kls
