#include "core/mkl/onk.h"

#include <glpk.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/common/checkpoint_codec.h"
#include "core/mkl/box_projection.h"

namespace kls {
namespace {

// f(α) and K·(Yα) of (7) with one kernel product; the gradient then costs O(n).
class QuarticOracle {
 public:
  QuarticOracle(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, double rho) : k_(k), y_(y), rho_(rho) {}

  // Ku = K (y ∘ α), using the lower triangle only (K is symmetric): half the
  // memory traffic of a full GEMV, which dominates for large n.
  void Product(const Eigen::VectorXd& alpha, Eigen::VectorXd& ku) {
    u_ = y_.cwiseProduct(alpha);
    ku.noalias() = k_.selfadjointView<Eigen::Lower>() * u_;
    ++evaluations_;
  }
  // f from α and its product (no kernel access).
  double Value(const Eigen::VectorXd& alpha, const Eigen::VectorXd& ku) const {
    const double sq = alpha.squaredNorm();
    return -2.0 * alpha.sum() + alpha.cwiseProduct(y_).dot(ku) + sq * sq / (4.0 * rho_);
  }
  void Gradient(const Eigen::VectorXd& alpha, const Eigen::VectorXd& ku, Eigen::VectorXd& g) const {
    const double sq = alpha.squaredNorm();
    g = 2.0 * y_.cwiseProduct(ku) + (sq / rho_) * alpha;
    g.array() -= 2.0;
  }
  int evaluations() const { return evaluations_; }
  void set_evaluations(int count) { evaluations_ = count; }  // a resumed run's count goes on

 private:
  const Eigen::MatrixXd& k_;
  const Eigen::VectorXd& y_;
  double rho_;
  Eigen::VectorXd u_;
  int evaluations_ = 0;
};

// Slack for rounding in the test (13): both sides are O(|f|) sums.
double ArmijoSlack(double f) { return 1e-13 * (1.0 + std::abs(f)); }

struct Projector {
  const Eigen::VectorXd& y;
  double c;
  std::vector<double> breaks;
  std::vector<int> active;
  void operator()(const Eigen::VectorXd& v, Eigen::VectorXd& x) {
    ProjectOntoBoxHyperplaneUnchecked(v, y, c, x, &breaks, &active);
  }
};

bool Report(const SolveControl& control, OnkResult& r, int iteration, double objective, double residual,
            const Stopwatch& watch, int max_iterations) {
  r.stats.iterations = iteration;
  r.stats.objective_history.push_back(objective);
  IterationRow row;
  row.iteration = iteration;
  row.objective = objective;
  row.primal_residual = residual;
  row.seconds = watch.Seconds();
  ReportIteration(control, row, max_iterations, &r.stats);
  Termination why;
  if (control.ShouldStop(&why)) {
    r.stats.termination = why;
    return true;
  }
  return false;
}

// ---- Checkpoints (SolveControl::checkpoint / resume_from) -------------------
//
// Taken after an iteration that does not end the run. After the common prefix
// (core/common/checkpoint_codec.h; one history entry per iteration) the
// method's state, all of it, so that a resumed run repeats the same
// arithmetic:
//   gradient / accelerated  x_k, x_{k−1}, K(Yx_k), K(Yx_{k−1}), f(x_k),
//                           f'(x_{k−1}) (the secant pair), γ, t, whether the
//                           secant is available, the last accepted γ;
//   level                   α_{i+1}, the best point and f_up, f_low, the cuts
//                           (g_j, offset_j), the projection's multipliers λ
//                           and the simplex basis of the LP (8) (the status of
//                           every row and column), so the warm-started LP
//                           takes the same pivots;
// and the number of kernel products so far.
constexpr char kCheckpointTag[] = "onk/1";
constexpr uint32_t kCheckpointMagic = 0x4f4e4b31;  // "ONK1"
constexpr uint32_t kCheckpointVersion = 1;

// K, y and the options that shape the iterates (not max_iterations; the
// tolerance only for the accelerated method, whose restart test uses it).
uint64_t CheckpointFingerprint(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const OnkOptions& o) {
  Fingerprint fp;
  fp.AddString(kCheckpointTag).AddDense(k).AddDense(y);
  fp.AddDouble(o.c).AddDouble(o.rho).AddInt(static_cast<int>(o.method)).AddDouble(o.min_gamma);
  if (o.method == OnkMethod::kAccelerated) fp.AddDouble(o.tolerance);
  if (o.method == OnkMethod::kLevel) fp.AddDouble(o.level_tau).AddInt(o.level_projection_iterations);
  return fp.value();
}

struct GradientState {
  Eigen::VectorXd x, x_prev, kx, kx_prev, g_prev;
  double fx = 0.0, gamma = 1.0, t = 1.0, last_gamma = 0.0;
  bool have_secant = false;
  int32_t evaluations = 0;
};

std::string EncodeGradient(uint64_t fingerprint, int iteration, const OnkResult& r, const GradientState& s) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kCheckpointMagic, kCheckpointVersion, fingerprint, iteration, r.stats.objective_history);
  w.PutVector(s.x);
  w.PutVector(s.x_prev);
  w.PutVector(s.kx);
  w.PutVector(s.kx_prev);
  w.PutVector(s.g_prev);
  w.Put<double>(s.fx);
  w.Put<double>(s.gamma);
  w.Put<double>(s.t);
  w.Put<double>(s.last_gamma);
  w.Put<uint8_t>(s.have_secant ? 1 : 0);
  w.Put<int32_t>(s.evaluations);
  return w.Take();
}

