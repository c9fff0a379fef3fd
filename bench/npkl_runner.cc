#include "bench/npkl_runner.h"
#include <map>
#include <memory>
#include <mutex>

#include "core/data/constraint_generators.h"
#include "core/data/feature_scaling.h"
#include "core/eval/baselines.h"
#include "core/graph/laplacian.h"
#include "core/metric/itml.h"
#include "core/npkl/bcd_npkl.h"
#include "core/npkl/kl_admm.h"
#include "core/npkl/simple_npkl.h"

namespace kls::bench {
namespace {
SolveControl Control(const RunParams& params) {
  SolveControl control = params.stop.StopConditions();
  control.progress = params.progress;
  return control;
}
}  // namespace

StatusOr<MethodSpec> ParseMethod(const std::string& name) {
  using F = MethodSpec::Family;
  static const struct { const char* name; F family; NpklLoss loss; } kMethods[] = {
      {"admm", F::kAdmm, NpklLoss::kSquare},
      {"bcd-hl", F::kBcd, NpklLoss::kHinge},
      {"bcd-shl", F::kBcd, NpklLoss::kSquareHinge},
      {"bcd-sl", F::kBcd, NpklLoss::kSquare},
      {"simplenpkl-ll", F::kSimple, NpklLoss::kLinear},
      {"simplenpkl-hl", F::kSimple, NpklLoss::kHinge},
      {"simplenpkl-shl", F::kSimple, NpklLoss::kSquareHinge},
      {"simplenpkl-sl", F::kSimple, NpklLoss::kSquare},
  };
  for (const auto& m : kMethods) {
    if (name == m.name) return MethodSpec{name, m.family, m.loss};
  }
  return InvalidArgumentError("--method = \"" + name +
                              "\" is not one of admm, bcd-hl, bcd-shl, bcd-sl, simplenpkl-ll, "
                              "simplenpkl-hl, simplenpkl-shl, simplenpkl-sl");
}

double DefaultC(const MethodSpec& method) { return method.family == MethodSpec::Family::kAdmm ? 10.0 : 1.0; }

StatusOr<Protocol> MakeProtocol(const std::string& name, const MethodSpec& method, int k, double c) {
  Protocol p;
  p.name = name;
  p.graph.k = k;
  if (name == "admm") {
    p.graph.weight = EdgeWeight::kGaussian;
  } else if (name == "bcd" || name == "simplenpkl") {
    p.graph.weight = EdgeWeight::kBinary;
  } else {
    return InvalidArgumentError("--protocol = \"" + name + "\" is not one of bcd, admm, simplenpkl");
  }
  // BCDNPKL §4.2 sets δ = C/2; its boundary reduction needs Δ_UU ≻ 0.
  p.graph.delta = method.family == MethodSpec::Family::kBcd ? c / 2.0 : 0.0;
  return p;
}

StatusOr<PairwiseConstraints> MakeConstraints(const std::string& protocol, const std::vector<int>& labels,
                                              uint64_t seed) {
  ConstraintProtocol request;
  request.name = protocol;
  request.seed = seed;
  return GenerateProtocol(request, labels, "--protocol");
}

StatusOr<NpklResult> RunMethod(const MethodSpec& method, const NpklProblem& problem, const RunParams& params) {
  const double c = params.c > 0 ? params.c : DefaultC(method);
  switch (method.family) {
    case MethodSpec::Family::kAdmm: {
      KlAdmmOptions o;
      o.gamma = c;
      o.seed = params.seed;
      o.num_threads = params.threads;
      if (params.max_iterations > 0) o.max_iterations = params.max_iterations;
      o.rank = params.rank;
      if (params.lbfgs_memory > 0) o.lbfgs_memory = params.lbfgs_memory;
      if (params.lbfgs_precondition >= 0) o.lbfgs_precondition = params.lbfgs_precondition != 0;
      if (params.switch_tolerance > 0) o.polish_switch_tolerance = params.switch_tolerance;
      if (params.multilevel >= 0) o.multilevel_min_points = params.multilevel;
      if (params.tolerance > 0.0) o.tolerance = params.tolerance;
      if (params.admm_mode == "paper") {
        o.polish = KlAdmmOptions::Polish::kNone;
      } else if (params.admm_mode == "polish") {
        o.polish = KlAdmmOptions::Polish::kLbfgs;
      } else if (!params.admm_mode.empty()) {
        return InvalidArgumentError("--admm-mode = \"" + params.admm_mode + "\" is not one of paper, polish");
      }
      if (params.escalation >= 0) o.rank_escalation = params.escalation != 0;
      o.initial_factor = params.initial_factor;
      return SolveKlAdmm(problem, o, Control(params), params.factor_diagnostics);
    }
    case MethodSpec::Family::kBcd: {
      BcdNpklOptions o;
      o.loss = method.loss;
      o.c = c;
      o.seed = params.seed;
      if (params.max_iterations > 0) o.max_iterations = params.max_iterations;
      if (params.omega > 0.0) o.over_relaxation = params.omega;
      o.rank = params.rank;
      if (params.escalation >= 0) o.rank_escalation = params.escalation != 0;
      // One thread unless --threads is given: at the rank the escalation ends
      // at (4 on adult-like data) the block GEMMs are thin and memory-bound,
      // and 2 threads measured slower (docs/BENCHMARKS.md).
      o.num_threads = params.threads > 0 ? params.threads : 1;
      o.initial_factor = params.initial_factor;
      return SolveBcdNpkl(problem, o, Control(params), params.factor_diagnostics);
    }
    case MethodSpec::Family::kSimple: {
      SimpleNpklOptions o;
      o.loss = method.loss;
      o.c = c;
      o.b = params.b > 0 ? params.b : 1.0;
      if (params.max_iterations > 0) o.max_iterations = params.max_iterations;
      if (params.block_warm_start >= 0) o.block_warm_start = params.block_warm_start != 0;
      if (params.tighten_factor > 0.0) o.tighten_factor = params.tighten_factor;
      if (params.adaptive_step >= 0) o.adaptive_step = params.adaptive_step != 0;
      if (params.accelerated >= 0) o.accelerated = params.accelerated != 0;
      if (params.newton >= 0) o.newton = params.newton != 0;
      if (params.start_rank >= 0) o.start_rank = params.start_rank;
      if (params.tolerance > 0.0) o.tolerance = params.tolerance;
      o.num_threads = params.threads;
      o.initial_factor = params.initial_factor;
      return SolveSimpleNpkl(problem, o, Control(params));
    }
  }
  return InternalError("unknown method family");
}

StatusOr<NpklResult> RunMethodAuto(const MethodSpec& method,
                                   const std::function<const Eigen::SparseMatrix<double>&(double)>& laplacian,
                                   const PairwiseConstraints& constraints, const RunParams& params,
                                   const CrossValidationOptions& cv, CrossValidationResult* cv_result) {
  LearnKernelFn learn = [&](const PairwiseConstraints& train, double value,
                            const SolveControl& control) -> StatusOr<LearnedKernel> {
    RunParams p = params;
    p.c = value;
    p.stop = control;
    p.threads = 1;
    p.progress = nullptr;
    p.factor_diagnostics = nullptr;
    KLS_ASSIGN_OR_RETURN(NpklResult r, RunMethod(method, NpklProblem{laplacian(value), train}, p));
    return std::move(r.kernel);
  };
  KLS_ASSIGN_OR_RETURN(*cv_result, CrossValidate(constraints, learn, cv));
  RunParams p = params;
  p.c = cv_result->best_value;
  return RunMethod(method, NpklProblem{laplacian(p.c), constraints}, p);
}

StatusOr<std::vector<AutoCandidate>> AutoCandidates(const Eigen::MatrixXd& features, bool try_zscore,
                                                    const std::string& protocol, int k, int clusters,
                                                    const RunParams& params) {
  struct Scaled {
    std::string name;
    std::shared_ptr<const Eigen::MatrixXd> x;
  };
  std::vector<Scaled> scaled = {{"none", std::make_shared<const Eigen::MatrixXd>(features)}};
  if (try_zscore) {
    KLS_ASSIGN_OR_RETURN(FeatureScaler scaler, FeatureScaler::Fit(features, FeatureScaling::kZScore));
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd z, scaler.Apply(features));
    scaled.push_back({"zscore", std::make_shared<const Eigen::MatrixXd>(std::move(z))});
  }
  const CrossValidationOptions grid_source;  // the default grid {0.1, 1, 10}
  auto family = [&](const AutoFamilyChoice& f, const Scaled& s) -> StatusOr<AutoCandidate> {
    const std::string family_name = f.family;
    MethodSpec m{f.name, family_name == "kl_admm"   ? MethodSpec::Family::kAdmm
                         : family_name == "bcd_npkl" ? MethodSpec::Family::kBcd
                                                     : MethodSpec::Family::kSimple,
                 f.has_loss ? f.loss : NpklLoss::kSquare};
    // One Laplacian per value when δ follows C (BCDNPKL), else one; a value
    // off the default grid (auto's refinement) gets its own on first use.
    auto laplacians = std::make_shared<std::map<double, Eigen::SparseMatrix<double>>>();
    auto mutex = std::make_shared<std::mutex>();
    auto build = [m, protocol, k, x = s.x](double v) -> StatusOr<Eigen::SparseMatrix<double>> {
      KLS_ASSIGN_OR_RETURN(Protocol p, MakeProtocol(protocol, m, k, v));
      KLS_ASSIGN_OR_RETURN(Graph g, BuildGraph(*x, p.graph));
      return std::move(g.laplacian);
    };
    for (double v : grid_source.grid) {
      KLS_ASSIGN_OR_RETURN((*laplacians)[v], build(v));
      if (m.family != MethodSpec::Family::kBcd) break;
    }
    RunParams base = params;
    base.threads = 1;
    base.progress = nullptr;
    base.factor_diagnostics = nullptr;
    AutoCandidate c;
    c.name = f.name;
    c.scaling = s.name;
    c.grid = grid_source.grid;
    c.learn = [m, laplacians, mutex, build, base](const PairwiseConstraints& train, double value,
                                                  const SolveControl& control) -> StatusOr<LearnedKernel> {
      const Eigen::SparseMatrix<double>* lp = &laplacians->begin()->second;  // δ independent of C: one for all
      if (m.family == MethodSpec::Family::kBcd) {
        std::lock_guard<std::mutex> lock(*mutex);  // std::map: references stay valid as it grows
        auto it = laplacians->find(value);
        if (it == laplacians->end()) {
          KLS_ASSIGN_OR_RETURN(Eigen::SparseMatrix<double> built, build(value));
          it = laplacians->emplace(value, std::move(built)).first;
        }
        lp = &it->second;
      }
      const Eigen::SparseMatrix<double>& l = *lp;
      RunParams p = base;
      p.c = value;
      p.stop = control;  // the budget's deadline reaches the solver
      NpklProblem problem{l, train};
      if (m.family == MethodSpec::Family::kBcd) {  // as the server's bcd_npkl: the admm protocol's self pairs left out
        problem.constraints.pairs.clear();
        for (const Pair& q : train.pairs)
          if (q.i != q.j) problem.constraints.pairs.push_back(q);
      }
      KLS_ASSIGN_OR_RETURN(NpklResult r, RunMethod(m, problem, p));
      return std::move(r.kernel);
    };
    return c;
  };
  std::vector<AutoCandidate> out;
  for (const AutoSlot& slot : AutoOrder(static_cast<int>(scaled.size()))) {
    const Scaled& s = scaled[slot.scaling];
    if (slot.plain >= 0) {
      const std::string name = kAutoPlainKernels[slot.plain];
      if (name == "diffusion") {  // on BCDNPKL's graph of the protocol, as the server's auto (δ only scales it)
        if (s.x->rows() > kDiffusionMaxPoints) continue;
        const MethodSpec bcd{"bcd-sl", MethodSpec::Family::kBcd, NpklLoss::kSquare};
        out.push_back(DiffusionKernelCandidate(
            [bcd, protocol, k, x = s.x]() -> StatusOr<Eigen::SparseMatrix<double>> {
              KLS_ASSIGN_OR_RETURN(Protocol p, MakeProtocol(protocol, bcd, k, DefaultC(bcd)));
              KLS_ASSIGN_OR_RETURN(Graph g, BuildGraph(*x, p.graph));
              return std::move(g.laplacian);
            },
            s.name));
      } else {
        out.push_back(PlainKernelCandidate(s.x, name, s.name, clusters));
      }
      continue;
    }
    KLS_ASSIGN_OR_RETURN(AutoCandidate c, family(kAutoFamilies[slot.family], s));
    out.push_back(std::move(c));
  }
  return out;
}

