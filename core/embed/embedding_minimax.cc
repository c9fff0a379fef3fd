#include "core/embed/embedding_minimax.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <Eigen/Eigenvalues>
#include <LBFGS.h>  // LBFGSpp (Debian liblbfgspp-dev), header-only, Eigen-based

#include "core/common/checkpoint_codec.h"

namespace kls {

struct EmbeddingCurvatureMemory::State {
  LBFGSpp::BFGSMat<double> pairs;
  int dimension = 0;  // 0: pairs not sized yet
  int capacity = 0;   // param.m of the last Reset
  // Set when a kNewton solve of this sequence handed over to L-BFGS (its
  // optimum sits on J's kink); the later, nearby solves then skip Newton.
  bool newton_handed_over = false;
  // The pairs (s, y) held by `pairs`, oldest first: BFGSMat keeps them
  // private, and a checkpoint needs them (Save / Restore).
  std::deque<std::pair<Eigen::VectorXd, Eigen::VectorXd>> kept;

  void Reset(int n, int m) {
    pairs.reset(n, m);
    capacity = m;
    kept.clear();
  }
  void Add(const Eigen::VectorXd& s, const Eigen::VectorXd& y) {
    pairs.add_correction(s, y);
    kept.emplace_back(s, y);
    if (static_cast<int>(kept.size()) > capacity) kept.pop_front();
  }
};

void EmbeddingCurvatureMemory::Save(ByteWriter* w) const {
  const State& s = *state_;
  w->Put<int32_t>(s.dimension);
  w->Put<int32_t>(s.capacity);
  w->Put<uint8_t>(s.newton_handed_over ? 1 : 0);
  w->Put<uint64_t>(s.kept.size());
  for (const auto& [sv, yv] : s.kept) {
    w->PutVector(sv);
    w->PutVector(yv);
  }
}

// Replays the pairs into a reset BFGSMat: its two-loop recursion then visits
// the same vectors in the same order (newest to oldest) with the same sᵀy and
// θ = yᵀy/sᵀy of the newest pair, so H·v is bit-identical.
Status EmbeddingCurvatureMemory::Restore(ByteReader* r) {
  int32_t dimension = 0, capacity = 0;
  uint8_t handed_over = 0;
  uint64_t count = 0;
  KLS_RETURN_IF_ERROR(r->Get(&dimension));
  KLS_RETURN_IF_ERROR(r->Get(&capacity));
  KLS_RETURN_IF_ERROR(r->Get(&handed_over));
  KLS_RETURN_IF_ERROR(r->Get(&count));
  if (dimension < 0 || capacity < 0 || count > static_cast<uint64_t>(capacity) ||
      (count > 0 && (dimension == 0 || capacity == 0))) {
    return DataLossError(r->what() + ": bad curvature memory");
  }
  auto fresh = std::make_unique<State>();
  fresh->newton_handed_over = handed_over != 0;
  fresh->dimension = dimension;
  if (dimension > 0 && capacity > 0) fresh->Reset(dimension, capacity);
  for (uint64_t k = 0; k < count; ++k) {
    Eigen::VectorXd sv, yv;
    KLS_RETURN_IF_ERROR(r->GetVector(&sv));
    KLS_RETURN_IF_ERROR(r->GetVector(&yv));
    if (sv.size() != dimension || yv.size() != dimension || !sv.allFinite() || !yv.allFinite()) {
      return DataLossError(r->what() + ": bad curvature pair");
    }
    fresh->Add(sv, yv);
  }
  state_ = std::move(fresh);
  return OkStatus();
}

EmbeddingCurvatureMemory::EmbeddingCurvatureMemory() : state_(std::make_unique<State>()) {}
EmbeddingCurvatureMemory::~EmbeddingCurvatureMemory() = default;
EmbeddingCurvatureMemory::EmbeddingCurvatureMemory(EmbeddingCurvatureMemory&&) noexcept = default;
EmbeddingCurvatureMemory& EmbeddingCurvatureMemory::operator=(EmbeddingCurvatureMemory&&) noexcept = default;

namespace {

// The whole spectrum of a dense A(α), split at the rounding-level threshold.
struct FullSpectrum {
  PositiveSpectrum positive;     // r pairs, descending (what Evaluate computes)
  Eigen::VectorXd rest_values;   // n − r, ascending, <= the threshold
  Eigen::MatrixXd rest_vectors;  // n × (n − r)
};

struct NewtonCounters {
  int newton_steps = 0;
  long long cg_products = 0;
};

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

  // Onto the dual set (identity for the square slack), in place, reusing the
  // evaluator's scratch (the projected-gradient loop projects tens of
  // thousands of SPE duals once per trial).
  void ProjectInPlace(Eigen::VectorXd* a) {
    if (p_.slack == EmbeddingMinimaxProblem::Slack::kMax) ProjectCappedSimplexInPlace(a, o_.c, &scratch_);
  }
  Eigen::VectorXd Project(Eigen::VectorXd a) {
    ProjectInPlace(&a);
    return a;
  }