// Any error means "not this run's checkpoint": the caller starts afresh.
Status DecodeGradient(const Checkpoint& c, uint64_t fingerprint, int n, std::vector<double>* history,
                      GradientState* s) {
  ByteReader in(c.bytes, "onk checkpoint");
  KLS_RETURN_IF_ERROR(GetCheckpointPrefix(&in, c, kCheckpointMagic, kCheckpointVersion, fingerprint, history));
  for (Eigen::VectorXd* v : {&s->x, &s->x_prev, &s->kx, &s->kx_prev, &s->g_prev}) {
    KLS_RETURN_IF_ERROR(in.GetVector(v));
    if (v->size() != n || !v->allFinite()) return DataLossError(in.what() + ": a vector that does not fit");
  }
  uint8_t have_secant = 0;
  KLS_RETURN_IF_ERROR(in.Get(&s->fx));
  KLS_RETURN_IF_ERROR(in.Get(&s->gamma));
  KLS_RETURN_IF_ERROR(in.Get(&s->t));
  KLS_RETURN_IF_ERROR(in.Get(&s->last_gamma));
  KLS_RETURN_IF_ERROR(in.Get(&have_secant));
  KLS_RETURN_IF_ERROR(in.Get(&s->evaluations));
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  s->have_secant = have_secant != 0;
  if (!std::isfinite(s->fx) || !(s->gamma > 0.0) || !std::isfinite(s->gamma) || !(s->t >= 1.0) ||
      !std::isfinite(s->t) || s->evaluations < 0) {
    return DataLossError(in.what() + ": inconsistent state");
  }
  return OkStatus();
}

