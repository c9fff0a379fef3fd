// Resumable solves (SolveControl::checkpoint / resume_from, core/common/solve_control.h):
// for every solver that checkpoints, a run that records its checkpoints ends
// exactly as a run without a sink; a run resumed from one of them continues
// the iteration count (stats.resumed_from_iteration) and ends where the
// uninterrupted run ends (bit-identical where the solver is deterministic,
// else within its tolerance); and a checkpoint of another problem or options
// (fingerprint), a truncated one, one with trailing bytes or another format
// tag is ignored: the solve starts afresh and equals a fresh run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/solve_control.h"
#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/graph/laplacian.h"
#include "core/embed/embedding.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/onk.h"
#include "core/npkl/bcd_npkl.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/simple_npkl.h"
#include "core/qsdp/qsdp_ipm.h"
#include "core/qsdp/qsdp_solver.h"
#include "core/qsdp/qsdp_subspace.h"
#include "core/qsdp/reg_problems.h"

namespace kls {
namespace {

// ---------------------------------------------------------------------------
// Harness

Dataset LoadIris() {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  return *data;
}

// The first `per_class` rows of every class, in order.
Dataset IrisSubset(int per_class) {
  const Dataset iris = LoadIris();
  std::vector<int> rows, seen(iris.num_classes(), 0);
  for (int i = 0; i < iris.num_points(); ++i) {
    if (seen[iris.labels[i]]++ < per_class) rows.push_back(i);
  }
  Dataset out;
  out.features.resize(static_cast<int>(rows.size()), iris.dim());
  for (size_t s = 0; s < rows.size(); ++s) {
    out.features.row(static_cast<int>(s)) = iris.features.row(rows[s]);
    out.labels.push_back(iris.labels[rows[s]]);
  }
  return out;
}

SolveControl Recording(std::vector<Checkpoint>* out) {
  SolveControl c;
  c.checkpoint_interval_seconds = 1e-9;  // after every iteration that may checkpoint
  c.checkpoint = [out](const Checkpoint& k) { out->push_back(k); };
  return c;
}

SolveControl ResumingFrom(const Checkpoint& k) {
  SolveControl c;
  c.resume_from = std::make_shared<const Checkpoint>(k);
  return c;
}

// How a solver is run and its results compared, for one problem.
template <typename R>
struct Case {
  std::string tag;  // the solver's checkpoint format
  std::function<StatusOr<R>(const SolveControl&)> solve;
  // The same solver on another problem or options whose iterates have the
  // same shapes: its checkpoints must be rejected by the fingerprint.
  std::function<StatusOr<R>(const SolveControl&)> solve_other;
  // Solver-specific parts of the result (solution, residuals); `tolerance`
  // 0 means bit-identical.
  std::function<void(const R&, const R&, double tolerance)> expect_same_solution;
  // 0: a resumed run is bit-identical to the uninterrupted one. Otherwise the
  // relative difference allowed in the final objective and solution.
  double resume_tolerance = 0.0;
  // Iterations of the checkpoints to resume from (by position in the
  // recorded list, negative from the end); default first, middle, last.
  std::vector<int> positions = {0, -2, -1};
  size_t min_checkpoints = 3;
};

template <typename R>
R Run(const Case<R>& c, const SolveControl& control) {
  StatusOr<R> r = c.solve(control);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : R();
}

template <typename R>
void ExpectIdenticalRuns(const Case<R>& c, const R& a, const R& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.stats.termination, b.stats.termination);
  EXPECT_EQ(a.stats.iterations, b.stats.iterations);
  EXPECT_EQ(a.stats.objective_history, b.stats.objective_history);
  EXPECT_EQ(a.stats.final_objective, b.stats.final_objective);
  c.expect_same_solution(a, b, 0.0);
}

// SolveReport::rows are the run's progress events, value for value.
void ExpectRowsAreEvents(const SolveReport& stats, const std::vector<ProgressEvent>& events) {
  ASSERT_EQ(stats.rows.size(), events.size()) << "one row per progress event";
  for (size_t k = 0; k < events.size(); ++k) {
    EXPECT_EQ(stats.rows[k].iteration, events[k].iteration) << "row " << k;
    EXPECT_EQ(stats.rows[k].objective, events[k].objective) << "row " << k;
    EXPECT_EQ(stats.rows[k].seconds, events[k].elapsed_seconds) << "row " << k;
  }
}

double RelDiff(double a, double b) { return std::abs(a - b) / std::max(1.0, std::max(std::abs(a), std::abs(b))); }

template <typename R>
void CheckResumable(const Case<R>& c) {
  std::vector<ProgressEvent> fresh_events;
  SolveControl plain;
  plain.progress = [&](const ProgressEvent& e) { fresh_events.push_back(e); };
  const R fresh = Run(c, plain);
  ExpectRowsAreEvents(fresh.stats, fresh_events);
  std::vector<Checkpoint> recorded;
  const R with_sink = Run(c, Recording(&recorded));
  ExpectIdenticalRuns(c, fresh, with_sink, "a checkpoint sink changes nothing");
  std::printf("%s: %d iterations (%s), %zu checkpoints\n", c.tag.c_str(), fresh.stats.iterations,
              TerminationName(fresh.stats.termination), recorded.size());
  ASSERT_GE(recorded.size(), c.min_checkpoints) << c.tag << ": too few checkpoints; the run took "
                                                << fresh.stats.iterations << " iterations";
  int last = 0;
  for (const Checkpoint& k : recorded) {
    EXPECT_EQ(k.solver, c.tag);
    EXPECT_GT(k.iteration, last) << "checkpoint iterations increase";
    EXPECT_LT(k.iteration, fresh.stats.iterations + 1);
    EXPECT_FALSE(k.bytes.empty());
    last = k.iteration;
  }

  // Resumed runs continue the iteration count and end where the uninterrupted run ends.
  for (int pos : c.positions) {
    const int index = pos >= 0 ? pos : static_cast<int>(recorded.size()) + pos;
    ASSERT_GE(index, 0);
    ASSERT_LT(index, static_cast<int>(recorded.size()));
    const Checkpoint& k = recorded[index];
    SCOPED_TRACE(c.tag + " resumed from iteration " + std::to_string(k.iteration) + " of " +
                 std::to_string(fresh.stats.iterations));
    std::vector<Checkpoint> again;
    SolveControl control = Recording(&again);
    control.resume_from = std::make_shared<const Checkpoint>(k);
    std::vector<ProgressEvent> events;
    control.progress = [&](const ProgressEvent& e) { events.push_back(e); };
    const R resumed = Run(c, control);
    EXPECT_EQ(resumed.stats.resumed_from_iteration, k.iteration);
    ExpectRowsAreEvents(resumed.stats, events);  // from the resume point on: checkpoints store no rows
    // Progress numbering goes on: the events are the uninterrupted run's
    // last ones (a solver that reports per certified iterate re-reports the
    // checkpoint's own iterate, numbered k).
    if (!events.empty()) EXPECT_GE(events.front().iteration, k.iteration);
    if (c.resume_tolerance == 0.0) {
      ASSERT_LE(events.size(), fresh_events.size());
      const size_t skip = fresh_events.size() - events.size();
      for (size_t i = 0; i < events.size(); ++i) {
        EXPECT_EQ(events[i].iteration, fresh_events[skip + i].iteration) << "event " << i;
        EXPECT_EQ(events[i].objective, fresh_events[skip + i].objective) << "event " << i;
      }
    }
    for (const Checkpoint& k2 : again) EXPECT_GT(k2.iteration, k.iteration);
    if (c.resume_tolerance == 0.0) {
      ExpectIdenticalRuns(c, fresh, resumed, "bit-identical resume");
    } else {
      EXPECT_EQ(resumed.stats.termination, fresh.stats.termination);
      EXPECT_LE(RelDiff(resumed.stats.final_objective, fresh.stats.final_objective), c.resume_tolerance)
          << resumed.stats.final_objective << " vs " << fresh.stats.final_objective;
      EXPECT_GE(resumed.stats.iterations, k.iteration);
      c.expect_same_solution(fresh, resumed, c.resume_tolerance);
    }
    // A checkpoint of the resumed run resumes as well (a second interruption).
    if (!again.empty() && c.resume_tolerance == 0.0) {
      const R twice = Run(c, ResumingFrom(again.back()));
      EXPECT_EQ(twice.stats.resumed_from_iteration, again.back().iteration);
      ExpectIdenticalRuns(c, fresh, twice, "resumed twice");
    }
  }

  // Checkpoints that are not this run's are ignored.
  const Checkpoint& mid = recorded[recorded.size() / 2];
  std::vector<std::pair<std::string, Checkpoint>> bad;
  {
    Checkpoint k = mid;
    k.bytes.resize(k.bytes.size() - 5);
    bad.emplace_back("truncated by 5 bytes", k);
    k.bytes.resize(k.bytes.size() / 2);
    bad.emplace_back("truncated to half", k);
    k.bytes.resize(12);
    bad.emplace_back("truncated to 12 bytes", k);
  }
  {
    Checkpoint k = mid;
    k.bytes.push_back('\0');
    bad.emplace_back("a trailing byte", k);
  }
  {
    Checkpoint k = mid;
    k.solver = "kl_admm/1" == c.tag ? "bcd_npkl/1" : "kl_admm/1";
    bad.emplace_back("another format tag", k);
    k = mid;
    k.solver = c.tag + "x";
    bad.emplace_back("a newer format tag", k);
  }
  {
    Checkpoint k = mid;
    k.iteration += 1;
    bad.emplace_back("an iteration that disagrees with its bytes", k);
  }
  {
    Checkpoint k = mid;
    k.bytes[0] = static_cast<char>(k.bytes[0] ^ 0x5a);
    bad.emplace_back("a damaged magic number", k);
  }
  {
    std::vector<Checkpoint> foreign;
    StatusOr<R> other = c.solve_other(Recording(&foreign));
    ASSERT_TRUE(other.ok()) << other.status();
    ASSERT_FALSE(foreign.empty()) << "the other problem took " << other->stats.iterations << " iterations";
    bad.emplace_back("another problem or options (fingerprint)", foreign[foreign.size() / 2]);
  }
  for (const auto& [what, k] : bad) {
    const R r = Run(c, ResumingFrom(k));
    EXPECT_EQ(r.stats.resumed_from_iteration, 0) << c.tag << ": " << what;
    ExpectIdenticalRuns(c, fresh, r, c.tag + ": ignored checkpoint with " + what);
  }
}

void ExpectSameMatrix(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, double tolerance, const char* what) {
  ASSERT_EQ(a.rows(), b.rows()) << what;
  ASSERT_EQ(a.cols(), b.cols()) << what;
  if (tolerance == 0.0) {
    EXPECT_TRUE(a == b) << what << ": differs by " << (a - b).cwiseAbs().maxCoeff();
  } else {
    EXPECT_LE((a - b).norm(), tolerance * std::max(1.0, a.norm())) << what;
  }
}

void ExpectSameScalar(double a, double b, double tolerance, const char* what) {
  if (tolerance == 0.0) {
    if (std::isnan(a) && std::isnan(b)) return;
    EXPECT_EQ(a, b) << what;
  } else {
    EXPECT_LE(RelDiff(a, b), tolerance) << what << ": " << a << " vs " << b;
  }
}

// ---------------------------------------------------------------------------
// The NPKL solvers (core/npkl)

void ExpectSameNpkl(const NpklResult& a, const NpklResult& b, double tolerance) {
  // K = V Vᵀ: compare the Gram matrices when a tolerance is allowed (V is
  // determined up to rotation only then).
  if (tolerance == 0.0) {
    ExpectSameMatrix(a.kernel.embedding(), b.kernel.embedding(), 0.0, "embedding V");
  } else {
    ExpectSameMatrix(a.kernel.Dense(), b.kernel.Dense(), tolerance, "kernel K");
  }
  ExpectSameScalar(a.primal_residual, b.primal_residual, tolerance, "primal_residual");
  ExpectSameScalar(a.dual_residual, b.dual_residual, tolerance, "dual_residual");
  ExpectSameScalar(a.stats.certificate.gap, b.stats.certificate.gap, tolerance, "certificate.gap");
}

NpklProblem IrisNpklProblem(int per_class, EdgeWeight weight, double delta, bool admm_protocol, uint64_t seed) {
  const Dataset d = IrisSubset(per_class);
  GraphOptions g;
  g.k = 5;
  g.weight = weight;
  g.delta = delta;
  g.num_threads = 1;
  auto graph = BuildGraph(d.features, g);
  EXPECT_TRUE(graph.ok()) << graph.status();
  auto constraints = admm_protocol ? GenerateAdmmProtocol(d.labels, seed) : GenerateBcdProtocol(d.labels, 0.3, seed);
  EXPECT_TRUE(constraints.ok()) << constraints.status();
  NpklProblem p;
  p.laplacian = graph->laplacian;
  p.constraints = *constraints;
  return p;
}

TEST(CheckpointResumeTest, KlAdmmAdmmAndPolishPhases) {
  const NpklProblem p = IrisNpklProblem(15, EdgeWeight::kGaussian, 0.0, /*admm_protocol=*/true, 3);
  KlAdmmOptions o;
  o.gamma = 10.0;
  o.num_threads = 1;
  o.max_iterations = 400;
  Case<NpklResult> c;
  c.tag = "kl_admm/1";
  c.solve = [&](const SolveControl& control) { return SolveKlAdmm(p, o, control); };
  c.solve_other = [&](const SolveControl& control) {
    KlAdmmOptions other = o;
    other.gamma = 11.0;  // same shapes, another γ
    return SolveKlAdmm(p, other, control);
  };
  c.expect_same_solution = ExpectSameNpkl;
  c.positions = {0, 5, -8, -1};
  CheckResumable(c);
}

// Checkpoints across the rank escalation's stages (V grows from 1 row; the
// polish checkpoints carry the stage's rank and the bookkeeping).
TEST(CheckpointResumeTest, KlAdmmAcrossEscalationStages) {
  const NpklProblem p = IrisNpklProblem(15, EdgeWeight::kGaussian, 0.0, /*admm_protocol=*/true, 3);
  KlAdmmOptions o;
  o.gamma = 10.0;
  o.num_threads = 1;
  o.max_iterations = 2000;
  o.tolerance = 1e-7;
  o.initial_rank = 1;
  o.escalation_step = 1;
  o.certificate_tolerance = 1e-7;
  FactorDiagnostics diag;
  auto full = SolveKlAdmm(p, o, SolveControl(), &diag);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_GE(diag.rank_history.size(), 3u) << "the case must cross escalation stages";
  Case<NpklResult> c;
  c.tag = "kl_admm/1";
  c.solve = [&](const SolveControl& control) { return SolveKlAdmm(p, o, control); };
  c.solve_other = [&](const SolveControl& control) {
    KlAdmmOptions other = o;
    other.escalation_step = 2;  // same shapes at the start, another escalation
    return SolveKlAdmm(p, other, control);
  };
  c.expect_same_solution = ExpectSameNpkl;
  c.positions = {0, 5, 50, 100, 150, 200, -8, -1};  // every stage
  CheckResumable(c);
}

// A checkpoint keeps the last 4,096 entries of KL-ADMM's objective history,
// so its size does not grow with the iterations: resumed past that tail, the
// solve is the uninterrupted one bit for bit but for the history's earlier
// entries, reported as NaN (not kept).
TEST(CheckpointResumeTest, KlAdmmCheckpointsKeepABoundedHistoryTail) {
  const NpklProblem p = IrisNpklProblem(10, EdgeWeight::kGaussian, 0.0, /*admm_protocol=*/true, 5);
  KlAdmmOptions o;
  o.gamma = 10.0;
  o.num_threads = 1;
  o.polish = KlAdmmOptions::Polish::kNone;
  o.tolerance = 0.0;
  o.max_iterations = 6000;
  auto fresh = SolveKlAdmm(p, o, SolveControl());
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->stats.iterations, 6000);
  std::optional<Checkpoint> late;
  size_t early_bytes = 0;
  SolveControl sink;
  sink.checkpoint_interval_seconds = 1e-9;
  sink.checkpoint = [&](const Checkpoint& k) {
    if (k.iteration == 100) early_bytes = k.bytes.size();
    if (!late && k.iteration >= 5000) late = k;
  };
  ASSERT_TRUE(SolveKlAdmm(p, o, sink).ok());
  ASSERT_TRUE(late.has_value());
  ASSERT_GT(early_bytes, 0u);
  // Iteration 100 carries 100 history entries, iteration 5,000 carries 4,096:
  // at most 4,096 × 8 bytes apart, not 5,000 × 8 (and never more after).
  EXPECT_LE(late->bytes.size(), early_bytes + (4096 - 100) * sizeof(double) + 64);
  auto resumed = SolveKlAdmm(p, o, ResumingFrom(*late));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->stats.iterations, fresh->stats.iterations);
  EXPECT_EQ(resumed->stats.final_objective, fresh->stats.final_objective);
  ExpectSameNpkl(*fresh, *resumed, 0.0);
  const std::vector<double>& a = fresh->stats.objective_history;
  const std::vector<double>& b = resumed->stats.objective_history;
  ASSERT_EQ(a.size(), b.size());
  const size_t dropped = static_cast<size_t>(late->iteration) - 4096;
  for (size_t k = 0; k < a.size(); ++k) {
    if (k < dropped) {
      ASSERT_TRUE(std::isnan(b[k])) << k;
    } else {
      ASSERT_EQ(a[k], b[k]) << k;
    }
  }
}

