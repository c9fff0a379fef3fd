#include "core/embed/embedding_minimax.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <LBFGS.h>  // LBFGSpp (Debian liblbfgspp-dev), header-only, Eigen-based

namespace kls {

struct EmbeddingCurvatureMemory::State {
  LBFGSpp::BFGSMat<double> pairs;
  int dimension = 0;  // 0: pairs not sized yet
};

EmbeddingCurvatureMemory::EmbeddingCurvatureMemory() : state_(std::make_unique<State>()) {}
EmbeddingCurvatureMemory::~EmbeddingCurvatureMemory() = default;
EmbeddingCurvatureMemory::EmbeddingCurvatureMemory(EmbeddingCurvatureMemory&&) noexcept = default;
EmbeddingCurvatureMemory& EmbeddingCurvatureMemory::operator=(EmbeddingCurvatureMemory&&) noexcept = default;

namespace {

// Everything the loop needs at one dual point α.
struct Iterate {
  Eigen::VectorXd alpha;
  Eigen::MatrixXd v;     // n × r, K(α) = v vᵀ
  Eigen::VectorXd z;     // z_k = tr(T_k K) per pair
  Eigen::VectorXd grad;  // ∇J(α)
  double primal = 0.0, dual = 0.0;
  bool Finite() const { return std::isfinite(primal) && std::isfinite(dual) && v.allFinite(); }
};

double RelativeGap(const Iterate& x) { return (x.primal - x.dual) / std::max(1.0, std::abs(x.primal)); }

class Evaluator {
 public:
  Evaluator(const EmbeddingMinimaxProblem& p, const EmbeddingMinimaxOptions& o)
      : p_(p), o_(o), a_(p.num_points, p.prior, p.pair_i, p.pair_j) {
    spectrum_.dense_threshold = o.dense_threshold;
    spectrum_.lanczos_tolerance = o.lanczos_tolerance;
  }

  Eigen::VectorXd Project(const Eigen::VectorXd& a) const {
    return p_.slack == EmbeddingMinimaxProblem::Slack::kSquare ? a : ProjectCappedSimplex(a, o_.c);
  }

  // Pair weights w(α) of A = H (M + Σ w_k T_k) H.
  Eigen::VectorXd Weights(const Eigen::VectorXd& alpha) const {
    if (p_.slack == EmbeddingMinimaxProblem::Slack::kSquare) return alpha;
    Eigen::VectorXd w = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(p_.pair_i.size()));
    for (int t = 0; t < alpha.size(); ++t) {
      if (alpha[t] == 0.0) continue;
      w[p_.triplet_far[t]] += alpha[t];
      w[p_.triplet_near[t]] -= alpha[t];
    }
    return w;
  }

  Status Evaluate(const Eigen::VectorXd& alpha, Iterate* out) {
    a_.set_weights(Weights(alpha));
    spectrum_.initial_rank = rank_hint_;
    const Eigen::VectorXd* warm = warm_.size() > 0 ? &warm_ : nullptr;
    KLS_ASSIGN_OR_RETURN(PositiveSpectrum s, EmbeddingPositiveSpectrum(a_, spectrum_, warm));
    rank_hint_ = std::max(2, s.rank() + 2);
    if (s.rank() > 0) {
      warm_ = s.eigenvectors.rowwise().sum();
    } else {
      warm_.resize(0);
    }
    const double norm = s.eigenvalues.norm();  // ‖A₊‖_F
    const double root_b = std::sqrt(o_.b);
    out->alpha = alpha;
    if (norm > 0.0) {
      // (3.8) with p = 2: K = √B A₊ / ‖A₊‖_F.
      const Eigen::VectorXd lambda = (root_b / norm) * s.eigenvalues;
      out->v = s.eigenvectors * lambda.cwiseSqrt().asDiagonal();
    } else {
      out->v = Eigen::MatrixXd::Zero(p_.num_points, 0);
    }
    const int m = static_cast<int>(p_.pair_i.size());
    out->z.resize(m);
    for (int k = 0; k < m; ++k) out->z[k] = (out->v.row(p_.pair_i[k]) - out->v.row(p_.pair_j[k])).squaredNorm();
    const double tr_mk = p_.prior.TraceWith(out->v);
    const double c = o_.c;
    if (p_.slack == EmbeddingMinimaxProblem::Slack::kSquare) {
      const Eigen::VectorXd residual = p_.target - out->z;  // ξ = D − tr(T K)
      out->primal = -tr_mk + 0.5 * c * residual.squaredNorm();
      out->dual = -root_b * norm + alpha.dot(p_.target) - alpha.squaredNorm() / (2.0 * c);  // (3.25)
      out->grad = residual - alpha / c;
    } else {
      const int nt = static_cast<int>(p_.triplet_near.size());
      out->grad.resize(nt);
      double worst = 0.0;  // ξ = max(0, max_t D_near − D_far)
      for (int t = 0; t < nt; ++t) {
        const double g = out->z[p_.triplet_near[t]] - out->z[p_.triplet_far[t]];
        out->grad[t] = g;  // ∇J_t = tr K (T_near − T_far), §3.4.3
        worst = std::max(worst, g);
      }
      out->primal = -tr_mk + c * worst;
      out->dual = -root_b * norm;
    }
    return OkStatus();
  }

