// kls-bench repro: the papers' clustering protocol on a labeled data set —
// graph + constraints per protocol, learn a kernel, kernel k-means with
// k = number of classes on the factored kernel, pair accuracy and NMI, over
// T trials with seeds S, S+1, ... (docs/REPRODUCTION.md).
#include <cmath>
#include <limits>

#include "bench/bench_util.h"
#include "bench/npkl_runner.h"
#include "core/common/solve_control.h"
#include "core/eval/kernel_kmeans.h"
#include "core/eval/metrics.h"

namespace kls::bench {
namespace {

void Standardize(Eigen::MatrixXd& x) {
  const Eigen::RowVectorXd mean = x.colwise().mean();
  x.rowwise() -= mean;
  Eigen::RowVectorXd sd = (x.cwiseProduct(x).colwise().sum() / std::max<Eigen::Index>(1, x.rows() - 1)).cwiseSqrt();
  for (Eigen::Index j = 0; j < sd.size(); ++j)
    if (sd[j] == 0) sd[j] = 1;
  x = x.array().rowwise() / sd.array();
}

}  // namespace

Runner RegisterRepro(CLI::App& app, bool* json) {
  struct Args {
    std::string data, synthetic, method = "admm", protocol = "admm";
    int n = 100, trials = 20, k = 5, restarts = 10, threads = 1, max_iterations = 0, block_warm_start = -1;
    double c = 0, b = 0, omega = 0, tolerance = 0;
    uint64_t seed = 1;
    bool standardize = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--data", a->data, "labeled CSV or LIBSVM file");
  app.add_option("--synthetic", a->synthetic, "or a synthetic set: chessboard, double_spiral, ...");
  app.add_option("--n", a->n, "points for --synthetic");
  app.add_option("--method", a->method, "admm | bcd-hl | bcd-shl | bcd-sl | simplenpkl-{ll,hl,shl,sl}");
  app.add_option("--protocol", a->protocol, "bcd | admm | simplenpkl");
  app.add_option("--C", a->c, "C (BCDNPKL, SimpleNPKL) or gamma (KL-ADMM); default 1 / 10");
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
  app.add_flag("--standardize", a->standardize, "z-score each feature first");
  return [a, json]() -> int {
    auto method = ParseMethod(a->method);
    if (!method.ok()) return Fail(method.status());
    auto data = LoadOrGenerate(a->data, a->synthetic, a->n, a->seed);
    if (!data.ok()) return Fail(data.status());
    if (!data->has_labels()) return Fail(InvalidArgumentError("--data: the data set has no labels"));
    if (a->standardize) Standardize(data->features);
    const double c = a->c > 0 ? a->c : DefaultC(*method);
    auto protocol = MakeProtocol(a->protocol, *method, a->k, c);
    if (!protocol.ok()) return Fail(protocol.status());
    protocol->graph.num_threads = a->threads;
    Stopwatch graph_watch;
    auto graph = BuildGraph(data->features, protocol->graph);
    if (!graph.ok()) return Fail(graph.status());
    const double graph_seconds = graph_watch.Seconds();
    MeanStd acc, nmi, secs, obj, iters, rank, cons, gap;
    double gap_max = -std::numeric_limits<double>::infinity();
    for (int t = 0; t < a->trials; ++t) {
      const uint64_t seed = a->seed + t;
      auto constraints = MakeConstraints(a->protocol, data->labels, seed);
      if (!constraints.ok()) return Fail(constraints.status());
      NpklProblem problem{graph->laplacian, *constraints};
      RunParams params;
      params.c = c;
      params.b = a->b;
      params.seed = seed;
      params.threads = a->threads;
      params.max_iterations = a->max_iterations;
      params.block_warm_start = a->block_warm_start;
      params.omega = a->omega;
      params.tolerance = a->tolerance;
      Stopwatch watch;
      auto result = RunMethod(*method, problem, params);
      if (!result.ok()) return Fail(result.status());
      secs.Add(watch.Seconds());
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
    Emit({{"benchmark", "repro"},
          {"method", a->method},
          {"protocol", a->protocol},
          {"data", a->data.empty() ? a->synthetic : a->data},
          {"n", data->num_points()},
          {"constraints", cons.mean()},
          {"rank", rank.mean()},
          {"C", c},
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
          {"machine", MachineInfo()}},
         *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("repro", "reproduce a paper's clustering table row (NPKL solvers)", RegisterRepro);

}  // namespace kls::bench
