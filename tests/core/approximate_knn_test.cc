// Approximate k-NN graphs (core/graph/approximate_knn.h) against the exact
// graph: recall, exact distances, layout, determinism, the recall check itself,
// and the graph builder's automatic choice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <random>
#include <set>

#include "core/data/synthetic.h"
#include "core/graph/approximate_knn.h"
#include "core/graph/knn.h"
#include "core/graph/laplacian.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

// Clustered points: `centers` Gaussian blobs in d dimensions, so the cells of
// the IVF search have structure to find (and boundaries to get wrong).
Eigen::MatrixXd Blobs(int n, int d, int centers, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd c(centers, d);
  for (int i = 0; i < centers; ++i)
    for (int j = 0; j < d; ++j) c(i, j) = 4.0 * g(rng);
  Eigen::MatrixXd x(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x(i, j) = c(i % centers, j) + g(rng);
  return x;
}

// Fraction of the exact neighbours (by distance, ties allowed) found — computed
// here from the full exact graph, independently of MeasureKnnRecall.
double FullRecall(const KnnGraph& approx, const KnnGraph& exact) {
  double hits = 0;
  for (int i = 0; i < exact.num_points; ++i) {
    const double kth = exact.distance(i, exact.k - 1);
    for (int t = 0; t < approx.k; ++t) hits += approx.distance(i, t) <= kth * (1 + 1e-12) + 1e-12 ? 1 : 0;
  }
  return hits / (static_cast<double>(exact.num_points) * exact.k);
}

void ExpectWellFormed(const Eigen::MatrixXd& x, const KnnGraph& g) {
  ASSERT_EQ(g.num_points, x.rows());
  for (int i = 0; i < g.num_points; ++i) {
    std::set<int> seen;
    for (int t = 0; t < g.k; ++t) {
      const int j = g.neighbor(i, t);
      ASSERT_NE(j, i) << "point " << i << " is its own neighbour";
      ASSERT_TRUE(seen.insert(j).second) << "point " << i << " lists " << j << " twice";
      EXPECT_NEAR(g.distance(i, t), (x.row(i) - x.row(j)).norm(), 1e-12 * (1 + g.distance(i, t)));
      if (t > 0) EXPECT_LE(g.distance(i, t - 1), g.distance(i, t));
    }
  }
}

TEST(IvfKnn, FindsAlmostAllExactNeighboursWithExactDistances) {
  const Eigen::MatrixXd x = Blobs(4000, 12, 20, 1);
  KnnOptions ko;
  ko.k = 10;
  const KnnGraph exact = ExactKnn(x, ko).value();
  IvfOptions o;
  o.k = 10;
  o.cell_size = 100;  // 40 cells
  o.probes = 6;
  const KnnGraph approx = IvfKnn(x, o).value();
  ExpectWellFormed(x, approx);
  EXPECT_GE(FullRecall(approx, exact), 0.97);
  // Probing every cell is the exact search.
  // Probing every cell is the exact search, up to float32 ranking of exact ties.
  o.probes = 1000;
  EXPECT_GE(FullRecall(IvfKnn(x, o).value(), exact), 0.9999);
}

// Two Gaussian classes in d dimensions (bench/million_e2e_data.py's dense
// data): class centres N(0, 1.5² I), points centre + N(0, I). Little structure
// below the classes, so a point's neighbours are spread over many cells.
Eigen::MatrixXd GaussianClasses(int n, int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd c(2, d);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < d; ++j) c(i, j) = 1.5 * g(rng);
  Eigen::MatrixXd x(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x(i, j) = c(i % 2, j) + g(rng);
  return x;
}

TEST(IvfKnn, AutomaticProbesAreTheFewestReachingTheTargetRecall) {
  // 4,000 points in 32 dimensions, cells of 16: 250 cells. The former rule
  // ⌈24 · (cells / 100)^¼⌉ = 31 probes finds too few neighbours here.
  const Eigen::MatrixXd x = GaussianClasses(4000, 32, 5);
  KnnOptions ko;
  ko.k = 5;
  const KnnGraph exact = ExactKnn(x, ko).value();
  IvfOptions o;
  o.k = 5;
  o.cell_size = 16;
  o.probes = 31;
  const double formula = FullRecall(IvfKnn(x, o).value(), exact);
  EXPECT_LT(formula, 0.9) << "the old formula's probes";
  // Automatic, with every point in the sample: the predicted recall is the
  // search's recall, the count the smallest that reaches the target.
  o.probes = 0;
  o.probe_sample = 4000;
  IvfReport rep;
  const KnnGraph g = IvfKnn(x, o, &rep).value();
  ExpectWellFormed(x, g);
  EXPECT_EQ(rep.cells, 250);
  EXPECT_EQ(rep.probe_sample, 4000);
  EXPECT_GT(rep.probes, 31);
  EXPECT_LT(rep.probes, 250);
  const double automatic = FullRecall(g, exact);
  EXPECT_GE(automatic, o.probe_recall_target - 1e-3);
  EXPECT_NEAR(automatic, rep.probe_sample_recall, 2e-3);
  EXPECT_NEAR(MeasureKnnRecall(x, g, 4000, 1).value().recall, automatic, 1e-12);
  // The same search as the measured count given explicitly; one probe fewer misses the target.
  o.probes = rep.probes;
  EXPECT_EQ(IvfKnn(x, o).value().indices, g.indices);
  o.probes = rep.probes - 1;
  EXPECT_LT(FullRecall(IvfKnn(x, o).value(), exact), o.probe_recall_target);
  // A sample of 512 (the default) lands within a few standard errors and
  // keeps the graph above the 0.95 bar.
  o.probes = 0;
  o.probe_sample = 512;
  const KnnGraph sampled = IvfKnn(x, o, &rep).value();
  EXPECT_EQ(rep.probe_sample, 512);
  EXPECT_GE(MeasureKnnRecall(x, sampled, 4000, 1).value().recall, 0.95);
}

TEST(IvfKnn, AutomaticProbesFollowTheData) {
  // Well-separated blobs: the neighbours sit in few cells, so few probes suffice.
  const Eigen::MatrixXd x = Blobs(4000, 32, 20, 6);
  KnnOptions ko;
  ko.k = 5;
  IvfOptions o;
  o.k = 5;
  o.cell_size = 16;
  IvfReport rep;
  const KnnGraph g = IvfKnn(x, o, &rep).value();
  EXPECT_LT(rep.probes, 60);
  EXPECT_GE(rep.probe_sample_recall, o.probe_recall_target);
  EXPECT_GE(FullRecall(g, ExactKnn(x, ko).value()), 0.95);
  // Given probes are used as given, and reported.
  o.probes = 7;
  ASSERT_TRUE(IvfKnn(x, o, &rep).ok());
  EXPECT_EQ(rep.probes, 7);
  EXPECT_EQ(rep.probe_sample, 0);
  // The options are checked.
  o.probe_recall_target = 1.5;
  EXPECT_THAT(IvfKnn(x, o).status().message(), HasSubstr("ivf.probe_recall_target"));
  o.probe_recall_target = 0.97;
  o.probe_sample = 0;
  EXPECT_THAT(IvfKnn(x, o).status().message(), HasSubstr("ivf.probe_sample = 0"));
}

TEST(IvfKnn, MoreProbesFindMore) {
  const Eigen::MatrixXd x = Blobs(3000, 8, 30, 2);
  KnnOptions ko;
  ko.k = 8;
  const KnnGraph exact = ExactKnn(x, ko).value();
  IvfOptions o;
  o.k = 8;
  o.cell_size = 50;
  double previous = 0;
  for (int probes : {1, 3, 9, 27}) {
    o.probes = probes;
    const double recall = FullRecall(IvfKnn(x, o).value(), exact);
    EXPECT_GE(recall, previous - 0.002) << "probes " << probes;
    previous = recall;
  }
  EXPECT_GE(previous, 0.99);
}

TEST(IvfKnn, DoesNotDependOnTheThreadCount) {
  const Eigen::MatrixXd x = Blobs(2500, 6, 10, 3);
  IvfOptions o;
  o.k = 7;
  o.cell_size = 64;
  o.probes = 4;
  o.num_threads = 1;
  const KnnGraph one = IvfKnn(x, o).value();
  o.num_threads = 3;
  const KnnGraph three = IvfKnn(x, o).value();
  EXPECT_EQ(one.indices, three.indices);
  EXPECT_EQ(one.distances, three.distances);
  // Automatic probes: the measurement does not depend on threads either.
  o.probes = 0;
  IvfReport r1, r3;
  const KnnGraph auto_three = IvfKnn(x, o, &r3).value();
  o.num_threads = 1;
  const KnnGraph auto_one = IvfKnn(x, o, &r1).value();
  EXPECT_EQ(r1.probes, r3.probes);
  EXPECT_EQ(r1.probe_sample_recall, r3.probe_sample_recall);
  EXPECT_EQ(auto_one.indices, auto_three.indices);
}

TEST(IvfKnn, ToleratesDuplicatesAndTinyCells) {
  // Binary one-hot rows (adult-like): most distances tie, many rows repeat.
  const Dataset d = MakeSyntheticByName("adult_like", 1500, 4).value();
  IvfOptions o;
  o.k = 20;
  o.cell_size = 16;
  o.probes = 1;  // fewer than k + 1 points in a cell's probes: more cells are added
  const KnnGraph g = IvfKnn(d.features, o).value();
  ExpectWellFormed(d.features, g);
  // The recall check on every point equals the recall against the full exact graph.
  KnnOptions ko;
  ko.k = 20;
  const KnnRecall r = MeasureKnnRecall(d.features, g, 1500, 1).value();
  EXPECT_EQ(r.sample, 1500);
  EXPECT_NEAR(r.recall, FullRecall(g, ExactKnn(d.features, ko).value()), 1e-12);
  EXPECT_GT(r.recall, 0.3);
}

TEST(IvfKnn, ErrorsNameTheField) {
  const Eigen::MatrixXd x = Blobs(100, 3, 2, 5);
  IvfOptions o;
  o.k = 100;
  EXPECT_THAT(IvfKnn(x, o).status().message(), HasSubstr("k = 100"));
  o.k = 5;
  o.probes = -1;
  EXPECT_THAT(IvfKnn(x, o).status().message(), HasSubstr("ivf.probes = -1"));
  o.probes = 4;
  o.cell_size = 3;
  EXPECT_THAT(IvfKnn(x, o).status().message(), HasSubstr("ivf.cell_size = 3"));
  o.cell_size = 50;
  Eigen::MatrixXd bad = x;
  bad(3, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(IvfKnn(bad, o).status().message(), HasSubstr("NaN"));
  EXPECT_THAT(ParseKnnMethod("annoy").status().message(), HasSubstr("\"annoy\""));
}

TEST(ExactKnnOfRows, EqualsTheRowsOfTheFullGraph) {
  const Eigen::MatrixXd x = Blobs(700, 5, 4, 6);
  KnnOptions ko;
  ko.k = 6;
  const KnnGraph full = ExactKnn(x, ko).value();
  const std::vector<int> rows = {0, 5, 699, 123, 5};
  const KnnGraph some = ExactKnnOfRows(x, rows, ko).value();
  ASSERT_EQ(some.num_points, 5);
  for (size_t t = 0; t < rows.size(); ++t) {
    for (int s = 0; s < ko.k; ++s) {
      EXPECT_EQ(some.neighbor(static_cast<int>(t), s), full.neighbor(rows[t], s));
      EXPECT_EQ(some.distance(static_cast<int>(t), s), full.distance(rows[t], s));
    }
  }
  EXPECT_THAT(ExactKnnOfRows(x, {700}, ko).status().message(), HasSubstr("700"));
}

TEST(MeasureKnnRecall, IsOneForTheExactGraphAndCountsWhatIsMissing) {
  const Eigen::MatrixXd x = Blobs(1200, 4, 6, 7);
  KnnOptions ko;
  ko.k = 5;
  KnnGraph g = ExactKnn(x, ko).value();
  const KnnRecall exact = MeasureKnnRecall(x, g, 300, 9).value();
  EXPECT_EQ(exact.sample, 300);
  EXPECT_DOUBLE_EQ(exact.recall, 1.0);
  EXPECT_DOUBLE_EQ(exact.min_recall, 1.0);
  // Replace every point's nearest neighbour by its farthest point: one of five
  // is wrong everywhere.
  for (int i = 0; i < g.num_points; ++i) {
    int far = 0;
    double dmax = -1;
    for (int j = 0; j < g.num_points; ++j) {
      const double dj = (x.row(i) - x.row(j)).norm();
      if (dj > dmax) dmax = dj, far = j;
    }
    g.indices[static_cast<size_t>(i) * 5] = far;
    g.distances[static_cast<size_t>(i) * 5] = dmax;
  }
  const KnnRecall broken = MeasureKnnRecall(x, g, 1200, 9).value();
  EXPECT_NEAR(broken.recall, 0.8, 1e-12);
  EXPECT_NEAR(broken.min_recall, 0.8, 1e-12);
}

TEST(BuildGraph, ChoosesTheSearchBySizeAndReportsRecall) {
  const Eigen::MatrixXd x = Blobs(3000, 6, 12, 8);
  GraphOptions go;
  go.k = 8;
  const Graph small = BuildGraph(x, go).value();
  EXPECT_EQ(small.knn_method, KnnMethod::kExact);
  EXPECT_EQ(small.recall.sample, 0);
  go.approximate_above = 2000;  // 3,000 points: above → IVF
  go.recall_sample = 500;
  const Graph large = BuildGraph(x, go).value();
  EXPECT_EQ(large.knn_method, KnnMethod::kIvf);
  EXPECT_EQ(large.recall.sample, 500);
  EXPECT_GE(large.recall.recall, 0.95);
  EXPECT_EQ(large.ivf.cells, 3);  // ~1,000 points a cell
  EXPECT_GE(large.ivf.probes, 1);
  EXPECT_LE(large.ivf.probes, large.ivf.cells);
  EXPECT_EQ(small.ivf.cells, 0);  // not an IVF search
  EXPECT_EQ(large.laplacian.rows(), 3000);
  go.knn_method = KnnMethod::kExact;  // forced: exact even above the threshold
  EXPECT_EQ(BuildGraph(x, go).value().knn_method, KnnMethod::kExact);
  go.recall_sample = -1;
  EXPECT_THAT(BuildGraph(x, go).status().message(), HasSubstr("graph.recall_sample = -1"));
}

TEST(HnswKnn, AgreesWithTheExactGraphWhenFaissIsBuiltIn) {
  const Eigen::MatrixXd x = Blobs(2000, 8, 10, 10);
  HnswOptions o;
  o.k = 10;
  if (!HaveHnsw()) {
    EXPECT_EQ(HnswKnn(x, o).status().code(), StatusCode::kFailedPrecondition);
    GTEST_SKIP() << "built without FAISS";
  }
  KnnOptions ko;
  ko.k = 10;
  const KnnGraph approx = HnswKnn(x, o).value();
  ExpectWellFormed(x, approx);
  EXPECT_GE(FullRecall(approx, ExactKnn(x, ko).value()), 0.95);
}

}  // namespace
}  // namespace kls
