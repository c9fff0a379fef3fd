#include "core/npkl/kl_admm.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>
#include <deque>
#include <exception>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/common/checkpoint_codec.h"
#include "core/common/iteration_driver.h"
#include "core/common/parallel.h"
#include "core/common/symmetry.h"
#include "core/npkl/blocked_laplacian.h"
#include "core/npkl/factor_certificate.h"

namespace kls {
namespace {

// T_i of eq. (11)–(13) for every i, in compressed rows: the points j with
// (i, j) ∈ T and their targets T_ij (1 must-link / self, 0 cannot-link).
// An unordered constraint {i, j}, i ≠ j, lands in both rows i and j — these
// are the ordered entries (i, j) and (j, i) of the header's convention — and a
// self pair (i, i) once in row i. Rows keep the constraints' input order, so
// every sum over T_i below has a fixed order.
struct ConstraintRows {
  std::vector<int> offset;     // n + 1
  std::vector<int> neighbor;   // |T| ordered entries
  std::vector<double> target;  // T_ij per entry
  int max_row = 0;             // max_i |T_i|

  int num_entries() const { return static_cast<int>(neighbor.size()); }
};

ConstraintRows BuildRows(const PairwiseConstraints& constraints, int n) {
  ConstraintRows rows;
  std::vector<int> count(n, 0);
  for (const Pair& p : constraints.pairs) {
    ++count[p.i];
    if (p.j != p.i) ++count[p.j];
  }
  rows.offset.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    rows.offset[i + 1] = rows.offset[i] + count[i];
    rows.max_row = std::max(rows.max_row, count[i]);
  }
  rows.neighbor.resize(rows.offset[n]);
  rows.target.resize(rows.offset[n]);
  std::vector<int> fill(rows.offset.begin(), rows.offset.end() - 1);
  for (const Pair& p : constraints.pairs) {
    const double t = p.kind == PairKind::kMustLink ? 1.0 : 0.0;  // eq. (2)
    rows.neighbor[fill[p.i]] = p.j;
    rows.target[fill[p.i]++] = t;
    if (p.j != p.i) {
      rows.neighbor[fill[p.j]] = p.i;
      rows.target[fill[p.j]++] = t;
    }
  }
  return rows;
}

// Scratch of SolveShiftedGram, one per thread.
struct ShiftedGramScratch {
  Eigen::MatrixXd small;  // a/c I + PᵀP  or  aI + c PPᵀ
  Eigen::VectorXd w;
  Eigen::LLT<Eigen::MatrixXd> llt;
};

// x ← (aI + c PPᵀ)⁻¹ x for the r × t matrix P (a, c > 0), through the smaller
// of the two systems: the r × r one itself when t ≥ r, else the t × t one of
// the Sherman–Morrison–Woodbury identity (eq. (25)):
//     (aI + c PPᵀ)⁻¹ x = (x − P (a/c I + PᵀP)⁻¹ Pᵀ x) / a.
// lazyProduct: t is tiny, so t² dot products beat Eigen's GEMM path.
template <class P, class X>
void SolveShiftedGram(const P& p, double a, double c, X&& x, ShiftedGramScratch* s) {
  const Eigen::Index r = p.rows(), t = p.cols();
  if (t == 0) {
    x /= a;
  } else if (t < r) {
    s->small.noalias() = p.transpose().lazyProduct(p);
    s->small.diagonal().array() += a / c;
    s->llt.compute(s->small);
    s->w.noalias() = p.transpose() * x;
    s->llt.solveInPlace(s->w);
    x.noalias() -= p * s->w;
    x /= a;
  } else {
    s->small.noalias() = c * (p * p.transpose());
    s->small.diagonal().array() += a;
    s->llt.compute(s->small);
    s->llt.solveInPlace(x);
  }
}

// One half-step of Algorithm 1 (line 6), eq. (13): for every column i,
//     x_i = (ρI + γ Σ_{j∈T_i} y_j y_jᵀ)⁻¹ (γ Σ_{j∈T_i} T_ij y_j − (Y L)_i + ρ y_i + s Λ_i)
// with Y the factor held fixed. V-step: Y = U, s = −1 (eq. (11), c_i);
// U-step: Y = V, s = +1 (eq. (12), d_i). `yl` = Y·L, computed once per
// half-step by the caller. Columns are independent, so they are split across
// threads; each column's arithmetic is the same whatever the split.
void HalfStep(const Eigen::MatrixXd& y, const Eigen::MatrixXd& yl, const Eigen::MatrixXd& lambda,
              double sign, double rho, double gamma, const ConstraintRows& rows, int num_threads,
              Eigen::MatrixXd* x) {
  const int r = static_cast<int>(y.rows());
  const int n = static_cast<int>(y.cols());
  ParallelFor(n, num_threads, [&](int begin, int end) {
    Eigen::MatrixXd p(r, rows.max_row);  // P_i = [y_j]_{j∈T_i} (eq. (25))
    Eigen::VectorXd b(r);
    ShiftedGramScratch scratch;
    for (int i = begin; i < end; ++i) {
      const int first = rows.offset[i];
      const int t = rows.offset[i + 1] - first;
      b = rho * y.col(i) + sign * lambda.col(i) - yl.col(i);
      for (int k = 0; k < t; ++k) {
        const int j = rows.neighbor[first + k];
        p.col(k) = y.col(j);
        if (rows.target[first + k] != 0.0) b.noalias() += (gamma * rows.target[first + k]) * y.col(j);
      }
      // A_i = ρI + γ P_iP_iᵀ of eq. (11)/(12).
      SolveShiftedGram(p.leftCols(t), rho, gamma, b, &scratch);
      x->col(i) = b;
    }
  });
}

// Eq. (1) at K = VᵀV: tr(V L Vᵀ) + (γ/2) Σ_{(i,j)∈T} (v_iᵀv_j − T_ij)², given
// vl = V·L. The loss runs over the ordered entries, so an i ≠ j pair is
// counted twice and a self pair once, as documented in the header.
double Objective(const Eigen::MatrixXd& v, const Eigen::MatrixXd& vl, double gamma,
                 const ConstraintRows& rows) {
  const double smooth = vl.cwiseProduct(v).sum();
  double loss = 0.0;
  const int n = static_cast<int>(v.cols());
  for (int i = 0; i < n; ++i) {
    for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e) {
      const double d = v.col(i).dot(v.col(rows.neighbor[e])) - rows.target[e];
      loss += d * d;
    }
  }
  return smooth + 0.5 * gamma * loss;
}

// ---- L-BFGS polish on the factored objective (KlAdmmOptions::Polish) -------
//
// f(V) = tr(V L Vᵀ) + (γ/2) Σ_{e=(i,j)∈T} d_e²,  d_e = v_iᵀv_j − T_ij   (eq. (1), K = VᵀV)
// ∇f(V) = 2 V (L + γ R),  R_ij = d_e on the ordered entries (symmetric): column
// i of the loss part is 2γ Σ_{e in row i} d_e v_j — an i ≠ j pair sits in rows
// i and j once each, a self pair (i, i) once in row i and contributes
// γ d ∂(v_iᵀv_i)/∂v_i = 2γ d v_i, so one formula covers both.

// d_e for every ordered entry, and grad = 2 (VL + γ V R). Columns in parallel;
// each column's arithmetic is fixed whatever the split.
void FactoredGradient(const Eigen::MatrixXd& v, const Eigen::MatrixXd& vl, double gamma,
                      const ConstraintRows& rows, int num_threads, std::vector<double>* d, Eigen::MatrixXd* grad) {
  const int n = static_cast<int>(v.cols());
  ParallelFor(n, num_threads, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      auto g = grad->col(i);
      g = vl.col(i);
      for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e) {
        const int j = rows.neighbor[e];
        const double de = v.col(i).dot(v.col(j)) - rows.target[e];
        (*d)[e] = de;
        g.noalias() += (gamma * de) * v.col(j);
      }
      g *= 2.0;
    }
  });
}

// f from the d_e of FactoredGradient, summed serially in entry order.
double FactoredObjective(const Eigen::MatrixXd& v, const Eigen::MatrixXd& vl, double gamma,
                         const std::vector<double>& d) {
  double loss = 0.0;
  for (double de : d) loss += de * de;
  return vl.cwiseProduct(v).sum() + 0.5 * gamma * loss;
}

