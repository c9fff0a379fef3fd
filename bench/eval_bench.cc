// kls-bench eval: kernel k-means on an embedding (K = V Vᵀ, V = the data's
// features or a synthetic set), with pair accuracy and NMI against labels.
#include "bench/bench_options.h"
#include "bench/bench_util.h"
#include "core/common/solve_control.h"
#include "core/eval/kernel_kmeans.h"
#include "core/eval/metrics.h"

namespace kls::bench {

Runner RegisterEval(CLI::App& app, bool* json) {
  struct Args {
    DataFlags source;
    int n = 1000;
    int clusters = 0;
    int restarts = 10;
    int threads = 1;
    uint64_t seed = 42;
  };
  auto args = std::make_shared<Args>();
  args->source.AddData(app, "labeled CSV or LIBSVM file; its features are the embedding V");
  args->source.AddSynthetic(app, "chessboard | double_spiral | swiss_roll | two_moons | adult_like");
  app.add_option("--n", args->n, "points for --synthetic");
  app.add_option("--clusters", args->clusters, "k of k-means (0 = number of classes)");
  app.add_option("--restarts", args->restarts, "k-means++ restarts");
  app.add_option("--threads", args->threads, "threads");
  app.add_option("--seed", args->seed, "random seed");
  return [args, json]() -> int {
    auto data = args->source.LoadLabeled(args->n, args->seed);
    if (!data.ok()) return Fail(data.status());
    KMeansOptions o;
    o.num_clusters = args->clusters > 0 ? args->clusters : data->num_classes();
    o.restarts = args->restarts;
    o.seed = args->seed;
    o.num_threads = args->threads;
    Stopwatch watch;
    auto km = KernelKMeans(data->features, o);
    if (!km.ok()) return Fail(km.status());
    const double seconds = watch.Seconds();
    auto pa = PairAccuracy(data->labels, km->assignment);
    auto nmi = NormalizedMutualInformation(data->labels, km->assignment);
    if (!pa.ok()) return Fail(pa.status());
    if (!nmi.ok()) return Fail(nmi.status());
    Emit({{"benchmark", "eval"},
          {"n", data->num_points()},
          {"rank", data->dim()},
          {"clusters", o.num_clusters},
          {"pair_accuracy", *pa},
          {"nmi", *nmi},
          {"objective", km->objective},
          {"kmeans_seconds", seconds},
          {"machine", MachineInfo()}},
         *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("eval", "kernel k-means on an embedding: pair accuracy, NMI, time", RegisterEval);

}  // namespace kls::bench
