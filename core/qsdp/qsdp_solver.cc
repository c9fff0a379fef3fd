#include "core/qsdp/qsdp_solver.h"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/common/checkpoint_codec.h"

namespace kls {

Status QsdpOptions::Validate() const {
  if (!(gap_tolerance > 0.0) || !std::isfinite(gap_tolerance)) {
    return InvalidArgumentError("gap_tolerance = " + FormatNumber(gap_tolerance) + " must be finite and > 0");
  }
  if (max_iterations < 1) {
    return InvalidArgumentError("max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  if (check_every < 1) return InvalidArgumentError("check_every = " + std::to_string(check_every) + " must be >= 1");
  if (!(polish_threshold >= 0.0) || !std::isfinite(polish_threshold)) {
    return InvalidArgumentError("polish_threshold = " + FormatNumber(polish_threshold) + " must be finite and >= 0");
  }
  if (!(face_threshold > 0.0 && face_threshold < 1.0)) {
    return InvalidArgumentError("face_threshold = " + FormatNumber(face_threshold) + " must be in (0, 1)");
  }
  if (max_cg_iterations < 1) {
    return InvalidArgumentError("max_cg_iterations = " + std::to_string(max_cg_iterations) + " must be >= 1");
  }
  if (!(lipschitz_safety >= 1.0) || !std::isfinite(lipschitz_safety)) {
    return InvalidArgumentError("lipschitz_safety = " + FormatNumber(lipschitz_safety) + " must be finite and >= 1");
  }
  return OkStatus();
}

// Congruence preconditioning Y = T Ỹ Tᵀ with T = M^{-1/2},
// M = Σ_k w_k (a_k a_kᵀ + b_k b_kᵀ)/2: the terms become a_k ← Tᵀa_k, b_k ← Tᵀb_k
// (a_kᵀ Y b_k is unchanged), so Σ w ã ãᵀ (symmetrized) = I, and the PSD cone
// maps onto itself. For RegMVU this undoes the λ_2 … λ_{m+1} scaling of the
// edge differences (Σ_N (q_i − q_j)(q_i − q_j)ᵀ = QᵀLQ), which otherwise
// makes the Hessian condition number grow like (λ_{m+1}/λ_2)²; for RegPCP
// (Σ_i q_i q_iᵀ = I from the diagonal terms) it is close to the identity.
// Returns false (T = I) when M is singular.
bool WhitenQsdp(const QsdpProblem& p, QsdpProblem* out, Eigen::MatrixXd* t) {
  const int m = p.dim();
  Eigen::MatrixXd sum = 0.5 * (p.left.transpose() * p.weight.asDiagonal() * p.left +
                               p.right.transpose() * p.weight.asDiagonal() * p.right);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (sum + sum.transpose()));
  const Eigen::VectorXd& d = eig.eigenvalues();
  *out = p;
  if (!(d[0] > 1e-12 * d[m - 1])) {
    *t = Eigen::MatrixXd::Identity(m, m);
    return false;
  }
  *t = eig.eigenvectors() * d.cwiseSqrt().cwiseInverse().asDiagonal() * eig.eigenvectors().transpose();
  out->left = p.left * *t;
  out->right = p.right * *t;
  // c tr(T Ỹ Tᵀ) + ⟨C, T Ỹ Tᵀ⟩ = ⟨Tᵀ(cI + C)T, Ỹ⟩.
  Eigen::MatrixXd lin = p.trace_weight * Eigen::MatrixXd::Identity(m, m);
  if (p.linear.size() != 0) lin += p.linear;
  out->linear = t->transpose() * lin * *t;
  out->linear = (0.5 * (out->linear + out->linear.transpose())).eval();
  out->trace_weight = 0.0;
  return true;
}

Eigen::MatrixXd ProjectPsd(const Eigen::MatrixXd& x) {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (x + x.transpose()));
  const Eigen::VectorXd d = eig.eigenvalues().cwiseMax(0.0);
  Eigen::MatrixXd v = eig.eigenvectors();
  Eigen::MatrixXd p = v * d.asDiagonal() * v.transpose();
  return 0.5 * (p + p.transpose());
}

namespace {

// g(λ) = −λᵀt − Σ λ_k²/(4 w_k), the dual objective of the file comment.
double DualValue(const QsdpProblem& p, const Eigen::VectorXd& lambda) {
  return -lambda.dot(p.target) - (lambda.array().square() / (4.0 * p.weight.array())).sum();
}

// Smallest eigenvalue of Σ_{k: a_k = b_k} a_k a_kᵀ and the indicator of those terms.
double PsdTermFloor(const QsdpProblem& p, Eigen::VectorXd* indicator) {
  const int m = p.dim();
  indicator->setZero(p.num_terms());
  Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(m, m);
  int count = 0;
  for (int k = 0; k < p.num_terms(); ++k) {
    if (p.left.row(k) == p.right.row(k)) {
      (*indicator)[k] = 1.0;
      sum.noalias() += p.left.row(k).transpose() * p.left.row(k);
      ++count;
    }
  }
  if (count == 0) return 0.0;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(sum, Eigen::EigenvaluesOnly);
  return eig.eigenvalues()[0];
}

}  // namespace

IterationRow CertificateRow(int iteration, const QsdpResult& cert, double elapsed_seconds) {
  IterationRow row;
  row.iteration = iteration;
  row.objective = cert.objective;
  row.primal_residual = cert.stats.certificate.kkt_residual;
  row.dual_residual = cert.stats.certificate.gap;
  row.gap = cert.stats.certificate.gap;
  row.seconds = elapsed_seconds;
  return row;
}

void EvaluateCertificate(const QsdpProblem& problem, const Eigen::MatrixXd& y, double face_threshold,
                         QsdpResult* out) {
  const Eigen::VectorXd applied = problem.Apply(y);
  const double f = problem.ObjectiveFromApplied(applied, problem.LinearTerm(y));
  const Eigen::VectorXd lambda = 2.0 * problem.weight.cwiseProduct(applied - problem.target);
  Eigen::MatrixXd s = problem.Adjoint(lambda);
  s.diagonal().array() -= problem.trace_weight;  // S(λ) = ∇f(Y)
  if (problem.linear.size() != 0) s -= problem.linear;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(s, Eigen::EigenvaluesOnly);
  const double neg = std::max(0.0, -eig.eigenvalues()[0]);
  double lb = -std::numeric_limits<double>::infinity();
  if (neg == 0.0) {
    lb = DualValue(problem, lambda);
  } else {
    Eigen::VectorXd indicator;
    const double floor = PsdTermFloor(problem, &indicator);
    if (floor > 0.0) lb = std::max(lb, DualValue(problem, lambda + (neg / floor) * indicator));  // (a)
    if (problem.trace_weight > neg && problem.linear.size() == 0) {
      const double eps = neg / (problem.trace_weight - neg);
      lb = std::max(lb, DualValue(problem, (1.0 + eps) * lambda));  // (b)
    }
  }
  out->objective = f;
  out->stats.certificate.lower_bound = lb;
  out->stats.certificate.gap = (f - lb) / std::max(1.0, std::abs(f));
  const Eigen::MatrixXd r = y - ProjectPsd(y - s);
  out->stats.certificate.kkt_residual = r.norm() / (1.0 + y.norm());
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> ey(y, Eigen::EigenvaluesOnly);
  const double top = std::max(ey.eigenvalues().maxCoeff(), 0.0);
  out->rank = static_cast<int>((ey.eigenvalues().array() > face_threshold * top).count());
  if (top == 0.0) out->rank = 0;
}

namespace {

// ‖D ↦ 2𝒜*(W𝒜(D))‖ by power iteration (deterministic start).
double LipschitzEstimate(const QsdpProblem& p) {
  const int m = p.dim();
  Eigen::MatrixXd d = Eigen::MatrixXd::Identity(m, m);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) d(i, j) += 0.01 * std::sin(1.0 + 3.0 * i + 7.0 * j);
  d = (0.5 * (d + d.transpose())).eval();
  d /= d.norm();
  double est = 0.0;
  for (int it = 0; it < 200; ++it) {
    Eigen::MatrixXd h = 2.0 * p.Adjoint(p.weight.cwiseProduct(p.Apply(d)));
    const double norm = h.norm();
    if (!(norm > 0.0)) return 0.0;
    d = h / norm;
    if (std::abs(norm - est) <= 1e-7 * norm) {
      est = norm;
      break;
    }
    est = norm;
  }
  return est;
}

// The problem restricted to the face {U S Uᵀ : S symmetric r × r}.
class Face {
 public:
  Face(const QsdpProblem& p, const Eigen::MatrixXd& u) : p_(p), u_(u), lu_(p.left * u), ru_(p.right * u) {
    // The linear part on the face: c tr(U S Uᵀ) + ⟨C, U S Uᵀ⟩ = ⟨c I + UᵀCU, S⟩.
    lin_ = p.trace_weight * Eigen::MatrixXd::Identity(u.cols(), u.cols());
    if (p.linear.size() != 0) lin_ += u.transpose() * p.linear * u;
  }
  Eigen::VectorXd Apply(const Eigen::MatrixXd& s) const { return (lu_ * s).cwiseProduct(ru_).rowwise().sum(); }
  Eigen::MatrixXd Adjoint(const Eigen::VectorXd& lambda) const {
    Eigen::MatrixXd a = lu_.transpose() * (lambda.asDiagonal() * ru_);
    return 0.5 * (a + a.transpose());
  }
  double Objective(const Eigen::MatrixXd& s) const {
    return p_.ObjectiveFromApplied(Apply(s), lin_.cwiseProduct(s).sum());
  }
  Eigen::MatrixXd Gradient(const Eigen::MatrixXd& s) const {
    Eigen::MatrixXd g = Adjoint(2.0 * p_.weight.cwiseProduct(Apply(s) - p_.target));
    return g - lin_;
  }
  Eigen::MatrixXd Hessian(const Eigen::MatrixXd& d) const { return Adjoint(2.0 * p_.weight.cwiseProduct(Apply(d))); }
  Eigen::MatrixXd Lift(const Eigen::MatrixXd& s) const {
    Eigen::MatrixXd y = u_ * s * u_.transpose();
    return 0.5 * (y + y.transpose());
  }