// φ(α) = f(V + αP) = Σ_k c_k α^k exactly (a quartic): the smooth part gives
// tr(VLVᵀ) + 2α⟨VL, P⟩ + α²⟨PL, P⟩, and each d_e(α) = d_e + α b_e + α² q_e
// with b_e = v_iᵀp_j + p_iᵀv_j, q_e = p_iᵀp_j.
struct Quartic {
  double c[5] = {0, 0, 0, 0, 0};
  double Value(double a) const { return (((c[4] * a + c[3]) * a + c[2]) * a + c[1]) * a + c[0]; }
  double Slope(double a) const { return ((4 * c[4] * a + 3 * c[3]) * a + 2 * c[2]) * a + c[1]; }
  double Curvature(double a) const { return (12 * c[4] * a + 6 * c[3]) * a + 2 * c[2]; }
};

Quartic LineQuartic(const Eigen::MatrixXd& v, const Eigen::MatrixXd& vl, const Eigen::MatrixXd& p,
                    const Eigen::MatrixXd& pl, double f, double gamma, const ConstraintRows& rows,
                    const std::vector<double>& d, int num_threads, Eigen::MatrixXd* per_column) {
  const int n = static_cast<int>(v.cols());
  // per_column(k, i): the loss coefficients of row i; summed serially below.
  ParallelFor(n, num_threads, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
      for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e) {
        const int j = rows.neighbor[e];
        const double b = v.col(i).dot(p.col(j)) + p.col(i).dot(v.col(j));
        const double q = p.col(i).dot(p.col(j));
        s1 += 2 * d[e] * b;
        s2 += b * b + 2 * d[e] * q;
        s3 += 2 * b * q;
        s4 += q * q;
      }
      (*per_column)(0, i) = s1;
      (*per_column)(1, i) = s2;
      (*per_column)(2, i) = s3;
      (*per_column)(3, i) = s4;
    }
  });
  double s[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < 4; ++k) s[k] += (*per_column)(k, i);
  Quartic q;
  q.c[0] = f;
  q.c[1] = 2.0 * vl.cwiseProduct(p).sum() + 0.5 * gamma * s[0];
  q.c[2] = pl.cwiseProduct(p).sum() + 0.5 * gamma * s[1];
  q.c[3] = 0.5 * gamma * s[2];
  q.c[4] = 0.5 * gamma * s[3];
  return q;
}

// The first local minimizer α > 0 of φ (φ'(0) < 0 required): bracket the first
// sign change of φ' by doubling, then safeguarded Newton/bisection on φ'.
// Returns 0 when φ'(0) ≥ 0 (not a descent direction).
double FirstMinimizer(const Quartic& q) {
  if (!(q.Slope(0.0) < 0.0)) return 0.0;
  double lo = 0.0, hi = 1.0;
  int guard = 0;
  while (q.Slope(hi) < 0.0) {
    lo = hi;
    hi *= 2.0;
    if (++guard > 200) return lo;  // φ' never turns: c4 = c3 = 0 and c2 ≤ 0 (cannot happen for f ≥ 0)
  }
  double a = 0.5 * (lo + hi);
  for (int it = 0; it < 100; ++it) {
    const double g = q.Slope(a);
    if (g < 0.0) lo = a; else hi = a;
    if (hi - lo <= 1e-15 * hi) break;
    const double h = q.Curvature(a);
    double next = h > 0.0 ? a - g / h : 0.5 * (lo + hi);
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    a = next;
  }
  return a;
}

// q ← H⁻¹ q column by column, H_i the r×r diagonal block of the Hessian of f
// at V (block-Jacobi preconditioner, the initial inverse Hessian of L-BFGS):
//   H_i = 2 (L_ii + γ max(d_ii, 0)) I + 2γ Σ_{j∈T_i, j≠i} v_j v_jᵀ + 4γ v_i v_iᵀ [(i, i) ∈ T]
// (d_ii clipped at 0 so H_i ≻ 0). H_i = a I + P Pᵀ with P = [√(2γ) v_j, √(4γ) v_i]
// is inverted through the small system of the Sherman–Morrison–Woodbury
// identity, as in the half-steps (eq. (25)).
void BlockJacobi(const Eigen::MatrixXd& v, const Eigen::VectorXd& l_diag, double gamma, const ConstraintRows& rows,
                 const std::vector<double>& d, int num_threads, Eigen::MatrixXd* q) {
  const int r = static_cast<int>(v.rows());
  const int n = static_cast<int>(v.cols());
  ParallelFor(n, num_threads, [&](int begin, int end) {
    Eigen::MatrixXd p(r, std::max(rows.max_row, 1));
    ShiftedGramScratch scratch;
    for (int i = begin; i < end; ++i) {
      double a = 2.0 * l_diag(i);
      const int t = rows.offset[i + 1] - rows.offset[i];
      for (int k = 0; k < t; ++k) {
        const int e = rows.offset[i] + k;
        const int j = rows.neighbor[e];
        if (j == i) {
          a += 2.0 * gamma * std::max(d[e], 0.0);
          p.col(k) = std::sqrt(4.0 * gamma) * v.col(i);
        } else {
          p.col(k) = std::sqrt(2.0 * gamma) * v.col(j);
        }
      }
      SolveShiftedGram(p.leftCols(t), std::max(a, 1e-12), 1.0, q->col(i), &scratch);
    }
  });
}

// The certificate of core/npkl/factor_certificate.h for S = L + γ R (the
// K-gradient of eq. (1), R_ij = d_e on the ordered entries), at the V whose
// d_e and objective f are given. The relative bound's denominator is
// max(|f|, 1). S is applied row by row in parallel (each row's sum in a fixed
// order, so the result does not depend on the thread count).
FactorCertificate CertifyPcp(const Eigen::SparseMatrix<double>& l, double gamma, const ConstraintRows& rows,
                             const std::vector<double>& d, const Eigen::MatrixXd& v, double f, int nev,
                             int num_threads) {
  const int n = static_cast<int>(l.rows());
  const SymmetricApply apply_s = [&](const double* x, double* y) {
    ParallelFor(n, num_threads, [&](int begin, int end) {
      for (int i = begin; i < end; ++i) {
        double acc = 0.0;  // (L x)_i = Σ_k L_ki x_k: column i of the symmetric L
        for (Eigen::SparseMatrix<double>::InnerIterator it(l, i); it; ++it) acc += it.value() * x[it.row()];
        double loss = 0.0;
        for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e) loss += d[e] * x[rows.neighbor[e]];
        y[i] = acc + gamma * loss;
      }
    });
  };
  FactorCertificateOptions options;
  options.nev = nev;
  options.objective_floor = 1.0;
  double sigma = 0.0;  // max_i S_ii: moves V's row space above the spectrum's low end
  for (int i = 0; i < n; ++i) {
    double sii = l.coeff(i, i);
    for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e)
      if (rows.neighbor[e] == i) sii += gamma * d[e];
    sigma = std::max(sigma, sii);
  }
  options.sigma = std::max(sigma, 1e-12);
  return CertifyFactor(n, apply_s, v, f, options);
}

// f''(0) of t ↦ f(K + t x xᵀ) = γ Σ_{(i,j)∈T} (x_i x_j)² (ordered entries).
DirectionCurvature PcpCurvature(double gamma, const ConstraintRows& rows) {
  return [gamma, &rows](const Eigen::VectorXd& x) {
    double sum = 0.0;
    const int n = static_cast<int>(x.size());
    for (int i = 0; i < n; ++i) {
      for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e) {
        const double xx = x[i] * x[rows.neighbor[e]];
        sum += xx * xx;
      }
    }
    return gamma * sum;
  };
}

// Uniform in [−a, a] from the top 53 bits of the engine, with no
// std::distribution so V⁰ is the same across standard libraries.
Eigen::MatrixXd RandomStart(int r, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double a = std::sqrt(3.0 / r);
  Eigen::MatrixXd v(r, n);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < r; ++k) {
      const double unit = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
      v(k, i) = a * (2.0 * unit - 1.0);
    }
  }
  return v;
}


