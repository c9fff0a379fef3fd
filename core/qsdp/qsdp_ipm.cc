#include "core/qsdp/qsdp_ipm.h"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/SVD>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/common/checkpoint_codec.h"
#include "core/qsdp/qsdp_solver.h"

namespace kls {

Status QsdpIpmOptions::Validate(std::string_view path) const {
  const std::string p(path);
  KLS_RETURN_IF_ERROR(CheckPositiveOption("gap_tolerance", gap_tolerance, path));
  if (max_iterations < 1) {
    return InvalidArgumentError(p + ".max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  if (!(step_fraction > 0.0 && step_fraction < 1.0)) {
    return InvalidArgumentError(p + ".step_fraction = " + FormatNumber(step_fraction) + " must be in (0, 1)");
  }
  if (!(rank_threshold > 0.0 && rank_threshold < 1.0)) {
    return InvalidArgumentError(p + ".rank_threshold = " + FormatNumber(rank_threshold) + " must be in (0, 1)");
  }
  return OkStatus();
}

Eigen::VectorXd Svec(const Eigen::MatrixXd& x) {
  const int m = static_cast<int>(x.rows());
  Eigen::VectorXd v(static_cast<Eigen::Index>(m) * (m + 1) / 2);
  const double r2 = std::sqrt(2.0);
  Eigen::Index k = 0;
  for (int j = 0; j < m; ++j)
    for (int i = 0; i <= j; ++i, ++k) v[k] = i == j ? x(i, i) : r2 * 0.5 * (x(i, j) + x(j, i));
  return v;
}

Eigen::MatrixXd Smat(const Eigen::VectorXd& v, int m) {
  Eigen::MatrixXd x(m, m);
  const double h = 1.0 / std::sqrt(2.0);
  Eigen::Index k = 0;
  for (int j = 0; j < m; ++j)
    for (int i = 0; i <= j; ++i, ++k) {
      if (i == j) {
        x(i, i) = v[k];
      } else {
        x(i, j) = x(j, i) = h * v[k];
      }
    }
  return x;
}

namespace {

// The rows √(2 w_k) svec(G_k), G_k = sym(a_k b_kᵀ): H = Fᵀ F is the paper's 2A
// in svec coordinates. O(K n_s).
Eigen::MatrixXd TermRows(const QsdpProblem& p) {
  const int m = p.dim(), k_terms = p.num_terms();
  const Eigen::Index ns = static_cast<Eigen::Index>(m) * (m + 1) / 2;
  Eigen::MatrixXd f(k_terms, ns);
  const double r2 = std::sqrt(2.0);
  for (Eigen::Index k = 0; k < k_terms; ++k) {
    const double s = std::sqrt(2.0 * p.weight[k]);
    Eigen::Index c = 0;
    for (int j = 0; j < m; ++j) {
      const double aj = p.left(k, j), bj = p.right(k, j);
      for (int i = 0; i <= j; ++i, ++c) {
        const double ai = p.left(k, i), bi = p.right(k, i);
        // (G_k)_ij = (a_i b_j + a_j b_i)/2; svec scales i ≠ j by √2.
        f(k, c) = i == j ? s * ai * bi : s * r2 * 0.5 * (ai * bj + aj * bi);
      }
    }
  }
  return f;
}

// svec-coordinates matrix of X ↦ P X P (P symmetric): entry ((i,j),(k,l)) =
// c_ij c_kl · 2 (P_ik P_jl + P_il P_jk), c = 1/2 on the diagonal, 1/√2 off it.
// Added to the lower triangle of `out`.
void AddSymmetricKron(const Eigen::MatrixXd& pm, Eigen::MatrixXd* out) {
  const int m = static_cast<int>(pm.rows());
  const double h = 1.0 / std::sqrt(2.0);
  std::vector<int> ri, rj;
  for (int j = 0; j < m; ++j)
    for (int i = 0; i <= j; ++i) {
      ri.push_back(i);
      rj.push_back(j);
    }
  const Eigen::Index ns = static_cast<Eigen::Index>(ri.size());
  for (Eigen::Index col = 0; col < ns; ++col) {
    const int k = ri[static_cast<size_t>(col)], l = rj[static_cast<size_t>(col)];
    const double ckl = k == l ? 0.5 : h;
    for (Eigen::Index row = col; row < ns; ++row) {
      const int i = ri[static_cast<size_t>(row)], j = rj[static_cast<size_t>(row)];
      const double cij = i == j ? 0.5 : h;
      (*out)(row, col) += cij * ckl * 2.0 * (pm(i, k) * pm(j, l) + pm(i, l) * pm(j, k));
    }
  }
}

// Largest α in [0, ∞) with X + α D ⪰ 0 for X = L Lᵀ ≻ 0 (∞ as 1e300).
double MaxStep(const Eigen::MatrixXd& chol_lower, const Eigen::MatrixXd& d) {
  const auto l = chol_lower.triangularView<Eigen::Lower>();
  Eigen::MatrixXd t = l.solve(d);
  t = l.solve(t.transpose()).eval();  // L⁻¹ D L⁻ᵀ
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (t + t.transpose()), Eigen::EigenvaluesOnly);
  const double lo = eig.eigenvalues()[0];
  return lo >= 0.0 ? 1e300 : -1.0 / lo;
}

// Distinct rows of [left; right]: RegPCP's terms reuse the rows q_i of Q
// (K = n + #pairs terms, at most n distinct vectors), so the Gram matrices
// of the low-rank Newton system come from one n_u × m × n_u product.
struct DistinctRows {
  Eigen::MatrixXd rows;              // n_u × m
  std::vector<int> left_id, right_id;  // term k → row
};

DistinctRows FindDistinctRows(const QsdpProblem& p) {
  DistinctRows d;
  std::unordered_map<std::string, int> seen;
  std::vector<Eigen::Index> order;
  const Eigen::Index m = p.left.cols();
  auto id_of = [&](const Eigen::MatrixXd& x, Eigen::Index k) {
    Eigen::RowVectorXd row = x.row(k);
    std::string key(reinterpret_cast<const char*>(row.data()), static_cast<size_t>(m) * sizeof(double));
    auto it = seen.emplace(std::move(key), static_cast<int>(order.size()));
    if (it.second) order.push_back(&x == &p.left ? k : -1 - k);
    return it.first->second;
  };
  for (Eigen::Index k = 0; k < p.left.rows(); ++k) {
    d.left_id.push_back(id_of(p.left, k));
    d.right_id.push_back(id_of(p.right, k));
  }
  d.rows.resize(static_cast<Eigen::Index>(order.size()), m);
  for (size_t i = 0; i < order.size(); ++i) {
    const Eigen::Index k = order[i];
    d.rows.row(static_cast<Eigen::Index>(i)) = k >= 0 ? p.left.row(k) : p.right.row(-1 - k);
  }
  return d;
}

bool CholLower(const Eigen::MatrixXd& x, Eigen::MatrixXd* l) {
  Eigen::LLT<Eigen::MatrixXd> llt(x);
  if (llt.info() != Eigen::Success) return false;
  *l = llt.matrixL();
  return l->allFinite();
}

// ---- Checkpoints (SolveControl::checkpoint / resume_from) -------------------
//
// Taken after a predictor–corrector step that does not end the run. After the
// common prefix (core/common/checkpoint_codec.h; the history has one entry
// per certified iterate, the start included, so `iteration` entries when the
// step's own iterate is not certified yet): the primal–dual pair svec(Ỹ),
// svec(Z) of the preconditioned problem, and the best certified iterate so far
// (Y, its certificate and μ). The Newton matrix is re-formed from (Y, Z) every
// iteration anyway, so nothing else carries over and a resumed run is
// bit-identical.
constexpr char kCheckpointTag[] = "qsdp_ipm/1";
constexpr uint32_t kCheckpointMagic = 0x51534950;  // "QSIP"
constexpr uint32_t kCheckpointVersion = 1;

// The problem and the options that shape the iterates (not gap_tolerance or max_iterations).
uint64_t CheckpointFingerprint(const QsdpProblem& problem, const QsdpIpmOptions& o) {
  Fingerprint fp;
  fp.AddString(kCheckpointTag);
  AddQsdpProblemToFingerprint(problem, &fp);
  fp.AddDouble(o.step_fraction).AddInt(static_cast<int>(o.newton_system)).AddInt(o.precondition);
  fp.AddDouble(o.rank_threshold);
  return fp.value();
}

std::string EncodeCheckpoint(uint64_t fingerprint, int iteration, const SolveReport& stats, const Eigen::VectorXd& y,
                             const Eigen::VectorXd& z, const QsdpIpmResult& best) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kCheckpointMagic, kCheckpointVersion, fingerprint, iteration, stats.objective_history);
  w.PutVector(y);
  w.PutVector(z);
  w.PutMatrix(best.y);
  w.Put<double>(best.objective);
  w.Put<double>(best.stats.certificate.lower_bound);
  w.Put<double>(best.stats.certificate.gap);
  w.Put<double>(best.stats.certificate.kkt_residual);
  w.Put<int32_t>(best.rank);
  w.Put<double>(best.mu);
  return w.Take();
}