TEST(CheckpointResumeTest, KlAdmmWithoutPolish) {
  const NpklProblem p = IrisNpklProblem(10, EdgeWeight::kGaussian, 0.0, /*admm_protocol=*/true, 5);
  KlAdmmOptions o;
  o.gamma = 10.0;
  o.num_threads = 1;
  o.polish = KlAdmmOptions::Polish::kNone;
  o.max_iterations = 60;
  Case<NpklResult> c;
  c.tag = "kl_admm/1";
  c.solve = [&](const SolveControl& control) { return SolveKlAdmm(p, o, control); };
  c.solve_other = [&](const SolveControl& control) {
    KlAdmmOptions other = o;
    other.seed = o.seed + 1;
    return SolveKlAdmm(p, other, control);
  };
  c.expect_same_solution = ExpectSameNpkl;
  CheckResumable(c);
}

TEST(CheckpointResumeTest, BcdNpkl) {
  const NpklProblem p = IrisNpklProblem(20, EdgeWeight::kBinary, 0.5, /*admm_protocol=*/false, 3);
  for (NpklLoss loss : {NpklLoss::kSquareHinge, NpklLoss::kHinge}) {
    SCOPED_TRACE(NpklLossName(loss));
    BcdNpklOptions o;
    o.loss = loss;
    o.max_iterations = 40;
    o.tolerance = 1e-7;
    o.num_threads = 1;
    Case<NpklResult> c;
    c.tag = "bcd_npkl/1";
    c.solve = [&](const SolveControl& control) { return SolveBcdNpkl(p, o, control); };
    c.solve_other = [&](const SolveControl& control) {
      BcdNpklOptions other = o;
      other.c = o.c * 2.0;
      return SolveBcdNpkl(p, other, control);
    };
    c.expect_same_solution = ExpectSameNpkl;
    CheckResumable(c);
  }
}

