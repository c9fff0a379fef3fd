// kls-bench repro: the papers' clustering protocol on a labeled data set —
// graph + constraints per protocol, learn a kernel, kernel k-means with
// k = number of classes on the factored kernel, pair accuracy and NMI, over
// T trials with seeds S, S+1, ... (docs/reproduction/README.md). `--C auto` chooses
// C / γ per trial by cross-validation on the trial's pairs (the server's
// cross_validation code); `--warm-start` also measures re-learning after 10 %
// more pairs from the kernel learned without them (docs/BENCHMARKS.md).
#include <cmath>
#include <limits>
#include <map>

#include "bench/bench_util.h"
#include "bench/npkl_runner.h"
#include "core/common/solve_control.h"
#include "core/data/feature_scaling.h"
#include "core/eval/kernel_kmeans.h"
#include "core/eval/metrics.h"
#include "core/npkl/cross_validation.h"

namespace kls::bench {

Runner RegisterRepro(CLI::App& app, bool* json) {
  struct Args {
    std::string data, synthetic, method = "admm", protocol = "admm";
    int n = 100, trials = 20, k = 5, restarts = 10, threads = 1, max_iterations = 0, block_warm_start = -1, newton = -1;
    double b = 0, omega = 0, tolerance = 0;
    std::string c;
    int cv_folds = 3, cv_threads = 1, cv_clusters = -1;
    uint64_t seed = 1;
    bool standardize = false, warm_start = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--data", a->data, "labeled CSV or LIBSVM file");
  app.add_option("--synthetic", a->synthetic, "or a synthetic set: chessboard, double_spiral, ...");
  app.add_option("--n", a->n, "points for --synthetic");
  app.add_option("--method", a->method, "admm | bcd-hl | bcd-shl | bcd-sl | simplenpkl-{ll,hl,shl,sl}");
  app.add_option("--protocol", a->protocol, "bcd | admm | simplenpkl");
  app.add_option("--C", a->c,
                 "C (BCDNPKL, SimpleNPKL) or gamma (KL-ADMM); default 1 / 10; auto = cross-validation over "
                 "{0.1, 1, 10} per trial");
  app.add_option("--cv-folds", a->cv_folds, "--C auto: folds (default 3)");
  app.add_option("--cv-threads", a->cv_threads, "--C auto: parallel (value, fold) learns (default 1)");
  app.add_option("--cv-clusters", a->cv_clusters,
                 "--C auto: score held-out pairs by kernel k-means with this many clusters; -1 (default) = the "
                 "data set's classes, the clustering this bench evaluates; 0 = the K_ij threshold score");
  app.add_flag("--warm-start", a->warm_start,
               "per trial also learn without 1/11 of the pairs, then re-learn all pairs from that kernel; "
               "reports cold vs warm iterations and objectives");
  app.add_option("--B", a->b, "SimpleNPKL capacity B (default 1)");
  app.add_option("--trials", a->trials, "trials (seeds S, S+1, ...)");
  app.add_option("--seed", a->seed, "first seed");
  app.add_option("--k", a->k, "graph neighbours (5 small sets, 50 adult)");
  app.add_option("--restarts", a->restarts, "k-means++ restarts per trial");
  app.add_option("--threads", a->threads, "solver threads");
  app.add_option("--max-iterations", a->max_iterations, "solver iteration cap (0 = default)");
  app.add_option("--tolerance", a->tolerance, "SimpleNPKL relative duality-gap tolerance (0 = solver default 1e-4)");
  app.add_option("--block-warm-start", a->block_warm_start,
                 "SimpleNPKL: 1 = block eigensolver for uncertified iterates (default), 0 = Lanczos always");
  app.add_option("--omega", a->omega, "BCDNPKL square loss: block over-relaxation omega in (0, 2) (0 = solver default 1)");
  app.add_option("--newton", a->newton,
                 "SimpleNPKL: 1 = projected Newton steps on the dense path (default), 0 = gradient steps only");
  app.add_flag("--standardize", a->standardize, "z-score each feature first");
  return [a, json]() -> int {
    auto method = ParseMethod(a->method);
    if (!method.ok()) return Fail(method.status());
    auto data = LoadOrGenerate(a->data, a->synthetic, a->n, a->seed);
    if (!data.ok()) return Fail(data.status());
    if (!data->has_labels()) return Fail(InvalidArgumentError("--data: the data set has no labels"));
    if (a->standardize) {  // the service's `scaling: zscore` (core/data/feature_scaling.h)
      auto scaler = FeatureScaler::Fit(data->features, FeatureScaling::kZScore);
      if (!scaler.ok()) return Fail(scaler.status());
      auto scaled = scaler->Apply(data->features);
      if (!scaled.ok()) return Fail(scaled.status());
      data->features = *std::move(scaled);
    }
    const bool c_auto = a->c == "auto";
    double c = DefaultC(*method);
    if (!c_auto && !a->c.empty()) {
      char* end = nullptr;
      c = std::strtod(a->c.c_str(), &end);
      if (end == a->c.c_str() || *end != '\0' || !(c > 0) || !std::isfinite(c)) {
        return Fail(InvalidArgumentError("--C = \"" + a->c + "\" is neither a positive number nor auto"));
      }
    }
    if (c_auto && a->warm_start) return Fail(InvalidArgumentError("--warm-start needs a fixed --C"));
    CrossValidationOptions cv;
    cv.folds = a->cv_folds;
    cv.num_threads = a->cv_threads;
    cv.clusters = a->cv_clusters < 0 ? data->num_classes() : a->cv_clusters;
    // One graph per value the trials may use: BCDNPKL's δ = C/2 follows C.
    std::map<double, Eigen::SparseMatrix<double>> laplacians;
    Stopwatch graph_watch;
    for (double v : c_auto ? cv.grid : std::vector<double>{c}) {
      auto protocol = MakeProtocol(a->protocol, *method, a->k, v);
      if (!protocol.ok()) return Fail(protocol.status());
      protocol->graph.num_threads = a->threads;
      auto graph = BuildGraph(data->features, protocol->graph);
      if (!graph.ok()) return Fail(graph.status());
      laplacians[v] = std::move(graph->laplacian);
      if (method->family != MethodSpec::Family::kBcd) break;  // δ = 0: one graph serves every value
    }
    const double graph_seconds = graph_watch.Seconds();
    auto laplacian = [&](double v) -> const Eigen::SparseMatrix<double>& {
      auto it = laplacians.find(v);
      return it != laplacians.end() ? it->second : laplacians.begin()->second;
    };
    MeanStd acc, nmi, secs, obj, iters, rank, cons, chosen, gap;
    double gap_max = -std::numeric_limits<double>::infinity();
    MeanStd warm_iters, cold_iters, iter_ratio, obj_diff, warm_reach, cold_reach, reach_ratio, warm_secs;
    constexpr double kReach = 1e-4;  // "the cold-start objective within tolerance"
    nlohmann::json cv_trials = nlohmann::json::array();
    for (int t = 0; t < a->trials; ++t) {
      const uint64_t seed = a->seed + t;
      auto constraints = MakeConstraints(a->protocol, data->labels, seed);
      if (!constraints.ok()) return Fail(constraints.status());
      NpklProblem problem{laplacian(c), *constraints};
      RunParams params;
      params.c = c;
      params.b = a->b;
      params.seed = seed;
      params.threads = a->threads;
      params.max_iterations = a->max_iterations;
      params.block_warm_start = a->block_warm_start;
      params.newton = a->newton;
      params.omega = a->omega;
      params.tolerance = a->tolerance;
      Stopwatch watch;
      CrossValidationResult cv_result;
      auto result = c_auto ? RunMethodAuto(*method, laplacian, *constraints, params, cv, &cv_result)
                           : RunMethod(*method, problem, params);
      if (!result.ok()) return Fail(result.status());
      secs.Add(watch.Seconds());
      if (c_auto) {
        chosen.Add(cv_result.best_value);
        cv_trials.push_back(nlohmann::json::parse(cv_result.Json()));
      }
      if (a->warm_start) {
        // The "previous version": the trial's pairs without fold 0 of 11
        // (1/11 of the pairs i != j, i.e. the full set is it plus 10 %).
        auto fold = AssignPairFolds(*constraints, 11, seed);
        if (!fold.ok()) return Fail(fold.status());
        PairwiseConstraints base;
        for (int k = 0; k < constraints->size(); ++k)
          if ((*fold)[k] != 0) base.pairs.push_back(constraints->pairs[k]);
        auto previous = RunMethod(*method, NpklProblem{laplacian(c), base}, params);
        if (!previous.ok()) return Fail(previous.status());
        RunParams warm_params = params;
        warm_params.initial_factor = std::make_shared<const Eigen::MatrixXd>(previous->kernel.embedding());
        Stopwatch warm_watch;
        auto warm = RunMethod(*method, problem, warm_params);
        if (!warm.ok()) return Fail(warm.status());
        warm_secs.Add(warm_watch.Seconds());
        cold_iters.Add(result->stats.iterations);
        warm_iters.Add(warm->stats.iterations);
        iter_ratio.Add(static_cast<double>(warm->stats.iterations) / std::max(1, result->stats.iterations));
        obj_diff.Add((warm->stats.final_objective - result->stats.final_objective) /
                     std::max(1.0, std::abs(result->stats.final_objective)));
        const double target = result->stats.final_objective;
        const int cr = IterationsToObjective(result->stats, target, kReach);
        const int wr = IterationsToObjective(warm->stats, target, kReach);
        cold_reach.Add(cr);
        warm_reach.Add(wr);
        reach_ratio.Add(static_cast<double>(wr) / std::max(1, cr));
      }
      KMeansOptions km;
      km.num_clusters = data->num_classes();
      km.restarts = a->restarts;
      km.seed = seed;
      auto clusters = KernelKMeans(Eigen::MatrixXd(result->kernel.embedding()), km);
      if (!clusters.ok()) return Fail(clusters.status());
      acc.Add(*PairAccuracy(data->labels, clusters->assignment));
      nmi.Add(*NormalizedMutualInformation(data->labels, clusters->assignment));
      obj.Add(result->stats.final_objective);
      iters.Add(result->stats.iterations);
      rank.Add(result->kernel.rank());
      cons.Add(constraints->size());
      if (std::isfinite(result->duality_gap)) {
        gap.Add(result->duality_gap);
        gap_max = std::max(gap_max, result->duality_gap);
      }
    }
    nlohmann::json extra = nlohmann::json::object();
    if (c_auto) {
      extra["C_chosen_mean"] = chosen.mean();
      extra["cross_validation"] = cv_trials;
    }
    if (a->warm_start) {
      extra["cold_iterations_mean"] = cold_iters.mean();
      extra["warm_iterations_mean"] = warm_iters.mean();
      extra["warm_over_cold_iterations_mean"] = iter_ratio.mean();
      extra["warm_minus_cold_objective_relative_mean"] = obj_diff.mean();
      extra["warm_minus_cold_objective_relative_std"] = obj_diff.std();
      extra["cold_seconds_mean"] = secs.mean();  // = learn_seconds_mean, beside its warm twin
      extra["warm_seconds_mean"] = warm_secs.mean();
      extra["cold_iterations_to_objective_mean"] = cold_reach.mean();
      extra["warm_iterations_to_objective_mean"] = warm_reach.mean();
      extra["warm_over_cold_iterations_to_objective_mean"] = reach_ratio.mean();
    }
    nlohmann::json record = {{"benchmark", "repro"},
          {"method", a->method},
          {"protocol", a->protocol},
          {"data", a->data.empty() ? a->synthetic : a->data},
          {"n", data->num_points()},
          {"constraints", cons.mean()},
          {"rank", rank.mean()},
          {"C", c_auto ? nlohmann::json("auto") : nlohmann::json(c)},
          {"trials", a->trials},
          {"pair_accuracy_mean", acc.mean()},
          {"pair_accuracy_std", acc.std()},
          {"nmi_mean", nmi.mean()},
          {"nmi_std", nmi.std()},
          {"learn_seconds_mean", secs.mean()},
          {"graph_seconds", graph_seconds},
          {"iterations_mean", iters.mean()},
          {"objective_mean", obj.mean()},
          // Certified relative duality gap (SimpleNPKL; null for solvers without one).
          {"duality_gap_mean", gap.n > 0 ? nlohmann::json(gap.mean()) : nlohmann::json()},
          {"duality_gap_max", gap.n > 0 ? nlohmann::json(gap_max) : nlohmann::json()},
          {"machine", MachineInfo()}};
    record.update(extra);
    Emit(record, *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("repro", "reproduce a paper's clustering table row (NPKL solvers)", RegisterRepro);

}  // namespace kls::bench