struct ResumeState {
  std::vector<double> objective_history;
  Eigen::VectorXd y, z;
  QsdpIpmResult best;
};

// Any error means "not this run's checkpoint": the caller starts afresh.
Status DecodeCheckpoint(const Checkpoint& c, uint64_t fingerprint, int m, ResumeState* s) {
  ByteReader in(c.bytes, "qsdp_ipm checkpoint");
  KLS_RETURN_IF_ERROR(
      GetCheckpointPrefix(&in, c, kCheckpointMagic, kCheckpointVersion, fingerprint, &s->objective_history));
  KLS_RETURN_IF_ERROR(in.GetVector(&s->y));
  KLS_RETURN_IF_ERROR(in.GetVector(&s->z));
  KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, m, m, &s->best.y));
  KLS_RETURN_IF_ERROR(in.Get(&s->best.objective));
  KLS_RETURN_IF_ERROR(in.Get(&s->best.stats.certificate.lower_bound));
  KLS_RETURN_IF_ERROR(in.Get(&s->best.stats.certificate.gap));
  KLS_RETURN_IF_ERROR(in.Get(&s->best.stats.certificate.kkt_residual));
  int32_t rank = 0;
  KLS_RETURN_IF_ERROR(in.Get(&rank));
  s->best.rank = rank;
  KLS_RETURN_IF_ERROR(in.Get(&s->best.mu));
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  const Eigen::Index ns = static_cast<Eigen::Index>(m) * (m + 1) / 2;
  if (s->y.size() != ns || s->z.size() != ns || !s->y.allFinite() || !s->z.allFinite() || !s->best.y.allFinite() ||
      rank < 0 || rank > m) {
    return DataLossError(in.what() + ": does not fit this problem");
  }
  return OkStatus();
}

