#include "core/npkl/bcd_npkl.h"

#include "core/npkl/factor_certificate.h"
#include "core/npkl/reduced_laplacian.h"
#include "core/common/checkpoint_codec.h"
#include "core/common/iteration_driver.h"
#include "core/common/parallel.h"
#include "core/common/symmetry.h"


#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Eigen/Core>
#include <Eigen/OrderingMethods>
#include <Eigen/SparseCholesky>
#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace kls {
namespace {

using SparseMatrix = Eigen::SparseMatrix<double>;

// ---------------------------------------------------------------------------
// Boundary reduction (Prop. 1).

// L = constrained points (local index = rank among them), U = the others.
// Sweeps between exact recomputations of the factored Δ̃'s Z = V Bᵀ.
constexpr int kResyncSweeps = 20;
// Tolerance tightenings (×0.1 each) when the certificate fails by ⟨S, Z⟩ alone.
constexpr int kMaxTightenings = 3;

std::vector<int> BoundaryIndex(const NpklProblem& problem) {
  const int n = problem.num_points();
  std::vector<int> local(n, -1);
  for (const Pair& p : problem.constraints.pairs) {
    local[p.i] = 0;
    local[p.j] = 0;
  }
  int l = 0;
  for (int g = 0; g < n; ++g) {
    if (local[g] == 0) local[g] = l++;
  }
  return local;
}


// ---------------------------------------------------------------------------
// Constraints per boundary column: T(i) of eq. (6) in compressed rows.

struct ColumnConstraints {
  std::vector<int> offset;      // l + 1
  std::vector<int> neighbor;    // local j for each entry
  std::vector<double> sign;     // T_ij
  int max_size = 0;             // max_i |T(i)|
};

ColumnConstraints BuildColumns(const PairwiseConstraints& constraints, const std::vector<int>& local, int l) {
  ColumnConstraints cols;
  std::vector<int> count(l, 0);
  for (const Pair& p : constraints.pairs) {
    ++count[local[p.i]];
    ++count[local[p.j]];
  }
  cols.offset.assign(l + 1, 0);
  for (int i = 0; i < l; ++i) {
    cols.offset[i + 1] = cols.offset[i] + count[i];
    cols.max_size = std::max(cols.max_size, count[i]);
  }
  cols.neighbor.resize(cols.offset[l]);
  cols.sign.resize(cols.offset[l]);
  std::vector<int> fill(cols.offset.begin(), cols.offset.end() - 1);
  for (const Pair& p : constraints.pairs) {
    const int a = local[p.i], b = local[p.j];
    cols.neighbor[fill[a]] = b;
    cols.sign[fill[a]++] = p.sign();
    cols.neighbor[fill[b]] = a;
    cols.sign[fill[b]++] = p.sign();
  }
  return cols;
}

// ---------------------------------------------------------------------------
// Losses.

double Loss(NpklLoss loss, double z) {
  switch (loss) {
    case NpklLoss::kSquare: return (1.0 - z) * (1.0 - z);
    case NpklLoss::kSquareHinge: { const double h = std::max(0.0, 1.0 - z); return h * h; }
    case NpklLoss::kHinge: return std::max(0.0, 1.0 - z);
    case NpklLoss::kLinear: return -z;
  }
  return 0.0;
}

// ℓ'(z) for the smooth losses.
double LossDerivative(NpklLoss loss, double z) {
  switch (loss) {
    case NpklLoss::kSquare: return -2.0 * (1.0 - z);
    case NpklLoss::kSquareHinge: return -2.0 * std::max(0.0, 1.0 - z);
    default: return 0.0;
  }
}

// Eq. (5): tr(V Δ̃ Vᵀ) + C Σ_{pairs} ℓ(T_ij v_iᵀv_j), each pair once (it is
// listed under both of its columns, hence the i < j filter).
double Objective(const Eigen::MatrixXd& v, double smooth, const ColumnConstraints& cols, NpklLoss loss,
                 double c) {
  double total = 0.0;
  const int l = static_cast<int>(v.cols());
  for (int i = 0; i < l; ++i) {
    for (int e = cols.offset[i]; e < cols.offset[i + 1]; ++e) {
      const int j = cols.neighbor[e];
      if (j > i) total += Loss(loss, cols.sign[e] * v.col(i).dot(v.col(j)));
    }
  }
  return smooth + c * total;
}

// ---------------------------------------------------------------------------
// The dual QPs of eq. (9)/(10):  min ½ αᵀHα − qᵀα,  0 ≤ α ≤ upper (upper may
// be +∞). `alpha` holds the warm start on entry and the solution on exit.
//
// Stage 1, cyclic coordinate descent with exact 1-D steps (Hsieh et al. 2008's
// dual coordinate descent): for a single constraint this is the paper's
// closed form α = clip(q/H) and ends after one pass; for a well-conditioned H
// it converges linearly. Stage 2, only when stage 1 hits its pass limit:
// H = YᵀY (+ a/C I) is the Gram matrix of the signed neighbours T_ij v_j, and
// once the embedding clusters, two neighbours of i often have nearly equal
// v_j, so H is (nearly) singular and coordinate descent zig-zags. Then a
// primal active-set method (Nocedal & Wright §16.3) finishes from the
// coordinate-descent point: Newton step to the minimizer over the free
// variables, (H_FF + μI) x_F = q_F − H_FB α_B with a tiny μ so that an
// (almost) flat direction gives a long step; the step is cut at the first
// bound it meets, which joins the working set; at a free-set minimizer the
// bound variable whose gradient sign most violates KKT is released. It is
// kept only if it ends with a smaller projected gradient. The primal v of
// eq. (8) depends on α only through Yα, which is unique even when α is not.
class DualQpSolver {
 public:
  void Solve(const Eigen::MatrixXd& h, const Eigen::VectorXd& q, double upper, Eigen::Ref<Eigen::VectorXd> alpha) {
    const int t = static_cast<int>(q.size());
    grad_.noalias() = h * alpha - q;
    // Rounding in g = Hα − q is relative to the larger of |q| and |Hα|.
    const double tol = 1e-12 * std::max({1.0, q.cwiseAbs().maxCoeff(), (grad_ + q).cwiseAbs().maxCoeff()});
    for (int pass = 0; pass < kMaxPasses; ++pass) {
      double violation = 0.0;
      for (int k = 0; k < t; ++k) {
        const double g = grad_[k];
        violation = std::max(violation, std::abs(ProjectedGradient(g, alpha[k], upper)));
        double next;
        if (h(k, k) > 0.0) {
          next = std::clamp(alpha[k] - g / h(k, k), 0.0, upper);
        } else {  // H_kk = 0 ⇒ H's row k is 0 (H ⪰ 0): linear in α_k
          next = g < 0.0 ? upper : (g > 0.0 ? 0.0 : alpha[k]);
          if (!std::isfinite(next)) next = alpha[k];  // unbounded direction; cannot occur for eq. (10)
        }
        const double step = next - alpha[k];
        if (step != 0.0) {
          alpha[k] = next;
          grad_.noalias() += step * h.col(k);
        }
      }
      if (violation <= tol) return;
    }
    ActiveSet(h, q, upper, tol, alpha);
  }