 private:
  const EmbeddingMinimaxProblem& p_;
  const EmbeddingMinimaxOptions& o_;
  EmbeddingDualMatrix a_;
  SpectrumOptions spectrum_;
  int rank_hint_ = 2;
  Eigen::VectorXd warm_;
};

// Shared bookkeeping of one solve: the iteration count (stats->iterations,
// one per spectrum evaluation accepted as an iterate), P history and the
// progress stream (elapsed time since the solver started).
struct Run {
  const EmbeddingMinimaxOptions& options;
  const SolveControl& control;
  const Stopwatch& watch;
  SolveStats* stats;

  int iterations() const { return stats->iterations; }
  void Accept(const Iterate& x, double step_inf) {
    ++stats->iterations;
    stats->objective_history.push_back(x.primal);
    ProgressEvent e;
    e.iteration = stats->iterations;
    e.objective = x.primal;
    e.primal_residual = RelativeGap(x);
    e.dual_residual = step_inf;
    e.elapsed_seconds = watch.Seconds();
    e.max_iterations = options.max_iterations;
    control.Report(e);
  }
};

// Projected gradient ascent on J from `cur` (the thesis's Algorithm 5 step,
// any slack). Returns how it ended; `cur` is the last accepted iterate.
StatusOr<Termination> ProjectedGradient(Evaluator& eval, Run& run, Iterate& cur) {
  const EmbeddingMinimaxOptions& options = run.options;
  double eta = options.initial_eta;
  while (run.iterations() < options.max_iterations) {
    Termination why;
    if (run.control.ShouldStop(&why)) return why;
    Iterate next;
    Eigen::VectorXd delta;
    bool ok = false, backtracked = false;
    for (int bt = 0; bt < options.max_backtracks; ++bt) {
      const Eigen::VectorXd alpha_new = eval.Project(cur.alpha + cur.grad / eta);
      delta = alpha_new - cur.alpha;
      KLS_RETURN_IF_ERROR(eval.Evaluate(alpha_new, &next));
      if (!next.Finite()) break;
      // Ascent inequality of Prop. 3.28 ((3.21) with α = α_{t+1}).
      const double lower = cur.dual + cur.grad.dot(delta) - 0.5 * eta * delta.squaredNorm();
      if (next.dual >= lower - 1e-12 * (1.0 + std::abs(cur.dual))) {
        ok = true;
        break;
      }
      eta *= 2.0;
      backtracked = true;
    }
    if (!ok) return Termination::kNumericalIssue;
    if (!backtracked) eta *= 0.5;
    const double step_inf = delta.size() > 0 ? delta.cwiseAbs().maxCoeff() : 0.0;
    cur = std::move(next);
    run.Accept(cur, step_inf);
    if (RelativeGap(cur) <= options.tolerance) return Termination::kConverged;
    // A fixed point of the projected step is optimal in exact arithmetic;
    // a remaining gap means the spectrum is not accurate enough.
    if (step_inf == 0.0) return Termination::kNumericalIssue;
  }
  return Termination::kIterationLimit;
}

constexpr int kLbfgsMemory = 160;  // pairs: 26–35% fewer spectra than 40 on MVE, 12–25% for 40 vs 10 (docs/EMBEDDING.md)

// L-BFGS (Nocedal & Wright 2006, Alg. 7.5) on f from x: the curvature pairs
// and the two-loop recursion are LBFGSpp's BFGSMat, the step LBFGSpp's
// strong-Wolfe line search; the loop is ours so that `pairs` can come from an
// earlier solve of a nearby problem. Runs until `f` throws (it enforces the
// stop rules) or the line search fails (std::exception).
template <typename F>
void MinimizeLbfgs(F& f, Eigen::VectorXd& x, LBFGSpp::BFGSMat<double>& pairs,
                   const LBFGSpp::LBFGSParam<double>& param) {
  Eigen::VectorXd grad(x.size()), xp, gradp, drt;
  double fx = f(x, grad);
  double step = 1.0;
  if (pairs.num_corrections() > 0) {
    pairs.apply_Hv(grad, -1.0, drt);
    if (!(drt.dot(grad) < 0.0)) pairs.reset(static_cast<int>(x.size()), param.m);  // not a descent direction
  }
  if (pairs.num_corrections() == 0) {
    if (grad.norm() == 0.0) return;  // stationary: nothing to do
    drt = -grad;
    step = 1.0 / drt.norm();
  }
  for (;;) {
    xp = x;
    gradp = grad;
    LBFGSpp::LineSearchNocedalWright<double>::LineSearch(f, fx, x, grad, step, drt, xp, param);
    const Eigen::VectorXd s = x - xp, y = grad - gradp;
    // Strong Wolfe gives sᵀy > 0 for a C¹ f; J is only C¹ where rank A₊
    // changes, so keep only pairs with clearly positive curvature.
    if (s.dot(y) > 1e-12 * s.norm() * y.norm()) pairs.add_correction(s, y);
    if (pairs.num_corrections() == 0) {
      drt = -grad;
      step = 1.0 / std::max(drt.norm(), 1e-300);
      continue;
    }
    pairs.apply_Hv(grad, -1.0, drt);
    step = 1.0;
  }
}

// L-BFGS on −J for the square slack, whose dual is unconstrained: J is
// (1/C)-strongly concave and, where A(α)₊ ≠ 0, differentiable with the
// Lipschitz gradient ∇J = D − tr(T K(α)) − α/C (K(α) is a projection onto the
// PSD cone, a 1-Lipschitz map, scaled), so a quasi-Newton model converges in
// far fewer spectra than the gradient step when C is large (its condition
// number grows like L·C). Every function evaluation is a full iterate with a
// certified gap, so the loop stops on the same rule as the gradient loop;
// the line search's trial points count as iterations (each costs a spectrum).
// Returns kIterationLimit (and `cur` = the best iterate) when L-BFGS gives up
// before the gap closes; the caller then continues with ProjectedGradient.
StatusOr<Termination> QuasiNewton(Evaluator& eval, Run& run, Iterate& cur, EmbeddingCurvatureMemory* memory) {
  struct Stop {
    Termination why;
  };
  Iterate best = cur;
  Eigen::VectorXd last_alpha = cur.alpha;
  int unusable_in_a_row = 0;
  auto objective = [&](const Eigen::VectorXd& alpha, Eigen::VectorXd& grad) -> double {
    Termination why;
    if (run.control.ShouldStop(&why)) throw Stop{why};
    if (run.iterations() >= run.options.max_iterations) throw Stop{Termination::kIterationLimit};
    // A NaN trial point means the quasi-Newton state broke down (e.g. a zero
    // curvature pair); so does a run of unusable points. Hand over to the
    // gradient loop: every call must make progress or end L-BFGS.
    if (alpha.hasNaN() || ++unusable_in_a_row > 20) throw std::runtime_error("L-BFGS breakdown");
    Iterate x;
    // A trial point of an overlong line-search step can be non-finite or make
    // A so large that the eigensolver fails: report it as +∞ so the line
    // search shrinks the step (the gradient loop takes over if it cannot).
    const bool usable = alpha.allFinite() && eval.Evaluate(alpha, &x).ok();
    if (!usable || !x.Finite()) {
      // Tell the line search this point is unusable (+∞ makes it shrink).
      grad = -cur.grad;
      return std::numeric_limits<double>::infinity();
    }
    unusable_in_a_row = 0;
    const double step_inf = (alpha - last_alpha).cwiseAbs().maxCoeff();
    last_alpha = alpha;
    run.Accept(x, step_inf);
    grad = -x.grad;
    const double value = -x.dual;
    if (x.dual > best.dual) best = x;
    if (RelativeGap(x) <= run.options.tolerance) {
      best = std::move(x);
      throw Stop{Termination::kConverged};
    }
    return value;
  };
  LBFGSpp::LBFGSParam<double> param;
  param.m = kLbfgsMemory;
  param.max_linesearch = 40;
  param.linesearch = LBFGSpp::LBFGS_LINESEARCH_BACKTRACKING_STRONG_WOLFE;
  EmbeddingCurvatureMemory fresh;
  EmbeddingCurvatureMemory::State& state = (memory != nullptr ? *memory : fresh).state();
  LBFGSpp::BFGSMat<double>& pairs = state.pairs;
  const int nd = static_cast<int>(cur.alpha.size());
  if (state.dimension != nd) {
    pairs.reset(nd, param.m);
    state.dimension = nd;
  }
  Termination why = Termination::kIterationLimit;
  // A breakdown (line search failure, zero curvature, J only C¹ where the
  // rank of A₊ changes) restarts L-BFGS with an empty memory from the best
  // iterate, as long as the previous run improved J; then the gradient loop
  // takes the best iterate.
  for (bool improved = true; improved;) {
    const double before = best.dual;
    Eigen::VectorXd alpha = best.alpha;
    last_alpha = alpha;
    unusable_in_a_row = 0;
    try {
      MinimizeLbfgs(objective, alpha, pairs, param);
      break;  // ∇J = 0 exactly at the start
    } catch (const Stop& s) {
      why = s.why;
      break;
    } catch (const std::exception&) {
      improved = best.dual > before + 1e-12 * (1.0 + std::abs(before));
      pairs.reset(nd, param.m);
    }
  }
  cur = std::move(best);
  return why;
}

StatusOr<EmbeddingMinimaxResult> Solve(const EmbeddingMinimaxProblem& problem,
                                       const EmbeddingMinimaxOptions& requested, const SolveControl& control,
                                       const Eigen::VectorXd* alpha0, EmbeddingCurvatureMemory* memory) {
  Stopwatch setup_watch;
  KLS_RETURN_IF_ERROR(requested.Validate());
  KLS_RETURN_IF_ERROR(problem.Validate());
  EmbeddingMinimaxOptions options = requested;  // with the absolute slack weight
  options.c = SlackWeight(problem, requested);
  options.relative_slack = false;
  const int nd = problem.num_duals();
  if (alpha0 != nullptr && alpha0->size() != nd) {
    return InvalidArgumentError("alpha0: has " + std::to_string(alpha0->size()) + " values but the problem has " +
                                std::to_string(nd) + " dual variables");
  }
  Evaluator eval(problem, options);
  Iterate cur;
  const Eigen::VectorXd start = alpha0 != nullptr ? eval.Project(*alpha0) : Eigen::VectorXd::Zero(nd);
  KLS_RETURN_IF_ERROR(eval.Evaluate(start, &cur));

  EmbeddingMinimaxResult result;
  SolveStats& stats = result.stats;
  stats.setup_seconds = setup_watch.Seconds();
  Stopwatch solve_watch;
  stats.objective_history.push_back(cur.primal);
  Run run{options, control, setup_watch, &stats};
  Termination termination = Termination::kIterationLimit;
  if (!cur.Finite()) {
    termination = Termination::kNumericalIssue;
  } else if (RelativeGap(cur) <= options.tolerance) {
    termination = Termination::kConverged;
  } else {
    const bool quasi_newton = options.method == EmbeddingMinimaxOptions::Method::kLbfgs &&
                              problem.slack == EmbeddingMinimaxProblem::Slack::kSquare && nd > 0;
    if (quasi_newton) {
      KLS_ASSIGN_OR_RETURN(termination, QuasiNewton(eval, run, cur, memory));
      result.quasi_newton_iterations = run.iterations();
    }
    if (termination == Termination::kIterationLimit && run.iterations() < options.max_iterations) {
      KLS_ASSIGN_OR_RETURN(termination, ProjectedGradient(eval, run, cur));
    }
  }
  stats.termination = termination;
  stats.final_objective = cur.primal;
  stats.solve_seconds = solve_watch.Seconds();
  result.primal = cur.primal;
  result.dual = cur.dual;
  result.duality_gap = RelativeGap(cur);
  result.stationarity =
      nd == 0 ? 0.0 : (cur.alpha - eval.Project(cur.alpha + cur.grad)).cwiseAbs().maxCoeff();
  result.slack_weight = options.c;
  result.alpha = std::move(cur.alpha);
  result.v = std::move(cur.v);
  return result;
}

}  // namespace

