// Connectivity repairs of k-NN graphs (core/graph/connect.h): components, the
// minimum spanning tree over components against a brute-force Kruskal, grow_k.
#include "core/graph/connect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <tuple>

namespace kls {
namespace {

using ::testing::HasSubstr;

// `clusters` well-separated Gaussian blobs of `per` points in 3-D.
Eigen::MatrixXd Blobs(int clusters, int per, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  std::uniform_real_distribution<double> u(-100, 100);
  Eigen::MatrixXd x(clusters * per, 3);
  for (int c = 0; c < clusters; ++c) {
    const Eigen::RowVector3d centre(u(rng), u(rng), u(rng));
    for (int t = 0; t < per; ++t) x.row(c * per + t) = centre + 0.1 * Eigen::RowVector3d(g(rng), g(rng), g(rng));
  }
  return x;
}

// Kruskal over the complete component graph with the shortest inter-component distances.
double BruteForceMstWeight(const Eigen::MatrixXd& x, const std::vector<int>& labels, int c) {
  std::vector<std::tuple<double, int, int>> edges;
  for (int a = 0; a < c; ++a) {
    for (int b = a + 1; b < c; ++b) {
      double best = 1e300;
      for (int i = 0; i < x.rows(); ++i)
        for (int j = 0; j < x.rows(); ++j)
          if (labels[i] == a && labels[j] == b) best = std::min(best, (x.row(i) - x.row(j)).norm());
      edges.emplace_back(best, a, b);
    }
  }
  std::sort(edges.begin(), edges.end());
  std::vector<int> parent(c);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int v) {
    while (parent[v] != v) v = parent[v];
    return v;
  };
  double total = 0;
  for (auto [d, a, b] : edges) {
    if (find(a) != find(b)) {
      parent[find(a)] = find(b);
      total += d;
    }
  }
  return total;
}

TEST(GraphConnectTest, ComponentsAreLabelledInOrderOfTheirSmallestVertex) {
  Eigen::SparseMatrix<double> a(5, 5);
  a.insert(0, 3) = a.insert(3, 0) = 1;
  a.insert(1, 4) = a.insert(4, 1) = 1;
  std::vector<int> labels;
  EXPECT_EQ(ConnectedComponents(a, &labels), 3);
  EXPECT_EQ(labels, (std::vector<int>{0, 1, 2, 0, 1}));
}

TEST(GraphConnectTest, MstJoinsElevenComponentsWithTheMinimumTotalLength) {
  const Eigen::MatrixXd x = Blobs(11, 12, 7);
  ConnectedKnnOptions o;
  o.k = 4;
  o.mode = ConnectMode::kMst;
  ConnectReport report;
  auto w = MakeConnectedKnnGraph(x, o, "test", &report);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(report.components, 11);
  ASSERT_EQ(report.added_edges.size(), 10u);
  std::vector<int> labels;
  EXPECT_EQ(ConnectedComponents(*w, &labels), 1);

  // Same total as Kruskal over the components; every added edge is in the graph with weight 1.
  ConnectedKnnOptions plain = o;
  plain.mode = ConnectMode::kError;
  KnnOptions ko;
  ko.k = 4;
  auto g = ExactKnn(x, ko);
  ASSERT_TRUE(g.ok());
  std::vector<int> before;
  ASSERT_EQ(ConnectedComponents(SymmetricAdjacency(*g, 4, EdgeWeight::kBinary, 0), &before), 11);
  double total = 0;
  for (const ComponentEdge& e : report.added_edges) {
    EXPECT_LT(e.i, e.j);
    EXPECT_NE(before[e.i], before[e.j]);
    EXPECT_NEAR(e.distance, (x.row(e.i) - x.row(e.j)).norm(), 1e-9);
    EXPECT_EQ(w->coeff(e.i, e.j), 1.0);
    EXPECT_EQ(w->coeff(e.j, e.i), 1.0);
    total += e.distance;
  }
  EXPECT_NEAR(total, BruteForceMstWeight(x, before, 11), 1e-9);
  EXPECT_EQ(w->nonZeros(), SymmetricAdjacency(*g, 4, EdgeWeight::kBinary, 0).nonZeros() + 20);
  EXPECT_THAT(report.Json(), HasSubstr("\"mode\":\"mst\",\"components\":11,\"k\":4,\"k_used\":4,\"added_edges\":[["));

  // Error mode fails naming the count and the caller's reason.
  auto refused = MakeConnectedKnnGraph(x, plain, "the problem is unbounded", nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(), "the 4-NN graph has 11 connected components; the problem is unbounded");
}

TEST(GraphConnectTest, ConnectedGraphIsUnchangedAndGaussianEdgesGetGaussianWeights) {
  Eigen::MatrixXd x(6, 1);
  x << 0, 1, 2, 10, 11, 12;
  ConnectedKnnOptions o;
  o.k = 1;
  o.mode = ConnectMode::kMst;
  o.weight = EdgeWeight::kGaussian;
  o.sigma = 5.0;
  ConnectReport report;
  auto w = MakeConnectedKnnGraph(x, o, "x", &report);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(report.added_edges.size(), 1u);
  EXPECT_EQ(report.added_edges[0], (ComponentEdge{2, 3, 8.0}));
  EXPECT_NEAR(w->coeff(2, 3), std::exp(-64.0 / 50.0), 1e-15);

  o.k = 3;  // already connected: nothing added
  auto same = MakeConnectedKnnGraph(x, o, "x", &report);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(report.components, 1);
  EXPECT_TRUE(report.added_edges.empty());
}

TEST(GraphConnectTest, GrowKStopsAtTheFirstConnectedKOrFailsAtTheBound) {
  const Eigen::MatrixXd x = Blobs(3, 6, 3);  // k = 6 reaches another blob
  ConnectedKnnOptions o;
  o.k = 2;
  o.mode = ConnectMode::kGrowK;
  ConnectReport report;
  auto w = MakeConnectedKnnGraph(x, o, "x", &report);  // bound 8
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(report.components, 3);
  EXPECT_GE(report.k_used, 6);
  std::vector<int> labels;
  EXPECT_EQ(ConnectedComponents(*w, &labels), 1);
  o.max_k = 4;
  auto capped = MakeConnectedKnnGraph(x, o, "x", &report);
  ASSERT_FALSE(capped.ok());
  EXPECT_THAT(capped.status().message(), HasSubstr("the 4-NN graph (grow_k's bound, from k = 2) has 3 connected"));
}

}  // namespace
}  // namespace kls