 private:
  static constexpr int kMaxPasses = 50;

  static double ProjectedGradient(double g, double a, double upper) {
    if (a <= 0.0) return std::min(g, 0.0);
    if (a >= upper) return std::max(g, 0.0);
    return g;
  }

  double Violation(const Eigen::MatrixXd& h, const Eigen::VectorXd& q, double upper, const Eigen::VectorXd& a) {
    grad_.noalias() = h * a - q;
    double v = 0.0;
    for (Eigen::Index k = 0; k < a.size(); ++k) v = std::max(v, std::abs(ProjectedGradient(grad_[k], a[k], upper)));
    return v;
  }

  void ActiveSet(const Eigen::MatrixXd& h, const Eigen::VectorXd& q, double upper, double tol,
                 Eigen::Ref<Eigen::VectorXd> alpha) {
    const int t = static_cast<int>(q.size());
    current_ = alpha;
    const double start_violation = Violation(h, q, upper, current_);
    const double mu = 1e-12 * std::max(h.diagonal().maxCoeff(), 1e-300);
    // Working set: variables at a bound whose gradient holds them there.
    bound_.assign(t, false);
    for (int k = 0; k < t; ++k) {
      bound_[k] = (current_[k] <= 0.0 && grad_[k] > 0.0) || (current_[k] >= upper && grad_[k] < 0.0);
    }
    for (int it = 0; it < 4 * t + 20; ++it) {
      free_.clear();
      for (int k = 0; k < t; ++k) {
        if (!bound_[k]) free_.push_back(k);
      }
      const int f = static_cast<int>(free_.size());
      if (f > 0) {
        hff_.resize(f, f);
        step_.resize(f);
        for (int s = 0; s < f; ++s) {
          double rhs = q[free_[s]];
          for (int k = 0; k < t; ++k) {
            if (bound_[k]) rhs -= h(free_[s], k) * current_[k];
          }
          step_[s] = rhs;
          for (int s2 = 0; s2 < f; ++s2) hff_(s, s2) = h(free_[s], free_[s2]);
          hff_(s, s) += mu;
        }
        ldlt_.compute(hff_);
        if (ldlt_.info() != Eigen::Success) break;
        step_ = ldlt_.solve(step_);  // the free-set minimizer x_F
        if (!step_.allFinite()) break;
        // Longest step s ∈ [0, 1] from α_F towards x_F inside the box.
        double length = 1.0;
        int blocking = -1;
        for (int s = 0; s < f; ++s) {
          const double a = current_[free_[s]], d = step_[s] - a;
          double limit = std::numeric_limits<double>::infinity();
          if (d < 0.0) limit = a / -d;
          if (d > 0.0 && std::isfinite(upper)) limit = (upper - a) / d;
          if (limit < length) {
            length = limit;
            blocking = s;
          }
        }
        for (int s = 0; s < f; ++s) {
          const double a = current_[free_[s]];
          current_[free_[s]] = std::clamp(a + length * (step_[s] - a), 0.0, upper);
        }
        if (blocking >= 0) {
          const int k = free_[blocking];
          current_[k] = step_[blocking] < current_[k] ? 0.0 : upper;  // exactly on the bound
          bound_[k] = true;
          continue;
        }
      }
      // At the free-set minimizer: release the worst KKT violator, if any.
      grad_.noalias() = h * current_ - q;
      int release = -1;
      double worst = tol;
      for (int k = 0; k < t; ++k) {
        if (!bound_[k]) continue;
        const double wrong = current_[k] <= 0.0 ? -grad_[k] : grad_[k];  // > 0: pulls into the box
        if (wrong > worst) {
          worst = wrong;
          release = k;
        }
      }
      if (release < 0) break;
      bound_[release] = false;
    }
    if (Violation(h, q, upper, current_) < start_violation) alpha = current_;
  }