  // Pair weights w(α) of A = H (M + Σ w_k T_k) H.
  void SetWeights(const Eigen::VectorXd& alpha) {
    if (p_.slack == EmbeddingMinimaxProblem::Slack::kSquare) {
      a_.set_weights(alpha);
      return;
    }
    weights_.setZero(static_cast<Eigen::Index>(p_.pair_i.size()));
    for (int t = 0; t < alpha.size(); ++t) {
      if (alpha[t] == 0.0) continue;
      weights_[p_.triplet_far[t]] += alpha[t];
      weights_[p_.triplet_near[t]] -= alpha[t];
    }
    a_.set_weights(weights_);
  }

  Status Evaluate(const Eigen::VectorXd& alpha, Iterate* out) {
    SetWeights(alpha);
    spectrum_.initial_rank = rank_hint_;
    const Eigen::VectorXd* warm = warm_.size() > 0 ? &warm_ : nullptr;
    KLS_ASSIGN_OR_RETURN(PositiveSpectrum s, EmbeddingPositiveSpectrum(a_, spectrum_, warm));
    rank_hint_ = std::max(2, s.rank() + 2);
    if (s.rank() > 0) {
      warm_ = s.eigenvectors.rowwise().sum();
    } else {
      warm_.resize(0);
    }
    Fill(alpha, s, out);
    return OkStatus();
  }

  // The iterate at α together with the whole spectrum of A(α) (dense, for
  // the Newton step: its Hessian needs the nonpositive eigenpairs too).
  // `full->positive` holds the positive eigenpairs, descending, as
  // Evaluate's; `full->rest_*` the others.
  Status EvaluateFull(const Eigen::VectorXd& alpha, Iterate* out, FullSpectrum* full) {
    SetWeights(alpha);
    const Eigen::MatrixXd dense = a_.ToDense();
    if (!dense.allFinite()) return InvalidArgumentError("A(alpha) is not finite");
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(dense);
    if (eig.info() != Eigen::Success) return InternalError("dense symmetric eigensolver did not converge");
    const Eigen::VectorXd& values = eig.eigenvalues();  // ascending
    const int n = static_cast<int>(values.size());
    // Positive = above rounding level, as EmbeddingPositiveSpectrum decides.
    const double floor = std::max(0.0, 1e-12 * values[n - 1]);
    int r = 0;
    while (r < n && values[n - 1 - r] > floor) ++r;
    full->positive.eigenvalues = values.tail(r).reverse();
    full->positive.eigenvectors = eig.eigenvectors().rightCols(r).rowwise().reverse();
    full->rest_values = values.head(n - r);
    full->rest_vectors = eig.eigenvectors().leftCols(n - r);
    Fill(alpha, full->positive, out);
    return OkStatus();
  }

  double root_b() const { return std::sqrt(o_.b); }
  const EmbeddingMinimaxProblem* problem() const { return &p_; }

  // The Lanczos warm start carried from one evaluation to the next (a
  // checkpoint keeps it so a resumed run's spectra are bit-identical).
  int rank_hint() const { return rank_hint_; }
  const Eigen::VectorXd& warm() const { return warm_; }
  void RestoreWarm(int rank_hint, Eigen::VectorXd warm) {
    rank_hint_ = rank_hint;
    warm_ = std::move(warm);
  }

 private:
  void Fill(const Eigen::VectorXd& alpha, const PositiveSpectrum& s, Iterate* out) {
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
    const int n = p_.num_points;
    out->z.resize(m);
    if (8LL * m > static_cast<long long>(n) * n && out->v.cols() > 0) {
      // Most pairs (SPE: every pair of points): z_k = G_ii + G_jj − 2 G_ij
      // from G = V Vᵀ by one rank-r update, instead of m strided row
      // differences. Absolute rounding ~ε·max G_ii, far below the gap test.
      gram_.setZero(n, n);
      gram_.selfadjointView<Eigen::Lower>().rankUpdate(out->v);
      for (int k = 0; k < m; ++k) {
        const int i = std::max(p_.pair_i[k], p_.pair_j[k]), j = std::min(p_.pair_i[k], p_.pair_j[k]);
        out->z[k] = gram_(i, i) + gram_(j, j) - 2.0 * gram_(i, j);
      }
    } else {
      for (int k = 0; k < m; ++k) out->z[k] = (out->v.row(p_.pair_i[k]) - out->v.row(p_.pair_j[k])).squaredNorm();
    }
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
  }