 private:
  const QsdpProblem& p_;
  const Eigen::MatrixXd& u_;
  Eigen::MatrixXd lu_, ru_, lin_;
};

// One face-polish step from the PSD matrix y; returns true and sets *out when
// it found a PSD point with a lower objective.
bool Polish(const QsdpProblem& p, const Eigen::MatrixXd& y, const QsdpOptions& o, int* cg_iterations,
            Eigen::MatrixXd* out) {
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(y);
  const Eigen::VectorXd& s = eig.eigenvalues();
  const double top = s.maxCoeff();
  if (!(top > 0.0)) return false;
  int r = 0;
  while (r < s.size() && s[s.size() - 1 - r] > o.face_threshold * top) ++r;
  const Eigen::MatrixXd u = eig.eigenvectors().rightCols(r);
  const Face face(p, u);
  const Eigen::MatrixXd s0 = s.tail(r).asDiagonal();
  const double f0 = face.Objective(s0);
  // CG on H Δ = −∇φ(S0) (symmetric matrices, Frobenius inner product).
  Eigen::MatrixXd delta = Eigen::MatrixXd::Zero(r, r);
  Eigen::MatrixXd res = -face.Gradient(s0);
  Eigen::MatrixXd dir = res;
  double rr = res.squaredNorm();
  const double stop = 1e-26 * std::max(rr, 1e-300);
  for (int it = 0; it < o.max_cg_iterations && rr > stop; ++it) {
    ++*cg_iterations;
    const Eigen::MatrixXd hd = face.Hessian(dir);
    const double curv = dir.cwiseProduct(hd).sum();
    if (!(curv > 0.0)) break;  // null direction of a rank-deficient A
    const double alpha = rr / curv;
    delta += alpha * dir;
    res -= alpha * hd;
    const double rr_new = res.squaredNorm();
    dir = res + (rr_new / rr) * dir;
    rr = rr_new;
  }
  if (!delta.allFinite()) return false;
  // Candidates: the full step projected onto the PSD cone, and the longest
  // step along Δ that keeps S PSD (S0 is diagonal and positive definite).
  Eigen::MatrixXd best;
  double best_f = f0;
  auto consider = [&](const Eigen::MatrixXd& cand) {
    const double f = face.Objective(cand);
    if (std::isfinite(f) && f < best_f) {
      best_f = f;
      best = cand;
    }
  };
  consider(ProjectPsd(s0 + delta));
  const Eigen::VectorXd inv_sqrt = s.tail(r).cwiseSqrt().cwiseInverse();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> scaled(inv_sqrt.asDiagonal() * delta * inv_sqrt.asDiagonal(),
                                                        Eigen::EigenvaluesOnly);
  const double lo = scaled.eigenvalues()[0];
  if (lo < -1.0) consider(s0 + (0.99 / -lo) * delta);
  if (best.size() == 0) return false;
  *out = face.Lift(best);
  return true;
}

// ---- Checkpoints (SolveControl::checkpoint / resume_from) -------------------
//
// Taken after a FISTA iteration that does not end the run. After the common
// prefix (core/common/checkpoint_codec.h; the history has one entry per
// certificate evaluated so far, not one per iteration): the accelerated
// gradient state (Ỹ_k, the extrapolated X_k, t_k), the iteration of the last
// face polish, the polish counters and the last certificate (its KKT residual
// gates the next polish). The step constant L is recomputed by the same
// deterministic power iteration, so a resumed run is bit-identical.
constexpr char kFistaCheckpointTag[] = "qsdp_fista/1";
constexpr uint32_t kFistaCheckpointMagic = 0x51534446;  // "QSDF"
constexpr uint32_t kFistaCheckpointVersion = 1;

}  // namespace