  Eigen::VectorXd grad_, step_, current_;
  std::vector<bool> bound_;
  Eigen::MatrixXd hff_;
  Eigen::LDLT<Eigen::MatrixXd> ldlt_;
  std::vector<int> free_;
};

// ---------------------------------------------------------------------------
// One outer iteration of Algorithm 1: v_1, …, v_l in turn, each by the exact
// minimizer of its block subproblem eq. (6), always with the newest columns.

class ColumnUpdater {
 public:
  ColumnUpdater(ReducedLaplacian& reduced, const ColumnConstraints& cols, NpklLoss loss, double c, int r,
                double omega)
      : reduced_(reduced), cols_(cols), loss_(loss), c_(c), r_(r), omega_(omega),
        duals_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(cols.neighbor.size()))) {
    y_.resize(r, std::max(cols.max_size, 1));
    b_.resize(r);
  }

  /// α per (column, constraint) entry: the dual QPs' warm starts, which a
  /// checkpoint carries so that a resumed sweep repeats the same arithmetic.
  Eigen::VectorXd& duals() { return duals_; }

  void Sweep(Eigen::MatrixXd* v, bool resync) {
    const int l = static_cast<int>(v->cols());
    reduced_.BeginSweep(*v, resync);
    for (int first = 0; first < l; first += ReducedLaplacian::kBlock) {
      const int width = std::min(ReducedLaplacian::kBlock, l - first);
      reduced_.BeginBlock(first, width);
      for (int i = first; i < first + width; ++i) {
        old_ = v->col(i);
        UpdateColumn(i, v);
        delta_ = v->col(i) - old_;
        reduced_.ColumnChanged(i, delta_);
      }
      reduced_.EndBlock();
    }
  }

 private:
  void UpdateColumn(int i, Eigen::MatrixXd* vp) {
    Eigen::MatrixXd& v = *vp;
    const double a = reduced_.Diagonal(i);
    // b = Σ_{k≠i} Δ̃_ik v_k (eq. (6)).
    reduced_.ColumnProduct(v, i, &b_);
    b_ -= a * v.col(i);
    const int first = cols_.offset[i];
    const int t = cols_.offset[i + 1] - first;
    // Y = [T_ij v_j]_{j∈T(i)} (signed columns; YYᵀ is sign-free).
    for (int k = 0; k < t; ++k) y_.col(k) = cols_.sign[first + k] * v.col(cols_.neighbor[first + k]);
    auto y = y_.leftCols(t);

    if (loss_ == NpklLoss::kSquare) {
      // eq. (11): (aI + C YYᵀ) v = C Y 1 − b.
      rhs_.noalias() = c_ * y.rowwise().sum();
      rhs_ -= b_;
      if (t < r_) {
        // Sherman–Morrison–Woodbury: (aI + C YYᵀ)⁻¹ = (1/a)(I − Y (a/C I + YᵀY)⁻¹ Yᵀ).
        small_.noalias() = y.transpose() * y;
        small_.diagonal().array() += a / c_;
        llt_.compute(small_);
        w_.noalias() = y.transpose() * rhs_;
        llt_.solveInPlace(w_);
        rhs_.noalias() -= y * w_;
        rhs_ /= a;
      } else {
        small_.noalias() = c_ * (y * y.transpose());
        small_.diagonal().array() += a;
        llt_.compute(small_);
        llt_.solveInPlace(rhs_);
      }
      // Block over-relaxation: v ← v + ω (v* − v). The block objective is a
      // strictly convex quadratic in v_i with minimizer v*, so for ω ∈ (0, 2)
      // it falls by ω(2 − ω)/2 · (v* − v)ᵀH(v* − v) ≥ 0: a descent step of
      // the same kind as Algorithm 1's (ω = 1), which keeps Theorem 1's
      // sufficient decrease, and for ω > 1 cuts the number of sweeps the way
      // SOR does for Gauss–Seidel on a Laplacian.
      if (omega_ == 1.0) {
        v.col(i) = rhs_;
      } else {
        v.col(i) += omega_ * (rhs_ - v.col(i));
      }
      return;
    }

    // eq. (9) / (10): H = P = YᵀY (+ a/C I), q = Yᵀb + a·1.
    small_.noalias() = y.transpose() * y;
    double upper = std::numeric_limits<double>::infinity();
    if (loss_ == NpklLoss::kSquareHinge) {
      small_.diagonal().array() += a / c_;
    } else {
      upper = 0.5 * c_;  // hinge weight C/2 in the halved subproblem (6)
    }
    q_.noalias() = y.transpose() * b_;
    q_.array() += a;
    auto alpha = duals_.segment(first, t);
    qp_.Solve(small_, q_, upper, alpha);
    // eq. (8): v = (Σ_s α_s T_is v_s − b) / a = (Yα − b) / a.
    rhs_.noalias() = y * alpha;
    rhs_ -= b_;
    v.col(i) = rhs_ / a;
  }

  ReducedLaplacian& reduced_;
  const ColumnConstraints& cols_;
  const NpklLoss loss_;
  const double c_;
  const int r_;
  const double omega_;
  Eigen::VectorXd old_, delta_;
  Eigen::VectorXd duals_;  // α per (column, constraint) entry, warm starts
  Eigen::MatrixXd y_, small_;
  Eigen::VectorXd b_, rhs_, w_, q_;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  DualQpSolver qp_;
};