// ---- Checkpoints (SolveControl::checkpoint / resume_from) -------------------
//
// After the common prefix (core/common/checkpoint_codec.h): the phase, the
// last iteration's residuals, then
//   ADMM    ρ (the value for the next iteration), V, U, Λ
//   polish  V, V·L (kept current incrementally, so re-forming it would not be
//           bit-identical), the L-BFGS pairs (s, y, sᵀy), oldest first, the
//           polish tolerance in force (tightened by the escalation) and the
//           escalation's diagnostics. V has the rank of the current
//           escalation stage (between the first stage's r and the cap).
// Version 2 added the last two and the variable rank; a version-1
// checkpoint is not this run's (the solve starts afresh).
// Everything else (d, ∇f, f) is recomputed from V and V·L exactly as the
// uninterrupted run computes it, so a resumed run is bit-identical.
constexpr char kCheckpointTag[] = "kl_admm/1";
constexpr uint32_t kCheckpointMagic = 0x4b4c4144;  // "KLAD"
constexpr uint32_t kCheckpointVersion = 3;
/// A checkpoint keeps the last kHistoryTail entries of the objective history
/// (one per iteration) and how many came before them: its size stays that of
/// the iterates, where the whole history grew with the iterations (2.9 MB and
/// 90–150 ms per PostgreSQL write at 358,889 iterations in the crash soak,
/// which the checkpoint schedule's 20 × cost rule turned into 2–3 s between
/// checkpoints). A solve resumed past the tail reports the entries before it
/// as NaN ("not kept"); its iterates, residuals and final objective are the
/// uninterrupted run's, bit for bit.
constexpr size_t kHistoryTail = 4096;

enum class Phase : uint8_t { kAdmm = 0, kPolish = 1 };

struct LbfgsMemory {
  std::deque<Eigen::MatrixXd> s, y;
  std::deque<double> sy;
  void Clear() {
    s.clear();
    y.clear();
    sy.clear();
  }
  // Keeps the pair (*s_new, *y_new) (taken by swap) and its sᵀy, the oldest
  // pair dropped beyond `capacity`; *s_new and *y_new receive the dropped
  // pair's storage, so a full memory allocates nothing (at n = 1,000,000,
  // r = 32 a pair is 512 MB of fresh pages otherwise, every iteration).
  void Push(Eigen::MatrixXd* s_new, Eigen::MatrixXd* y_new, double sy_new, int capacity) {
    Eigen::MatrixXd s_spare, y_spare;
    if (static_cast<int>(s.size()) >= capacity) {
      s_spare.swap(s.front());
      y_spare.swap(y.front());
      s.pop_front();
      y.pop_front();
      sy.pop_front();
    }
    s.emplace_back().swap(*s_new);
    y.emplace_back().swap(*y_new);
    sy.push_back(sy_new);
    s_new->swap(s_spare);
    y_new->swap(y_spare);
  }
};

struct ResumeState {
  Phase phase = Phase::kAdmm;
  int iteration = 0;
  std::vector<double> objective_history;
  double primal_residual = 0.0, dual_residual = 0.0;
  double rho = 0.0;            // ADMM
  Eigen::MatrixXd v, u, lambda;  // ADMM: V, U, Λ; polish: V
  Eigen::MatrixXd vl;          // polish
  LbfgsMemory memory;          // polish
  double polish_tolerance = 0.0;  // polish
  FactorDiagnostics diag;      // polish
};

// Ties a checkpoint to the problem (L, T) and to every option that changes
// the iterates (not tolerance, max_iterations, certify or num_threads, which
// may differ between the interrupted and the resumed call).
uint64_t CheckpointFingerprint(const NpklProblem& problem, const KlAdmmOptions& o, int r) {
  Fingerprint fp;
  fp.AddString(kCheckpointTag).AddInt(r).AddSparse(problem.laplacian);
  fp.AddInt(problem.constraints.size());
  for (const Pair& p : problem.constraints.pairs) fp.AddInt(p.i).AddInt(p.j).AddInt(static_cast<int>(p.kind));
  fp.AddDouble(o.gamma).AddDouble(o.rho_initial).AddDouble(o.rho_min).AddInt(o.adaptive_rho);
  fp.Add(o.seed).AddInt(static_cast<int>(o.polish)).AddDouble(o.polish_switch_tolerance);
  fp.AddInt(o.lbfgs_memory).AddInt(o.lbfgs_precondition);
  fp.AddInt(o.rank_escalation).AddInt(o.initial_rank).AddInt(o.escalation_step).AddDouble(o.certificate_tolerance);
  if (o.initial_factor) fp.AddDense(*o.initial_factor);  // cold fingerprints unchanged
  return fp.value();
}

/// The common prefix with the history's last kHistoryTail entries, then the
/// number of entries before them.
void PutHistoryTail(ByteWriter* w, uint64_t fingerprint, int iteration, const std::vector<double>& history) {
  const size_t kept = std::min(history.size(), kHistoryTail);
  const std::vector<double> tail(history.end() - static_cast<std::ptrdiff_t>(kept), history.end());
  PutCheckpointPrefix(w, kCheckpointMagic, kCheckpointVersion, fingerprint, iteration, tail);
  w->Put<uint64_t>(history.size() - kept);
}

/// Reads what PutHistoryTail wrote: the history with NaN for the entries not kept.
Status GetHistoryTail(ByteReader* in, const Checkpoint& c, uint64_t fingerprint, std::vector<double>* history) {
  std::vector<double> tail;
  KLS_RETURN_IF_ERROR(GetCheckpointPrefixWithHistoryBound(in, c, kCheckpointMagic, kCheckpointVersion, fingerprint,
                                                          &tail, kHistoryTail));
  uint64_t dropped = 0;
  KLS_RETURN_IF_ERROR(in->Get(&dropped));
  if (dropped > static_cast<uint64_t>(c.iteration) || dropped + tail.size() != static_cast<uint64_t>(c.iteration) ||
      (dropped > 0 && tail.size() != kHistoryTail)) {
    return FailedPreconditionError(in->what() + ": inconsistent history length");
  }
  history->assign(dropped, std::numeric_limits<double>::quiet_NaN());
  history->insert(history->end(), tail.begin(), tail.end());
  return OkStatus();
}

std::string EncodeAdmm(uint64_t fingerprint, int iteration, const NpklResult& result, double rho,
                       const Eigen::MatrixXd& v, const Eigen::MatrixXd& u, const Eigen::MatrixXd& lambda) {
  ByteWriter w;
  PutHistoryTail(&w, fingerprint, iteration, result.stats.objective_history);
  w.Put<uint8_t>(static_cast<uint8_t>(Phase::kAdmm));
  w.Put<double>(result.primal_residual);
  w.Put<double>(result.dual_residual);
  w.Put<double>(rho);
  w.PutMatrix(v);
  w.PutMatrix(u);
  w.PutMatrix(lambda);
  return w.Take();
}

std::string EncodePolish(uint64_t fingerprint, int iteration, const NpklResult& result, const Eigen::MatrixXd& v,
                         const Eigen::MatrixXd& vl, const LbfgsMemory& memory, double polish_tolerance,
                         const FactorDiagnostics& diag) {
  ByteWriter w;
  PutHistoryTail(&w, fingerprint, iteration, result.stats.objective_history);
  w.Put<uint8_t>(static_cast<uint8_t>(Phase::kPolish));
  w.Put<double>(result.primal_residual);
  w.Put<double>(result.dual_residual);
  w.PutMatrix(v);
  w.PutMatrix(vl);
  w.Put<uint32_t>(static_cast<uint32_t>(memory.s.size()));
  for (size_t k = 0; k < memory.s.size(); ++k) {
    w.PutMatrix(memory.s[k]);
    w.PutMatrix(memory.y[k]);
    w.Put<double>(memory.sy[k]);
  }
  w.Put<double>(polish_tolerance);
  PutFactorDiagnostics(&w, diag);
  return w.Take();
}