TEST(CheckpointResumeTest, BcdNpklRankEscalation) {
  const NpklProblem p = IrisNpklProblem(20, EdgeWeight::kBinary, 0.5, /*admm_protocol=*/false, 7);
  BcdNpklOptions o;
  o.loss = NpklLoss::kSquareHinge;
  o.rank_escalation = true;
  o.initial_rank = 2;
  o.max_iterations = 200;
  o.num_threads = 1;
  Case<NpklResult> c;
  c.tag = "bcd_npkl/1";
  c.solve = [&](const SolveControl& control) { return SolveBcdNpkl(p, o, control); };
  c.solve_other = [&](const SolveControl& control) {
    BcdNpklOptions other = o;
    other.seed = o.seed + 1;
    return SolveBcdNpkl(p, other, control);
  };
  c.expect_same_solution = ExpectSameNpkl;
  c.positions = {0, 3, -2, -1};
  CheckResumable(c);
}

// Warm starts (PrepareWarmFactor: the compact previous factor, BCDNPKL's first
// sweep, the appended directions) resume bit-identically too: the start is
// prepared again only when there is no checkpoint to resume.
TEST(CheckpointResumeTest, WarmStartedBcdNpklAndKlAdmm) {
  const NpklProblem bcd_previous = IrisNpklProblem(20, EdgeWeight::kBinary, 0.5, /*admm_protocol=*/false, 3);
  const NpklProblem bcd_p = IrisNpklProblem(20, EdgeWeight::kBinary, 0.5, /*admm_protocol=*/false, 7);
  BcdNpklOptions bo;
  bo.loss = NpklLoss::kSquare;
  bo.num_threads = 1;
  auto bcd_start = SolveBcdNpkl(bcd_previous, bo);
  ASSERT_TRUE(bcd_start.ok()) << bcd_start.status();
  bo.initial_factor = std::make_shared<const Eigen::MatrixXd>(bcd_start->kernel.embedding());
  {
    SCOPED_TRACE("bcd_npkl");
    Case<NpklResult> c;
    c.tag = "bcd_npkl/1";
    c.solve = [&](const SolveControl& control) { return SolveBcdNpkl(bcd_p, bo, control); };
    c.solve_other = [&](const SolveControl& control) {
      BcdNpklOptions other = bo;
      other.c = bo.c * 2.0;
      return SolveBcdNpkl(bcd_p, other, control);
    };
    c.expect_same_solution = ExpectSameNpkl;
    c.positions = {0, 1, -2, -1};
    CheckResumable(c);
  }
  const NpklProblem admm_previous = IrisNpklProblem(15, EdgeWeight::kGaussian, 0.0, /*admm_protocol=*/true, 3);
  const NpklProblem admm_p = IrisNpklProblem(15, EdgeWeight::kGaussian, 0.0, /*admm_protocol=*/true, 7);
  KlAdmmOptions ao;
  ao.gamma = 10.0;
  ao.num_threads = 1;
  auto admm_start = SolveKlAdmm(admm_previous, ao);
  ASSERT_TRUE(admm_start.ok()) << admm_start.status();
  ao.initial_factor = std::make_shared<const Eigen::MatrixXd>(admm_start->kernel.embedding());
  {
    SCOPED_TRACE("kl_admm");
    Case<NpklResult> c;
    c.tag = "kl_admm/1";
    c.solve = [&](const SolveControl& control) { return SolveKlAdmm(admm_p, ao, control); };
    c.solve_other = [&](const SolveControl& control) {
      KlAdmmOptions other = ao;
      other.gamma = 11.0;
      return SolveKlAdmm(admm_p, other, control);
    };
    c.expect_same_solution = ExpectSameNpkl;
    c.positions = {0, 1, -2, -1};
    CheckResumable(c);
  }
}