// The preconditioned problem and the parts of its Newton system that stay the
// same from one iteration to the next. F v = √(2w) ∘ 𝒜(Smat v) and
// Fᵀx = svec(𝒜*(√(2w) ∘ x)); 𝓗 = Fᵀ F.
struct IpmSystem {
  int m = 0;
  QsdpProblem wp;        // the preconditioned problem (the original one without preconditioning)
  Eigen::MatrixXd tm;    // Y = T Ỹ Tᵀ
  Eigen::Index ns = 0;   // m(m+1)/2
  Eigen::Index k_terms = 0;
  bool low_rank = false;  // Woodbury form of the Newton system (K × K instead of n_s × n_s)
  Eigen::MatrixXd h;      // dense path: H = Fᵀ F (lower triangle)
  bool symmetric_terms = false;
  DistinctRows distinct;  // low-rank path
  Eigen::VectorXd root_w;
  Eigen::VectorXd b;  // svec(B), B = −2𝒜*(W t) − cI − C

  Eigen::MatrixXd Original(const Eigen::MatrixXd& yt) const {
    Eigen::MatrixXd yy = tm * yt * tm.transpose();
    return 0.5 * (yy + yy.transpose());
  }
  Eigen::VectorXd FApply(const Eigen::VectorXd& v) const {
    return std::sqrt(2.0) * root_w.cwiseProduct(wp.Apply(Smat(v, m)));
  }
  Eigen::VectorXd FAdjoint(const Eigen::VectorXd& x) const {
    return Svec(wp.Adjoint(std::sqrt(2.0) * root_w.cwiseProduct(x)));
  }
  Eigen::VectorXd HMul(const Eigen::VectorXd& v) const {
    if (low_rank) return Svec(2.0 * wp.Adjoint(wp.weight.cwiseProduct(wp.Apply(Smat(v, m)))));
    return h.selfadjointView<Eigen::Lower>() * v;
  }
};