Status EmbeddingMinimaxProblem::Validate() const {
  const int n = num_points;
  if (n < 2) return InvalidArgumentError("num_points = " + std::to_string(n) + " must be >= 2");
  KLS_RETURN_IF_ERROR(prior.Validate(n));
  if (pair_i.size() != pair_j.size()) {
    return InvalidArgumentError("pair_j: has " + std::to_string(pair_j.size()) + " entries but pair_i has " +
                                std::to_string(pair_i.size()));
  }
  const int m = static_cast<int>(pair_i.size());
  for (int k = 0; k < m; ++k) {
    const int i = pair_i[k], j = pair_j[k];
    if (i < 0 || i >= n || j < 0 || j >= n || i == j) {
      return InvalidArgumentError("pair " + std::to_string(k) + " = (" + std::to_string(i) + ", " +
                                  std::to_string(j) + ") must be two different points in [0, " + std::to_string(n) +
                                  ")");
    }
  }
  if (slack == Slack::kSquare) {
    if (target.size() != m) {
      return InvalidArgumentError("target: has " + std::to_string(target.size()) + " values but there are " +
                                  std::to_string(m) + " pairs");
    }
    for (int k = 0; k < m; ++k)
      if (!(target[k] >= 0.0) || !std::isfinite(target[k])) {
        return InvalidArgumentError("target[" + std::to_string(k) + "] = " + FormatNumber(target[k]) +
                                    " must be a finite squared distance >= 0");
      }
  } else {
    if (triplet_near.size() != triplet_far.size()) {
      return InvalidArgumentError("triplet_far: has " + std::to_string(triplet_far.size()) +
                                  " entries but triplet_near has " + std::to_string(triplet_near.size()));
    }
    for (size_t t = 0; t < triplet_near.size(); ++t) {
      if (triplet_near[t] < 0 || triplet_near[t] >= m || triplet_far[t] < 0 || triplet_far[t] >= m) {
        return InvalidArgumentError("triplet " + std::to_string(t) + " refers to pair " +
                                    std::to_string(std::min(triplet_near[t], triplet_far[t]) < 0
                                                       ? std::min(triplet_near[t], triplet_far[t])
                                                       : std::max(triplet_near[t], triplet_far[t])) +
                                    " but there are " + std::to_string(m) + " pairs");
      }
    }
  }
  return OkStatus();
}