// Algorithm 2 (and its accelerated form when `accelerated`).
void RunGradient(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const OnkOptions& opt,
                 const SolveControl& control, bool accelerated, OnkResult& r) {
  const int n = static_cast<int>(y.size());
  Stopwatch watch;
  QuarticOracle oracle(k, y, opt.rho);
  Projector project{y, opt.c, {}, {}};
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n), kx = Eigen::VectorXd::Zero(n);  // α_0 = 0 ∈ P, K·0 = 0
  Eigen::VectorXd x_prev = x, kx_prev = kx;
  double fx = 0.0;
  Eigen::VectorXd g(n), g_prev(n), s(n), ks(n), xn(n), kxn(n), gn(n);
  double gamma = 1.0;
  bool have_secant = false;
  double t = 1.0;
  int first = 1;
  // The fingerprint costs O(n²): only computed when checkpoints are used.
  const bool use_checkpoints = static_cast<bool>(control.checkpoint) || control.ResumeFrom(kCheckpointTag);
  const uint64_t fingerprint = use_checkpoints ? CheckpointFingerprint(k, y, opt) : 0;
  if (const Checkpoint* c = control.ResumeFrom(kCheckpointTag)) {
    GradientState st;
    if (DecodeGradient(*c, fingerprint, n, &r.stats.objective_history, &st).ok()) {
      x = std::move(st.x);
      x_prev = std::move(st.x_prev);
      kx = std::move(st.kx);
      kx_prev = std::move(st.kx_prev);
      g_prev = std::move(st.g_prev);
      fx = st.fx;
      gamma = st.gamma;
      t = st.t;
      have_secant = st.have_secant;
      r.last_gamma = st.last_gamma;
      oracle.set_evaluations(st.evaluations);
      r.stats.iterations = c->iteration;
      r.stats.resumed_from_iteration = c->iteration;
      first = c->iteration + 1;
    } else {  // not this run's checkpoint: start afresh
      r.stats.objective_history.clear();
    }
  }
  CheckpointTimer checkpoints(control);
  auto save = [&](int it) {
    if (it >= opt.max_iterations) return;
    checkpoints.MaybeSave(kCheckpointTag, it, [&] {
      GradientState st{x, x_prev, kx, kx_prev, g_prev, fx, gamma, t, r.last_gamma, have_secant, oracle.evaluations()};
      return EncodeGradient(fingerprint, it, r, st);
    });
  };
  r.stats.termination = Termination::kIterationLimit;
  for (int it = first; it <= opt.max_iterations; ++it) {
    // Point where the gradient-mapping step is taken: x (Alg. 2) or the
    // extrapolated s (accelerated). K(Ys) is a combination of stored products.
    double beta = 0.0, t_next = 1.0;
    if (accelerated) {
      t_next = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t));
      beta = (t - 1.0) / t_next;
    }
    s = x + beta * (x - x_prev);
    ks = kx + beta * (kx - kx_prev);
    const double fs = beta == 0.0 ? fx : oracle.Value(s, ks);
    oracle.Gradient(s, ks, g);
    if (!accelerated && have_secant) {
      // secant estimate of the local Lipschitz constant as the trial γ
      gamma = std::max(opt.min_gamma, (g - g_prev).norm() / std::max((x - x_prev).norm(), 1e-300));
    }
    double fn = 0.0;
    int doublings = 0;
    while (true) {
      project(s - g / gamma, xn);  // eq. (11)
      oracle.Product(xn, kxn);
      fn = oracle.Value(xn, kxn);
      const Eigen::VectorXd d = xn - s;
      // Armijo–Goldstein rule (13)
      if (fn <= fs + g.dot(d) + 0.5 * gamma * d.squaredNorm() + ArmijoSlack(fs)) break;
      gamma *= 2.0;
      if (++doublings > 200 || !std::isfinite(fn)) {
        r.stats.termination = Termination::kNumericalIssue;
        break;
      }
    }
    if (r.stats.termination == Termination::kNumericalIssue) break;
    const double step = (xn - s).norm();
    const double scale = std::max(s.norm(), 1.0);
    if (accelerated && fn > fx && !(beta == 0.0 && step <= opt.tolerance * scale)) {
      if (beta == 0.0) {
        // A plain step from x did not decrease f: only rounding is left.
        r.stats.termination = Termination::kConverged;
        r.stats.iterations = it;
        r.stats.objective_history.push_back(fx);
        break;
      }
      // Function restart: drop the momentum and retake the step from x.
      t = 1.0;
      x_prev = x;
      kx_prev = kx;
      if (Report(control, r, it, fx, step, watch, opt.max_iterations)) break;
      save(it);
      continue;
    }
    g_prev = g;
    x_prev = x;
    kx_prev = kx;
    x.swap(xn);
    kx.swap(kxn);
    fx = fn;
    t = t_next;
    have_secant = true;
    r.last_gamma = gamma;
    if (step <= opt.tolerance * scale) {  // Algorithm 2, step 5
      r.stats.termination = Termination::kConverged;
      r.stats.iterations = it;
      r.stats.objective_history.push_back(fx);
      break;
    }
    if (Report(control, r, it, fx, step, watch, opt.max_iterations)) break;
    save(it);
  }
  r.alpha = x;
  r.objective = fx;
  r.lower_bound = fx;
  r.function_evaluations = oracle.evaluations();
  r.stats.final_objective = fx;
  r.stats.solve_seconds = watch.Seconds();
}