TEST(CheckpointResumeTest, SimpleNpkl) {
  const NpklProblem p = IrisNpklProblem(15, EdgeWeight::kGaussian, 0.0, /*admm_protocol=*/false, 11);
  // Dense eigensolver with gradient and with Newton steps, and Lanczos (warm
  // starts in the checkpoint; Newton steps are dense-path only).
  for (auto [dense_threshold, newton] : {std::pair{300, false}, std::pair{300, true}, std::pair{0, false}}) {
    SCOPED_TRACE("dense_threshold " + std::to_string(dense_threshold) + (newton ? " newton" : ""));
    SimpleNpklOptions o;
    o.b = 20.0;
    o.max_iterations = 60;
    o.tolerance = newton ? 1e-12 : 1e-6;  // Newton steps: enough iterations to checkpoint
    o.dense_threshold = dense_threshold;
    o.num_threads = 1;
    o.newton = newton;
    Case<NpklResult> c;
    if (newton) c.min_checkpoints = 2;
    c.tag = "simple_npkl/1";
    c.solve = [&](const SolveControl& control) { return SolveSimpleNpkl(p, o, control); };
    c.solve_other = [&](const SolveControl& control) {
      SimpleNpklOptions other = o;
      other.c = 2.0;
      return SolveSimpleNpkl(p, other, control);
    };
    c.expect_same_solution = ExpectSameNpkl;
    CheckResumable(c);
  }
}