IpmSystem BuildIpmSystem(const QsdpProblem& problem, const QsdpIpmOptions& options) {
  IpmSystem s;
  s.m = problem.dim();
  if (!options.precondition || !WhitenQsdp(problem, &s.wp, &s.tm)) {
    s.wp = problem;
    s.tm = Eigen::MatrixXd::Identity(s.m, s.m);
  }
  s.ns = static_cast<Eigen::Index>(s.m) * (s.m + 1) / 2;
  s.k_terms = s.wp.num_terms();
  s.low_rank = options.newton_system == QsdpNewtonSystem::kLowRank ||
               (options.newton_system == QsdpNewtonSystem::kAuto && s.k_terms < s.ns);
  if (!s.low_rank) {
    const Eigen::MatrixXd f_rows = TermRows(s.wp);
    s.h = Eigen::MatrixXd::Zero(s.ns, s.ns);
    s.h.selfadjointView<Eigen::Lower>().rankUpdate(f_rows.transpose());
  }
  s.symmetric_terms = s.wp.left == s.wp.right;
  if (s.low_rank) s.distinct = FindDistinctRows(s.wp);
  s.root_w = s.wp.weight.cwiseSqrt();
  Eigen::MatrixXd b_mat = -2.0 * s.wp.Adjoint(s.wp.weight.cwiseProduct(s.wp.target));
  b_mat.diagonal().array() -= s.wp.trace_weight;
  if (s.wp.linear.size() != 0) b_mat -= s.wp.linear;
  s.b = Svec(b_mat);
  return s;
}

// Start: Y₀ = ξI with ξ the minimizer of f along the ray {sI} (>= 1 after
// preconditioning, where the terms are normalized), Z₀ = ζI with ζ the
// size of ∇f(Y₀), so both are well inside their cones and balanced.
void StartingPoint(const IpmSystem& sys, Eigen::VectorXd* y, Eigen::VectorXd* z) {
  const int m = sys.m;
  const Eigen::VectorXd e = Svec(Eigen::MatrixXd::Identity(m, m));
  const double curvature = e.dot(sys.HMul(e));
  double xi = curvature > 0.0 ? -sys.b.dot(e) / curvature : 1.0;
  xi = std::max({xi, 1.0, std::sqrt(static_cast<double>(m))});
  *y = xi * e;
  const Eigen::VectorXd g0 = sys.HMul(*y) + sys.b;
  const double zeta = std::max(1.0, g0.norm() / std::sqrt(static_cast<double>(m)));
  *z = zeta * e;
}

// NT scaling: Y = R Rᵀ, Z = S Sᵀ, Sᵀ R = U D Vᵀ, G = R V D^{-1/2}:
// Gᵀ Z G = G⁻¹ Y G⁻ᵀ = D = Λ.
struct NtScaling {
  Eigen::MatrixXd rl, sl;  // R, S (lower Cholesky factors of Y, Z)
  Eigen::VectorXd lam;     // Λ
  Eigen::MatrixXd g, ginv;
  Eigen::MatrixXd winv;  // 𝒲⁻¹ = G⁻ᵀ G⁻¹
};