// ½∇ of eq. (5) is V G̃ with G̃ = Δ̃ + C Σ ℓ'(z_ij) T_ij (E_ij + E_ji)/2,
// formed as V Δ̃ plus the sparse pair terms (no second l × l matrix).
double StationarityResidual(const Eigen::MatrixXd& v, const ReducedLaplacian& reduced, const ColumnConstraints& cols,
                            NpklLoss loss, double c) {
  Eigen::MatrixXd vg;
  reduced.Apply(v, &vg);
  const int l = static_cast<int>(v.cols());
  for (int i = 0; i < l; ++i) {
    for (int e = cols.offset[i]; e < cols.offset[i + 1]; ++e) {
      const int j = cols.neighbor[e];
      const double z = cols.sign[e] * v.col(i).dot(v.col(j));
      // G̃_ij = C ℓ' T_ij / 2; the visit from i adds v_i G̃_ij to column j,
      // the visit from j (the same pair listed under j) the mirror term.
      vg.col(j) += (0.5 * c * LossDerivative(loss, z) * cols.sign[e]) * v.col(i);
    }
  }
  const double scale = std::max(v.norm(), 1e-300) * std::max(1.0, reduced.FrobeniusNorm());
  return vg.norm() / scale;
}

// ---------------------------------------------------------------------------
// Global-optimality certificate of the factorization (Prop. 2).
//
// f(Z) = tr(Δ̃Z) + C Σ_pairs ℓ(T_ij Z_ij) is convex (eq. (4)); its gradient is
//     S = Δ̃ + C Σ_pairs ℓ'(T_ij Z_ij) T_ij (E_ij + E_ji)/2,
// and for any Z* ⪰ 0, f(Z) − f(Z*) ≤ ⟨S, Z − Z*⟩ ≤ ⟨S, Z⟩ − λ_min(S) tr(Z*).
// At a stationary point of eq. (5) the row space of V is in S's null space;
// core/npkl/factor_certificate.h deflates it (σ = max_i Δ̃_ii) and computes
// the smallest eigenvalues of S on its complement.
FactorCertificate ComputeCertificate(const Eigen::MatrixXd& v, double objective, const ReducedLaplacian& red,
                                     const ColumnConstraints& cols, NpklLoss loss, double c, int nev) {
  const int l = red.l();
  // S's pair weights per column entry: S_ij = C ℓ'(T_ij z_ij) T_ij / 2.
  std::vector<double> weight(cols.neighbor.size());
  for (int i = 0; i < l; ++i) {
    for (int e = cols.offset[i]; e < cols.offset[i + 1]; ++e) {
      const double z = cols.sign[e] * v.col(i).dot(v.col(cols.neighbor[e]));
      weight[e] = 0.5 * c * LossDerivative(loss, z) * cols.sign[e];
    }
  }
  const SymmetricApply apply_s = [&](const double* x, double* y) {
    red.ApplyVector(x, y);
    for (int i = 0; i < l; ++i) {
      double acc = 0.0;
      for (int e = cols.offset[i]; e < cols.offset[i + 1]; ++e) acc += weight[e] * x[cols.neighbor[e]];
      y[i] += acc;
    }
  };
  FactorCertificateOptions options;
  options.nev = nev;
  options.sigma = 0.0;
  for (int i = 0; i < l; ++i) options.sigma = std::max(options.sigma, red.Diagonal(i));
  return CertifyFactor(l, apply_s, v, objective, options);
}

// The rows of the escalation: t the exact minimizer of the 1-D quadratic
// f(Z + t xxᵀ) = f + tλ + t²·C Σ_pairs (x_i x_j)² for the square loss (for
// the square hinge the same t under-steps, since its curvature is at most
// that). Returns the rows added.
DirectionCurvature Curvature(const ColumnConstraints& cols, double c) {
  return [&cols, c](const Eigen::VectorXd& x) {
    double sum = 0.0;
    const int l = static_cast<int>(x.size());
    for (int i = 0; i < l; ++i) {
      for (int e = cols.offset[i]; e < cols.offset[i + 1]; ++e) {
        const int j = cols.neighbor[e];
        if (j > i) sum += (x[i] * x[j]) * (x[i] * x[j]);
      }
    }
    return 2.0 * c * sum;  // f''(t)
  };
}

int AppendDirections(const FactorCertificate& cert, const ColumnConstraints& cols, double c, int max_rows,
                     Eigen::MatrixXd* v) {
  return AppendNegativeDirections(cert, Curvature(cols, c), max_rows, v);
}

// V⁰ ~ U[0, 1)^{r×l} (the paper's rand(r, l)) from the top 53 bits of each
// draw, column by column.
Eigen::MatrixXd RandomStart(int r, int l, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Eigen::MatrixXd v(r, l);
  for (int i = 0; i < l; ++i) {
    for (int k = 0; k < r; ++k) v(k, i) = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  }
  return v;
}