// Any error means "not this run's checkpoint": the caller starts afresh.
// r: the first stage's rank (the ADMM phase's); r_cap: the escalation's cap.
Status DecodeCheckpoint(const Checkpoint& c, uint64_t fingerprint, int r, int r_cap, int n,
                        const KlAdmmOptions& options, ResumeState* state) {
  ByteReader in(c.bytes, "kl_admm checkpoint");
  KLS_RETURN_IF_ERROR(
      GetHistoryTail(&in, c, fingerprint, &state->objective_history));
  state->iteration = c.iteration;
  uint8_t phase = 0;
  KLS_RETURN_IF_ERROR(in.Get(&phase));
  KLS_RETURN_IF_ERROR(in.Get(&state->primal_residual));
  KLS_RETURN_IF_ERROR(in.Get(&state->dual_residual));
  if (phase == static_cast<uint8_t>(Phase::kAdmm)) {
    state->phase = Phase::kAdmm;
    KLS_RETURN_IF_ERROR(in.Get(&state->rho));
    if (!(state->rho > 0.0) || !std::isfinite(state->rho)) return DataLossError(in.what() + ": bad ρ");
    KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, r, n, &state->v));
    KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, r, n, &state->u));
    KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, r, n, &state->lambda));
  } else if (phase == static_cast<uint8_t>(Phase::kPolish) &&
             options.polish == KlAdmmOptions::Polish::kLbfgs) {
    state->phase = Phase::kPolish;
    KLS_RETURN_IF_ERROR(in.GetMatrix(&state->v));
    const int rank = static_cast<int>(state->v.rows());
    if (rank < r || rank > r_cap || state->v.cols() != n) {
      return DataLossError(in.what() + ": V is " + std::to_string(rank) + " x " + std::to_string(state->v.cols()));
    }
    r = rank;
    KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, r, n, &state->vl));
    uint32_t m = 0;
    KLS_RETURN_IF_ERROR(in.Get(&m));
    if (m > static_cast<uint32_t>(options.lbfgs_memory)) return DataLossError(in.what() + ": too many L-BFGS pairs");
    for (uint32_t k = 0; k < m; ++k) {
      Eigen::MatrixXd s, y;
      double sy = 0.0;
      KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, r, n, &s));
      KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, r, n, &y));
      KLS_RETURN_IF_ERROR(in.Get(&sy));
      if (!(sy > 0.0)) return DataLossError(in.what() + ": L-BFGS pair with sᵀy ≤ 0");
      state->memory.s.push_back(std::move(s));
      state->memory.y.push_back(std::move(y));
      state->memory.sy.push_back(sy);
    }
    KLS_RETURN_IF_ERROR(in.Get(&state->polish_tolerance));
    if (!(state->polish_tolerance >= 0.0)) return DataLossError(in.what() + ": bad polish tolerance");
    KLS_RETURN_IF_ERROR(GetFactorDiagnostics(&in, &state->diag));
    if (state->diag.rank_history.empty() || state->diag.rank_history.back() != r ||
        state->diag.stage_sweeps.size() != state->diag.rank_history.size()) {
      return DataLossError(in.what() + ": inconsistent stage bookkeeping");
    }
  } else {
    return DataLossError(in.what() + ": unknown phase " + std::to_string(phase));
  }
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  if (!state->v.allFinite() || !state->u.allFinite() || !state->lambda.allFinite() || !state->vl.allFinite()) {
    return DataLossError(in.what() + ": non-finite iterate");
  }
  return OkStatus();
}

// Polish-tolerance tightenings (×0.1 each) when the certificate fails by
// ⟨S, K⟩ alone (no negative eigenvalue to escalate along).
constexpr int kMaxTightenings = 3;

// The first stage's rank: the cap (fixed rank or RankBound(|T|)), or with the
// escalation the initial rank (or the warm start's) below it.
int FirstStageRank(const KlAdmmOptions& options, bool escalate, int r_cap) {
  const int start_rank = options.initial_factor ? static_cast<int>(options.initial_factor->cols()) : options.initial_rank;
  return escalate ? std::max(1, std::min(r_cap, start_rank)) : r_cap;
}

// Whether the options ask for the rank escalation (the polish stages ended by
// the certificate, from initial_rank up).
bool Escalates(const KlAdmmOptions& o) {
  return o.polish == KlAdmmOptions::Polish::kLbfgs && o.certify && o.rank == 0 && o.rank_escalation;
}

// The polish's first stopping tolerance (EndStage tightens it ×0.1 when only
// ⟨S, K⟩ fails the certificate). With the escalation the certificate decides,
// and `tolerance` bounds its ⟨S, K⟩ term: since ∇f(V) = 2VS,
// |⟨S, K⟩| = ½|⟨∇f(V), V⟩| ≤ ½‖∇f(V)‖‖V‖ (Cauchy–Schwarz), so the test
// ‖∇f(V)‖·‖V‖ ≤ 2·tolerance·max(|f|, 1) keeps |⟨S, K⟩| ≤ tolerance·max(|f|, 1);
// the certificate's other term, λ_min(S) off V's row space, is the
// escalation's. Without the escalation (and for tolerance = 0, which runs to
// max_iterations) the test is ‖∇f(V)‖·‖V‖ ≤ tolerance·max(|f|, 1).
double FirstPolishTolerance(const KlAdmmOptions& o, bool escalate) {
  return escalate ? 2.0 * o.tolerance : o.tolerance;
}

// What an AdmmRun solves.
enum class RunRole {
  kProblem,     ///< the problem itself, from the options' start (random or warm)
  kFromCoarse,  ///< the problem itself, from its multilevel start (MultilevelStart)
  kCoarse,      ///< a coarse level of a multilevel start: fixed rank, polish only, no checkpoints, no certificate
};

// The multilevel start's coarse problems' rank (see MultilevelStart). Above
// the fine optimum's at 50,000 and 200,000 points adult-like (21, 28), so that
// the fixed-rank coarse polish reaches the coarse optimum's shape without the
// escalation's stages and certificates. A higher cap does not predict the
// fine rank better: at 48 the coarse solution's significant directions were
// 27 at 200,000 points (fine optimum 28) but fewer than the fine optimum's
// (above 32) at a million, where the fine solve then needed one stage more
// (docs/BENCHMARKS.md, "KL-ADMM at a million").
constexpr int kCoarseRank = 32;

// One KL-ADMM solve on the iteration driver (core/common/iteration_driver.h):
// the start (random, warm or a checkpoint's), Algorithm 1's ADMM iterations
// until the polish's switch tolerance, then the L-BFGS polish in stages of
// the rank escalation, each ended by the certificate; then the final
// certificate and the kernel.
class AdmmRun {
 public:
  // `problem` (for the checkpoint fingerprint) is null for a coarse level.
  AdmmRun(const Eigen::SparseMatrix<double>& l, ConstraintRows rows, const NpklProblem* problem, RunRole role,
          const KlAdmmOptions& options, const SolveControl& control, const Stopwatch& setup_clock)
      : problem_(problem),
        role_(role),
        options_(options),
        n_(static_cast<int>(l.rows())),
        rows_(std::move(rows)),
        // r_cap: the fixed rank, or RankBound(|T|) (the rank of some optimum never
        // exceeds it); with the escalation the first stage starts lower.
        r_cap_(options.rank > 0 ? options.rank
                                : std::min({n_, RankBound(rows_.num_entries()), role == RunRole::kCoarse ? kCoarseRank : n_})),
        gamma_(options.gamma),
        l_(l),
        threads_(ResolveThreadCount(options.num_threads)),
        polish_(options.polish == KlAdmmOptions::Polish::kLbfgs),
        escalate_(role != RunRole::kCoarse && Escalates(options)),
        setup_clock_(setup_clock),
        driver_(control, kCheckpointTag, options.max_iterations, setup_clock, &result_.stats),
        r_(FirstStageRank(options, escalate_, r_cap_)),
        // Cache blocks sized for the current rank (re-cut when the escalation grows
        // it; the product is bitwise the same for any block size).
        block_columns_(BlockedLaplacian::CacheBlockColumns(r_, n_)),
        laplacian_(l_, block_columns_) {}

  void Start();
  void RunAdmm();
  void RunPolish();
  StatusOr<NpklResult> Finish(FactorDiagnostics* diagnostics);

 private:
  void WarmStart();
  void Resume();
  StepOutcome AdmmStep(int iter);
  bool PolishStage(int* tightenings);
  bool EndStage(int* tightenings);