void AddQsdpProblemToFingerprint(const QsdpProblem& p, Fingerprint* fp) {
  fp->AddDense(p.left).AddDense(p.right).AddDense(p.target).AddDense(p.weight);
  fp->AddDouble(p.trace_weight).AddDense(p.linear);
}

namespace {

// The problem and the options that shape the iterates (not gap_tolerance or max_iterations).
uint64_t FistaFingerprint(const QsdpProblem& problem, const QsdpOptions& o) {
  Fingerprint fp;
  fp.AddString(kFistaCheckpointTag);
  AddQsdpProblemToFingerprint(problem, &fp);
  fp.AddInt(o.check_every).AddDouble(o.polish_threshold).AddDouble(o.face_threshold).AddInt(o.max_cg_iterations);
  fp.AddInt(o.precondition).AddDouble(o.lipschitz_safety);
  return fp.value();
}

struct FistaState {
  Eigen::MatrixXd y, x;
  double t = 1.0;
  int last_polish = 0;
  QsdpResult certificate;  // objective … rank of the last certificate, polishes, cg_iterations, history
};

void PutCertificate(ByteWriter* w, const QsdpResult& r) {
  w->Put<double>(r.objective);
  w->Put<double>(r.stats.certificate.lower_bound);
  w->Put<double>(r.stats.certificate.gap);
  w->Put<double>(r.stats.certificate.kkt_residual);
  w->Put<int32_t>(r.rank);
}

Status GetCertificate(ByteReader* in, QsdpResult* r) {
  KLS_RETURN_IF_ERROR(in->Get(&r->objective));
  KLS_RETURN_IF_ERROR(in->Get(&r->stats.certificate.lower_bound));
  KLS_RETURN_IF_ERROR(in->Get(&r->stats.certificate.gap));
  KLS_RETURN_IF_ERROR(in->Get(&r->stats.certificate.kkt_residual));
  int32_t rank = 0;
  KLS_RETURN_IF_ERROR(in->Get(&rank));
  r->rank = rank;
  return OkStatus();
}

std::string EncodeFista(uint64_t fingerprint, int iteration, const QsdpResult& result, const Eigen::MatrixXd& y,
                        const Eigen::MatrixXd& x, double t, int last_polish) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kFistaCheckpointMagic, kFistaCheckpointVersion, fingerprint, iteration,
                      result.stats.objective_history);
  w.PutMatrix(y);
  w.PutMatrix(x);
  w.Put<double>(t);
  w.Put<int32_t>(last_polish);
  w.Put<int32_t>(result.polishes);
  w.Put<int32_t>(result.cg_iterations);
  PutCertificate(&w, result);
  return w.Take();
}