// Φ = [Vᵀ on L; −Δ_UU⁻¹ Δ_UL Vᵀ on U] = Q Vᵀ (Prop. 1), n × r row-major.
LearnedKernel::Embedding Extend(const ReducedLaplacian& red, const Eigen::MatrixXd& v, int n) {
  const int r = static_cast<int>(v.rows());
  LearnedKernel::Embedding phi(n, r);
  for (int i = 0; i < red.l(); ++i) phi.row(red.boundary()[i]) = v.col(i).transpose();
  const Eigen::MatrixXd phi_u = red.ExtendInterior(v);
  for (int k = 0; k < red.u(); ++k) phi.row(red.interior()[k]) = phi_u.row(k);
  return phi;
}

// ---- Checkpoints (SolveControl::checkpoint / resume_from) -------------------
//
// Taken after a sweep that did not end its stage, and after an escalation
// (rows appended to V, the next stage not yet begun: stage sweeps 0, zero
// duals, no Z). After the common prefix (core/common/checkpoint_codec.h): the
// last ‖V^{t+1} − V^t‖_F, the sweeps of the current stage, V (r × l, r the
// current rank of the escalation), the dual QPs' warm starts α, the factored
// form's carried Z = V Bᵀ (empty in the dense form), and the escalation's
// bookkeeping (BcdNpklDiagnostics).
constexpr char kCheckpointTag[] = "bcd_npkl/1";
constexpr uint32_t kCheckpointMagic = 0x4243444e;  // "BCDN"
constexpr uint32_t kCheckpointVersion = 1;

struct ResumeState {
  std::vector<double> objective_history;
  double primal_residual = 0.0;
  int stage_iter = 0;
  Eigen::MatrixXd v, z;
  Eigen::VectorXd duals;
  BcdNpklDiagnostics diag;
};

// The problem and every option that shapes the iterates; not tolerance,
// max_iterations or num_threads (bit-identity also needs the same thread
// count, see BcdNpklOptions::num_threads).
uint64_t CheckpointFingerprint(const NpklProblem& problem, const BcdNpklOptions& o) {
  Fingerprint fp;
  fp.AddString(kCheckpointTag).AddSparse(problem.laplacian).AddInt(problem.constraints.size());
  for (const Pair& p : problem.constraints.pairs) fp.AddInt(p.i).AddInt(p.j).AddInt(static_cast<int>(p.kind));
  fp.AddInt(static_cast<int>(o.loss)).AddDouble(o.c).AddInt(o.rank).AddDouble(o.over_relaxation).Add(o.seed);
  fp.AddInt(o.rank_escalation).AddInt(o.initial_rank).AddInt(o.escalation_step).AddDouble(o.certificate_tolerance);
  if (o.initial_factor) fp.AddDense(*o.initial_factor);  // cold fingerprints unchanged
  return fp.value();
}

std::string EncodeCheckpoint(uint64_t fingerprint, int iteration, const NpklResult& result, int stage_iter,
                             const Eigen::MatrixXd& v, const Eigen::VectorXd& duals, const Eigen::MatrixXd& z,
                             const BcdNpklDiagnostics& d) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kCheckpointMagic, kCheckpointVersion, fingerprint, iteration,
                      result.stats.objective_history);
  w.Put<double>(result.primal_residual);
  w.Put<int32_t>(stage_iter);
  w.PutMatrix(v);
  w.PutVector(duals);
  w.PutMatrix(z);
  PutFactorDiagnostics(&w, d);
  return w.Take();
}

// Any error means "not this run's checkpoint": the caller starts afresh.
Status DecodeCheckpoint(const Checkpoint& c, uint64_t fingerprint, int r_max, const ReducedLaplacian& reduced,
                        int num_duals, ResumeState* s) {
  ByteReader in(c.bytes, "bcd_npkl checkpoint");
  KLS_RETURN_IF_ERROR(
      GetCheckpointPrefix(&in, c, kCheckpointMagic, kCheckpointVersion, fingerprint, &s->objective_history));
  KLS_RETURN_IF_ERROR(in.Get(&s->primal_residual));
  int32_t stage_iter = 0;
  KLS_RETURN_IF_ERROR(in.Get(&stage_iter));
  s->stage_iter = stage_iter;
  KLS_RETURN_IF_ERROR(in.GetMatrix(&s->v));
  const int r = static_cast<int>(s->v.rows());
  if (r < 1 || r > r_max || s->v.cols() != reduced.l() || !s->v.allFinite()) {
    return FailedPreconditionError(in.what() + ": V does not fit this problem");
  }
  KLS_RETURN_IF_ERROR(in.GetVector(&s->duals));
  if (s->duals.size() != num_duals) return FailedPreconditionError(in.what() + ": wrong number of duals");
  const bool carried = stage_iter > 0 && reduced.factored();
  KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, carried ? r : 0, carried ? reduced.u() : 0, &s->z));
  BcdNpklDiagnostics& d = s->diag;
  KLS_RETURN_IF_ERROR(GetFactorDiagnostics(&in, &d));
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  // The bookkeeping must describe this V and this iteration count.
  long long sweeps = 0;
  for (int k : d.stage_sweeps) sweeps += k;
  // stage_iter = 0: taken after an escalation, so V has more rows than the
  // last stage.
  const bool consistent =
      !d.rank_history.empty() && d.stage_sweeps.size() == d.rank_history.size() && sweeps == c.iteration &&
      (stage_iter == 0 ? d.rank_history.back() < r
                       : stage_iter >= 1 && d.rank_history.back() == r && stage_iter == d.stage_sweeps.back());
  if (!consistent) {
    return FailedPreconditionError(in.what() + ": inconsistent stage bookkeeping");
  }
  return OkStatus();
}