struct GlpDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

struct LevelState {
  Eigen::VectorXd alpha, best, lambda;
  double f_up = 0.0, f_low = 0.0;
  std::vector<Eigen::VectorXd> cuts;
  std::vector<double> cut_offsets;
  std::vector<int32_t> row_status, col_status;  // GLP_BS, GLP_NL, … of the LP's rows 1.., columns 1..
  int32_t evaluations = 0;
};

std::string EncodeLevel(uint64_t fingerprint, int iteration, const OnkResult& r, const LevelState& s) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kCheckpointMagic, kCheckpointVersion, fingerprint, iteration, r.stats.objective_history);
  w.PutVector(s.alpha);
  w.PutVector(s.best);
  w.PutVector(s.lambda);
  w.Put<double>(s.f_up);
  w.Put<double>(s.f_low);
  for (size_t j = 0; j < s.cuts.size(); ++j) {
    w.PutVector(s.cuts[j]);
    w.Put<double>(s.cut_offsets[j]);
  }
  for (int32_t st : s.row_status) w.Put<int32_t>(st);
  for (int32_t st : s.col_status) w.Put<int32_t>(st);
  w.Put<int32_t>(s.evaluations);
  return w.Take();
}

// Any error means "not this run's checkpoint": the caller starts afresh. One
// cut per iteration; the LP has a row for αᵀy = 0 and one per cut, and n + 1
// columns.
Status DecodeLevel(const Checkpoint& c, uint64_t fingerprint, int n, std::vector<double>* history, LevelState* s) {
  ByteReader in(c.bytes, "onk checkpoint");
  KLS_RETURN_IF_ERROR(GetCheckpointPrefix(&in, c, kCheckpointMagic, kCheckpointVersion, fingerprint, history));
  const int m = c.iteration;
  for (Eigen::VectorXd* v : {&s->alpha, &s->best}) {
    KLS_RETURN_IF_ERROR(in.GetVector(v));
    if (v->size() != n || !v->allFinite()) return DataLossError(in.what() + ": a vector that does not fit");
  }
  KLS_RETURN_IF_ERROR(in.GetVector(&s->lambda));
  if (s->lambda.size() != m || !s->lambda.allFinite()) return DataLossError(in.what() + ": bad multipliers");
  KLS_RETURN_IF_ERROR(in.Get(&s->f_up));
  KLS_RETURN_IF_ERROR(in.Get(&s->f_low));
  for (int j = 0; j < m; ++j) {
    Eigen::VectorXd g;
    double offset = 0.0;
    KLS_RETURN_IF_ERROR(in.GetVector(&g));
    KLS_RETURN_IF_ERROR(in.Get(&offset));
    if (g.size() != n || !g.allFinite() || !std::isfinite(offset)) return DataLossError(in.what() + ": bad cut");
    s->cuts.push_back(std::move(g));
    s->cut_offsets.push_back(offset);
  }
  auto get_status = [&](int count, std::vector<int32_t>* out) -> Status {
    for (int i = 0; i < count; ++i) {
      int32_t st = 0;
      KLS_RETURN_IF_ERROR(in.Get(&st));
      if (st != GLP_BS && st != GLP_NL && st != GLP_NU && st != GLP_NF && st != GLP_NS) {
        return DataLossError(in.what() + ": bad basis status");
      }
      out->push_back(st);
    }
    return OkStatus();
  };
  KLS_RETURN_IF_ERROR(get_status(1 + m, &s->row_status));
  KLS_RETURN_IF_ERROR(get_status(n + 1, &s->col_status));
  KLS_RETURN_IF_ERROR(in.Get(&s->evaluations));
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  if (!std::isfinite(s->f_up) || !std::isfinite(s->f_low) || s->evaluations < 0) {
    return DataLossError(in.what() + ": inconsistent state");
  }
  return OkStatus();
}