  const NpklProblem* problem_;
  const RunRole role_;
  const KlAdmmOptions& options_;
  const int n_;
  const ConstraintRows rows_;
  const int r_cap_;
  const double gamma_;
  const Eigen::SparseMatrix<double>& l_;
  const int threads_;
  const bool polish_;
  const bool escalate_;
  const Stopwatch& setup_clock_;
  IterationDriver driver_;
  int r_;
  int block_columns_;
  BlockedLaplacian laplacian_;
  Eigen::MatrixXd v_, u_, lambda_, v_old_, work_;
  double rho_ = 0.0;
  bool switched_ = false;  // ADMM handed over to the L-BFGS polish
  NpklResult result_;
  LbfgsMemory memory_;
  FactorDiagnostics diag_;
  double polish_tolerance_ = 0.0;  // tightened when only ⟨S, K⟩ fails the certificate
  Eigen::MatrixXd resumed_vl_;     // V·L of a polish-phase checkpoint
  uint64_t fingerprint_ = 0;
  std::vector<double> d_;
  Eigen::MatrixXd g_;
  std::vector<double> alpha_hist_;  // the two-loop recursion's α_k
  Eigen::VectorXd l_diag_;
  bool certificate_current_ = false;  // diag_ holds the certificate of the final V
  Stopwatch clock_;
};

// V⁰, U⁰ = V⁰, Λ⁰ = 0 (or a warm start, or a checkpoint's state); the
// iterations' clock and checkpoint schedule start at the end.
void AdmmRun::Start() {
  v_ = RandomStart(r_, n_, options_.seed);
  if (options_.initial_factor) WarmStart();
  u_ = v_;
  lambda_ = Eigen::MatrixXd::Zero(r_, n_);
  v_old_.resize(r_, n_);
  work_.resize(r_, n_);
  rho_ = options_.rho_initial;
  // A warm start goes straight to the polish, and so does a coarse level: its
  // Laplacian PᵀLP sums the weights of whole aggregates, and ADMM's explicit
  // U·L step, stable for ‖L‖ of the order of ρ, diverged on the second coarse
  // level at 200,000 points.
  if (polish_ && (options_.initial_factor || role_ == RunRole::kCoarse)) {
    switched_ = true;
    laplacian_.Apply(v_, threads_, &work_);  // `work_` = V·L, as at the hand-over
  }
  diag_.rank_history.push_back(r_);
  diag_.stage_sweeps.push_back(0);
  polish_tolerance_ = FirstPolishTolerance(options_, escalate_);
  // The fingerprint costs O(nnz(L) + |T|): only computed when checkpoints are used.
  fingerprint_ = driver_.uses_checkpoints() && problem_ != nullptr ? CheckpointFingerprint(*problem_, options_, r_) : 0;
  Resume();
  result_.stats.setup_seconds = setup_clock_.Seconds();
  clock_.Reset();
  driver_.Start();
}

void AdmmRun::WarmStart() {
  std::vector<int> all(n_);
  for (int i = 0; i < n_; ++i) all[i] = i;
  v_ = WarmStartRows(*options_.initial_factor, all, r_, v_);
  // A multilevel start goes straight to the polish: its directions are the
  // coarse optimum's, and the stage's own certificate follows.
  if (!(polish_ && escalate_) || role_ == RunRole::kFromCoarse) return;
  // The previous optimum's degenerate directions go and the new problem's
  // negative ones come in at their exact step (PrepareWarmFactor).
  const FactorCertify certify = [&](const Eigen::MatrixXd& x, double* f) {
    const Eigen::MatrixXd xl = x * l_;  // L symmetric: (L xᵀ)ᵀ
    std::vector<double> dx(rows_.num_entries());
    Eigen::MatrixXd gx(x.rows(), n_);
    FactoredGradient(x, xl, gamma_, rows_, threads_, &dx, &gx);
    *f = FactoredObjective(x, xl, gamma_, dx);
    return CertifyPcp(l_, gamma_, rows_, dx, x, *f, std::max(1, options_.escalation_step), threads_);
  };
  v_ = PrepareWarmFactor(v_, certify, PcpCurvature(gamma_, rows_), r_cap_, options_.certificate_tolerance);
  r_ = static_cast<int>(v_.rows());
  block_columns_ = BlockedLaplacian::CacheBlockColumns(r_, n_);
  laplacian_ = BlockedLaplacian(l_, block_columns_);
}

void AdmmRun::Resume() {
  ResumeState state;
  if (!driver_.Resume([&](const Checkpoint& c) {
        return DecodeCheckpoint(c, fingerprint_, r_, r_cap_, n_, options_, &state);
      })) {
    return;  // not this run's checkpoint (or none): start afresh
  }
  SolveReport& stats = result_.stats;
  stats.iterations = state.iteration;
  stats.resumed_from_iteration = state.iteration;
  stats.objective_history = std::move(state.objective_history);
  result_.primal_residual = state.primal_residual;
  result_.dual_residual = state.dual_residual;
  v_ = std::move(state.v);
  if (state.phase == Phase::kAdmm) {
    u_ = std::move(state.u);
    lambda_ = std::move(state.lambda);
    rho_ = state.rho;
    diag_.stage_sweeps.back() = state.iteration;
  } else {
    switched_ = true;
    r_ = static_cast<int>(v_.rows());
    resumed_vl_ = std::move(state.vl);
    block_columns_ = BlockedLaplacian::CacheBlockColumns(r_, n_);
    laplacian_ = BlockedLaplacian(l_, block_columns_);
    memory_ = std::move(state.memory);
    polish_tolerance_ = state.polish_tolerance;
    diag_ = std::move(state.diag);
  }
}

// The ADMM phase (none after a warm start or a polish checkpoint).
void AdmmRun::RunAdmm() {
  SolveReport& stats = result_.stats;
  stats.termination = Termination::kIterationLimit;
  if (!switched_) stats.termination = driver_.Run(stats.iterations + 1, [&](int iter) { return AdmmStep(iter); });
  u_.resize(0, 0);  // the ADMM phase's U and Λ are not needed by the polish
  lambda_.resize(0, 0);
  d_.assign(rows_.num_entries(), 0.0);
  g_.resize(r_, n_);
}

// One iteration of Algorithm 1: the V- and U-half-steps, the multiplier
// update, the residuals of eq. (14), the stopping test, the switch to the
// polish, and the ρ schedule of eq. (15).
StepOutcome AdmmRun::AdmmStep(int iter) {
  SolveReport& stats = result_.stats;
  v_old_ = v_;
  // V-step, eq. (7): the Laplacian term (U L)_i of every c_i in one product.
  laplacian_.Apply(u_, threads_, &work_);
  HalfStep(u_, work_, lambda_, -1.0, rho_, gamma_, rows_, threads_, &v_);
  // U-step, eq. (8), with the new V.
  laplacian_.Apply(v_, threads_, &work_);
  HalfStep(v_, work_, lambda_, +1.0, rho_, gamma_, rows_, threads_, &u_);
  // work = V^{k+1} L, reused by the objective below.
  const double objective = Objective(v_, work_, gamma_, rows_);
  if (!std::isfinite(objective) || !u_.allFinite() || !v_.allFinite()) {
    v_ = v_old_;  // the last finite iterate; objective_history ends with its value
    return driver_.Stop(Termination::kNumericalIssue);
  }
  lambda_.noalias() += rho_ * (v_ - u_);  // Algorithm 1, line 8
  // eq. (14)
  const double primal = (v_ - u_).norm();
  const double dual = rho_ * (v_ - v_old_).norm();
  const double size = std::max({v_.norm(), u_.norm(), 1e-300});
  const double primal_rel = primal / size;
  const double dual_rel = dual / (options_.rho_min * size);

  stats.iterations = iter;
  ++diag_.stage_sweeps.back();
  stats.objective_history.push_back(objective);
  result_.primal_residual = primal;
  result_.dual_residual = dual;
  IterationRow row;
  row.iteration = iter;
  row.objective = objective;
  row.primal_residual = primal;
  row.dual_residual = dual;
  row.step = dual / rho_;  // ‖V − V_old‖
  driver_.Report(row);

  if (primal_rel <= options_.tolerance && dual_rel <= options_.tolerance) {
    return driver_.Stop(Termination::kConverged);
  }
  if (polish_ && primal_rel <= options_.polish_switch_tolerance && dual_rel <= options_.polish_switch_tolerance) {
    switched_ = true;  // `work_` = V·L: the polish's starting point
    driver_.MaybeCheckpoint(iter, [&] {
      return EncodePolish(fingerprint_, iter, result_, v_, work_, memory_, polish_tolerance_, diag_);
    });
    return StepOutcome::kStop;
  }
  if (options_.adaptive_rho) {  // eq. (15)
    if (primal > 10.0 * dual) {
      rho_ *= 2.0;
    } else if (dual > 10.0 * primal) {
      rho_ = std::max(rho_ / 2.0, options_.rho_min);
    }
  }
  driver_.MaybeCheckpoint(iter, [&] { return EncodeAdmm(fingerprint_, iter, result_, rho_, v_, u_, lambda_); });
  return StepOutcome::kContinue;
}