// BCDNPKL's own problem check: the block subproblem eq. (6) needs j ≠ i.
Status CheckNoSelfPairs(const PairwiseConstraints& constraints) {
  for (int k = 0; k < constraints.size(); ++k) {
    const Pair& p = constraints.pairs[k];
    if (p.i == p.j) {
      return InvalidArgumentError("constraints[" + std::to_string(k) + "]: self pair (" + std::to_string(p.i) +
                                  ", " + std::to_string(p.j) +
                                  ") is not supported by BCDNPKL (the block subproblem eq. (6) needs j ≠ i)");
    }
  }
  return OkStatus();
}

// One BCDNPKL solve on the iteration driver (core/common/iteration_driver.h):
// the start (random, resumed or warm), then stages of sweeps (Algorithm 1 at
// a fixed rank), each followed by the certificate and, with the escalation,
// more rows or a tighter tolerance.
class BcdRun {
 public:
  BcdRun(const NpklProblem& problem, const BcdNpklOptions& options, ReducedLaplacian& reduced,
         const ColumnConstraints& cols, const SolveControl& control, const Stopwatch& setup_clock)
      : options_(options),
        reduced_(reduced),
        cols_(cols),
        r_max_(std::min(reduced.l(), options.rank > 0 ? options.rank : RankBound(problem.constraints.size()))),
        smooth_(options.loss != NpklLoss::kHinge),
        escalate_(smooth_ && options.rank == 0 && options.rank_escalation),
        // Over-relaxation applies to the square loss, whose block problem is an
        // exact quadratic; the (square) hinge blocks keep ω = 1.
        omega_(options.loss == NpklLoss::kSquare ? options.over_relaxation : 1.0),
        setup_clock_(setup_clock),
        driver_(control, kCheckpointTag, options.max_iterations, setup_clock, &result_.stats) {}

  void Start(const NpklProblem& problem);
  void Iterate();
  StatusOr<NpklResult> Finish(int n, BcdNpklDiagnostics* diagnostics);

 private:
  void WarmStart();
  bool Stage();
  // Reports sweep iter_: its objective and ‖V − V_old‖ (primal residual and step).
  void ReportSweep(double objective, double change) {
    IterationRow row;
    row.iteration = iter_;
    row.objective = objective;
    row.primal_residual = change;
    row.step = change;
    driver_.Report(row);
  }

  const BcdNpklOptions& options_;
  ReducedLaplacian& reduced_;
  const ColumnConstraints& cols_;
  const int r_max_;
  const bool smooth_;
  const bool escalate_;
  const double omega_;
  const Stopwatch& setup_clock_;
  IterationDriver driver_;
  uint64_t fingerprint_ = 0;
  int r_ = 0;
  int iter_ = 0;
  Eigen::MatrixXd v_, v_old_;
  BcdNpklDiagnostics diag_;
  NpklResult result_;
  ResumeState resume_;     // resume_.stage_iter > 0: the first stage continues a checkpoint's
  int carried_sweeps_ = 0; // sweeps of the warm start's first sweep that belong to the first stage
  Stopwatch solve_clock_;
};

// V⁰ (random, or the warm start's rows), or the checkpoint's state.
void BcdRun::Start(const NpklProblem& problem) {
  const int start_rank =
      options_.initial_factor ? static_cast<int>(options_.initial_factor->cols()) : options_.initial_rank;
  r_ = escalate_ ? std::min(r_max_, start_rank) : r_max_;
  v_ = RandomStart(r_, reduced_.l(), options_.seed);
  if (options_.initial_factor) v_ = WarmStartRows(*options_.initial_factor, reduced_.boundary(), r_, v_);
  // The fingerprint costs O(nnz(Δ) + m): only computed when checkpoints are used.
  fingerprint_ = driver_.uses_checkpoints() ? CheckpointFingerprint(problem, options_) : 0;
  SolveReport& stats = result_.stats;
  const int num_duals = static_cast<int>(cols_.neighbor.size());
  if (driver_.Resume([&](const Checkpoint& c) {
        return DecodeCheckpoint(c, fingerprint_, r_max_, reduced_, num_duals, &resume_);
      })) {
    iter_ = driver_.resumed_from_iteration();
    stats.iterations = iter_;
    stats.resumed_from_iteration = iter_;
    stats.objective_history = std::move(resume_.objective_history);
    result_.primal_residual = resume_.primal_residual;
    v_ = std::move(resume_.v);
    r_ = static_cast<int>(v_.rows());
    diag_ = std::move(resume_.diag);
  } else {
    resume_.stage_iter = 0;  // not this run's checkpoint (or none): start afresh
  }
  if (options_.initial_factor && escalate_ && stats.resumed_from_iteration == 0) WarmStart();
}