Status EmbeddingMinimaxOptions::Validate() const {
  KLS_RETURN_IF_ERROR(CheckPositiveOption("c", c));
  KLS_RETURN_IF_ERROR(CheckPositiveOption("b", b));
  if (max_iterations < 1) {
    return InvalidArgumentError("options.max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError("options.tolerance = " + FormatNumber(tolerance) + " must be finite and >= 0");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("initial_eta", initial_eta));
  if (max_backtracks < 1) {
    return InvalidArgumentError("options.max_backtracks = " + std::to_string(max_backtracks) + " must be >= 1");
  }
  if (dense_threshold < 0) {
    return InvalidArgumentError("options.dense_threshold = " + std::to_string(dense_threshold) + " must be >= 0");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("lanczos_tolerance", lanczos_tolerance));
  return OkStatus();
}

double SlackWeight(const EmbeddingMinimaxProblem& problem, const EmbeddingMinimaxOptions& options) {
  if (!options.relative_slack || problem.slack != EmbeddingMinimaxProblem::Slack::kSquare) return options.c;
  if (problem.target.size() == 0) return options.c;
  const double mean = problem.target.mean();
  return mean > 0.0 && std::isfinite(mean) ? options.c / (mean * mean) : options.c;
}

Eigen::VectorXd ProjectCappedSimplex(const Eigen::VectorXd& a, double cap) {
  // Onto {α >= 0, Σ α <= cap}: (a)₊ if it fits, else (a − θ)₊ with
  // Σ (a − θ)₊ = cap, θ > 0. Michelot's fixed point (Math. Prog. 1986):
  // θ = (Σ_S a − cap) / |S| over the current support S (at first the positive
  // entries), then drop the entries <= θ; θ rises monotonically and S shrinks
  // to the support of the projection in a few O(|S|) passes, with no sort
  // (SPE's dual has ~n·k·n entries and is projected once per step; a sort
  // dominated the solve). θ < max(S) always, so S never empties.
  std::vector<double> support;
  double total = 0.0;
  for (Eigen::Index i = 0; i < a.size(); ++i)
    if (a[i] > 0.0) {
      support.push_back(a[i]);
      total += a[i];
    }
  if (total <= cap) return a.cwiseMax(0.0);
  double theta = 0.0;
  while (true) {
    theta = (total - cap) / static_cast<double>(support.size());
    const size_t before = support.size();
    support.erase(std::remove_if(support.begin(), support.end(), [theta](double v) { return v <= theta; }),
                  support.end());
    if (support.size() == before) break;
    total = 0.0;
    for (double v : support) total += v;
  }
  return (a.array() - theta).max(0.0).matrix();
}

StatusOr<EmbeddingMinimaxResult> SolveEmbeddingMinimax(const EmbeddingMinimaxProblem& problem,
                                                       const EmbeddingMinimaxOptions& options,
                                                       const SolveControl& control, const Eigen::VectorXd* alpha0,
                                                       EmbeddingCurvatureMemory* memory) {
  return GuardExceptions("embedding minimax", [&] { return Solve(problem, options, control, alpha0, memory); });
}

}  // namespace kls