  const EmbeddingMinimaxProblem& p_;
  const EmbeddingMinimaxOptions& o_;
  EmbeddingDualMatrix a_;
  SpectrumOptions spectrum_;
  int rank_hint_ = 2;
  Eigen::VectorXd warm_;
  std::vector<double> scratch_;
  Eigen::VectorXd weights_;  // SPE pair weights
  Eigen::MatrixXd gram_;     // V Vᵀ (lower triangle) when most pairs are constrained
};

// Shared bookkeeping of one solve: the iteration count (stats->iterations,
// one per spectrum evaluation accepted as an iterate), P history and the
// progress stream (elapsed time since the solver started).
struct Run {
  const EmbeddingMinimaxOptions& options;
  const SolveControl& control;
  const Stopwatch& watch;
  SolveReport* stats;

  int iterations() const { return stats->iterations; }
  void Accept(const Iterate& x, double step_inf) {
    ++stats->iterations;
    stats->objective_history.push_back(x.primal);
    IterationRow row = IterationRow::GapAndStep(stats->iterations, x.primal, RelativeGap(x), step_inf);
    row.seconds = watch.Seconds();
    ReportIteration(control, row, options.max_iterations, stats);
  }
};

// Projected gradient ascent on J from `cur` (the thesis's Algorithm 5 step,
// any slack). Returns how it ended; `cur` is the last accepted iterate.
// `save`, when set, is offered (cur, η) after every step that does not end
// the run (checkpoints); `eta0` > 0 continues a checkpoint's step length.
StatusOr<Termination> ProjectedGradient(Evaluator& eval, Run& run, Iterate& cur,
                                        const std::function<void(const Iterate&, double)>& save = nullptr,
                                        double eta0 = 0.0) {
  const EmbeddingMinimaxOptions& options = run.options;
  double eta = eta0 > 0.0 ? eta0 : options.initial_eta;
  // Buffers reused across trials and iterations: SPE has ~5·10⁴ duals, and
  // fresh vectors of that size per trial cost more in page faults than the
  // projection itself.
  Iterate next;
  Eigen::VectorXd alpha_new, delta;
  while (run.iterations() < options.max_iterations) {
    Termination why;
    if (run.control.ShouldStop(&why)) return why;
    bool ok = false, backtracked = false;
    for (int bt = 0; bt < options.max_backtracks; ++bt) {
      alpha_new = cur.alpha + cur.grad / eta;
      eval.ProjectInPlace(&alpha_new);
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
    std::swap(cur, next);  // `next` keeps the old buffers for the next trial
    run.Accept(cur, step_inf);
    if (RelativeGap(cur) <= options.tolerance) return Termination::kConverged;
    // A fixed point of the projected step is optimal in exact arithmetic;
    // a remaining gap means the spectrum is not accurate enough.
    if (step_inf == 0.0) return Termination::kNumericalIssue;
    if (save && run.iterations() < options.max_iterations) save(cur, eta);
  }
  return Termination::kIterationLimit;
}

// ---- Checkpoints of a projected-gradient solve (SPE; CMVU / MVE with
// Method::kProjectedGradient) ----------------------------------------------
//
// After the common prefix (core/common/checkpoint_codec.h; the history has
// iteration + 1 entries, the first for α₀): η, the current iterate in full
// (α, the n × r factor of K(α), z, ∇J, P, J) and the evaluator's Lanczos warm
// start, so that nothing is recomputed and a resumed run is bit-identical.
constexpr char kCheckpointTag[] = "embedding_pg/1";
constexpr uint32_t kCheckpointMagic = 0x454d5047;  // "EMPG"
constexpr uint32_t kCheckpointVersion = 1;

void AddInts(Fingerprint* fp, const std::vector<int>& v) {
  fp->AddInt(static_cast<int64_t>(v.size()));
  for (int x : v) fp->AddInt(x);
}

// The problem, the start α₀ and the options that shape the iterates (`o`
// with the absolute slack weight; not tolerance or max_iterations).
uint64_t CheckpointFingerprint(const EmbeddingMinimaxProblem& p, const EmbeddingMinimaxOptions& o,
                               const Eigen::VectorXd& start) {
  Fingerprint fp;
  fp.AddString(kCheckpointTag).AddInt(p.num_points).AddInt(static_cast<int>(p.slack));
  fp.AddSparse(p.prior.sparse).AddDense(p.prior.factor).AddDense(p.prior.factor_scale).AddDouble(p.prior.identity);
  AddInts(&fp, p.pair_i);
  AddInts(&fp, p.pair_j);
  fp.AddDense(p.target);
  AddInts(&fp, p.triplet_near);
  AddInts(&fp, p.triplet_far);
  fp.AddInt(static_cast<int>(o.method)).AddDouble(o.c).AddDouble(o.b).AddDouble(o.initial_eta);
  fp.AddInt(o.max_backtracks).AddInt(o.dense_threshold).AddDouble(o.lanczos_tolerance);
  fp.AddDense(start);
  return fp.value();
}

std::string EncodeCheckpoint(uint64_t fingerprint, const SolveReport& stats, const Iterate& cur, double eta,
                             const Evaluator& eval) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kCheckpointMagic, kCheckpointVersion, fingerprint, stats.iterations,
                      stats.objective_history);
  w.Put<double>(eta);
  w.PutVector(cur.alpha);
  w.PutMatrix(cur.v);
  w.PutVector(cur.z);
  w.PutVector(cur.grad);
  w.Put<double>(cur.primal);
  w.Put<double>(cur.dual);
  w.Put<int32_t>(eval.rank_hint());
  w.PutVector(eval.warm());
  return w.Take();
}