// Algorithm 1.
// LP (8) of the level method: min t s.t. t >= f_j + g_jᵀ(α − α_j), α ∈ P
// (0 <= α <= C, yᵀα = 0). Columns 1..n = α, n+1 = t; row 1 is yᵀα = 0, then
// one row per cut. Solved by GLPK's dual simplex, warm-started.
class CuttingPlaneLp {
 public:
  CuttingPlaneLp(const Eigen::VectorXd& y, double c)
      : n_(static_cast<int>(y.size())), lp_(glp_create_prob()), ind_(n_ + 2), val_(n_ + 2) {
    glp_set_obj_dir(lp_.get(), GLP_MIN);
    glp_add_cols(lp_.get(), n_ + 1);
    for (int j = 1; j <= n_; ++j) glp_set_col_bnds(lp_.get(), j, GLP_DB, 0.0, c);
    glp_set_col_bnds(lp_.get(), n_ + 1, GLP_FR, 0.0, 0.0);
    glp_set_obj_coef(lp_.get(), n_ + 1, 1.0);
    glp_add_rows(lp_.get(), 1);
    for (int j = 1; j <= n_; ++j) {
      ind_[j] = j;
      val_[j] = y[j - 1];
    }
    glp_set_mat_row(lp_.get(), 1, n_, ind_.data(), val_.data());
    glp_set_row_bnds(lp_.get(), 1, GLP_FX, 0.0, 0.0);
    glp_init_smcp(&smcp_);
    smcp_.msg_lev = GLP_MSG_OFF;
    smcp_.meth = GLP_DUALP;
  }

  // New cut, as an LP row: t − g_jᵀα >= f_j − g_jᵀα_j (`offset`).
  void AddCut(const Eigen::VectorXd& cut, double offset) {
    const int row = glp_add_rows(lp_.get(), 1);
    for (int j = 1; j <= n_; ++j) {
      ind_[j] = j;
      val_[j] = -cut[j - 1];
    }
    ind_[n_ + 1] = n_ + 1;
    val_[n_ + 1] = 1.0;
    glp_set_mat_row(lp_.get(), row, n_ + 1, ind_.data(), val_.data());
    glp_set_row_bnds(lp_.get(), row, GLP_LO, offset, 0.0);
  }

  // False when no optimum was found, even after rebuilding the basis once.
  bool Solve() {
    int ret = glp_simplex(lp_.get(), &smcp_);
    if (ret != 0 || glp_get_status(lp_.get()) != GLP_OPT) {
      // Rebuild the basis from scratch once before giving up.
      glp_adv_basis(lp_.get(), 0);
      smcp_.meth = GLP_PRIMAL;
      ret = glp_simplex(lp_.get(), &smcp_);
      smcp_.meth = GLP_DUALP;
      if (ret != 0 || glp_get_status(lp_.get()) != GLP_OPT) return false;
    }
    return true;
  }
  double Value() const { return glp_get_obj_val(lp_.get()); }

  // The basis (row and column statuses), for checkpoints; restored with m cuts.
  void SaveBasis(LevelState* st) const {
    for (int i = 1; i <= glp_get_num_rows(lp_.get()); ++i) st->row_status.push_back(glp_get_row_stat(lp_.get(), i));
    for (int j = 1; j <= glp_get_num_cols(lp_.get()); ++j) st->col_status.push_back(glp_get_col_stat(lp_.get(), j));
  }
  void RestoreBasis(const LevelState& st, int m) {
    for (int i = 0; i < 1 + m; ++i) glp_set_row_stat(lp_.get(), i + 1, st.row_status[i]);
    for (int j = 0; j <= n_; ++j) glp_set_col_stat(lp_.get(), j + 1, st.col_status[j]);
  }

 private:
  int n_;
  std::unique_ptr<glp_prob, GlpDeleter> lp_;
  std::vector<int> ind_;
  std::vector<double> val_;
  glp_smcp smcp_;
};