// Warm start (PrepareWarmFactor): the previous optimum's degenerate
// directions go; one sweep at the compact rank lets its rows take up what
// they can of the new pairs (measured: appending before it cost 2–3 sweeps
// wherever the start needed no new direction); then the new problem's
// significant negative directions come in at their exact step.
void BcdRun::WarmStart() {
  SolveReport& stats = result_.stats;
  int compact_rank = r_, probe_sweeps = 0;
  const FactorSettle settle = [&](Eigen::MatrixXd* x) {
    compact_rank = static_cast<int>(x->rows());
    if (iter_ >= options_.max_iterations) return;
    const Eigen::MatrixXd before = *x;
    ColumnUpdater probe(reduced_, cols_, options_.loss, options_.c, static_cast<int>(x->rows()), omega_);
    probe.Sweep(x, /*resync=*/true);
    const double objective = Objective(*x, reduced_.QuadraticAfterSweep(*x), cols_, options_.loss, options_.c);
    if (!std::isfinite(objective) || !x->allFinite()) {
      *x = before;  // the stage loop meets the same issue and reports it
      return;
    }
    stats.objective_history.push_back(objective);
    stats.iterations = ++iter_;
    ReportSweep(objective, (*x - before).norm());
    probe_sweeps = 1;
  };
  const FactorCertify certify = [&](const Eigen::MatrixXd& x, double* f) {
    *f = Objective(x, reduced_.Quadratic(x), cols_, options_.loss, options_.c);
    return ComputeCertificate(x, *f, reduced_, cols_, options_.loss, options_.c, std::max(1, options_.escalation_step));
  };
  v_ = PrepareWarmFactor(v_, certify, Curvature(cols_, options_.c), r_max_, options_.certificate_tolerance, settle);
  r_ = static_cast<int>(v_.rows());
  if (r_ != compact_rank && probe_sweeps > 0) {  // the sweep was a stage of its own, at the compact rank
    diag_.rank_history.push_back(compact_rank);
    diag_.stage_sweeps.push_back(probe_sweeps);
  } else {
    carried_sweeps_ = probe_sweeps;
  }
}

void BcdRun::Iterate() {
  result_.stats.setup_seconds = setup_clock_.Seconds();
  solve_clock_.Reset();
  driver_.Start();
  result_.stats.termination = Termination::kIterationLimit;
  while (Stage()) {
  }
}

// One stage: Algorithm 1 at the current r until the stopping test, then the
// certificate of Prop. 2. False when the solve ends (stopped by the control,
// a numerical issue or the iteration cap, or converged for good).
bool BcdRun::Stage() {
  SolveReport& stats = result_.stats;
  ColumnUpdater updater(reduced_, cols_, options_.loss, options_.c, r_, omega_);
  int stage_iter = 0;
  if (resume_.stage_iter > 0) {  // the stage a checkpoint was taken in
    stage_iter = resume_.stage_iter;
    updater.duals() = std::move(resume_.duals);
    reduced_.RestoreCarriedProduct(std::move(resume_.z));
    resume_.stage_iter = 0;
  } else {
    diag_.rank_history.push_back(r_);
    diag_.stage_sweeps.push_back(carried_sweeps_);
    stage_iter = carried_sweeps_;
    carried_sweeps_ = 0;
  }
  // A stage at the previous stage's rank is a tightening (below): ×0.1 each.
  int tightenings = 0;
  for (size_t k = 1; k < diag_.rank_history.size(); ++k) tightenings += diag_.rank_history[k] == diag_.rank_history[k - 1];
  const double stage_tolerance = options_.tolerance * std::pow(0.1, tightenings);
  stats.termination = driver_.Run(iter_ + 1, [&](int it) {
    v_old_ = v_;
    ++stage_iter;
    updater.Sweep(&v_, /*resync=*/stage_iter % kResyncSweeps == 1);
    const double objective = Objective(v_, reduced_.QuadraticAfterSweep(v_), cols_, options_.loss, options_.c);
    if (!std::isfinite(objective) || !v_.allFinite()) {
      v_ = v_old_;
      return driver_.Stop(Termination::kNumericalIssue);
    }
    const double change = (v_ - v_old_).norm();
    stats.iterations = iter_ = it;
    ++diag_.stage_sweeps.back();
    stats.objective_history.push_back(objective);
    result_.primal_residual = change;
    ReportSweep(objective, change);
    // Algorithm 1's stopping test, relative (see BcdNpklOptions::tolerance).
    if (change <= stage_tolerance * v_.norm()) return driver_.Stop(Termination::kConverged);
    driver_.MaybeCheckpoint(it, [&] {
      return EncodeCheckpoint(fingerprint_, it, result_, stage_iter, v_, updater.duals(), reduced_.CarriedProduct(),
                              diag_);
    });
    return StepOutcome::kContinue;
  });
  if (stats.termination != Termination::kConverged || !smooth_) return false;
  // The certificate of Prop. 2 at the converged V.
  Stopwatch cert_clock;
  const double f = stats.objective_history.back();
  const int nev = escalate_ ? std::max(1, options_.escalation_step) : 1;
  const FactorCertificate cert = ComputeCertificate(v_, f, reduced_, cols_, options_.loss, options_.c, nev);
  diag_.Record(cert, cert_clock.Seconds(), options_.certificate_tolerance);
  if (!escalate_ || diag_.certified) return false;
  const int added = r_ < r_max_ ? AppendDirections(cert, cols_, options_.c, r_max_ - r_, &v_) : 0;
  if (added == 0) {
    // No negative direction to follow: the bound is ⟨S, Z⟩ alone, i.e. the
    // sweeps stopped short of stationarity. Sweep on at a tenfold tighter
    // tolerance (a new stage at the same rank), at most kMaxTightenings times.
    return tightenings < kMaxTightenings && options_.tolerance > 0.0;
  }
  r_ += added;
  // Checkpoint at the stage boundary, so the certificate's Lanczos work is
  // not lost: the next stage starts with zero duals and recomputes Z.
  driver_.MaybeCheckpoint(iter_, [&] {
    return EncodeCheckpoint(fingerprint_, iter_, result_, /*stage_iter=*/0, v_,
                            Eigen::VectorXd::Zero(static_cast<Eigen::Index>(cols_.neighbor.size())),
                            Eigen::MatrixXd(), diag_);
  });
  return true;
}