// Any error means "not this run's checkpoint": the caller starts afresh.
Status DecodeFista(const Checkpoint& c, uint64_t fingerprint, int m, FistaState* s) {
  ByteReader in(c.bytes, "qsdp_fista checkpoint");
  // At most one certificate per iteration plus one per polish.
  KLS_RETURN_IF_ERROR(GetCheckpointPrefixWithHistoryBound(&in, c, kFistaCheckpointMagic, kFistaCheckpointVersion,
                                                          fingerprint, &s->certificate.stats.objective_history,
                                                          2 * static_cast<uint64_t>(c.iteration)));
  KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, m, m, &s->y));
  KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, m, m, &s->x));
  KLS_RETURN_IF_ERROR(in.Get(&s->t));
  int32_t last_polish = 0, polishes = 0, cg = 0;
  KLS_RETURN_IF_ERROR(in.Get(&last_polish));
  KLS_RETURN_IF_ERROR(in.Get(&polishes));
  KLS_RETURN_IF_ERROR(in.Get(&cg));
  KLS_RETURN_IF_ERROR(GetCertificate(&in, &s->certificate));
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  s->last_polish = last_polish;
  s->certificate.polishes = polishes;
  s->certificate.cg_iterations = cg;
  if (!s->y.allFinite() || !s->x.allFinite() || !(s->t >= 1.0) || !std::isfinite(s->t) ||
      last_polish > c.iteration || polishes < 0 || cg < 0) {
    return DataLossError(in.what() + ": inconsistent state");
  }
  return OkStatus();
}

}  // namespace