// L-BFGS on f(V) from V (= U to polish_switch_tolerance). `work_` holds
// V·L, kept current by work += α P·L (re-formed at the end).
void AdmmRun::RunPolish() {
  if (!switched_) return;
  if (result_.stats.resumed_from_iteration > 0 && resumed_vl_.size() > 0) work_ = std::move(resumed_vl_);
  l_diag_ = l_.diagonal();
  // Tightenings so far (polish_tolerance_, checkpointed, is the first one ·0.1^k).
  int tightenings = 0;
  for (double t = FirstPolishTolerance(options_, escalate_); tightenings < kMaxTightenings && t > polish_tolerance_;
       t *= 0.1)
    ++tightenings;
  // One escalation stage per pass: the polish at rank r to polish_tolerance,
  // then (escalate) the certificate; a failed one appends rows or tightens
  // the tolerance and the next pass continues from there.
  while (PolishStage(&tightenings)) {
  }
}

// The polish at the current rank until its stopping test; then, with the
// escalation, the stage's end (EndStage). True when another stage follows.
bool AdmmRun::PolishStage(int* tightenings) {
  SolveReport& stats = result_.stats;
  Eigen::MatrixXd& vl = work_;
  const int r = r_, n = n_;
  Eigen::MatrixXd g_new(r, n), p(r, n), pl(r, n), coef(4, n), q(r, n);
  Eigen::MatrixXd& g = g_;
  g.resize(r, n);
  v_old_.resize(r, n);
  FactoredGradient(v_, vl, gamma_, rows_, threads_, &d_, &g);
  double f = FactoredObjective(v_, vl, gamma_, d_);
  std::deque<Eigen::MatrixXd>& s_hist = memory_.s;
  std::deque<Eigen::MatrixXd>& y_hist = memory_.y;
  std::deque<double>& sy_hist = memory_.sy;
  stats.termination = driver_.Run(stats.iterations + 1, [&](int iter) {
    // Two-loop recursion: p = −H g (Nocedal & Wright, Alg. 7.4), H⁰ = (sᵀy / yᵀy) I.
    q = g;
    const int m = static_cast<int>(s_hist.size());
    alpha_hist_.assign(m, 0.0);
    for (int k = m - 1; k >= 0; --k) {
      alpha_hist_[k] = s_hist[k].cwiseProduct(q).sum() / sy_hist[k];
      q.noalias() -= alpha_hist_[k] * y_hist[k];
    }
    if (options_.lbfgs_precondition) {
      BlockJacobi(v_, l_diag_, gamma_, rows_, d_, threads_, &q);
    } else if (m > 0) {
      q *= sy_hist[m - 1] / y_hist[m - 1].squaredNorm();
    }
    for (int k = 0; k < m; ++k) {
      const double beta = y_hist[k].cwiseProduct(q).sum() / sy_hist[k];
      q.noalias() += (alpha_hist_[k] - beta) * s_hist[k];
    }
    p = -q;
    if (!(p.cwiseProduct(g).sum() < 0.0)) {  // not a descent direction: restart from −g
      memory_.Clear();
      p = -g;
    }
    laplacian_.Apply(p, threads_, &pl);
    const Quartic phi = LineQuartic(v_, vl, p, pl, f, gamma_, rows_, d_, threads_, &coef);
    const double step = FirstMinimizer(phi);  // exact line search: φ'(step) = 0
    if (!(step > 0.0) && polish_tolerance_ > 0.0) {
      return driver_.Stop(Termination::kConverged);  // no descent left at double precision
    }
    // tolerance = 0 runs to max_iterations (the documented contract): a
    // stalled iteration is a null step that still counts and reports.
    v_old_ = v_;
    v_.noalias() += step * p;
    vl.noalias() += step * pl;
    FactoredGradient(v_, vl, gamma_, rows_, threads_, &d_, &g_new);
    const double f_new = FactoredObjective(v_, vl, gamma_, d_);
    if (!std::isfinite(f_new) || !v_.allFinite()) {
      v_ = v_old_;
      return driver_.Stop(Termination::kNumericalIssue);
    }
    p *= step;      // s = V_new − V_old
    q = g_new - g;  // y
    const double sy = p.cwiseProduct(q).sum();
    if (!(step > 0.0)) {
      memory_.Clear();
    } else if (sy > 0.0) {
      memory_.Push(&p, &q, sy, options_.lbfgs_memory);  // p and q are assigned afresh next iteration
    }
    g.swap(g_new);
    f = f_new;
    const double grad_norm = g.norm();
    stats.iterations = iter;
    ++diag_.stage_sweeps.back();
    stats.objective_history.push_back(f);
    result_.primal_residual = 0.0;  // V = U throughout the polish
    result_.dual_residual = grad_norm;
    IterationRow row;
    row.iteration = iter;
    row.objective = f;
    row.primal_residual = 0.0;
    row.dual_residual = grad_norm;
    row.step = step;
    driver_.Report(row);
    if (grad_norm * v_.norm() <= polish_tolerance_ * std::max(std::abs(f), 1.0)) {
      return driver_.Stop(Termination::kConverged);
    }
    driver_.MaybeCheckpoint(iter, [&] {
      return EncodePolish(fingerprint_, iter, result_, v_, vl, memory_, polish_tolerance_, diag_);
    });
    return StepOutcome::kContinue;
  });
  if (!escalate_ || stats.termination != Termination::kConverged) return false;
  return EndStage(tightenings);
}

// The certificate at the converged V (V·L re-formed: exact d and f); a
// failed one appends its negative directions (the next stage's rank) or, with
// none left, tightens the polish tolerance. True when another stage follows.
bool AdmmRun::EndStage(int* tightenings) {
  Eigen::MatrixXd& vl = work_;
  Stopwatch certificate_clock;
  laplacian_.Apply(v_, threads_, &vl);
  FactoredGradient(v_, vl, gamma_, rows_, threads_, &d_, &g_);
  const double f = FactoredObjective(v_, vl, gamma_, d_);
  const FactorCertificate cert =
      CertifyPcp(l_, gamma_, rows_, d_, v_, f, std::max(1, options_.escalation_step), threads_);
  diag_.Record(cert, certificate_clock.Seconds(), options_.certificate_tolerance);
  result_.stats.certificate = Certificate::FromGap(cert.gap, options_.certificate_tolerance);
  certificate_current_ = true;
  if (diag_.certified || result_.stats.iterations >= options_.max_iterations) return false;
  const int added = r_ < r_cap_ ? AppendNegativeDirections(cert, PcpCurvature(gamma_, rows_), r_cap_ - r_, &v_) : 0;
  if (added == 0) {
    // No negative direction left (or at the cap): the bound is ⟨S, K⟩,
    // i.e. stationarity; polish further at a tighter tolerance.
    if (*tightenings >= kMaxTightenings || !(polish_tolerance_ > 0.0)) return false;
    polish_tolerance_ *= 0.1;
    ++*tightenings;
    return true;
  }
  r_ += added;
  memory_.Clear();
  if (BlockedLaplacian::CacheBlockColumns(r_, n_) != block_columns_) {
    block_columns_ = BlockedLaplacian::CacheBlockColumns(r_, n_);
    laplacian_ = BlockedLaplacian(l_, block_columns_);
  }
  vl.resize(r_, n_);
  laplacian_.Apply(v_, threads_, &vl);
  diag_.rank_history.push_back(r_);
  diag_.stage_sweeps.push_back(0);
  certificate_current_ = false;
  return true;
}