// False when Y or Z is not numerically positive definite.
bool ComputeNtScaling(const Eigen::MatrixXd& ym, const Eigen::MatrixXd& zm, NtScaling* nt) {
  const Eigen::Index m = ym.rows();
  if (!CholLower(ym, &nt->rl) || !CholLower(zm, &nt->sl)) return false;
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(nt->sl.transpose() * nt->rl, Eigen::ComputeFullU | Eigen::ComputeFullV);
  nt->lam = svd.singularValues();
  if (!(nt->lam.minCoeff() > 0.0) || !nt->lam.allFinite()) return false;
  nt->g = nt->rl * svd.matrixV() * nt->lam.cwiseSqrt().cwiseInverse().asDiagonal();
  // G⁻¹ = D^{1/2} Vᵀ R⁻¹ and 𝒲⁻¹ = G⁻ᵀ G⁻¹.
  const Eigen::MatrixXd rinv_t =
      nt->rl.triangularView<Eigen::Lower>().solve(Eigen::MatrixXd::Identity(m, m)).transpose();  // R⁻ᵀ
  nt->ginv = nt->lam.cwiseSqrt().asDiagonal() * svd.matrixV().transpose() * rinv_t.transpose();
  nt->winv = nt->ginv.transpose() * nt->ginv;
  nt->winv = (0.5 * (nt->winv + nt->winv.transpose())).eval();
  return true;
}

// Forms the Newton matrix at this scaling into `newton` (H + 𝒲⁻¹⊛𝒲⁻¹ on the
// dense path; I + F𝒫Fᵀ with 𝒲 = G Gᵀ into `wnt` on the low-rank path) and
// factors it. False when it is not numerically positive definite.
bool FactorNewtonMatrix(const IpmSystem& sys, const NtScaling& nt, Eigen::MatrixXd* newton, Eigen::MatrixXd* wnt,
                        Eigen::LLT<Eigen::MatrixXd, Eigen::Lower>* llt) {
  const Eigen::Index k_terms = sys.k_terms;
  if (!sys.low_rank) {
    newton->triangularView<Eigen::Lower>() = sys.h.triangularView<Eigen::Lower>();
    AddSymmetricKron(nt.winv, newton);
  } else {
    // I + F𝒫Fᵀ, 𝒫 = 𝒲⊛𝒲 (Woodbury; see the header).
    *wnt = nt.g * nt.g.transpose();
    *wnt = (0.5 * (*wnt + wnt->transpose())).eval();
    const DistinctRows& distinct = sys.distinct;
    if (distinct.rows.rows() < k_terms) {
      // (a_kᵀ𝒲a_l)(b_kᵀ𝒲b_l) + (a_kᵀ𝒲b_l)(b_kᵀ𝒲a_l) gathered from S = V𝒲Vᵀ.
      const Eigen::MatrixXd sg = distinct.rows * *wnt * distinct.rows.transpose();
      for (Eigen::Index l = 0; l < k_terms; ++l) {
        const int al = distinct.left_id[static_cast<size_t>(l)], bl = distinct.right_id[static_cast<size_t>(l)];
        for (Eigen::Index k = l; k < k_terms; ++k) {
          const int ak = distinct.left_id[static_cast<size_t>(k)], bk = distinct.right_id[static_cast<size_t>(k)];
          (*newton)(k, l) = sg(ak, al) * sg(bk, bl) + sg(ak, bl) * sg(bk, al);
        }
      }
    } else {
      const Eigen::MatrixXd lw = sys.wp.left * *wnt;
      Eigen::MatrixXd p1 = lw * sys.wp.left.transpose();
      if (sys.symmetric_terms) {
        *newton = p1.cwiseProduct(p1);
        *newton *= 2.0;
      } else {
        *newton = p1.cwiseProduct(sys.wp.right * *wnt * sys.wp.right.transpose());
        p1 = lw * sys.wp.right.transpose();
        *newton += p1.cwiseProduct(p1.transpose());
      }
    }
    *newton = sys.root_w.asDiagonal() * *newton * sys.root_w.asDiagonal();
    newton->diagonal().array() += 1.0;
  }
  llt->compute(*newton);
  if (llt->info() != Eigen::Success) {
    // Rounding near the end of the path: regularize slightly and retry.
    const double shift = 1e-12 * newton->diagonal().cwiseAbs().maxCoeff();
    newton->diagonal().array() += shift;
    llt->compute(*newton);
    return llt->info() == Eigen::Success;
  }
  return true;
}

