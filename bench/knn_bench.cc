// kls-bench knn: time of the exact k-NN search and of the normalized
// Laplacian as n grows (issue "Foundation", item 5).
#include <chrono>

#include "bench/bench_util.h"
#include "core/common/solve_control.h"
#include "core/graph/laplacian.h"

namespace kls::bench {

Runner RegisterKnn(CLI::App& app, bool* json) {
  struct Args {
    std::vector<int> n = {1000, 2000, 5000, 10000, 20000};
    int dim = 123;
    int k = 5;
    int threads = 0;
    std::string synthetic = "adult_like";
    bool gaussian = false;
    uint64_t seed = 1;
  };
  auto args = std::make_shared<Args>();
  app.add_option("--n", args->n, "point counts to time (comma separated)")->delimiter(',');
  app.add_option("--dim", args->dim, "feature dimension for --synthetic gaussian");
  app.add_option("--k", args->k, "neighbours per point");
  app.add_option("--threads", args->threads, "threads (0 = all cores)");
  app.add_option("--synthetic", args->synthetic, "adult_like (123 binary features) or gaussian");
  app.add_flag("--gaussian-weights", args->gaussian, "Gaussian edge weights with automatic sigma");
  app.add_option("--seed", args->seed, "random seed");
  return [args, json]() -> int {
    nlohmann::json runs = nlohmann::json::array();
    for (int n : args->n) {
      Dataset data;
      if (args->synthetic == "gaussian") {
        data.features = Eigen::MatrixXd::Random(n, args->dim);
      } else {
        auto d = LoadOrGenerate("", args->synthetic, n, args->seed);
        if (!d.ok()) return Fail(d.status());
        data = std::move(d).value();
      }
      GraphOptions o;
      o.k = args->k;
      o.num_threads = args->threads;
      o.weight = args->gaussian ? EdgeWeight::kGaussian : EdgeWeight::kBinary;
      KnnOptions ko;
      ko.k = o.weight == EdgeWeight::kGaussian ? std::max(o.k, o.sigma_neighbors) : o.k;
      ko.num_threads = o.num_threads;
      Stopwatch knn_watch;
      auto knn = ExactKnn(data.features, ko);
      if (!knn.ok()) return Fail(knn.status());
      const double knn_seconds = knn_watch.Seconds();
      Stopwatch graph_watch;
      auto graph = BuildGraph(data.features, o);
      if (!graph.ok()) return Fail(graph.status());
      const double graph_seconds = graph_watch.Seconds();
      runs.push_back({{"n", n},
                      {"dim", data.dim()},
                      {"k", o.k},
                      {"knn_seconds", knn_seconds},
                      {"graph_seconds", graph_seconds},
                      {"laplacian_nonzeros", graph->laplacian.nonZeros()}});
    }
    nlohmann::json out = {{"benchmark", "knn"},
                          {"synthetic", args->synthetic},
                          {"threads", args->threads},
                          {"runs", runs},
                          {"peak_rss_mb", PeakRssMb()},
                          {"machine", MachineInfo()}};
    Emit(out, *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("knn", "exact k-NN graph + Laplacian time vs n", RegisterKnn);

}  // namespace kls::bench
