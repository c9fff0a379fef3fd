// Warm starts (options.initial_factor) of KL-ADMM, BCDNPKL and SimpleNPKL on
// iris: learning again after 10 % more pairs from the kernel learned without
// them reaches the cold start's objective in fewer iterations; restarting from
// the optimum itself stops at once; a factor of the wrong size is rejected;
// WarmStartRows fits a factor to any rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/graph/laplacian.h"
#include "core/npkl/bcd_npkl.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/simple_npkl.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

struct Family {
  const char* name;
  EdgeWeight weight;
  double delta;
  std::function<StatusOr<PairwiseConstraints>(const std::vector<int>&)> protocol;  // the family's paper's
  std::function<StatusOr<NpklResult>(const NpklProblem&, InitialFactor)> solve;
};

std::vector<Family> Families() {
  return {
      {"kl_admm", EdgeWeight::kGaussian, 0.0, [](const std::vector<int>& y) { return GenerateAdmmProtocol(y, 3); },
       [](const NpklProblem& p, InitialFactor f) {
         KlAdmmOptions o;
         o.gamma = 10;
         o.initial_factor = std::move(f);
         return SolveKlAdmm(p, o);
       }},
      {"bcd_npkl", EdgeWeight::kBinary, 0.5, [](const std::vector<int>& y) { return GenerateBcdProtocol(y, 0.3, 3); },
       [](const NpklProblem& p, InitialFactor f) {
         BcdNpklOptions o;
         o.initial_factor = std::move(f);
         return SolveBcdNpkl(p, o);
       }},
      {"simple_npkl", EdgeWeight::kBinary, 0.0,
       [](const std::vector<int>& y) { return GenerateComponentProtocol(y, 0.7, 3); },
       [](const NpklProblem& p, InitialFactor f) {
         SimpleNpklOptions o;
         o.b = 150;  // B = n: a run of several iterations (B = 1 converges at α⁰ on iris)
         o.initial_factor = std::move(f);
         return SolveSimpleNpkl(p, o);
       }},
  };
}

TEST(WarmStartTest, TenPercentMorePairsReachTheColdObjectiveInFewerIterations) {
  auto iris = ReadCsvFile("data/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  for (const Family& f : Families()) {
    SCOPED_TRACE(f.name);
    auto all = f.protocol(iris->labels);
    ASSERT_TRUE(all.ok());
    PairwiseConstraints base;  // without every 11th pair: `all` is it plus 10 %
    for (int k = 0; k < all->size(); ++k)
      if (k % 11 != 0) base.pairs.push_back(all->pairs[k]);
    GraphOptions g;
    g.k = 5;
    g.weight = f.weight;
    g.delta = f.delta;
    auto graph = BuildGraph(iris->features, g);
    ASSERT_TRUE(graph.ok());
    auto previous = f.solve(NpklProblem{graph->laplacian, base}, nullptr);
    ASSERT_TRUE(previous.ok()) << previous.status();
    const NpklProblem full{graph->laplacian, *all};
    auto cold = f.solve(full, nullptr);
    ASSERT_TRUE(cold.ok()) << cold.status();
    auto warm = f.solve(full, std::make_shared<const Eigen::MatrixXd>(previous->kernel.embedding()));
    ASSERT_TRUE(warm.ok()) << warm.status();
    EXPECT_EQ(warm->stats.termination, Termination::kConverged);
    // The measure: iterations to the cold optimum within 1e-4.
    const double target = cold->stats.final_objective;
    EXPECT_LT(IterationsToObjective(warm->stats, target, 1e-4), IterationsToObjective(cold->stats, target, 1e-4));
    const double scale = std::max(1.0, std::abs(cold->stats.final_objective));
    EXPECT_NEAR(warm->stats.final_objective, cold->stats.final_objective, 1e-3 * scale);
    // From the optimum itself: (almost) nothing left to do.
    auto again = f.solve(full, std::make_shared<const Eigen::MatrixXd>(cold->kernel.embedding()));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_LE(again->stats.iterations, std::max(2, cold->stats.iterations / 4));
    EXPECT_NEAR(again->stats.final_objective, cold->stats.final_objective, 1e-3 * scale);
  }
}

TEST(WarmStartTest, AFactorOfTheWrongSizeIsInvalidArgument) {
  auto iris = ReadCsvFile("data/iris.csv");
  ASSERT_TRUE(iris.ok());
  auto c = GenerateBcdProtocol(iris->labels, 0.3, 1);
  ASSERT_TRUE(c.ok());
  auto graph = BuildGraph(iris->features, GraphOptions());
  ASSERT_TRUE(graph.ok());
  const NpklProblem p{graph->laplacian, *c};
  auto wrong = std::make_shared<const Eigen::MatrixXd>(Eigen::MatrixXd::Ones(149, 3));
  for (const Family& f : Families()) {
    auto r = f.solve(p, wrong);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << f.name;
    EXPECT_THAT(r.status().message(), HasSubstr("options.initial_factor has 149 rows for 150 points")) << f.name;
  }
}

TEST(WarmStartTest, WarmStartRowsKeepsPadsOrCompressesTheFactor) {
  Eigen::MatrixXd f(4, 2);
  f << 1, 0, 0, 2, 1, 1, 3, 0;
  const std::vector<int> points = {3, 0, 2};
  const Eigen::MatrixXd pad = Eigen::MatrixXd::Constant(4, 3, 5.0);
  const Eigen::MatrixXd same = WarmStartRows(f, points, 2, pad);
  EXPECT_EQ(same(0, 0), 3);
  EXPECT_EQ(same(1, 2), 1);
  const Eigen::MatrixXd padded = WarmStartRows(f, points, 4, pad);
  EXPECT_EQ(padded.rows(), 4);
  EXPECT_DOUBLE_EQ(padded(3, 1), 5e-3);
  // Rank 1: the best rank-1 approximation of K restricted to the points.
  const Eigen::MatrixXd one = WarmStartRows(f, points, 1, pad);
  Eigen::MatrixXd sub(3, 2);
  for (int k = 0; k < 3; ++k) sub.row(k) = f.row(points[k]);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(sub * sub.transpose());
  const double top = eig.eigenvalues()(2);
  const Eigen::MatrixXd best = top * eig.eigenvectors().col(2) * eig.eigenvectors().col(2).transpose();
  EXPECT_LE((one.transpose() * one - best).norm(), 1e-12 * best.norm());
}

}  // namespace
}  // namespace kls