// ---------------------------------------------------------------------------
// The QSDP solvers (core/qsdp): first-order (FISTA + face polish), the
// interior-point method and the face rounds of the subspace driver.

QsdpProblem RegPcpIris(int m, uint64_t seed = 7) {
  const Dataset iris = LoadIris();
  auto cons = GeneratePerClassConstraints(iris.labels, 5, 5, seed);
  EXPECT_TRUE(cons.ok()) << cons.status();
  RegPcpOptions o;
  o.m = m;
  auto built = BuildRegPcp(iris.features, *cons, o);
  EXPECT_TRUE(built.ok()) << built.status();
  return built->problem;
}

template <typename R>
void ExpectSameQsdp(const R& a, const R& b, double tolerance) {
  ExpectSameMatrix(a.y, b.y, tolerance, "Y");
  ExpectSameScalar(a.objective, b.objective, tolerance, "objective");
  ExpectSameScalar(a.stats.certificate.lower_bound, b.stats.certificate.lower_bound, tolerance, "lower_bound");
  ExpectSameScalar(a.stats.certificate.gap, b.stats.certificate.gap, tolerance, "certificate.gap");
  ExpectSameScalar(a.stats.certificate.kkt_residual, b.stats.certificate.kkt_residual, tolerance, "kkt_residual");
  if (tolerance == 0.0) EXPECT_EQ(a.rank, b.rank);
}