StatusOr<NpklResult> AdmmRun::Finish(FactorDiagnostics* diagnostics) {
  SolveReport& stats = result_.stats;
  stats.solve_seconds = clock_.Seconds();
  if (polish_ && (stats.termination == Termination::kConverged || stats.termination == Termination::kIterationLimit) &&
      options_.certify && role_ != RunRole::kCoarse && !certificate_current_) {
    // Global-optimality certificate of the convex problem (1) at K = VᵀV.
    Stopwatch certificate_clock;
    work_.resize(r_, n_);
    laplacian_.Apply(v_, threads_, &work_);
    FactoredGradient(v_, work_, gamma_, rows_, threads_, &d_, &g_);
    const double f = FactoredObjective(v_, work_, gamma_, d_);
    const FactorCertificate cert = CertifyPcp(l_, gamma_, rows_, d_, v_, f, 1, threads_);
    diag_.Record(cert, certificate_clock.Seconds(), options_.certificate_tolerance);
    result_.stats.certificate = Certificate::FromGap(cert.gap, options_.certificate_tolerance);
  }
  diag_.final_rank = static_cast<int>(v_.rows());
  if (diagnostics != nullptr) *diagnostics = diag_;
  if (stats.objective_history.empty()) {
    work_.resize(v_.rows(), n_);
    laplacian_.Apply(v_, threads_, &work_);
    stats.final_objective = Objective(v_, work_, gamma_, rows_);
  } else {
    stats.final_objective = stats.objective_history.back();
  }
  LearnedKernel::Embedding embedding = v_.transpose();  // n × r, row i = v_i
  KLS_ASSIGN_OR_RETURN(result_.kernel, LearnedKernel::FromEmbedding(std::move(embedding)));
  return std::move(result_);
}

// ---- Multilevel start (KlAdmmOptions::multilevel_min_points) --------------
//
// The polish from a random start spends most of its iterations carrying the
// constraints' information across the graph: the smooth modes of L are the
// ill-conditioned ones (n = 200,000 adult-like: 395 of 678 iterations in the
// first stage alone). So the problem is first solved on an aggregated graph —
// points merged into aggregates, V piecewise constant on them — where those
// modes are few and cheap, and its solution, copied to every point of its
// aggregate, starts the fine solve (as a warm start does).
//
// The coarse problem: the aggregation's 0/1 prolongation P (n × n_c) gives
// the Laplacian PᵀLP (the aggregated graph's Laplacian: tr(V_c PᵀLP V_cᵀ) =
// tr(V L Vᵀ) at V = V_c Pᵀ) and moves every ordered entry (i, j) to
// (a(i), a(j)). Not all of them: the exact restriction (all entries) puts
// ~8× the fine problem's constraints on every coarse point, a completion
// problem so dense that it converged more slowly than the fine problem itself
// (n = 50,000: 5,000 coarse iterations, not converged). So the coarse problem
// keeps one pair in s = n / n_c (a fixed hash of the pair, self pairs always),
// the fine problem's density of constraints per point: a smaller problem of
// the same kind, whose solution carries the pairs' information across the
// graph. Entries that land on one coarse pair are kept apart (their squares
// add), so ConstraintRows may repeat a neighbour.

// A point's aggregate: every point not yet aggregated, in index order, opens
// one with its up to kAggregateSize − 1 strongest free neighbours (largest
// −L_ij); a point left alone joins its strongest neighbour's aggregate.
// Deterministic, O(nnz(L) log k).
constexpr int kAggregateSize = 8;

std::vector<int> AggregatePoints(const Eigen::SparseMatrix<double>& l, int* num_aggregates) {
  const int n = static_cast<int>(l.cols());
  std::vector<int> agg(n, -1), size;
  std::vector<std::pair<double, int>> free;
  for (int i = 0; i < n; ++i) {
    if (agg[i] >= 0) continue;
    const int id = static_cast<int>(size.size());
    agg[i] = id;
    free.clear();
    for (Eigen::SparseMatrix<double>::InnerIterator it(l, i); it; ++it) {
      const int j = static_cast<int>(it.row());
      if (j != i && agg[j] < 0 && it.value() < 0.0) free.emplace_back(-it.value(), j);
    }
    const size_t take = std::min(free.size(), static_cast<size_t>(kAggregateSize - 1));
    std::partial_sort(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(take), free.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    for (size_t k = 0; k < take; ++k) agg[free[k].second] = id;
    size.push_back(static_cast<int>(take) + 1);
  }
  // Singletons join their strongest neighbour's aggregate; ids are then made compact.
  for (int i = 0; i < n; ++i) {
    if (size[agg[i]] != 1) continue;
    double best = 0.0;
    int to = -1;
    for (Eigen::SparseMatrix<double>::InnerIterator it(l, i); it; ++it) {
      const int j = static_cast<int>(it.row());
      if (j != i && -it.value() > best && size[agg[j]] > 1) {
        best = -it.value();
        to = agg[j];
      }
    }
    if (to >= 0) {
      --size[agg[i]];
      agg[i] = to;
      ++size[to];
    }
  }
  std::vector<int> compact(size.size(), -1);
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (compact[agg[i]] < 0) compact[agg[i]] = m++;
    agg[i] = compact[agg[i]];
  }
  *num_aggregates = m;
  return agg;
}

// PᵀLP for the 0/1 prolongation of `agg`.
Eigen::SparseMatrix<double> CoarseLaplacian(const Eigen::SparseMatrix<double>& l, const std::vector<int>& agg, int m) {
  std::vector<Eigen::Triplet<double>> t;
  t.reserve(static_cast<size_t>(l.nonZeros()));
  for (int i = 0; i < l.outerSize(); ++i) {
    for (Eigen::SparseMatrix<double>::InnerIterator it(l, i); it; ++it) {
      t.emplace_back(agg[static_cast<int>(it.row())], agg[i], it.value());
    }
  }
  Eigen::SparseMatrix<double> lc(m, m);
  lc.setFromTriplets(t.begin(), t.end());
  return lc;
}

// The kept ordered entries (i, j) of `rows` (one pair in round(n / m), both
// of its entries; every self pair) as (a(i), a(j)) with their targets, in the
// fine rows' order.
ConstraintRows CoarseRows(const ConstraintRows& rows, const std::vector<int>& agg, int m) {
  const int n = static_cast<int>(agg.size());
  const uint64_t keep_one_in = static_cast<uint64_t>(std::max(1, (n + m / 2) / m));
  auto kept = [&](int i, int j) {
    if (i == j || keep_one_in == 1) return true;
    const uint64_t a = static_cast<uint64_t>(std::min(i, j)), b = static_cast<uint64_t>(std::max(i, j));
    return ((a * 0x9E3779B97F4A7C15ULL) ^ (b * 0xC2B2AE3D27D4EB4FULL)) % keep_one_in == 0;
  };
  ConstraintRows c;
  c.offset.assign(m + 1, 0);
  for (int i = 0; i < n; ++i)
    for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e) c.offset[agg[i] + 1] += kept(i, rows.neighbor[e]);
  for (int a = 0; a < m; ++a) {
    c.max_row = std::max(c.max_row, c.offset[a + 1]);
    c.offset[a + 1] += c.offset[a];
  }
  c.neighbor.resize(c.offset[m]);
  c.target.resize(c.offset[m]);
  std::vector<int> fill(c.offset.begin(), c.offset.end() - 1);
  for (int i = 0; i < n; ++i) {
    for (int e = rows.offset[i]; e < rows.offset[i + 1]; ++e) {
      if (!kept(i, rows.neighbor[e])) continue;
      const int k = fill[agg[i]]++;
      c.neighbor[k] = agg[rows.neighbor[e]];
      c.target[k] = rows.target[e];
    }
  }
  return c;
}

StatusOr<NpklResult> SolvePcp(const Eigen::SparseMatrix<double>& l, ConstraintRows rows, const NpklProblem* problem,
                              RunRole role, const KlAdmmOptions& options, const SolveControl& control,
                              FactorDiagnostics* diagnostics);