StatusOr<QsdpResult> SolveQsdp(const QsdpProblem& problem, const QsdpOptions& options,
                               const SolveControl& control) {
  return GuardExceptions("SolveQsdp", [&]() -> StatusOr<QsdpResult> {
    KLS_RETURN_IF_ERROR(problem.Validate().WithContext("QsdpProblem"));
    KLS_RETURN_IF_ERROR(options.Validate().WithContext("QsdpOptions"));
    Stopwatch setup_watch;
    const int m = problem.dim();
    QsdpResult result;
    // Iterate on Ỹ of the preconditioned problem wp (Y = T Ỹ Tᵀ); certify on the original.
    QsdpProblem wp;
    Eigen::MatrixXd tm;
    if (!options.precondition || !WhitenQsdp(problem, &wp, &tm)) {
      wp = problem;
      tm = Eigen::MatrixXd::Identity(m, m);
    }
    auto original = [&](const Eigen::MatrixXd& yt) -> Eigen::MatrixXd {
      Eigen::MatrixXd yy = tm * yt * tm.transpose();
      return 0.5 * (yy + yy.transpose());
    };
    const double lip = options.lipschitz_safety * LipschitzEstimate(wp);
    result.lipschitz = lip;
    result.stats.setup_seconds = setup_watch.Seconds();
    Stopwatch watch;
    Eigen::MatrixXd y = Eigen::MatrixXd::Zero(m, m);
    if (!(lip > 0.0)) {
      // 𝒜 = 0: f = const − c tr(Y), bounded only when c = 0 (Y = 0 optimal).
      if (problem.trace_weight > 0.0) {
        return InvalidArgumentError("QsdpProblem: all terms vanish and trace_weight = " +
                                    FormatNumber(problem.trace_weight) + " > 0, so the problem is unbounded");
      }
      EvaluateCertificate(problem, y, options.face_threshold, &result);
      result.y = y;
      return result;
    }
    Eigen::MatrixXd x = y;
    double t = 1.0;
    int last_polish = -1000000;
    bool done = false;
    Termination why = Termination::kIterationLimit;
    int it = 0;
    // The fingerprint costs O(K m + m²): only computed when checkpoints are used.
    const bool use_checkpoints = static_cast<bool>(control.checkpoint) || control.ResumeFrom(kFistaCheckpointTag);
    const uint64_t fingerprint = use_checkpoints ? FistaFingerprint(problem, options) : 0;
    if (const Checkpoint* c = control.ResumeFrom(kFistaCheckpointTag)) {
      FistaState state;
      if (DecodeFista(*c, fingerprint, m, &state).ok()) {
        it = c->iteration;
        y = std::move(state.y);
        x = std::move(state.x);
        t = state.t;
        last_polish = state.last_polish;
        result.objective = state.certificate.objective;
        result.stats.certificate = state.certificate.stats.certificate;
        result.rank = state.certificate.rank;
        result.polishes = state.certificate.polishes;
        result.cg_iterations = state.certificate.cg_iterations;
        result.stats.objective_history = std::move(state.certificate.stats.objective_history);
        result.stats.resumed_from_iteration = it;
      }  // otherwise not this run's checkpoint: start afresh
    }
    CheckpointTimer checkpoints(control);
    auto certify = [&]() -> bool {
      EvaluateCertificate(problem, original(y), options.face_threshold, &result);
      result.stats.objective_history.push_back(result.objective);
      ReportIteration(control, CertificateRow(it, result, watch.Seconds()), options.max_iterations, &result.stats);
      return result.stats.certificate.gap <= options.gap_tolerance;
    };
    while (it < options.max_iterations && !done) {
      Termination stop;
      if (control.ShouldStop(&stop)) {
        why = stop;
        break;
      }
      ++it;
      const Eigen::MatrixXd g = wp.Gradient(x);
      Eigen::MatrixXd y_next = ProjectPsd(x - g / lip);
      if (!y_next.allFinite()) {
        why = Termination::kNumericalIssue;
        break;
      }
      // Gradient-based adaptive restart (O'Donoghue & Candès 2015).
      if (g.cwiseProduct(y_next - y).sum() > 0.0) t = 1.0;
      const double t_next = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t));
      x = y_next + ((t - 1.0) / t_next) * (y_next - y);
      y = std::move(y_next);
      t = t_next;
      if (it % options.check_every == 0 || it == options.max_iterations) {
        if (certify()) {
          why = Termination::kConverged;
          done = true;
          break;
        }
        if (options.polish_threshold > 0.0 && result.stats.certificate.kkt_residual < options.polish_threshold &&
            it - last_polish >= options.check_every) {
          last_polish = it;
          Eigen::MatrixXd polished;
          if (Polish(wp, y, options, &result.cg_iterations, &polished)) {
            ++result.polishes;
            y = polished;
            x = y;
            t = 1.0;
            if (certify()) {
              why = Termination::kConverged;
              done = true;
            }
          }
        }
      }
      if (!done && it < options.max_iterations) {
        checkpoints.MaybeSave(kFistaCheckpointTag, it,
                              [&] { return EncodeFista(fingerprint, it, result, y, x, t, last_polish); });
      }
    }
    result.y = original(y);
    if (result.stats.objective_history.empty() || !done) {
      EvaluateCertificate(problem, result.y, options.face_threshold, &result);
    }
    result.stats.certificate.CheckAgainst(options.gap_tolerance);
    result.stats.termination = why;
    result.stats.iterations = it;
    result.stats.final_objective = result.objective;
    result.stats.solve_seconds = watch.Seconds();
    return result;
  });
}

}  // namespace kls
