// Shared by `kls-bench repro` and `kls-bench scale`: the papers' protocols
// (graph + constraints) and the method names of the issue tracker.
#pragma once

#include <functional>
#include <string>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/constraints.h"
#include "core/data/dataset.h"
#include "core/graph/laplacian.h"
#include "core/npkl/auto_select.h"
#include "core/npkl/cross_validation.h"
#include "core/npkl/npkl_problem.h"

namespace kls {
struct FactorDiagnostics;
}

namespace kls::bench {

/// A method name such as "admm", "bcd-sl", "simplenpkl-shl".
struct MethodSpec {
  std::string name;
  enum class Family { kAdmm, kBcd, kSimple } family = Family::kAdmm;
  NpklLoss loss = NpklLoss::kSquare;
};
StatusOr<MethodSpec> ParseMethod(const std::string& name);

/// "bcd" (BCDNPKL §4.2: binary k-NN, 4n·30% pairs half/half), "admm" (KL-ADMM §4:
/// Gaussian k-NN, 0.6n must + 0.6n cannot + n self pairs), "simplenpkl"
/// (thesis §3.5.1: binary k-NN, pairs until 70% n must-link components).
struct Protocol {
  std::string name;
  GraphOptions graph;
};
/// `k` neighbours (5 small sets, 50 adult); δ = C/2 for BCDNPKL (§4.2), else 0.
StatusOr<Protocol> MakeProtocol(const std::string& name, const MethodSpec& method, int k, double c);
StatusOr<PairwiseConstraints> MakeConstraints(const std::string& protocol, const std::vector<int>& labels,
                                              uint64_t seed);

/// Parameters a run may override; NaN / 0 keep the solver defaults.
struct RunParams {
  double c = 0.0;          ///< C (BCD, SimpleNPKL) or γ (KL-ADMM); 0 = method default
  double b = 0.0;          ///< SimpleNPKL capacity B; 0 = 1
  int max_iterations = 0;  ///< 0 = solver default
  int threads = 1;
  uint64_t seed = 1;
  double omega = 0.0;      ///< BCDNPKL over-relaxation ω; 0 = solver default
  int rank = 0;            ///< BCDNPKL / KL-ADMM r; 0 = automatic (escalation or RankBound)
  int escalation = -1;     ///< BCDNPKL / KL-ADMM rank escalation: 1 on, 0 off, -1 solver default
  /// BCDNPKL, KL-ADMM: receives the rank escalation / certificate diagnostics.
  FactorDiagnostics* factor_diagnostics = nullptr;
  /// KL-ADMM: "" = solver default (L-BFGS polish), "paper" = Algorithm 1 only,
  /// "polish" = ADMM then L-BFGS polish (KlAdmmOptions::Polish).
  std::string admm_mode;
  int lbfgs_memory = 0;    ///< KL-ADMM polish memory; 0 = solver default
  int lbfgs_precondition = -1;  ///< KL-ADMM polish block-Jacobi: 1 / 0; -1 = solver default
  double switch_tolerance = 0.0;  ///< KL-ADMM polish switch; 0 = solver default
  int multilevel = -1;     ///< KL-ADMM multilevel_min_points; -1 = solver default, 0 = off
  int block_warm_start = -1;      ///< SimpleNPKL block eigensolver: 1 / 0; -1 = solver default
  double tighten_factor = 0.0;    ///< SimpleNPKL tighten_factor; 0 = solver default
  int adaptive_step = -1;         ///< SimpleNPKL adaptive_step: 1 / 0; -1 = solver default
  int accelerated = -1;           ///< SimpleNPKL accelerated: 1 / 0; -1 = solver default
  int newton = -1;                ///< SimpleNPKL Newton steps: 1 / 0; -1 = solver default
  int start_rank = -1;            ///< SimpleNPKL start_rank; -1 = solver default
  double tolerance = 0.0;         ///< SimpleNPKL relative-gap / KL-ADMM stopping tolerance; 0 = solver default
  /// Progress sink handed to the solver (empty: none).
  std::function<void(const ProgressEvent&)> progress;
  /// The caller's cancellation and deadline (auto's budget, cross-validation's
  /// deadline), handed to the solver with `progress`.
  SolveControl stop;
  /// Warm start: the factor of an earlier kernel of the same points (null: cold).
  InitialFactor initial_factor;
};

/// Solves with the named method; the result's stats carry timings.
StatusOr<NpklResult> RunMethod(const MethodSpec& method, const NpklProblem& problem, const RunParams& params);

/// `--C auto`: CrossValidate (core/npkl/cross_validation.h, the code the
/// server's cross_validation option runs) with `params`' method over
/// `cv.grid`, each learn single-threaded with cv.num_threads learns in
/// parallel, then the learn on every pair with the chosen value (params.c is
/// ignored). `laplacian(value)` is the problem's Laplacian for a value
/// (BCDNPKL's δ = C/2 follows C). The cross-validation lands in *cv_result.
StatusOr<NpklResult> RunMethodAuto(const MethodSpec& method,
                                   const std::function<const Eigen::SparseMatrix<double>&(double)>& laplacian,
                                   const PairwiseConstraints& constraints, const RunParams& params,
                                   const CrossValidationOptions& cv, CrossValidationResult* cv_result);

/// `--method itml` (core/metric/itml.h): ITML on `features` (n × d, the rows
/// the constraints index) with γ = params.c (0 = ITML's default 1), seed
/// params.seed, iteration cap params.max_iterations; no graph. The result's
/// kernel is K = (X L)(X L)ᵀ over those n rows, stats are ITML's (iterations =
/// sweeps), duality_gap NaN; *factor (if not null) receives L (d × r), so any
/// other rows X' get the exact kernel factor X' L.
StatusOr<NpklResult> RunItml(const Eigen::MatrixXd& features, const PairwiseConstraints& constraints,
                             const RunParams& params, Eigen::MatrixXd* factor = nullptr);

/// `--C auto` for ITML: CrossValidate over cv.grid (γ values) with RunItml as
/// the learn, then the learn on every pair with the chosen γ.
StatusOr<NpklResult> RunItmlAuto(const Eigen::MatrixXd& features, const PairwiseConstraints& constraints,
                                 const RunParams& params, const CrossValidationOptions& cv,
                                 CrossValidationResult* cv_result, Eigen::MatrixXd* factor = nullptr);

/// `--method auto`: the candidates of core/npkl/auto_select.h on `features`
/// (and on their z-scores when `try_zscore`): each family of kAutoFamilies
/// over the protocol's graph (`protocol`, `k`; BCDNPKL's δ = C/2 follows the
/// value) with `params` (threads 1), then the plain kernels (for the score
/// with `clusters`: PlainKernelCandidate; the diffusion kernel on BCDNPKL's
/// graph of the protocol: DiffusionKernelCandidate). A candidate's
/// learn on every pair with its chosen value is the kernel `auto` stores.
StatusOr<std::vector<AutoCandidate>> AutoCandidates(const Eigen::MatrixXd& features, bool try_zscore,
                                                    const std::string& protocol, int k, int clusters,
                                                    const RunParams& params);

/// Default C / γ per family: KL-ADMM γ = 10, BCDNPKL C = 1, SimpleNPKL C = 1.
double DefaultC(const MethodSpec& method);

}  // namespace kls::bench