TEST(CheckpointResumeTest, QsdpFirstOrder) {
  const QsdpProblem p = RegPcpIris(8);
  for (double polish : {1e-2, 0.0}) {
    SCOPED_TRACE("polish_threshold " + std::to_string(polish));
    QsdpOptions o;
    o.gap_tolerance = 1e-7;
    o.polish_threshold = polish;
    o.check_every = 5;
    o.max_iterations = polish > 0.0 ? 2000 : 150;
    Case<QsdpResult> c;
    c.tag = "qsdp_fista/1";
    c.solve = [&](const SolveControl& control) { return SolveQsdp(p, o, control); };
    c.solve_other = [&](const SolveControl& control) {
      QsdpOptions other = o;
      other.lipschitz_safety = 1.2;
      return SolveQsdp(p, other, control);
    };
    c.expect_same_solution = [](const QsdpResult& a, const QsdpResult& b, double tol) {
      ExpectSameQsdp(a, b, tol);
      EXPECT_EQ(a.polishes, b.polishes);
      EXPECT_EQ(a.cg_iterations, b.cg_iterations);
      EXPECT_EQ(a.lipschitz, b.lipschitz);
    };
    c.positions = {0, 3, -2, -1};
    CheckResumable(c);
  }
}

TEST(CheckpointResumeTest, QsdpInteriorPoint) {
  const QsdpProblem p = RegPcpIris(10);
  for (QsdpNewtonSystem system : {QsdpNewtonSystem::kDense, QsdpNewtonSystem::kLowRank}) {
    SCOPED_TRACE(system == QsdpNewtonSystem::kDense ? "dense Newton system" : "low-rank Newton system");
    QsdpIpmOptions o;
    o.newton_system = system;
    o.gap_tolerance = 1e-9;
    Case<QsdpIpmResult> c;
    c.tag = "qsdp_ipm/1";
    c.solve = [&](const SolveControl& control) { return SolveQsdpInteriorPoint(p, o, control); };
    c.solve_other = [&](const SolveControl& control) {
      // Another problem of the same size: other constraints.
      static const QsdpProblem other = RegPcpIris(10, 8);
      return SolveQsdpInteriorPoint(other, o, control);
    };
    c.expect_same_solution = [](const QsdpIpmResult& a, const QsdpIpmResult& b, double tol) {
      ExpectSameQsdp(a, b, tol);
      ExpectSameScalar(a.mu, b.mu, tol, "mu");
    };
    CheckResumable(c);
  }
}

void ExpectSameSubspace(const QsdpSubspaceResult& a, const QsdpSubspaceResult& b, double tol) {
  ExpectSameQsdp(a, b, tol);
  EXPECT_EQ(a.ipm_iterations, b.ipm_iterations);
  ASSERT_EQ(a.rounds.size(), b.rounds.size());
  for (size_t i = 0; i < a.rounds.size(); ++i) {
    EXPECT_EQ(a.rounds[i].dimension, b.rounds[i].dimension);
    EXPECT_EQ(a.rounds[i].ipm_iterations, b.rounds[i].ipm_iterations);
    EXPECT_EQ(a.rounds[i].gap, b.rounds[i].gap);
  }
}

TEST(CheckpointResumeTest, QsdpSubspaceFaceRounds) {
  const QsdpProblem p = RegPcpIris(12);
  QsdpSubspaceOptions o;
  o.full_system_size = 10;  // force the face rounds on a small problem
  o.initial_dimension = 3;
  o.margin = 2;
  o.growth = 1.0;
  o.gap_tolerance = 1e-10;
  Case<QsdpSubspaceResult> c;
  c.tag = "qsdp_subspace/1";
  c.solve = [&](const SolveControl& control) { return SolveQsdpSubspace(p, o, control); };
  c.solve_other = [&](const SolveControl& control) {
    QsdpSubspaceOptions other = o;
    other.margin = 3;
    return SolveQsdpSubspace(p, other, control);
  };
  c.expect_same_solution = ExpectSameSubspace;
  c.positions = {0, -1};
  c.min_checkpoints = 2;
  CheckResumable(c);
}