struct ResumeState {
  std::vector<double> objective_history;
  double eta = 0.0;
  Iterate cur;
  int32_t rank_hint = 0;
  Eigen::VectorXd warm;
};

// Any error means "not this run's checkpoint": the caller starts afresh.
Status DecodeCheckpoint(const Checkpoint& c, uint64_t fingerprint, const EmbeddingMinimaxProblem& p,
                        ResumeState* s) {
  ByteReader in(c.bytes, "embedding_pg checkpoint");
  KLS_RETURN_IF_ERROR(GetCheckpointPrefix(&in, c, kCheckpointMagic, kCheckpointVersion, fingerprint,
                                          &s->objective_history, /*extra_history_entries=*/1));
  KLS_RETURN_IF_ERROR(in.Get(&s->eta));
  KLS_RETURN_IF_ERROR(in.GetVector(&s->cur.alpha));
  KLS_RETURN_IF_ERROR(in.GetMatrix(&s->cur.v));
  KLS_RETURN_IF_ERROR(in.GetVector(&s->cur.z));
  KLS_RETURN_IF_ERROR(in.GetVector(&s->cur.grad));
  KLS_RETURN_IF_ERROR(in.Get(&s->cur.primal));
  KLS_RETURN_IF_ERROR(in.Get(&s->cur.dual));
  KLS_RETURN_IF_ERROR(in.Get(&s->rank_hint));
  KLS_RETURN_IF_ERROR(in.GetVector(&s->warm));
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  const int n = p.num_points, nd = p.num_duals(), m = static_cast<int>(p.pair_i.size());
  if (!(s->eta > 0.0) || !std::isfinite(s->eta) || s->cur.alpha.size() != nd || s->cur.grad.size() != nd ||
      s->cur.z.size() != m || s->cur.v.rows() != n || !s->cur.Finite() || !s->cur.alpha.allFinite() ||
      s->rank_hint < 1 || (s->warm.size() != 0 && s->warm.size() != n)) {
    return DataLossError(in.what() + ": does not fit this problem");
  }
  return OkStatus();
}

constexpr int kLbfgsMemory = 160;  // pairs: 26–35% fewer spectra than 40 on MVE, 12–25% for 40 vs 10 (docs/reproduction/embedding.md)

// L-BFGS (Nocedal & Wright 2006, Alg. 7.5) on f from x: the curvature pairs
// and the two-loop recursion are LBFGSpp's BFGSMat, the step LBFGSpp's
// strong-Wolfe line search; the loop is ours so that `pairs` can come from an
// earlier solve of a nearby problem. Runs until `f` throws (it enforces the
// stop rules) or the line search fails (std::exception).
template <typename F>
void MinimizeLbfgs(F& f, Eigen::VectorXd& x, EmbeddingCurvatureMemory::State& state,
                   const LBFGSpp::LBFGSParam<double>& param) {
  LBFGSpp::BFGSMat<double>& pairs = state.pairs;
  Eigen::VectorXd grad(x.size()), xp, gradp, drt;
  double fx = f(x, grad);
  double step = 1.0;
  if (pairs.num_corrections() > 0) {
    pairs.apply_Hv(grad, -1.0, drt);
    if (!(drt.dot(grad) < 0.0)) state.Reset(static_cast<int>(x.size()), param.m);  // not a descent direction
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
    if (s.dot(y) > 1e-12 * s.norm() * y.norm()) state.Add(s, y);
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
  const int nd = static_cast<int>(cur.alpha.size());
  if (state.dimension != nd || state.capacity != param.m) {
    state.Reset(nd, param.m);
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
      MinimizeLbfgs(objective, alpha, state, param);
      break;  // ∇J = 0 exactly at the start
    } catch (const Stop& s) {
      why = s.why;
      break;
    } catch (const std::exception&) {
      improved = best.dual > before + 1e-12 * (1.0 + std::abs(before));
      state.Reset(nd, param.m);
    }
  }
  cur = std::move(best);
  return why;
}