// Projection (10) of α_i (`alpha`) onto {α ∈ P : Gα <= rhs} (the level set
// at `level`) by accelerated dual ascent, warm-started from *lambda:
// D(λ) = min_{α∈P} ½‖α − α_i‖² + λᵀ(Gα − rhs), concave with
// ∇D = Gα(λ) − rhs, α(λ) = π_P(α_i − Gᵀλ); Lipschitz constant ‖G‖².
// Leaves the multipliers in *lambda and α(λ) ∈ P in *trial.
void ProjectOntoLevelSet(const Eigen::MatrixXd& gmat, const Eigen::VectorXd& rhs, double level, int iterations,
                         Projector& project, Eigen::VectorXd* lambda, Eigen::VectorXd* trial,
                         const Eigen::VectorXd& alpha) {
  const Eigen::Index m = gmat.rows();
  const Eigen::MatrixXd gram = gmat * gmat.transpose();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram, Eigen::EigenvaluesOnly);
  const double lip = std::max(eig.eigenvalues().maxCoeff(), 1e-300);
  Eigen::VectorXd mu = *lambda, lam_prev = *lambda, grad_d(m);
  double tk = 1.0;
  const double feas_tol = 1e-10 * (1.0 + std::abs(level));
  for (int inner = 0; inner < iterations; ++inner) {
    project(alpha - gmat.transpose() * mu, *trial);
    grad_d = gmat * *trial - rhs;
    Eigen::VectorXd lam_next = (mu + grad_d / lip).cwiseMax(0.0);
    const double t_next = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * tk * tk));
    mu = lam_next + ((tk - 1.0) / t_next) * (lam_next - *lambda);
    lam_prev = *lambda;
    *lambda = lam_next;
    tk = t_next;
    // Stop when α(λ) is (nearly) in the level set and complementary slackness holds.
    const double viol = grad_d.maxCoeff();
    const double comp = (lambda->array() * grad_d.array().abs()).maxCoeff();
    if (viol <= feas_tol && comp <= feas_tol) break;
  }
  project(alpha - gmat.transpose() * *lambda, *trial);
}