// The coarse solve's polish tolerance: a start needs the coarse solution's
// shape, not its last digits. Measured at n = 50,000 adult-like
// (docs/BENCHMARKS.md): 1e-2 took 212 coarse iterations, 1e-3 903 and 1e-4
// 1,916, for the same fine iterations (149–161).
constexpr double kCoarseTolerance = 1e-2;
// The coarse solution's directions with singular value below this fraction
// of the largest are dropped before it starts the finer solve (the coarse
// rank is above the optimum's; the fine certificate adds what is missing).
constexpr double kCoarseDirectionFloor = 0.1;
// ... and this many of the next ones are handed on as well, the count
// rounded up to a multiple of kRankMultiple.
constexpr int kCoarseExtraDirections = 4;
constexpr int kRankMultiple = 8;

// The multilevel start: the coarse problem's solution copied to every point of
// its aggregate (n × r), or null when the graph does not coarsen (fewer than
// a third of the points merged), no pair is kept, or the coarse solve did not
// converge. The coarse problem is solved at the fixed rank kCoarseRank by the
// polish alone (RunRole::kCoarse), with the caller's deadline and
// cancellation, no progress, no checkpoints and no certificate; it is itself
// multilevel when large enough. Each level solved lands in *levels.
InitialFactor MultilevelStart(const Eigen::SparseMatrix<double>& l, const ConstraintRows& rows,
                              const KlAdmmOptions& options, const SolveControl& control,
                              std::vector<CoarseLevelReport>* levels) {
  Stopwatch clock;
  const int n = static_cast<int>(l.rows());
  int m = 0;
  const std::vector<int> agg = AggregatePoints(l, &m);
  if (3 * m > 2 * n) return nullptr;
  const SolveControl coarse_control = control.StopConditions();
  KlAdmmOptions coarse_options = options;
  coarse_options.initial_factor = nullptr;
  coarse_options.tolerance = std::max(options.tolerance, kCoarseTolerance);
  coarse_options.certify = false;
  ConstraintRows coarse_rows = CoarseRows(rows, agg, m);
  if (coarse_rows.num_entries() == 0) return nullptr;  // too few pairs to keep one
  CoarseLevelReport level;
  level.points = m;
  level.entries = coarse_rows.num_entries();
  FactorDiagnostics coarse_diagnostics;  // the coarser levels', if any
  const StatusOr<NpklResult> coarse = SolvePcp(CoarseLaplacian(l, agg, m), std::move(coarse_rows), nullptr,
                                               RunRole::kCoarse, coarse_options, coarse_control, &coarse_diagnostics);
  if (!coarse.ok() || coarse->stats.termination != Termination::kConverged) return nullptr;
  const Eigen::MatrixXd vc = DropDegenerateDirections(coarse->kernel.embedding().transpose(), kCoarseDirectionFloor,
                                                      kCoarseExtraDirections, kRankMultiple);
  auto start = std::make_shared<Eigen::MatrixXd>(n, vc.rows());
  for (int i = 0; i < n; ++i) start->row(i) = vc.col(agg[i]).transpose();
  level.iterations = coarse->stats.iterations;
  level.rank = static_cast<int>(vc.rows());
  level.seconds = clock.Seconds();
  if (levels != nullptr) {
    *levels = std::move(coarse_diagnostics.coarse_levels);
    levels->push_back(level);
  }
  return start;
}

// One solve of the PCP problem (1) over `l` and `rows` in the given role
// (kProblem or kCoarse; a problem started by its coarse level becomes
// kFromCoarse). The multilevel start runs for the problem with the rank
// escalation, and for every coarse level, from multilevel_min_points up.
StatusOr<NpklResult> SolvePcp(const Eigen::SparseMatrix<double>& l, ConstraintRows rows, const NpklProblem* problem,
                              RunRole role, const KlAdmmOptions& options, const SolveControl& control,
                              FactorDiagnostics* diagnostics) {
  Stopwatch setup_clock;
  KlAdmmOptions o = options;
  const bool coarsens = role == RunRole::kCoarse ? o.polish == KlAdmmOptions::Polish::kLbfgs : Escalates(o);
  std::vector<CoarseLevelReport> levels;
  if (coarsens && !o.initial_factor && o.multilevel_min_points > 0 && l.rows() >= o.multilevel_min_points) {
    o.initial_factor = MultilevelStart(l, rows, o, control, &levels);
    if (o.initial_factor && role == RunRole::kProblem) role = RunRole::kFromCoarse;
  }
  AdmmRun run(l, std::move(rows), problem, role, o, control, setup_clock);
  run.Start();
  run.RunAdmm();
  run.RunPolish();
  StatusOr<NpklResult> result = run.Finish(diagnostics);
  if (diagnostics != nullptr) diagnostics->coarse_levels = std::move(levels);
  return result;
}

StatusOr<NpklResult> Solve(const NpklProblem& problem, const KlAdmmOptions& options,
                           const SolveControl& control, FactorDiagnostics* diagnostics) {
  KLS_RETURN_IF_ERROR(problem.Validate());
  KLS_RETURN_IF_ERROR(options.Validate());
  KLS_RETURN_IF_ERROR(CheckSymmetric(problem.laplacian, "laplacian"));
  const int n = problem.num_points();
  if (options.rank > n) {
    return InvalidArgumentError("options.rank = " + std::to_string(options.rank) +
                                " exceeds the number of points " + std::to_string(n));
  }
  KLS_RETURN_IF_ERROR(ValidateInitialFactor(options.initial_factor, n));
  return SolvePcp(problem.laplacian, BuildRows(problem.constraints, n), &problem, RunRole::kProblem, options, control,
                  diagnostics);
}

}  // namespace

Status KlAdmmOptions::Validate(std::string_view path) const {
  if (!(gamma > 0.0) || !std::isfinite(gamma)) {
    return InvalidArgumentError(std::string(path) + ".gamma = " + FormatNumber(gamma) + " must be positive and finite");
  }
  if (rank < 0) {
    return InvalidArgumentError(std::string(path) + ".rank = " + std::to_string(rank) +
                                " must be >= 1 (or 0 for automatic)");
  }
  if (!(rho_initial > 0.0) || !std::isfinite(rho_initial)) {
    return InvalidArgumentError(std::string(path) + ".rho_initial = " + FormatNumber(rho_initial) +
                                " must be positive and finite");
  }
  if (!(rho_min > 0.0) || !std::isfinite(rho_min)) {
    return InvalidArgumentError(std::string(path) + ".rho_min = " + FormatNumber(rho_min) + " must be positive and finite");
  }
  if (max_iterations < 1) {
    return InvalidArgumentError(std::string(path) + ".max_iterations = " + std::to_string(max_iterations) +
                                " must be >= 1");
  }
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError(std::string(path) + ".tolerance = " + FormatNumber(tolerance) +
                                " must be non-negative and finite");
  }
  if (!(polish_switch_tolerance > 0.0) || !std::isfinite(polish_switch_tolerance)) {
    return InvalidArgumentError(std::string(path) + ".polish_switch_tolerance = " + FormatNumber(polish_switch_tolerance) +
                                " must be positive and finite");
  }
  KLS_RETURN_IF_ERROR(ValidateEscalationOptions(initial_rank, escalation_step, certificate_tolerance, path));
  if (multilevel_min_points < 0) {
    return InvalidArgumentError(std::string(path) + ".multilevel_min_points = " + std::to_string(multilevel_min_points) +
                                " must be >= 0 (0 = off)");
  }
  if (lbfgs_memory < 1) {
    return InvalidArgumentError(std::string(path) + ".lbfgs_memory = " + std::to_string(lbfgs_memory) + " must be >= 1");
  }
  if (num_threads < 0 || num_threads > kMaxSolverThreads) {
    return InvalidArgumentError(std::string(path) + ".num_threads = " + std::to_string(num_threads) + " must be in [0, " +
                                std::to_string(kMaxSolverThreads) + "] (0 = all hardware threads)");
  }
  return OkStatus();
}

StatusOr<NpklResult> SolveKlAdmm(const NpklProblem& problem, const KlAdmmOptions& options,
                                 const SolveControl& control, FactorDiagnostics* diagnostics) {
  return GuardExceptions("KL-ADMM", [&] { return Solve(problem, options, control, diagnostics); });
}

}  // namespace kls