// The generalized Hessian of −J at α for the square slack (one element of
// the Clarke Jacobian of −∇J; J is C¹ with a strongly semismooth gradient,
// since K(α) is a scaled projection onto the PSD cone):
//
//   H d = T*(dΦ[T d]) + d / C,     T d = Σ_k d_k T_k,  T*(X)_k = tr(T_k X),
//   Φ(A) = √B A₊ / N,  N = ‖A₊‖_F   (K(α) = Φ(A(α)), the closed form (3.8)),
//   dΦ[E] = (√B / N) (dP[E] − A₊ ⟨A₊, E⟩ / N²),
//   dP[E] = Q (Ω ∘ QᵀEQ) Qᵀ with Ω_ab = 1 when λ_a, λ_b > 0,
//           λ_a / (λ_a − λ_b) when λ_a > 0 >= λ_b, 0 when both <= 0
//
// (the derivative of the PSD projection, e.g. Qi & Sun, SIAM J. Matrix Anal.
// Appl. 28 (2006), and of the norm). H >= I/C is positive definite. T d is
// centered (T_k 1 = 0), so H (·) H leaves it unchanged. With U the r positive
// eigenvectors and Q̄ the others, only the blocks UᵀEU and UᵀEQ̄ of QᵀEQ meet
// a non-zero Ω, and dP[E] = U Wᵀ + W Uᵀ with W = U G/2 + Q̄ (Ν ∘ UᵀEQ̄)ᵀ,
// G = UᵀEU: one product costs O(m r + n² r), no n × n matrix.
class NewtonHessian {
 public:
  NewtonHessian(const EmbeddingMinimaxProblem& p, const FullSpectrum& f, const Iterate& x, double root_b, double c)
      : p_(p),
        u_(f.positive.eigenvectors),
        rest_(f.rest_vectors),
        ut_(f.positive.eigenvectors.transpose()),
        rest_t_(f.rest_vectors.transpose()),
        z_(x.z),
        inv_c_(1.0 / c) {
    const int r = static_cast<int>(f.positive.eigenvalues.size());
    const int rest = static_cast<int>(f.rest_values.size());
    norm_ = f.positive.eigenvalues.norm();
    scale_ = norm_ > 0.0 ? root_b / norm_ : 0.0;
    rank_one_ = norm_ > 0.0 ? 1.0 / (root_b * norm_) : 0.0;  // z zᵀ/(√B N) = (√B/N³) z̃ z̃ᵀ, z̃ = tr(T A₊)
    nu_.resize(r, rest);
    for (int a = 0; a < r; ++a)
      for (int b = 0; b < rest; ++b) {
        const double la = f.positive.eigenvalues[a];
        nu_(a, b) = la / (la - f.rest_values[b]);
      }
    // Jacobi preconditioner: H_kk = (√B/N) (Σ_ab Ω_ab δ_a² δ_b² − z̃_k²/N²) + 1/C
    // with δ = Qᵀ(e_i − e_j): (‖δ_U‖²)² + 2 Σ_a δ_a² Σ_b Ν_ab δ_b².
    const int m = static_cast<int>(p.pair_i.size());
    diag_.resize(m);
    Eigen::VectorXd du(r), dq(rest);
    for (int k = 0; k < m; ++k) {
      double h = 0.0;
      if (r > 0) {
        du = (u_.row(p.pair_i[k]) - u_.row(p.pair_j[k])).transpose().array().square();
        dq = (rest_.row(p.pair_i[k]) - rest_.row(p.pair_j[k])).transpose().array().square();
        const double su = du.sum();
        h = scale_ * (su * su + 2.0 * du.dot(nu_ * dq)) - rank_one_ * z_[k] * z_[k];
      }
      diag_[k] = std::max(h, 0.0) + inv_c_;
    }
  }

  const Eigen::VectorXd& diagonal() const { return diag_; }

  void Apply(const Eigen::VectorXd& d, Eigen::VectorXd& out) const {
    out = inv_c_ * d;
    const int r = static_cast<int>(ut_.rows());
    if (r == 0 || norm_ == 0.0) return;
    const int m = static_cast<int>(p_.pair_i.size());
    // (EU)ᵀ with E = Σ_k d_k T_k: column i gets d_k (u_i − u_j), column j the opposite.
    eut_.setZero(r, ut_.cols());
    for (int k = 0; k < m; ++k) {
      if (d[k] == 0.0) continue;
      const int i = p_.pair_i[k], j = p_.pair_j[k];
      for (int a = 0; a < r; ++a) {
        const double delta = d[k] * (ut_(a, i) - ut_(a, j));
        eut_(a, i) += delta;
        eut_(a, j) -= delta;
      }
    }
    g_.noalias() = eut_ * u_;                                   // UᵀEU, r × r
    y_.noalias() = eut_ * rest_;                                // UᵀEQ̄, r × (n − r)
    y_.array() *= nu_.array();
    wt_.noalias() = (0.5 * g_) * ut_;                           // Wᵀ, r × n
    wt_.noalias() += y_ * rest_t_;
    double za = 0.0;  // ⟨z, d⟩
    for (int k = 0; k < m; ++k) za += z_[k] * d[k];
    for (int k = 0; k < m; ++k) {
      const int i = p_.pair_i[k], j = p_.pair_j[k];
      double t = 0.0;  // tr(T_k dP[E]) = 2 (u_i − u_j)ᵀ(w_i − w_j)
      for (int a = 0; a < r; ++a) t += (ut_(a, i) - ut_(a, j)) * (wt_(a, i) - wt_(a, j));
      out[k] += scale_ * 2.0 * t - rank_one_ * z_[k] * za;
    }
  }