// Small problems go to one full-space IPM solve, with the caller's control:
// its "qsdp_ipm/1" checkpoints resume the subspace driver bit-identically.
TEST(CheckpointResumeTest, QsdpSubspaceDirectIpmPassesCheckpointsThrough) {
  const QsdpProblem p = RegPcpIris(8);
  QsdpSubspaceOptions o;
  o.gap_tolerance = 1e-10;
  auto fresh = SolveQsdpSubspace(p, o);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->rounds.size(), 1u);
  std::vector<Checkpoint> recorded;
  auto with_sink = SolveQsdpSubspace(p, o, Recording(&recorded));
  ASSERT_TRUE(with_sink.ok());
  ExpectSameSubspace(*fresh, *with_sink, 0.0);
  ASSERT_GE(recorded.size(), 3u);
  for (const Checkpoint& k : recorded) EXPECT_EQ(k.solver, "qsdp_ipm/1");
  const Checkpoint& mid = recorded[recorded.size() / 2];
  auto resumed = SolveQsdpSubspace(p, o, ResumingFrom(mid));
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->stats.resumed_from_iteration, mid.iteration);
  EXPECT_EQ(resumed->stats.objective_history, fresh->stats.objective_history);
  ExpectSameSubspace(*fresh, *resumed, 0.0);
  // The same state through SolveQsdpInteriorPoint with the driver's IPM options.
  QsdpIpmOptions ipm = o.ipm;
  ipm.gap_tolerance = o.gap_tolerance;
  auto direct = SolveQsdpInteriorPoint(p, ipm, ResumingFrom(mid));
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->stats.resumed_from_iteration, mid.iteration);
  EXPECT_TRUE(direct->y == fresh->y);
}


// ---------------------------------------------------------------------------
// ONK (core/mkl/onk.h): the gradient, accelerated and level methods.

struct OnkData {
  Eigen::MatrixXd kernel;
  Eigen::VectorXd y;
};

// The first n rows of ionosphere with the paper's kernel exp(−‖x − z‖²/σ_k).
OnkData IonosphereOnk(int n, int sigma_k) {
  auto data = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/ionosphere.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  OnkData d;
  const Eigen::MatrixXd x = data->features.topRows(n);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) d.y[i] = data->labels[i] == 1 ? 1.0 : -1.0;
  BaseKernelSpec spec;
  spec.gamma = 1.0 / OnkSigma(x, sigma_k);
  d.kernel = EvaluateKernel(spec, x, x);
  return d;
}

void ExpectSameOnk(const OnkResult& a, const OnkResult& b, double tol) {
  ExpectSameMatrix(a.alpha, b.alpha, tol == 0.0 ? 0.0 : std::sqrt(tol), "alpha");
  ExpectSameScalar(a.objective, b.objective, tol, "objective");
  ExpectSameScalar(a.lower_bound, b.lower_bound, tol, "lower_bound");
  if (tol == 0.0) {
    EXPECT_EQ(a.function_evaluations, b.function_evaluations);
    EXPECT_EQ(a.last_gamma, b.last_gamma);
  }
}

TEST(CheckpointResumeTest, OnkGradientMethods) {
  const OnkData d = IonosphereOnk(50, 2);
  for (OnkMethod method : {OnkMethod::kGradient, OnkMethod::kAccelerated}) {
    SCOPED_TRACE(OnkMethodName(method));
    OnkOptions o;
    o.method = method;
    o.rho = 1.0;
    o.tolerance = 1e-9;
    Case<OnkResult> c;
    c.tag = "onk/1";
    c.solve = [&](const SolveControl& control) { return SolveOnk(d.kernel, d.y, o, control); };
    c.solve_other = [&](const SolveControl& control) {
      OnkOptions other = o;
      other.rho = 2.0;
      return SolveOnk(d.kernel, d.y, other, control);
    };
    c.expect_same_solution = ExpectSameOnk;
    CheckResumable(c);
  }
}

TEST(CheckpointResumeTest, OnkLevelMethod) {
  const OnkData d = IonosphereOnk(40, 2);
  OnkOptions o;
  o.method = OnkMethod::kLevel;
  o.rho = 1.0;
  o.tolerance = 1e-6;
  o.max_iterations = 2000;
  Case<OnkResult> c;
  c.tag = "onk/1";
  c.solve = [&](const SolveControl& control) { return SolveOnk(d.kernel, d.y, o, control); };
  c.solve_other = [&](const SolveControl& control) {
    OnkOptions other = o;
    other.level_tau = 0.6;
    return SolveOnk(d.kernel, d.y, other, control);
  };
  c.expect_same_solution = ExpectSameOnk;
  CheckResumable(c);
}


