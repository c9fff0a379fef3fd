#include "tests/test_util/random_graph.h"

#include <cstdio>
#include <cstdlib>
#include <random>

namespace kls::test_util {

Eigen::SparseMatrix<double> RandomKnnLaplacian(int n, int dim, uint64_t seed, GraphOptions options) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd x(n, dim);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < dim; ++j) x(i, j) = g(rng);
  options.num_threads = 1;
  auto graph = BuildGraph(x, options);
  if (!graph.ok()) {
    std::fprintf(stderr, "RandomKnnLaplacian: %s\n", graph.status().ToString().c_str());
    std::abort();
  }
  return graph->laplacian;
}

}  // namespace kls::test_util