 private:
  const EmbeddingMinimaxProblem& p_;
  const Eigen::MatrixXd& u_;
  const Eigen::MatrixXd& rest_;
  Eigen::MatrixXd ut_, rest_t_;  // Uᵀ, Q̄ᵀ: the per-pair loops read contiguous columns
  const Eigen::VectorXd& z_;
  double inv_c_, norm_ = 0.0, scale_ = 0.0, rank_one_ = 0.0;
  Eigen::MatrixXd nu_;
  Eigen::VectorXd diag_;
  mutable Eigen::MatrixXd eut_, g_, y_, wt_;
};

// Preconditioned conjugate gradients for H x = b until ‖H x − b‖ <= tol ‖b‖
// or `max_products` products. Returns the products used.
int ConjugateGradient(const NewtonHessian& h, const Eigen::VectorXd& b, double tol, int max_products,
                      Eigen::VectorXd& x) {
  x.setZero(b.size());
  Eigen::VectorXd r = b, z = r.cwiseQuotient(h.diagonal()), p = z, hp;
  double rz = r.dot(z);
  const double stop = tol * b.norm();
  int products = 0;
  while (products < max_products && r.norm() > stop) {
    h.Apply(p, hp);
    ++products;
    const double php = p.dot(hp);
    if (!(php > 0.0)) break;  // H is positive definite; only rounding gets here
    const double step = rz / php;
    x += step * p;
    r -= step * hp;
    z = r.cwiseQuotient(h.diagonal());
    const double rz_new = r.dot(z);
    p = z + (rz_new / rz) * p;
    rz = rz_new;
  }
  return products;
}