StatusOr<NpklResult> RunItml(const Eigen::MatrixXd& features, const PairwiseConstraints& constraints,
                             const RunParams& params, Eigen::MatrixXd* factor) {
  ItmlOptions o;
  if (params.c > 0) o.gamma = params.c;
  o.seed = params.seed;
  if (params.max_iterations > 0) o.max_iterations = params.max_iterations;
  KLS_ASSIGN_OR_RETURN(ItmlResult r, SolveItml(features, constraints, o, Control(params)));
  NpklResult out;
  KLS_ASSIGN_OR_RETURN(out.kernel, LearnedKernel::FromEmbedding(LearnedKernel::Embedding(features * r.factor)));
  out.stats = std::move(r.stats);
  if (out.stats.iterations == 0) out.stats.iterations = r.sweeps;
  if (factor) *factor = std::move(r.factor);
  return out;
}

StatusOr<NpklResult> RunItmlAuto(const Eigen::MatrixXd& features, const PairwiseConstraints& constraints,
                                 const RunParams& params, const CrossValidationOptions& cv,
                                 CrossValidationResult* cv_result, Eigen::MatrixXd* factor) {
  LearnKernelFn learn = [&](const PairwiseConstraints& train, double value,
                            const SolveControl& control) -> StatusOr<LearnedKernel> {
    RunParams p = params;
    p.c = value;
    p.stop = control;
    p.progress = nullptr;
    KLS_ASSIGN_OR_RETURN(NpklResult r, RunItml(features, train, p));
    return std::move(r.kernel);
  };
  KLS_ASSIGN_OR_RETURN(*cv_result, CrossValidate(constraints, learn, cv));
  RunParams p = params;
  p.c = cv_result->best_value;
  return RunItml(features, constraints, p, factor);
}

}  // namespace kls::bench