Status RunLevel(const Eigen::MatrixXd& k, const Eigen::VectorXd& y, const OnkOptions& opt,
                const SolveControl& control, OnkResult& r) {
  const int n = static_cast<int>(y.size());
  Stopwatch watch;
  QuarticOracle oracle(k, y, opt.rho);
  Projector project{y, opt.c, {}, {}};

  CuttingPlaneLp lp(y, opt.c);

  std::vector<Eigen::VectorXd> cuts;  // gradients g_j
  std::vector<double> cut_offsets;    // f_j − g_jᵀα_j, so the cut is g_jᵀα + offset
  Eigen::MatrixXd gmat;               // m × n, rows g_j
  Eigen::VectorXd lambda;             // dual multipliers of (10), warm start

  Eigen::VectorXd alpha = Eigen::VectorXd::Zero(n), ka(n), g(n), best = alpha;
  double f_up = std::numeric_limits<double>::infinity(), f_low = -std::numeric_limits<double>::infinity();
  int first = 1;
  // The fingerprint costs O(n²): only computed when checkpoints are used.
  const bool use_checkpoints = static_cast<bool>(control.checkpoint) || control.ResumeFrom(kCheckpointTag);
  const uint64_t fingerprint = use_checkpoints ? CheckpointFingerprint(k, y, opt) : 0;
  if (const Checkpoint* c = control.ResumeFrom(kCheckpointTag)) {
    LevelState st;
    if (DecodeLevel(*c, fingerprint, n, &r.stats.objective_history, &st).ok()) {
      alpha = std::move(st.alpha);
      best = std::move(st.best);
      lambda = std::move(st.lambda);
      f_up = st.f_up;
      f_low = st.f_low;
      const int m = c->iteration;
      gmat.resize(m, n);
      for (int j = 0; j < m; ++j) {
        lp.AddCut(st.cuts[j], st.cut_offsets[j]);
        gmat.row(j) = st.cuts[j].transpose();
      }
      cuts = std::move(st.cuts);
      cut_offsets = std::move(st.cut_offsets);
      lp.RestoreBasis(st, m);
      oracle.set_evaluations(st.evaluations);
      r.lower_bound = f_low;
      r.stats.iterations = m;
      r.stats.resumed_from_iteration = m;
      first = m + 1;
    } else {  // not this run's checkpoint: start afresh
      r.stats.objective_history.clear();
    }
  }
  CheckpointTimer checkpoints(control);
  r.stats.termination = Termination::kIterationLimit;
  Eigen::VectorXd z(n), trial(n), mom(n);
  for (int it = first; it <= opt.max_iterations; ++it) {
    oracle.Product(alpha, ka);
    const double fa = oracle.Value(alpha, ka);
    oracle.Gradient(alpha, ka, g);
    if (fa < f_up) {
      f_up = fa;
      best = alpha;
    }
    const double offset = fa - g.dot(alpha);
    cuts.push_back(g);
    cut_offsets.push_back(offset);
    lp.AddCut(g, offset);
    if (!lp.Solve()) {
      r.stats.termination = Termination::kNumericalIssue;
      break;
    }
    f_low = std::max(f_low, lp.Value());  // lower bound f_i(u_i), eq. (8)
    const double gap = f_up - f_low;
    r.lower_bound = f_low;
    if (gap <= opt.tolerance * std::max(1.0, std::abs(f_up))) {
      r.stats.termination = Termination::kConverged;
      r.stats.iterations = it;
      r.stats.objective_history.push_back(f_up);
      break;
    }
    if (Report(control, r, it, f_up, gap, watch, opt.max_iterations)) break;

    // Level (9) and projection (10) of α_i onto {α ∈ P : g_jᵀα + offset_j <= l}.
    const double level = f_low + opt.level_tau * gap;
    const int m = static_cast<int>(cuts.size());
    gmat.conservativeResize(m, n);
    gmat.row(m - 1) = g.transpose();
    Eigen::VectorXd rhs(m);
    for (int j = 0; j < m; ++j) rhs[j] = level - cut_offsets[j];
    lambda.conservativeResize(m);
    lambda[m - 1] = 0.0;
    ProjectOntoLevelSet(gmat, rhs, level, opt.level_projection_iterations, project, &lambda, &trial, alpha);
    alpha = trial;  // α_{i+1} ∈ P exactly
    if (it < opt.max_iterations) {
      checkpoints.MaybeSave(kCheckpointTag, it, [&] {
        LevelState st;
        st.alpha = alpha;
        st.best = best;
        st.lambda = lambda;
        st.f_up = f_up;
        st.f_low = f_low;
        st.cuts = cuts;
        st.cut_offsets = cut_offsets;
        lp.SaveBasis(&st);
        st.evaluations = oracle.evaluations();
        return EncodeLevel(fingerprint, it, r, st);
      });
    }
  }
  r.alpha = best;
  r.objective = f_up;
  r.function_evaluations = oracle.evaluations();
  r.stats.final_objective = f_up;
  r.stats.solve_seconds = watch.Seconds();
  return OkStatus();
}

}  // namespace

const char* OnkMethodName(OnkMethod m) {
  switch (m) {
    case OnkMethod::kGradient: return "gradient";
    case OnkMethod::kAccelerated: return "accelerated";
    case OnkMethod::kLevel: return "level";
  }
  return "unknown";
}

StatusOr<OnkMethod> ParseOnkMethod(const std::string& name) {
  if (name == "gradient" || name == "cgd") return OnkMethod::kGradient;
  if (name == "accelerated" || name == "fista") return OnkMethod::kAccelerated;
  if (name == "level") return OnkMethod::kLevel;
  return InvalidArgumentError("onk method = \"" + name + "\": expected gradient, accelerated or level");
}