// Semismooth Newton-CG on J for the square slack (dense path only: the
// Hessian needs the whole spectrum of A): solve H Δ = ∇J by preconditioned
// CG to the forcing tolerance min(0.1, √gap), then a backtracking (Armijo)
// line search on J. J is (1/C)-strongly concave with a strongly semismooth
// gradient, so the iteration is globally convergent and locally quadratic
// (Qi & Sun 2006 for the same structure): unlike L-BFGS its step count does
// not grow with the condition number ~ C·‖T‖². Every trial point is a
// certified iterate (same stop rule as the other loops). Returns
// kIterationLimit with `cur` = the best iterate when the line search fails.
// `full` is the whole spectrum of A at `cur` (EvaluateFull).
StatusOr<Termination> SemismoothNewton(Evaluator& eval, Run& run, Iterate& cur, FullSpectrum full,
                                       NewtonCounters* counters) {
  const EmbeddingMinimaxOptions& options = run.options;
  constexpr double kArmijo = 1e-4;
  // Hand over to L-BFGS when the Newton model stops predicting J: a line
  // search that needs more than kMaxTrials spectra, or kMaxShortSteps
  // accepted steps in a row shorter than kShortStep. That happens when the
  // dual optimum sits on J's kink A(α)₊ = 0 (the capacity tr K² <= B is
  // inactive, e.g. MVE at B = 10 N with C = 3: the generalized Hessian is
  // then I/C in most directions and the steps shrink to 1e-16), or at an
  // iterate with A(α)₊ = 0. L-BFGS still makes progress there, slowly (MVE
  // on breast cancer at C = 3, B = 10 N: 3,355 spectra with L-BFGS alone,
  // more after a handover; docs/reproduction/embedding.md, "Known limits"). A handover also
  // marks `memory`, so the later solves of an MVE sequence skip Newton.
  constexpr int kMaxTrials = 10, kMaxShortSteps = 3;
  constexpr double kShortStep = 1e-6;
  int short_steps = 0;
  double last_step = 1.0;
  while (true) {
    if (RelativeGap(cur) <= options.tolerance) return Termination::kConverged;
    Termination why;
    if (run.control.ShouldStop(&why)) return why;
    if (run.iterations() >= options.max_iterations) return Termination::kIterationLimit;
    const NewtonHessian hessian(*eval.problem(), full, cur, eval.root_b(), options.c);
    Eigen::VectorXd step;
    const double forcing = std::min(0.1, std::sqrt(std::max(0.0, RelativeGap(cur))));
    const int nd = static_cast<int>(cur.alpha.size());
    counters->cg_products += ConjugateGradient(hessian, cur.grad, forcing, std::max(50, 2 * nd), step);
    ++counters->newton_steps;
    const double slope = cur.grad.dot(step);  // > 0: H is positive definite
    if (!(slope > 0.0)) return Termination::kIterationLimit;
    bool accepted = false;
    // The unit step is tried unless the last search needed a much shorter
    // one: far from the optimum the generalized Hessian sees no curvature
    // along directions where A(α) has no positive eigenvalue yet (only the
    // 1/C term), so the Newton step overshoots for several steps in a row.
    double t = std::min(1.0, 4.0 * last_step);
    for (int bt = 0; bt < kMaxTrials && run.iterations() < options.max_iterations; ++bt) {
      Iterate next;
      FullSpectrum next_full;
      const Eigen::VectorXd alpha = cur.alpha + t * step;
      if (!eval.EvaluateFull(alpha, &next, &next_full).ok() || !next.Finite()) {
        t *= 0.1;
        continue;
      }
      run.Accept(next, t * step.cwiseAbs().maxCoeff());
      const double rise = next.dual - cur.dual;
      if (rise >= kArmijo * t * slope || RelativeGap(next) <= options.tolerance) {
        cur = std::move(next);
        full = std::move(next_full);
        accepted = true;
        last_step = t;
        short_steps = t < kShortStep ? short_steps + 1 : 0;
        // A(α)₊ = 0: J is not differentiable here (the kink itself).
        if (full.positive.rank() == 0) short_steps = kMaxShortSteps;
        break;
      }
      // Backtrack to the maximizer of the concave quadratic through J(α),
      // its slope and J(α + tΔ), kept within [0.1 t, 0.5 t] (Nocedal &
      // Wright 2006, §3.5): far fewer spectra than halving when the full
      // Newton step overshoots by orders of magnitude (the first solves).
      const double curvature = slope * t - rise;  // > 0 here
      const double t_model = curvature > 0.0 ? 0.5 * slope * t * t / curvature : 0.1 * t;
      t = std::clamp(t_model, 0.1 * t, 0.5 * t);
    }
    if (!accepted || short_steps >= kMaxShortSteps) return Termination::kIterationLimit;
  }
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
  const bool square = problem.slack == EmbeddingMinimaxProblem::Slack::kSquare && nd > 0;
  const bool newton = square && options.method == EmbeddingMinimaxOptions::Method::kNewton &&
                      problem.num_points <= options.dense_threshold &&
                      (memory == nullptr || !memory->state().newton_handed_over);
  const bool quasi_newton = square && options.method != EmbeddingMinimaxOptions::Method::kProjectedGradient;
  // Checkpoints: only a solve that is projected gradient throughout (SPE
  // always) — the Newton and L-BFGS phases keep state a checkpoint does not hold.
  const bool gradient_only = !newton && !quasi_newton;
  // The fingerprint costs O(m + #triplets): only computed when checkpoints are used.
  const bool use_checkpoints =
      gradient_only && (static_cast<bool>(control.checkpoint) || control.ResumeFrom(kCheckpointTag));
  const uint64_t fingerprint = use_checkpoints ? CheckpointFingerprint(problem, options, start) : 0;
  ResumeState resume;
  bool resumed = false;
  if (const Checkpoint* c = use_checkpoints ? control.ResumeFrom(kCheckpointTag) : nullptr) {
    resumed = DecodeCheckpoint(*c, fingerprint, problem, &resume).ok();  // else start afresh
  }
  // Newton needs the whole spectrum at the start: one evaluation serves both.
  FullSpectrum start_spectrum;
  if (resumed) {
    cur = std::move(resume.cur);
    eval.RestoreWarm(resume.rank_hint, std::move(resume.warm));
  } else if (newton) {
    KLS_RETURN_IF_ERROR(eval.EvaluateFull(start, &cur, &start_spectrum));
  } else {
    KLS_RETURN_IF_ERROR(eval.Evaluate(start, &cur));
  }

  EmbeddingMinimaxResult result;
  SolveReport& stats = result.stats;
  stats.setup_seconds = setup_watch.Seconds();
  Stopwatch solve_watch;
  if (resumed) {
    stats.objective_history = std::move(resume.objective_history);
    stats.iterations = static_cast<int>(stats.objective_history.size()) - 1;
    stats.resumed_from_iteration = stats.iterations;
  } else {
    stats.objective_history.push_back(cur.primal);
  }
  Run run{options, control, setup_watch, &stats};
  CheckpointTimer checkpoints(control);
  std::function<void(const Iterate&, double)> save;
  if (use_checkpoints && control.checkpoint) {
    save = [&](const Iterate& x, double eta) {
      checkpoints.MaybeSave(kCheckpointTag, stats.iterations,
                            [&] { return EncodeCheckpoint(fingerprint, stats, x, eta, eval); });
    };
  }
  Termination termination = Termination::kIterationLimit;
  if (!cur.Finite()) {
    termination = Termination::kNumericalIssue;
  } else if (RelativeGap(cur) <= options.tolerance) {
    termination = Termination::kConverged;
  } else {
    if (newton) {
      NewtonCounters counters;
      KLS_ASSIGN_OR_RETURN(termination, SemismoothNewton(eval, run, cur, std::move(start_spectrum), &counters));
      result.newton_steps = counters.newton_steps;
      result.cg_products = counters.cg_products;
      if (termination == Termination::kIterationLimit && memory != nullptr) memory->state().newton_handed_over = true;
    }
    const int before_quasi_newton = run.iterations();
    if (quasi_newton && termination == Termination::kIterationLimit && run.iterations() < options.max_iterations) {
      KLS_ASSIGN_OR_RETURN(termination, QuasiNewton(eval, run, cur, memory));
      result.quasi_newton_iterations = run.iterations() - before_quasi_newton;
    }
    if (termination == Termination::kIterationLimit && run.iterations() < options.max_iterations) {
      KLS_ASSIGN_OR_RETURN(termination, ProjectedGradient(eval, run, cur, save, resumed ? resume.eta : 0.0));
    }
  }
  stats.termination = termination;
  stats.final_objective = cur.primal;
  stats.solve_seconds = solve_watch.Seconds();
  result.primal = cur.primal;
  result.dual = cur.dual;
  result.stats.certificate = Certificate::FromGap(RelativeGap(cur), options.tolerance);
  result.stats.certificate.lower_bound = cur.dual;
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

Status EmbeddingMinimaxOptions::Validate(std::string_view path) const {
  const std::string p(path);
  KLS_RETURN_IF_ERROR(CheckPositiveOption("c", c, path));
  KLS_RETURN_IF_ERROR(CheckPositiveOption("b", b, path));
  if (max_iterations < 1) {
    return InvalidArgumentError(p + ".max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError(p + ".tolerance = " + FormatNumber(tolerance) + " must be finite and >= 0");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("initial_eta", initial_eta, path));
  if (max_backtracks < 1) {
    return InvalidArgumentError(p + ".max_backtracks = " + std::to_string(max_backtracks) + " must be >= 1");
  }
  if (dense_threshold < 0) {
    return InvalidArgumentError(p + ".dense_threshold = " + std::to_string(dense_threshold) + " must be >= 0");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("lanczos_tolerance", lanczos_tolerance, path));
  return OkStatus();
}

double SlackWeight(const EmbeddingMinimaxProblem& problem, const EmbeddingMinimaxOptions& options) {
  if (!options.relative_slack || problem.slack != EmbeddingMinimaxProblem::Slack::kSquare) return options.c;
  if (problem.target.size() == 0) return options.c;
  const double mean = problem.target.mean();
  return mean > 0.0 && std::isfinite(mean) ? options.c / (mean * mean) : options.c;
}

Eigen::VectorXd ProjectCappedSimplex(const Eigen::VectorXd& a, double cap) {
  Eigen::VectorXd out = a;
  std::vector<double> scratch;
  ProjectCappedSimplexInPlace(&out, cap, &scratch);
  return out;
}

void ProjectCappedSimplexInPlace(Eigen::VectorXd* a_inout, double cap, std::vector<double>* scratch) {
  Eigen::VectorXd& a = *a_inout;
  // Onto {α >= 0, Σ α <= cap}: (a)₊ if it fits, else (a − θ)₊ with
  // Σ (a − θ)₊ = cap, θ > 0. Michelot's fixed point (Math. Prog. 1986):
  // θ = (Σ_S a − cap) / |S| over the current support S (at first the positive
  // entries), then drop the entries <= θ; θ rises monotonically and S shrinks
  // to the support of the projection in a few O(|S|) passes, with no sort
  // (SPE's dual has ~n·k·n entries and is projected once per step; a sort
  // dominated the solve). θ < max(S) always, so S never empties.
  std::vector<double>& support = *scratch;
  support.clear();
  support.reserve(static_cast<size_t>(a.size()));
  double total = 0.0;
  for (Eigen::Index i = 0; i < a.size(); ++i)
    if (a[i] > 0.0) {
      support.push_back(a[i]);
      total += a[i];
    }
  if (total <= cap) {
    a = a.cwiseMax(0.0);
    return;
  }
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
  a = (a.array() - theta).max(0.0).matrix();
}

StatusOr<EmbeddingMinimaxResult> SolveEmbeddingMinimax(const EmbeddingMinimaxProblem& problem,
                                                       const EmbeddingMinimaxOptions& options,
                                                       const SolveControl& control, const Eigen::VectorXd* alpha0,
                                                       EmbeddingCurvatureMemory* memory) {
  return GuardExceptions("embedding minimax", [&] { return Solve(problem, options, control, alpha0, memory); });
}

}  // namespace kls