StatusOr<NpklResult> BcdRun::Finish(int n, BcdNpklDiagnostics* diagnostics) {
  SolveReport& stats = result_.stats;
  diag_.final_rank = static_cast<int>(v_.rows());
  result_.stats.certificate = Certificate::FromGap(
      diag_.certificate_checks > 0 ? diag_.gap : std::numeric_limits<double>::quiet_NaN(),
      options_.certificate_tolerance);
  if (diagnostics != nullptr) *diagnostics = diag_;
  stats.final_objective = stats.objective_history.empty()
                              ? Objective(v_, reduced_.Quadratic(v_), cols_, options_.loss, options_.c)
                              : stats.objective_history.back();
  result_.dual_residual = options_.loss == NpklLoss::kHinge
                              ? std::numeric_limits<double>::quiet_NaN()
                              : StationarityResidual(v_, reduced_, cols_, options_.loss, options_.c);
  LearnedKernel::Embedding phi = Extend(reduced_, v_, n);
  stats.solve_seconds = solve_clock_.Seconds();
  KLS_ASSIGN_OR_RETURN(result_.kernel, LearnedKernel::FromEmbedding(std::move(phi)));
  return std::move(result_);
}

StatusOr<NpklResult> Solve(const NpklProblem& problem, const BcdNpklOptions& options, const SolveControl& control,
                           BcdNpklDiagnostics* diagnostics) {
  Stopwatch setup_clock;
  KLS_RETURN_IF_ERROR(problem.Validate());
  KLS_RETURN_IF_ERROR(options.Validate());
  KLS_RETURN_IF_ERROR(CheckSymmetric(problem.laplacian, "laplacian"));
  KLS_RETURN_IF_ERROR(CheckNoSelfPairs(problem.constraints));
  const int n = problem.num_points();
  const std::vector<int> local = BoundaryIndex(problem);
  KLS_ASSIGN_OR_RETURN(ReducedLaplacian reduced, ReducedLaplacian::Build(problem.laplacian, local));
  const ColumnConstraints cols = BuildColumns(problem.constraints, local, reduced.l());
  KLS_RETURN_IF_ERROR(ValidateInitialFactor(options.initial_factor, n));
  reduced.SetThreads(ResolveThreadCount(options.num_threads));
  BcdRun run(problem, options, reduced, cols, control, setup_clock);
  run.Start(problem);
  run.Iterate();
  return run.Finish(n, diagnostics);
}

}  // namespace

Status BcdNpklOptions::Validate(std::string_view path) const {
  if (loss != NpklLoss::kSquare && loss != NpklLoss::kSquareHinge && loss != NpklLoss::kHinge) {
    return InvalidArgumentError(std::string(std::string(path) + ".loss = ") + NpklLossName(loss) +
                                " is not supported by BCDNPKL (use hinge, square_hinge or square)");
  }
  if (!(c > 0.0) || !std::isfinite(c)) {
    return InvalidArgumentError(std::string(path) + ".c = " + FormatNumber(c) + " must be positive and finite");
  }
  if (rank < 0) {
    return InvalidArgumentError(std::string(path) + ".rank = " + std::to_string(rank) + " must be >= 1 (or 0 for automatic)");
  }
  if (max_iterations < 1) {
    return InvalidArgumentError(std::string(path) + ".max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError(std::string(path) + ".tolerance = " + FormatNumber(tolerance) + " must be non-negative and finite");
  }
  if (!(over_relaxation > 0.0 && over_relaxation < 2.0)) {
    return InvalidArgumentError(std::string(path) + ".over_relaxation = " + FormatNumber(over_relaxation) +
                                " must be in (0, 2) (block over-relaxation descends only there)");
  }
  KLS_RETURN_IF_ERROR(ValidateEscalationOptions(initial_rank, escalation_step, certificate_tolerance, path));
  return OkStatus();
}

StatusOr<NpklResult> SolveBcdNpkl(const NpklProblem& problem, const BcdNpklOptions& options,
                                  const SolveControl& control, BcdNpklDiagnostics* diagnostics) {
  return GuardExceptions("BCDNPKL", [&] { return Solve(problem, options, control, diagnostics); });
}

}  // namespace kls