// ---------------------------------------------------------------------------
// MVE (core/embed/embedding.h): the outer minorize–maximize loop over K₀.

NeighborhoodGraph WineGraph(int n, Eigen::MatrixXd* x) {
  auto wine = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/wine.csv");
  EXPECT_TRUE(wine.ok()) << wine.status();
  Eigen::MatrixXd f = wine->features.topRows(n);
  const Eigen::RowVectorXd mean = f.colwise().mean();
  f.rowwise() -= mean;
  for (int j = 0; j < f.cols(); ++j) {
    const double sd = std::sqrt(f.col(j).squaredNorm() / n);
    if (sd > 0) f.col(j) /= sd;
  }
  *x = ScaledToUnitInputGram(f);
  auto graph = BuildNeighborhood(*x, 4);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *graph;
}

void ExpectSameEmbedding(const EmbeddingResult& a, const EmbeddingResult& b, double tol) {
  if (tol == 0.0) {
    ExpectSameMatrix(a.kernel.embedding(), b.kernel.embedding(), 0.0, "embedding V");
  } else {
    ExpectSameMatrix(a.kernel.Dense(), b.kernel.Dense(), tol, "kernel K");
  }
  ExpectSameScalar(a.stats.certificate.gap, b.stats.certificate.gap, tol, "certificate.gap");
  ExpectSameScalar(a.stationarity, b.stationarity, tol, "stationarity");
  ExpectSameMatrix(a.dual, b.dual, tol, "dual");
  if (tol == 0.0) {
    EXPECT_EQ(a.quasi_newton_iterations, b.quasi_newton_iterations);
    EXPECT_EQ(a.newton_steps, b.newton_steps);
    EXPECT_EQ(a.cg_products, b.cg_products);
    EXPECT_EQ(a.outer_iterations, b.outer_iterations);
    EXPECT_EQ(a.mve_objective, b.mve_objective);
    EXPECT_EQ(a.mve_ascent_slack, b.mve_ascent_slack);
    EXPECT_EQ(a.mve_change, b.mve_change);
    EXPECT_EQ(a.mve_ascent_stopped, b.mve_ascent_stopped);
    ExpectSameMatrix(a.mve_basis, b.mve_basis, 0.0, "mve_basis");
  }
}

TEST(CheckpointResumeTest, MveOuterLoop) {
  Eigen::MatrixXd x;
  const NeighborhoodGraph graph = WineGraph(40, &x);
  const MveProblem problem{graph, LearnedKernel::Embedding(x)};
  struct Setting {
    const char* name;
    EmbeddingMinimaxOptions::Method method;
    double inexact_factor;
  };
  for (const Setting& setting : {Setting{"newton", EmbeddingMinimaxOptions::Method::kNewton, 0.0},
                                 Setting{"lbfgs, curvature memory, inexact", EmbeddingMinimaxOptions::Method::kLbfgs,
                                         0.1}}) {
    SCOPED_TRACE(setting.name);
    MveOptions o;
    o.inner.b = 40.0;
    o.inner.tolerance = 1e-8;
    o.inner.max_iterations = 5000;
    o.inner.method = setting.method;
    o.inexact_factor = setting.inexact_factor;
    o.outer_tolerance = 0.0;
    o.objective_tolerance = 1e-6;
    o.max_outer_iterations = 40;
    Case<EmbeddingResult> c;
    c.tag = "mve/1";
    c.solve = [&](const SolveControl& control) { return SolveMve(problem, o, control); };
    c.solve_other = [&](const SolveControl& control) {
      MveOptions other = o;
      other.inner.c = 2.0;
      return SolveMve(problem, other, control);
    };
    c.expect_same_solution = ExpectSameEmbedding;
    CheckResumable(c);
  }
}


// SPE (and any projected-gradient SimpleNPKL-scheme embedding): the dual
// iterate of the one SolveEmbeddingMinimax loop.
TEST(CheckpointResumeTest, SpeProjectedGradient) {
  Eigen::MatrixXd x;
  const NeighborhoodGraph graph = WineGraph(30, &x);
  for (int dense_threshold : {300, 0}) {  // dense eigensolver and Lanczos (warm start in the checkpoint)
    SCOPED_TRACE("dense_threshold " + std::to_string(dense_threshold));
    EmbeddingMinimaxOptions o;
    o.b = 30.0;
    o.c = 1.0;
    o.tolerance = 1e-7;
    o.max_iterations = 120;
    o.dense_threshold = dense_threshold;
    Case<EmbeddingResult> c;
    c.tag = "embedding_pg/1";
    c.solve = [&](const SolveControl& control) { return SolveSpe(SpeProblem{graph}, o, control); };
    c.solve_other = [&](const SolveControl& control) {
      EmbeddingMinimaxOptions other = o;
      other.b = 31.0;
      return SolveSpe(SpeProblem{graph}, other, control);
    };
    c.expect_same_solution = ExpectSameEmbedding;
    CheckResumable(c);
  }
}

}  // namespace
}  // namespace kls