Status OnkOptions::Validate(std::string_view path) const {
  const std::string p(path);
  KLS_RETURN_IF_ERROR(CheckPositiveOption("c", c, path));
  KLS_RETURN_IF_ERROR(CheckPositiveOption("rho", rho, path));
  if (!(tolerance > 0 && tolerance < 1))
    return InvalidArgumentError(p + ".tolerance = " + FormatNumber(tolerance) + " must be in (0, 1)");
  if (max_iterations < 1)
    return InvalidArgumentError(p + ".max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  if (!(level_tau > 0 && level_tau < 1))
    return InvalidArgumentError(p + ".level_tau = " + FormatNumber(level_tau) + " must be in (0, 1)");
  if (level_projection_iterations < 1)
    return InvalidArgumentError(p + ".level_projection_iterations = " + std::to_string(level_projection_iterations) +
                                " must be >= 1");
  if (!(min_gamma > 0)) return InvalidArgumentError(p + ".min_gamma = " + FormatNumber(min_gamma) + " must be > 0");
  return OkStatus();
}

StatusOr<OnkResult> SolveOnk(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, const OnkOptions& options,
                             const SolveControl& control) {
  return GuardExceptions("SolveOnk", [&]() -> StatusOr<OnkResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const Eigen::Index n = y.size();
    if (n < 2) return InvalidArgumentError("onk labels: need at least 2 points, got " + std::to_string(n));
    if (kernel.rows() != n || kernel.cols() != n) {
      return InvalidArgumentError("onk kernel is " + std::to_string(kernel.rows()) + "x" +
                                  std::to_string(kernel.cols()) + " but there are " + std::to_string(n) + " labels");
    }
    KLS_RETURN_IF_ERROR(ValidateSignLabels(y, "onk labels"));
    int npos = 0;
    for (Eigen::Index i = 0; i < n; ++i) npos += y[i] > 0;
    if (npos == 0 || npos == n) return InvalidArgumentError("onk labels: both classes (+1 and -1) must be present");
    for (Eigen::Index j = 0; j < n; ++j)
      for (Eigen::Index i = j; i < n; ++i)
        if (!std::isfinite(kernel(i, j))) {
          return InvalidArgumentError("onk kernel(" + std::to_string(i) + ", " + std::to_string(j) +
                                      ") = " + FormatNumber(kernel(i, j)) + ": must be finite");
        }
    OnkResult r;
    if (options.method == OnkMethod::kLevel) {
      KLS_RETURN_IF_ERROR(RunLevel(kernel, y, options, control, r));
    } else {
      RunGradient(kernel, y, options, control, options.method == OnkMethod::kAccelerated, r);
    }
    return r;
  });
}

double OnkObjective(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, const Eigen::VectorXd& alpha,
                    double rho) {
  const Eigen::VectorXd u = y.cwiseProduct(alpha);
  const double sq = alpha.squaredNorm();
  return -2.0 * alpha.sum() + u.dot(kernel * u) + sq * sq / (4.0 * rho);
}

Eigen::VectorXd OnkGradient(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, const Eigen::VectorXd& alpha,
                            double rho) {
  const Eigen::VectorXd u = y.cwiseProduct(alpha);
  Eigen::VectorXd g = 2.0 * y.cwiseProduct(kernel * u) + (alpha.squaredNorm() / rho) * alpha;
  g.array() -= 2.0;
  return g;
}

Eigen::MatrixXd OnkLearnedKernel(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y,
                                 const Eigen::VectorXd& alpha, double rho) {
  const Eigen::VectorXd u = y.cwiseProduct(alpha);
  Eigen::MatrixXd g = kernel;
  g.noalias() += (u * u.transpose()) / (2.0 * rho);
  return g;
}

double OnkSigma(const Eigen::MatrixXd& x, int k) {
  // Σ_ij ‖x_i − x_j‖² / n² = 2 (mean ‖x_i‖² − ‖mean x‖²)
  const double n = static_cast<double>(x.rows());
  const double mean_sq = x.rowwise().squaredNorm().sum() / n;
  const double center = (x.colwise().sum() / n).squaredNorm();
  return std::pow(4.0, k - 1) * 2.0 * (mean_sq - center);
}

}  // namespace kls