// One Mehrotra predictor–corrector step from (y, z), whose matrices are
// (ym, zm) with μ = ⟨Y, Z⟩ / m. `newton` is the Newton matrix's storage, kept
// between iterations; the time spent forming and factoring it is added to
// `factor_seconds`. False on a numerical issue.
bool PredictorCorrectorStep(const IpmSystem& sys, const QsdpIpmOptions& options, const Eigen::MatrixXd& ym,
                            const Eigen::MatrixXd& zm, double mu, Eigen::MatrixXd* newton, double* factor_seconds,
                            Eigen::VectorXd* y, Eigen::VectorXd* z) {
  const int m = sys.m;
  const Eigen::VectorXd rd = sys.HMul(*y) + sys.b - *z;  // dual residual 𝓗Y + B − Z
  NtScaling nt;
  if (!ComputeNtScaling(ym, zm, &nt)) return false;
  Stopwatch fw;
  Eigen::LLT<Eigen::MatrixXd, Eigen::Lower> llt;
  Eigen::MatrixXd wnt;  // 𝒲 = G Gᵀ (low-rank path)
  if (!FactorNewtonMatrix(sys, nt, newton, &wnt, &llt)) return false;
  *factor_seconds += fw.Seconds();
  auto newton_solve = [&](const Eigen::VectorXd& r) -> Eigen::VectorXd {
    if (!sys.low_rank) return llt.solve(r);
    auto p_apply = [&](const Eigen::VectorXd& v) -> Eigen::VectorXd {
      Eigen::MatrixXd x = wnt * Smat(v, m) * wnt;
      return Svec(0.5 * (x + x.transpose()));
    };
    const Eigen::VectorXd u = p_apply(r);
    return u - p_apply(sys.FAdjoint(llt.solve(sys.FApply(u))));
  };
  auto solve_direction = [&](const Eigen::MatrixXd& rhat, Eigen::VectorXd* dy, Eigen::VectorXd* dz) {
    const Eigen::MatrixXd rc = nt.ginv.transpose() * rhat * nt.ginv;
    *dy = newton_solve(Svec(0.5 * (rc + rc.transpose())) - rd);
    *dz = sys.HMul(*dy) + rd;
  };
  auto step_to_boundary = [&](const Eigen::VectorXd& dy, const Eigen::VectorXd& dz) {
    return std::min(MaxStep(nt.rl, Smat(dy, m)), MaxStep(nt.sl, Smat(dz, m)));
  };
  const Eigen::VectorXd& lam = nt.lam;
  // Predictor (affine scaling): R̂ = −Λ.
  Eigen::VectorXd dy_a, dz_a;
  solve_direction(-Eigen::MatrixXd(lam.asDiagonal()), &dy_a, &dz_a);
  const double alpha_a = std::min(1.0, step_to_boundary(dy_a, dz_a));
  const double mu_a = Smat(*y + alpha_a * dy_a, m).cwiseProduct(Smat(*z + alpha_a * dz_a, m)).sum() / m;
  const double sigma = std::clamp(std::pow(std::max(mu_a, 0.0) / mu, 3.0), 0.0, 1.0);
  // Corrector: R̂ = (2σμI − 2Λ² − (ŶₐẐₐ + ẐₐŶₐ)) ⊘ (λ_i + λ_j) with the
  // scaled predictor Ŷₐ = G⁻¹ΔYₐG⁻ᵀ, Ẑₐ = GᵀΔZₐG (Mehrotra's second-order term).
  const Eigen::MatrixXd yh = nt.ginv * Smat(dy_a, m) * nt.ginv.transpose();
  const Eigen::MatrixXd zh = nt.g.transpose() * Smat(dz_a, m) * nt.g;
  Eigen::MatrixXd rhat = -(yh * zh + zh * yh);
  for (int i = 0; i < m; ++i) rhat(i, i) += 2.0 * sigma * mu - 2.0 * lam[i] * lam[i];
  for (int j = 0; j < m; ++j)
    for (int i = 0; i < m; ++i) rhat(i, j) /= lam[i] + lam[j];
  Eigen::VectorXd dy, dz;
  solve_direction(rhat, &dy, &dz);
  const double alpha = std::min(1.0, options.step_fraction * step_to_boundary(dy, dz));
  if (!dy.allFinite() || !dz.allFinite() || !(alpha > 0.0)) return false;
  *y += alpha * dy;
  *z += alpha * dz;
  // An unbounded problem (e.g. c > 0 and 𝒜 not injective on the cone).
  return y->norm() < 1e150;
}

}  // namespace

