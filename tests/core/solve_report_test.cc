// SolveReport (core/common/solve_control.h): one row per iteration a run
// reported, with exactly the values of that iteration's ProgressEvent and the
// objective_history entry of that iteration — for the solvers on the
// iteration driver (KL-ADMM, BCDNPKL, SimpleNPKL) and for solvers that report
// through ReportIteration directly (NPK ranking, VisualRank); a resumed run
// holds the rows from its resume point on.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/common/solve_control.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/graph/laplacian.h"
#include "core/npkl/bcd_npkl.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/simple_npkl.h"
#include "core/ranking/npk_ranking.h"
#include "core/ranking/visual_rank.h"

namespace kls {
namespace {

// A SolveControl that records every progress event.
SolveControl Recording(std::vector<ProgressEvent>* events) {
  SolveControl c;
  c.progress = [events](const ProgressEvent& e) { events->push_back(e); };
  return c;
}

bool SameNumber(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The rows are the events, value for value.
void ExpectRowsAreEvents(const SolveReport& stats, const std::vector<ProgressEvent>& events) {
  ASSERT_EQ(stats.rows.size(), events.size());
  for (size_t k = 0; k < events.size(); ++k) {
    SCOPED_TRACE("row " + std::to_string(k));
    const IterationRow& row = stats.rows[k];
    EXPECT_EQ(row.iteration, events[k].iteration);
    EXPECT_TRUE(SameNumber(row.objective, events[k].objective));
    EXPECT_TRUE(SameNumber(row.primal_residual, events[k].primal_residual));
    EXPECT_TRUE(SameNumber(row.dual_residual, events[k].dual_residual));
    EXPECT_TRUE(SameNumber(row.gap, events[k].gap));
    EXPECT_TRUE(SameNumber(row.step, events[k].step));
    EXPECT_EQ(row.seconds, events[k].elapsed_seconds);
  }
}

// One row per iteration of this run, numbered resumed_from_iteration + 1, …,
// iterations, each with the objective_history entry of its iteration (the
// last entry is iteration stats.iterations; a history may start with the
// initial iterate's entry).
void ExpectOneRowPerIteration(const SolveReport& stats) {
  ASSERT_GT(stats.iterations, stats.resumed_from_iteration);
  ASSERT_EQ(stats.rows.size(), static_cast<size_t>(stats.iterations - stats.resumed_from_iteration));
  const int history = static_cast<int>(stats.objective_history.size());
  for (size_t k = 0; k < stats.rows.size(); ++k) {
    SCOPED_TRACE("row " + std::to_string(k));
    const IterationRow& row = stats.rows[k];
    EXPECT_EQ(row.iteration, stats.resumed_from_iteration + 1 + static_cast<int>(k));
    if (k > 0) {
      EXPECT_GT(row.iteration, stats.rows[k - 1].iteration);
    }
    const int entry = history - 1 - (stats.iterations - row.iteration);
    ASSERT_GE(entry, 0);
    EXPECT_EQ(row.objective, stats.objective_history[entry]);
  }
}

template <typename R>
void CheckFreshRun(const StatusOr<R>& r, const std::vector<ProgressEvent>& events) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GE(r->stats.iterations, 3) << "too few iterations to check the rows";
  EXPECT_EQ(r->stats.resumed_from_iteration, 0);
  ExpectOneRowPerIteration(r->stats);
  ExpectRowsAreEvents(r->stats, events);
}

NpklProblem IrisProblem(int per_class, bool admm_protocol) {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  std::vector<int> rows, seen(data->num_classes(), 0);
  for (int i = 0; i < data->num_points(); ++i) {
    if (seen[data->labels[i]]++ < per_class) rows.push_back(i);
  }
  Eigen::MatrixXd x(static_cast<int>(rows.size()), data->dim());
  std::vector<int> labels;
  for (size_t s = 0; s < rows.size(); ++s) {
    x.row(static_cast<int>(s)) = data->features.row(rows[s]);
    labels.push_back(data->labels[rows[s]]);
  }
  GraphOptions g;
  g.k = 5;
  g.weight = EdgeWeight::kGaussian;
  g.num_threads = 1;
  auto graph = BuildGraph(x, g);
  EXPECT_TRUE(graph.ok()) << graph.status();
  auto constraints = admm_protocol ? GenerateAdmmProtocol(labels, 3) : GenerateBcdProtocol(labels, 0.3, 3);
  EXPECT_TRUE(constraints.ok()) << constraints.status();
  NpklProblem p;
  p.laplacian = graph->laplacian;
  p.constraints = *constraints;
  return p;
}

KlAdmmOptions AdmmOptions() {
  KlAdmmOptions o;
  o.gamma = 10.0;
  o.num_threads = 1;
  o.max_iterations = 400;
  return o;
}

TEST(SolveReport, KlAdmmKeepsOneRowPerIteration) {
  const NpklProblem p = IrisProblem(15, /*admm_protocol=*/true);
  std::vector<ProgressEvent> events;
  CheckFreshRun(SolveKlAdmm(p, AdmmOptions(), Recording(&events)), events);
}

TEST(SolveReport, AResumedKlAdmmRunKeepsTheRowsFromItsResumePoint) {
  const NpklProblem p = IrisProblem(15, /*admm_protocol=*/true);
  std::vector<Checkpoint> checkpoints;
  SolveControl sink;
  sink.checkpoint_interval_seconds = 1e-9;
  sink.checkpoint = [&](const Checkpoint& k) { checkpoints.push_back(k); };
  auto fresh = SolveKlAdmm(p, AdmmOptions(), sink);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_GE(checkpoints.size(), 2u);
  for (const Checkpoint& k : {checkpoints.front(), checkpoints[checkpoints.size() / 2]}) {
    SCOPED_TRACE("resumed from iteration " + std::to_string(k.iteration));
    std::vector<ProgressEvent> events;
    SolveControl control = Recording(&events);
    control.resume_from = std::make_shared<const Checkpoint>(k);
    auto resumed = SolveKlAdmm(p, AdmmOptions(), control);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    ASSERT_EQ(resumed->stats.resumed_from_iteration, k.iteration);
    ExpectOneRowPerIteration(resumed->stats);
    ExpectRowsAreEvents(resumed->stats, events);
    ASSERT_FALSE(resumed->stats.rows.empty());
    EXPECT_EQ(resumed->stats.rows.front().iteration, k.iteration + 1);
    // The same rows as the uninterrupted run's last ones (bit-identical resume), but the times.
    const std::vector<IterationRow>& all = fresh->stats.rows;
    ASSERT_EQ(all.size(), static_cast<size_t>(fresh->stats.iterations));
    for (const IterationRow& row : resumed->stats.rows) {
      const IterationRow& same = all[static_cast<size_t>(row.iteration - 1)];
      EXPECT_EQ(row.iteration, same.iteration);
      EXPECT_EQ(row.objective, same.objective);
      EXPECT_EQ(row.primal_residual, same.primal_residual);
    }
  }
}

TEST(SolveReport, BcdNpklKeepsOneRowPerSweep) {
  const NpklProblem p = IrisProblem(15, /*admm_protocol=*/false);
  BcdNpklOptions o;
  o.num_threads = 1;
  o.max_iterations = 300;
  std::vector<ProgressEvent> events;
  CheckFreshRun(SolveBcdNpkl(p, o, Recording(&events)), events);
}

TEST(SolveReport, SimpleNpklKeepsOneRowPerIterationAfterItsInitialEntry) {
  const NpklProblem p = IrisProblem(10, /*admm_protocol=*/false);
  SimpleNpklOptions o;
  o.newton = false;  // gradient steps: more than a couple of iterations
  o.tolerance = 1e-6;
  o.max_iterations = 500;
  std::vector<ProgressEvent> events;
  auto r = SolveSimpleNpkl(p, o, Recording(&events));
  CheckFreshRun(r, events);
  ASSERT_TRUE(r.ok());
  // Its history starts with the initial iterate: row k is entry k + 1.
  ASSERT_EQ(r->stats.objective_history.size(), r->stats.rows.size() + 1);
  EXPECT_EQ(r->stats.rows.front().objective, r->stats.objective_history[1]);
}

TEST(SolveReport, NpkRankingKeepsOneRowPerIteration) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> g;
  const int n = 40;
  Eigen::MatrixXd x(n, 3), t(n, 6);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) x(i, j) = g(rng);
    for (int j = 0; j < 6; ++j) t(i, j) = std::abs(g(rng));
  }
  NpkRankingOptions o;
  o.low_rank = 10;
  o.max_iterations = 2000;
  std::vector<ProgressEvent> events;
  auto r = SolveNpkRanking(x, t * t.transpose(), o, Recording(&events));
  CheckFreshRun(r, events);
  ASSERT_TRUE(r.ok());
  // Its certificate is in the report: the last iterate's gap.
  EXPECT_EQ(r->stats.certificate.gap, r->stats.rows.back().gap) << r->stats.certificate.Json();
}

TEST(SolveReport, VisualRankKeepsOneRowPerIteration) {
  std::mt19937_64 rng(2);
  std::normal_distribution<double> g;
  Eigen::MatrixXd x(30, 4);
  for (int i = 0; i < x.rows(); ++i)
    for (int j = 0; j < x.cols(); ++j) x(i, j) = g(rng);
  std::vector<ProgressEvent> events;
  auto r = SolveVisualRank(x * x.transpose(), Eigen::VectorXd(), VisualRankOptions(), Recording(&events));
  CheckFreshRun(r, events);
  ASSERT_TRUE(r.ok());
  // VisualRank has no certificate: the default one.
  EXPECT_TRUE(std::isnan(r->stats.certificate.gap));
  EXPECT_FALSE(r->stats.certificate.certified);
}

}  // namespace
}  // namespace kls
