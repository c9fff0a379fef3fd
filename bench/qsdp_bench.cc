// kls-bench qsdp: RegPCP / RegMVU (SQLP paper §4) solved by the exact QSDP
// solver (core/qsdp/qsdp_solver.h), optionally side by side with the paper's
// baseline — the Schur-complement SDP (15)–(16) solved by CSDP — on the same
// problem in the same run (docs/reproduction/qsdp.md).
#include <Eigen/Eigenvalues>
#include <cmath>

#include "bench/bench_util.h"
#include "core/common/solve_control.h"
#include "core/data/csv_reader.h"
#include "core/data/synthetic.h"
#include "core/eval/kernel_kmeans.h"
#include "core/eval/metrics.h"
#include "core/qsdp/qsdp_ipm.h"
#include "core/qsdp/qsdp_solver.h"
#include "core/qsdp/qsdp_subspace.h"
#include "core/qsdp/reg_problems.h"
#include "core/qsdp/schur_sdp.h"
#include "tests/test_util/sdp_oracle.h"

namespace kls::bench {
namespace {

// The fields of the subspace / interior-point result the record reads, as a
// QsdpResult (the first-order solver's, whose polishes and CG iterations stay 0).
template <typename Result>
QsdpResult AsQsdpResult(const Result& r) {
  QsdpResult q;
  q.y = r.y;
  q.objective = r.objective;
  q.rank = r.rank;
  q.stats = r.stats;  // with the certificate
  return q;
}

}  // namespace

Runner RegisterQsdp(CLI::App& app, bool* json) {
  struct Args {
    std::string problem = "regmvu", data = "swissroll", method = "subspace";
    int m = 10, n = 2000, must = 20, cannot = 20, threads = 1, max_iterations = 20000, restarts = 10;
    double nu = 1.0, tolerance = 1e-8, growth = 1.5;
    uint64_t seed = 1;
    bool csdp = false, no_polish = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--problem", a->problem, "regpcp | regmvu");
  app.add_option("--method", a->method, "subspace (default: IPM on faces) | ipm (full-space interior point) | fista (first-order + face polish)");
  app.add_option("--data", a->data, "swissroll (generated, --n points) or a labeled CSV file");
  app.add_option("--m", a->m, "basis size m (Y is m x m)");
  app.add_option("--n", a->n, "Swiss roll points");
  app.add_option("--nu", a->nu, "RegMVU penalty weight nu in (11)");
  app.add_option("--must", a->must, "RegPCP must-links per class (paper: 20)");
  app.add_option("--cannot", a->cannot, "RegPCP cannot-links per class pair (paper: 20)");
  app.add_option("--seed", a->seed, "seed for the Swiss roll and the constraints");
  app.add_option("--tolerance", a->tolerance, "relative duality-gap tolerance (paper: 1e-8)");
  app.add_option("--growth", a->growth, "subspace method: face growth factor per round");
  app.add_option("--max-iterations", a->max_iterations, "solver iteration cap");
  app.add_option("--threads", a->threads, "k-NN threads");
  app.add_option("--restarts", a->restarts, "kernel k-means restarts (RegPCP pair accuracy)");
  app.add_flag("--csdp", a->csdp, "also solve the Schur-complement SDP (15)-(16) with CSDP");
  app.add_flag("--no-polish", a->no_polish, "accelerated projected gradient only (no face polish)");
  return [a, json]() -> int {
    if (a->problem != "regpcp" && a->problem != "regmvu") {
      return Fail(InvalidArgumentError("--problem = " + a->problem + " must be regpcp or regmvu"));
    }
    Dataset data;
    if (a->data == "swissroll") {
      auto roll = MakeSwissRoll(a->n, 0.0, a->seed);
      if (!roll.ok()) return Fail(roll.status());
      data = std::move(roll->data);
    } else {
      auto read = ReadCsvFile(a->data);
      if (!read.ok()) return Fail(read.status());
      data = std::move(*read);
    }
    Stopwatch build_watch;
    StatusOr<RegularizedKernelProblem> built = InvalidArgumentError("unset");
    int num_constraints = 0;
    if (a->problem == "regmvu") {
      RegMvuOptions o;
      o.m = a->m;
      o.nu = a->nu;
      o.num_threads = a->threads;
      built = BuildRegMvu(data.features, o);
    } else {
      if (!data.has_labels()) return Fail(InvalidArgumentError("--data: RegPCP needs labels for its constraints"));
      auto cons = GeneratePerClassConstraints(data.labels, a->must, a->cannot, a->seed);
      if (!cons.ok()) return Fail(cons.status());
      num_constraints = cons->size();
      RegPcpOptions o;
      o.m = a->m;
      o.num_threads = a->threads;
      built = BuildRegPcp(data.features, *cons, o);
    }
    if (!built.ok()) return Fail(built.status());
    const double build_seconds = build_watch.Seconds();
    QsdpOptions qo;
    qo.gap_tolerance = a->tolerance;
    qo.max_iterations = a->max_iterations;
    if (a->no_polish) qo.polish_threshold = 0.0;
    Stopwatch watch;
    StatusOr<QsdpResult> result = InvalidArgumentError("--method = " + a->method + " must be ipm or fista");
    if (a->method == "fista") result = SolveQsdp(built->problem, qo);
    nlohmann::json rounds = nlohmann::json::array();
    int out_ipm_iterations = 0;
    if (a->method == "subspace") {
      QsdpSubspaceOptions so;
      so.gap_tolerance = a->tolerance;
      so.growth = a->growth;
      auto r = SolveQsdpSubspace(built->problem, so);
      if (!r.ok()) return Fail(r.status());
      out_ipm_iterations = r->ipm_iterations;
      for (const auto& rd : r->rounds)
        rounds.push_back({{"dimension", rd.dimension}, {"ipm_iterations", rd.ipm_iterations}, {"gap", rd.gap}, {"seconds", rd.seconds}});
      result = AsQsdpResult(*r);
    }
    if (a->method == "ipm") {
      QsdpIpmOptions io;
      io.gap_tolerance = a->tolerance;
      auto r = SolveQsdpInteriorPoint(built->problem, io);
      if (!r.ok()) return Fail(r.status());
      out_ipm_iterations = r->stats.iterations;
      result = AsQsdpResult(*r);
    }
    const double seconds = watch.Seconds();
    if (!result.ok()) return Fail(result.status());
    nlohmann::json out = {{"benchmark", "qsdp"},
                          {"problem", a->problem},
                          {"data", a->data},
                          {"n", data.num_points()},
                          {"m", a->m},
                          {"terms", built->problem.num_terms()},
                          {"pairwise_constraints", num_constraints},
                          {"graph_edges", built->num_edges},
                          {"objective", result->objective},
                          {"paper_objective", built->sign * result->objective},
                          {"lower_bound", result->stats.certificate.lower_bound},
                          {"gap", result->stats.certificate.gap},
                          {"kkt_residual", result->stats.certificate.kkt_residual},
                          {"seconds", seconds},
                          {"iterations", result->stats.iterations},
                          {"polishes", result->polishes},
                          {"cg_iterations", result->cg_iterations},
                          {"rank_y", result->rank},
                          {"termination", TerminationName(result->stats.termination)},
                          {"build_seconds", build_seconds},
                          {"basis_seconds", built->basis_seconds},
                          {"basis_residual", built->basis.max_residual},
                          {"method", a->method},
                          {"rounds", rounds},
                          {"ipm_iterations", out_ipm_iterations},
                          {"machine", MachineInfo()}};
    if (a->problem == "regmvu") out["nu"] = a->nu;
    if (a->problem == "regpcp") {
      out["sigma"] = built->sigma;
      // K = Q Y Qᵀ = V Vᵀ with V = Q U Λ^{1/2}; kernel k-means, k = classes.
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(result->y);
      const Eigen::MatrixXd v = built->basis.vectors * eig.eigenvectors() *
                                eig.eigenvalues().cwiseMax(0.0).cwiseSqrt().asDiagonal();
      KMeansOptions km;
      km.num_clusters = data.num_classes();
      km.restarts = a->restarts;
      km.seed = a->seed;
      auto clusters = KernelKMeans(v, km);
      if (!clusters.ok()) return Fail(clusters.status());
      out["pair_accuracy"] = *PairAccuracy(data.labels, clusters->assignment);
      out["nmi"] = *NormalizedMutualInformation(data.labels, clusters->assignment);
    }
    if (a->csdp) {
      Stopwatch csdp_watch;
      test_util::SdpOracle oracle;
      BuildSchurComplementSdp(built->problem, &oracle);
      auto sol = oracle.Solve();
      const double csdp_seconds = csdp_watch.Seconds();
      if (!sol.ok()) return Fail(sol.status());
      const Eigen::MatrixXd y = SchurSdpSolutionY(sol->y, a->m);
      const double csdp_objective = built->problem.Objective(y);
      out["csdp_objective"] = csdp_objective;
      out["csdp_seconds"] = csdp_seconds;
      out["csdp_relative_difference"] =
          std::abs(csdp_objective - result->objective) / std::max(1.0, std::abs(csdp_objective));
      out["speedup"] = csdp_seconds / std::max(seconds, 1e-9);
      auto at = sol->log.find("Iter:");
      int iters = 0;
      for (; at != std::string::npos; at = sol->log.find("Iter:", at + 1)) ++iters;
      out["csdp_iterations"] = iters;
    }
    Emit(out, *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("qsdp", "RegPCP / RegMVU QSDPs (SQLP paper) with the exact solver, optionally vs CSDP",
                     RegisterQsdp);

}  // namespace kls::bench