StatusOr<QsdpIpmResult> SolveQsdpInteriorPoint(const QsdpProblem& problem, const QsdpIpmOptions& options,
                                               const SolveControl& control) {
  return GuardExceptions("SolveQsdpInteriorPoint", [&]() -> StatusOr<QsdpIpmResult> {
    KLS_RETURN_IF_ERROR(problem.Validate().WithContext("QsdpProblem"));
    KLS_RETURN_IF_ERROR(options.Validate().WithContext("QsdpIpmOptions"));
    Stopwatch setup_watch;
    const IpmSystem sys = BuildIpmSystem(problem, options);
    const int m = sys.m;
    Eigen::VectorXd y, z;
    StartingPoint(sys, &y, &z);
    QsdpIpmResult result;
    result.stats.setup_seconds = setup_watch.Seconds();

    Stopwatch watch;
    QsdpResult cert;
    QsdpIpmResult best;
    best.stats.certificate.gap = std::numeric_limits<double>::infinity();
    Termination why = Termination::kIterationLimit;
    int it = 0;
    auto certify = [&](const Eigen::VectorXd& yv, double mu) -> bool {
      const Eigen::MatrixXd yo = sys.Original(Smat(yv, m));
      EvaluateCertificate(problem, yo, options.rank_threshold, &cert);
      result.stats.objective_history.push_back(cert.objective);
      if (cert.stats.certificate.gap < best.stats.certificate.gap || best.y.size() == 0) {
        best.y = yo;
        best.objective = cert.objective;
        best.stats.certificate = cert.stats.certificate;
        best.rank = cert.rank;
        best.mu = mu;
      }
      ReportIteration(control, CertificateRow(it, cert, watch.Seconds()), options.max_iterations, &result.stats);
      return cert.stats.certificate.gap <= options.gap_tolerance;
    };
    // The fingerprint costs O(K m + m²): only computed when checkpoints are used.
    const bool use_checkpoints = static_cast<bool>(control.checkpoint) || control.ResumeFrom(kCheckpointTag);
    const uint64_t fingerprint = use_checkpoints ? CheckpointFingerprint(problem, options) : 0;
    if (const Checkpoint* c = control.ResumeFrom(kCheckpointTag)) {
      ResumeState state;
      if (DecodeCheckpoint(*c, fingerprint, m, &state).ok()) {
        it = c->iteration;
        y = std::move(state.y);
        z = std::move(state.z);
        best = std::move(state.best);
        result.stats.objective_history = std::move(state.objective_history);
        result.stats.resumed_from_iteration = it;
      }  // otherwise not this run's checkpoint: start afresh
    }
    CheckpointTimer checkpoints(control);
    const Eigen::Index newton_size = sys.low_rank ? sys.k_terms : sys.ns;
    Eigen::MatrixXd newton(newton_size, newton_size);
    double factor_seconds = 0.0;
    while (true) {
      const Eigen::MatrixXd ym = Smat(y, m), zm = Smat(z, m);
      const double mu = ym.cwiseProduct(zm).sum() / m;
      if (certify(y, mu)) {
        why = Termination::kConverged;
        break;
      }
      if (it >= options.max_iterations) break;
      Termination stop;
      if (control.ShouldStop(&stop)) {
        why = stop;
        break;
      }
      ++it;
      if (!PredictorCorrectorStep(sys, options, ym, zm, mu, &newton, &factor_seconds, &y, &z)) {
        why = Termination::kNumericalIssue;
        break;
      }
      if (it < options.max_iterations) {
        checkpoints.MaybeSave(kCheckpointTag, it,
                              [&] { return EncodeCheckpoint(fingerprint, it, result.stats, y, z, best); });
      }
    }
    const Certificate certificate = best.stats.certificate;  // the best iterate's
    best.stats = std::move(result.stats);
    best.stats.certificate = certificate;
    best.stats.termination = why;
    best.stats.iterations = it;
    best.stats.final_objective = best.objective;
    best.stats.solve_seconds = watch.Seconds();
    best.stats.certificate.CheckAgainst(options.gap_tolerance);
    best.factor_seconds = factor_seconds;
    best.low_rank_newton = sys.low_rank;
    return best;
  });
}

}  // namespace kls
