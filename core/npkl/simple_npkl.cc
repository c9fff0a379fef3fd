#include "core/npkl/simple_npkl.h"

#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/SparseCore>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <new>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>

#include "core/common/checkpoint_codec.h"
#include "core/common/iteration_driver.h"
#include "core/common/parallel.h"
#include "core/common/symmetry.h"
#include "core/npkl/block_spectrum.h"
#include "core/npkl/blocked_laplacian.h"
#include "core/npkl/positive_spectrum.h"

namespace kls {
namespace {

// The constraint terms the solver works on (all of them, or the active subset).
struct Terms {
  std::vector<int> row;
  std::vector<int> col;
  Eigen::VectorXd t;  // T_ij = ±1
  int size() const { return static_cast<int>(row.size()); }
};

Terms MakeTerms(const PairwiseConstraints& c, const std::vector<int>* subset) {
  Terms out;
  const int m = subset ? static_cast<int>(subset->size()) : c.size();
  out.row.resize(m);
  out.col.resize(m);
  out.t.resize(m);
  for (int k = 0; k < m; ++k) {
    const Pair& p = c.pairs[subset ? (*subset)[k] : k];
    out.row[k] = p.i;
    out.col[k] = p.j;
    out.t[k] = p.sign();
  }
  return out;
}

// Everything the algorithm needs at one dual point α.
struct Iterate {
  Eigen::VectorXd alpha;   // dual variables (for the linear loss: unused)
  Eigen::MatrixXd v;       // n × r embedding, K(α) = v vᵀ
  Eigen::VectorXd z;       // z_k = T_k K_{i_k j_k}
  Eigen::VectorXd grad;    // ∇J(α), (3.19)
  double g_eff = 0.0;      // G, or the equivalent G of the constraint form
  double dual = 0.0;       // J(α)
  double primal = 0.0;     // P(K(α))
  int rank = 0;            // number of positive eigenvalues of A
  bool from_block = false; // A₊ came from the warm-started block solver, not Lanczos
  bool Finite() const { return std::isfinite(dual) && std::isfinite(primal) && v.allFinite(); }
};

class Evaluator {
 public:
  Evaluator(const NpklProblem& problem, const SimpleNpklOptions& options, Terms terms,
            Eigen::MatrixXd basis)
      : problem_(problem),
        options_(options),
        terms_(std::move(terms)),
        a_(problem.laplacian, terms_.row, terms_.col),
        basis_(std::move(basis)) {
    spectrum_.dense_threshold = options.dense_threshold;
    spectrum_.lanczos_tolerance = options.lanczos_tolerance;
    rank_bound_ = RankBound(terms_.size());
    rank_hint_ = rank_bound_;
    if (basis_.size() > 0) {
      // Vᵀ L V is fixed in the low-rank mode (§3.3.4): precompute it once.
      Eigen::MatrixXd lv = problem.laplacian * basis_;
      basis_l_ = basis_.transpose() * lv;
      basis_l_ = 0.5 * (basis_l_ + basis_l_.transpose());
    }
  }

  const Terms& terms() const { return terms_; }

  /// What the evaluator carries from one evaluation to the next (Lanczos
  /// start and rank hint, the block solver's Ritz block and its seed count,
  /// and the column count the cache-blocked L was built for, −1 = not yet):
  /// a checkpoint saves it so that a resumed run repeats the same arithmetic.
  struct WarmState {
    int rank_hint = 1;
    Eigen::VectorXd warm;
    Eigen::MatrixXd block;
    int last_rank = 0;
    uint64_t block_calls = 0;
    int blocked_columns = -1;
  };
  WarmState SaveWarmState() const {
    return {rank_hint_, warm_, block_, last_rank_, block_calls_, blocked_columns_};
  }
  void RestoreWarmState(WarmState s) {
    rank_hint_ = s.rank_hint;
    warm_ = std::move(s.warm);
    block_ = std::move(s.block);
    last_rank_ = s.last_rank;
    block_calls_ = s.block_calls;
    blocked_columns_ = s.blocked_columns;
    blocked_.reset();
    if (blocked_columns_ >= 0) MakeBlocked();
  }

  /// Number of Lanczos eigenpairs the next Lanczos evaluation asks for first.
  void set_rank_hint(int r) { rank_hint_ = std::max(1, r); }

  /// Lanczos relative tolerance of the following evaluations.
  void set_lanczos_tolerance(double tol) { spectrum_.lanczos_tolerance = tol; }
  double lanczos_tolerance() const { return spectrum_.lanczos_tolerance; }

  /// Weights w_k of A = Σ w_k S_k − L at α: w = α ∘ T (linear loss: C T).
  Eigen::VectorXd Weights(const Eigen::VectorXd& alpha) const {
    if (options_.loss == NpklLoss::kLinear) return options_.c * terms_.t;
    return alpha.cwiseProduct(terms_.t);
  }

  /// `exact`: use Spectra's Lanczos (or the dense solver), never the block
  /// solver — the evaluations convergence is claimed from.
  Status Evaluate(const Eigen::VectorXd& alpha, Iterate* out, bool exact = false) {
    const Eigen::VectorXd w = Weights(alpha);
    out->from_block = false;
    Eigen::MatrixXd u;
    Eigen::VectorXd sigma;
    if (basis_.size() > 0) {
      // Low-rank mode: positive part of Vᵀ A V (r × r).
      Eigen::MatrixXd proj = -basis_l_;
      for (int k = 0; k < terms_.size(); ++k) {
        const auto bi = basis_.row(terms_.row[k]);
        const auto bj = basis_.row(terms_.col[k]);
        const Eigen::MatrixXd outer = bi.transpose() * bj;
        proj.noalias() += 0.5 * w[k] * (outer + outer.transpose());
      }
      KLS_ASSIGN_OR_RETURN(PositiveSpectrum s, DensePositiveSpectrum(proj));
      u = basis_ * s.eigenvectors;
      sigma = std::move(s.eigenvalues);
    } else if (!exact && block_.size() > 0 &&
               static_cast<double>(options_.block_points_per_column) * (last_rank_ + std::max(4, last_rank_ / 8)) <=
                   static_cast<double>(problem_.laplacian.rows())) {
      // Every evaluation that claims nothing (issue 3): A₊ by the block solver,
      // warm-started from the previous positive Ritz vectors plus a few
      // guards from just below 0, to options.block_tolerance. The iterate
      // only steers the next projected-gradient step (3.19)–(3.21); every
      // certified gap is recomputed by Lanczos (Evaluate(…, exact = true)).
      a_.set_weights(w);
      if (!blocked_) {
        blocked_columns_ = static_cast<int>(block_.cols()) + 8;
        MakeBlocked();
      }
      BlockSpectrumOptions bo;
      bo.tolerance = options_.block_tolerance;
      bo.num_threads = ResolveThreadCount(options_.num_threads);
      bo.seed = ++block_calls_;
      const int r_prev = last_rank_;
      bo.guard = std::max(4, r_prev / 8);
      const int keep = std::min(static_cast<int>(block_.cols()), r_prev + bo.guard);
      StatusOr<BlockSpectrumResult> b = BlockPositiveSpectrum(a_, *blocked_, block_.leftCols(keep), bo);
      if (b.ok() && b->converged) {
        block_ = std::move(b->block);
        last_rank_ = b->spectrum.rank();
        out->from_block = true;
        FillFromSpectrum(alpha, b->spectrum.eigenvectors, b->spectrum.eigenvalues, out);
        return OkStatus();
      }
      return Evaluate(alpha, out, /*exact=*/true);
    } else {
      a_.set_weights(w);
      spectrum_.initial_rank = rank_hint_;
      const Eigen::VectorXd* warm = warm_.size() > 0 ? &warm_ : nullptr;
      KLS_ASSIGN_OR_RETURN(PositiveSpectrum s, ComputePositiveSpectrum(a_, spectrum_, warm));
      u = std::move(s.eigenvectors);
      sigma = std::move(s.eigenvalues);
      // Next Lanczos run (issue 3): the first run starts at the rank bound of
      // Prop. 3.27; later runs start from the current positive rank plus a
      // small margin instead, because A changes little between iterations and
      // every extra wanted pair beyond the positive ones lies in the dense
      // cluster of −L's eigenvalues just below 0, which Spectra must converge
      // to its (relative, floored at eps^{2/3}) tolerance — the dominant cost.
      // ComputePositiveSpectrum still grows r until the smallest computed
      // eigenvalue is <= 0, so A₊ stays exact at every iterate.
      const int r_now = static_cast<int>(sigma.size());
      rank_hint_ = r_now + std::max(4, r_now / 8);
      if (sigma.size() > 0) {
        warm_ = u.rowwise().sum();
      } else {
        warm_.resize(0);
      }
      last_rank_ = r_now;
      if (options_.block_warm_start && !s.used_dense && r_now > 0) block_ = u;
    }
    FillFromSpectrum(alpha, u, sigma, out);
    return OkStatus();
  }

 private:
  void MakeBlocked() {
    const int n = static_cast<int>(problem_.laplacian.rows());
    blocked_ = std::make_unique<BlockedLaplacian>(problem_.laplacian,
                                                  BlockedLaplacian::CacheBlockColumns(blocked_columns_, n));
  }

  // Closed form (3.8) / (3.14) for K from A₊, then J, P and ∇J.
  void FillFromSpectrum(const Eigen::VectorXd& alpha, const Eigen::MatrixXd& u, const Eigen::VectorXd& sigma,
                        Iterate* out) const {
    const double p = options_.p;
    const double q = p / (p - 1.0);
    const double c = options_.c;
    const int r = static_cast<int>(sigma.size());
    const double s = sigma.array().pow(q).sum();  // tr A₊^q
    Eigen::VectorXd lambda = Eigen::VectorXd::Zero(r);
    double capacity_value = 0.0;  // max_K tr(A K) − [(G/p) tr K^p]
    double penalty = 0.0;         // (G/p) tr K^p at K(α), penalty form only
    if (options_.capacity == SimpleNpklOptions::Capacity::kConstraint) {
      if (s > 0.0) {
        // (3.8): K = (B / tr A₊^q)^{1/p} A₊^{1/(p−1)}; optimum B^{1/p} (tr A₊^q)^{1/q} (Hölder).
        lambda = std::pow(options_.b / s, 1.0 / p) * sigma.array().pow(1.0 / (p - 1.0)).matrix();
        capacity_value = std::pow(options_.b, 1.0 / p) * std::pow(s, 1.0 / q);
        out->g_eff = std::pow(s / options_.b, 1.0 / q);  // G = (tr A₊^q / B)^{(p−1)/p}, below (3.14)
      } else {
        out->g_eff = 0.0;
      }
    } else {
      const double g = options_.g;
      // (3.14): K = (A₊ / G)^{1/(p−1)}; optimum (1/q) G^{1−q} tr A₊^q.
      lambda = (sigma / g).array().pow(1.0 / (p - 1.0)).matrix();
      capacity_value = std::pow(g, 1.0 - q) * s / q;
      penalty = g / p * lambda.array().pow(p).sum();
      out->g_eff = g;
    }
    out->rank = r;
    out->alpha = alpha;
    out->v = u * lambda.cwiseSqrt().asDiagonal();
    const int m = terms_.size();
    out->z.resize(m);
    for (int k = 0; k < m; ++k) {
      out->z[k] = terms_.t[k] * out->v.row(terms_.row[k]).dot(out->v.row(terms_.col[k]));
    }
    const double tr_lk =
        r > 0 ? out->v.cwiseProduct(problem_.laplacian * out->v).sum() : 0.0;  // tr(L K) = tr(vᵀ L v)
    const Eigen::ArrayXd slack = 1.0 - out->z.array();                       // 1 − T_ij K_ij
    double loss = 0.0;
    switch (options_.loss) {
      case NpklLoss::kLinear:
        loss = -c * out->z.sum();
        out->dual = -capacity_value;
        out->grad = Eigen::VectorXd::Zero(m);
        break;
      case NpklLoss::kSquareHinge:
        loss = 0.5 * c * slack.max(0.0).square().sum();
        out->dual = -capacity_value + alpha.sum() - alpha.squaredNorm() / (2.0 * c);  // (3.18)
        out->grad = (slack - alpha.array() / c).matrix();                          // (3.19)
        break;
      case NpklLoss::kSquare:
        loss = 0.5 * c * slack.square().sum();
        out->dual = -capacity_value + alpha.sum() - alpha.squaredNorm() / (2.0 * c);  // §3.2.4
        out->grad = (slack - alpha.array() / c).matrix();
        break;
      case NpklLoss::kHinge:
        loss = c * slack.max(0.0).sum();
        out->dual = -capacity_value + alpha.sum();  // §3.2.5
        out->grad = slack.matrix();
        break;
    }
    out->primal = tr_lk + penalty + loss;
  }

  const NpklProblem& problem_;
  const SimpleNpklOptions& options_;
  Terms terms_;
  DualMatrix a_;
  Eigen::MatrixXd basis_;    // n × r fixed basis (low-rank mode), else empty
  Eigen::MatrixXd basis_l_;  // Vᵀ L V
  SpectrumOptions spectrum_;
  int rank_bound_ = 1;
  int rank_hint_ = 1;
  Eigen::VectorXd warm_;
  // Block warm start (options.block_warm_start): the last Ritz block (n × p),
  // its positive rank, and the cache-blocked L it multiplies by.
  Eigen::MatrixXd block_;
  int last_rank_ = 0;
  std::unique_ptr<BlockedLaplacian> blocked_;
  int blocked_columns_ = -1;  // the column count blocked_ was built for
  uint64_t block_calls_ = 0;

 public:
};

// Π: the feasible set of α for each loss.
Eigen::VectorXd ProjectDual(const Eigen::VectorXd& a, const SimpleNpklOptions& o) {
  switch (o.loss) {
    case NpklLoss::kSquareHinge: return a.cwiseMax(0.0);
    case NpklLoss::kHinge: return a.cwiseMax(0.0).cwiseMin(o.c);
    case NpklLoss::kSquare:
    case NpklLoss::kLinear: return a;
  }
  return a;
}

// P(0): the objective at K = 0, i.e. the loss of z = 0 on every constraint
// (linear 0, quadratic losses C/2 each, hinge C each). It does not depend on
// K, so it is left out of the scale of the relative gap (see the header).
double ObjectiveAtZero(const SimpleNpklOptions& o, int m) {
  switch (o.loss) {
    case NpklLoss::kLinear: return 0.0;
    case NpklLoss::kSquareHinge:
    case NpklLoss::kSquare: return 0.5 * o.c * m;
    case NpklLoss::kHinge: return o.c * m;
  }
  return 0.0;
}

// FISTA's t_{k+1} = (1 + √(1 + 4 t_k²)) / 2 (the accelerated method; see the header).
double NextMomentum(double t) { return 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t)); }

// (P − J) / max(1, |P − P(0)|): the gap against the part of the objective that
// K moves, not against the constant P(0) (issue 23).
double RelativeGapFrom(const Iterate& x, double p0) {
  return (x.primal - x.dual) / std::max(1.0, std::abs(x.primal - p0));
}

// The low-rank start (options.start_rank): the largest s in (0, 1], found by
// bisection to 2^-kStartBisections, such that A(s·C·1) = s·C Σ T_k S_k − L has at
// most start_rank positive eigenvalues; 1 when A(C·1) already has. Each probe
// is one Lanczos run for the top start_rank + 1 eigenpairs. If even the
// smallest probed s has more, that s.
constexpr int kStartBisections = 6;
StatusOr<double> LowRankStartScale(const Eigen::SparseMatrix<double>& laplacian, const Terms& terms,
                                   const SimpleNpklOptions& o) {
  const int n = static_cast<int>(laplacian.rows());
  const int k = o.start_rank + 1;
  if (2 * k >= n) return 1.0;
  DualMatrix a(laplacian, terms.row, terms.col);
  SpectrumOptions so;
  so.dense_threshold = o.dense_threshold;
  so.lanczos_tolerance = std::max(o.lanczos_tolerance, o.early_lanczos_tolerance);
  auto exceeds = [&](double s) -> StatusOr<bool> {
    a.set_weights(s * o.c * terms.t);
    KLS_ASSIGN_OR_RETURN(const Eigen::MatrixXd u, TopEigenvectors(a, k, so));
    const Eigen::VectorXd last = u.col(k - 1);
    return last.dot(a.Multiply(last).col(0)) > 0.0;  // λ_{start_rank + 1} > 0
  };
  KLS_ASSIGN_OR_RETURN(const bool full_exceeds, exceeds(1.0));
  if (!full_exceeds) return 1.0;
  double lo = 0.0, hi = 1.0;
  for (int b = 0; b < kStartBisections; ++b) {
    const double mid = 0.5 * (lo + hi);
    KLS_ASSIGN_OR_RETURN(const bool over, exceeds(mid));
    (over ? hi : lo) = mid;
  }
  return lo > 0.0 ? lo : hi;
}


// ---- Newton steps (options.newton; dense path, p = 2, square / square hinge) --
//
// −J is strongly convex: −J(α) = capacity(M(α)) − Σ α + ‖α‖²/(2C) with
// M(α) = Σ_k α_k T_k S_k − L and capacity(M) = √B‖M₊‖_F (constraint form) or
// ‖M₊‖²_F/(2G) (penalty form), both convex in M. Its generalized Hessian
// (Clarke; the positive-part map is strongly semismooth) at α applied to v is
//     H v = v/C + T ∘ dK[E(v)],   E(v) = Σ_k v_k T_k S_k,
// with dK the derivative of K(α) along E: for M = U Λ Uᵀ (all eigenpairs),
//     dM₊[E] = U (Ω ∘ Uᵀ E U) Uᵀ,  Ω_kl = (λ_k⁺ − λ_l⁺)/(λ_k − λ_l)
// (1 when both are positive, 0 when neither is; Daleckii–Krein), and
//     constraint form  dK = (√B/N) (dM₊ − M₊ ⟨M₊, dM₊⟩/N²),  N = ‖M₊‖_F,
//     penalty form     dK = dM₊ / G.
// Only the rows of Ω with λ_k > 0 are non-zero, so a product costs
// O(m n + r n²) for r positive eigenvalues, against O(n³) for the
// eigendecomposition. The step is Bertsekas's projected Newton method
// ("Projected Newton methods for optimization problems with simple
// constraints", 1982): on the free set F (α_k above ε or ∇J_k > 0; every pair
// for the square loss) H_FF d_F = ∇J_F is solved by conjugate gradients
// (H ⪰ I/C, so CG converges), d = C ∇J elsewhere, and α⁺ = Π(α + s d) with s
// halved from 1 until the Armijo test J(α⁺) ≥ J(α) + 10⁻⁴ ∇J·(α⁺ − α) holds.
// Near the optimum the free set and the rank of M₊ settle and the steps
// converge superlinearly (Qi & Sun, "A quadratically convergent Newton method
// for computing the nearest correlation matrix", 2006, for the same
// positive-part structure), which is what lets a warm start that begins close
// finish in a few iterations.
class NewtonOperator {
 public:
  // `a` = M(α) dense (n × n, symmetric); `terms` the pairs; `b`, `g` the capacity.
  NewtonOperator(const Eigen::MatrixXd& a, const Terms& terms, const SimpleNpklOptions& o) : terms_(terms), o_(o) {
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(a);
    ok_ = eig.info() == Eigen::Success && eig.eigenvalues().allFinite();
    if (!ok_) return;
    const Eigen::VectorXd& lam = eig.eigenvalues();  // ascending
    const int n = static_cast<int>(lam.size());
    int first_pos = n;
    while (first_pos > 0 && lam[first_pos - 1] > 0.0) --first_pos;
    r_ = n - first_pos;
    u_ = eig.eigenvectors();
    up_ = u_.rightCols(r_);
    lp_ = lam.tail(r_);
    // Ω rows of the positive eigenvalues: Ω_kl for k positive, l any.
    omega_.resize(r_, n);
    for (int k = 0; k < r_; ++k) {
      for (int l = 0; l < n; ++l) {
        const double lk = lp_[k], ll = lam[l];
        omega_(k, l) = ll > 0.0 ? 1.0 : (lk - ll > 0.0 ? lk / (lk - ll) : 1.0);
      }
    }
    norm_ = lp_.norm();
    const int m = terms_.size();
    mplus_.resize(m);
    for (int k = 0; k < m; ++k) {
      mplus_[k] = (up_.row(terms_.row[k]).array() * lp_.transpose().array() * up_.row(terms_.col[k]).array()).sum();
    }
  }
  bool ok() const { return ok_ && r_ > 0; }

  // H v restricted to the pairs with free[k] (others: v_k = 0 in, 0 out).
  Eigen::VectorXd Apply(const Eigen::VectorXd& v, const std::vector<char>& free) const {
    const int n = static_cast<int>(u_.rows());
    const int m = terms_.size();
    // E U (n × n): E = Σ v_k T_k S_k.
    Eigen::MatrixXd eu = Eigen::MatrixXd::Zero(n, n);
    for (int k = 0; k < m; ++k) {
      if (!free[k] || v[k] == 0.0) continue;
      const int i = terms_.row[k], j = terms_.col[k];
      const double w = v[k] * terms_.t[k];
      if (i == j) {
        eu.row(i) += w * u_.row(i);
      } else {
        eu.row(i) += 0.5 * w * u_.row(j);
        eu.row(j) += 0.5 * w * u_.row(i);
      }
    }
    // Z = Ω₊ ∘ (U₊ᵀ E U) (r × n); dM₊ = Y + Yᵀ with Y = U₊ Z' Uᵀ, Z' = Z with
    // its positive block halved (it appears in both Y and Yᵀ).
    Eigen::MatrixXd z = omega_.cwiseProduct(up_.transpose() * eu);
    const int n_nonpos = n - r_;
    double inner = 0.0;  // ⟨M₊, dM₊⟩ = Σ_k λ_k Z_kk
    for (int k = 0; k < r_; ++k) inner += lp_[k] * z(k, n_nonpos + k);
    z.rightCols(r_) *= 0.5;
    const Eigen::MatrixXd g = z * u_.transpose();  // r × n
    Eigen::VectorXd out(m);
    double scale = 0.0, proj = 0.0;
    if (o_.capacity == SimpleNpklOptions::Capacity::kConstraint) {
      scale = std::sqrt(o_.b) / norm_;
      proj = inner / (norm_ * norm_);
    } else {
      scale = 1.0 / o_.g;
    }
    for (int k = 0; k < m; ++k) {
      if (!free[k]) {
        out[k] = 0.0;
        continue;
      }
      const int i = terms_.row[k], j = terms_.col[k];
      const double dm = up_.row(i).dot(g.col(j)) + up_.row(j).dot(g.col(i));
      out[k] = terms_.t[k] * scale * (dm - proj * mplus_[k]) + v[k] / o_.c;
    }
    return out;
  }

 private:
  const Terms& terms_;
  const SimpleNpklOptions& o_;
  bool ok_ = false;
  int r_ = 0;
  Eigen::MatrixXd u_, up_, omega_;
  Eigen::VectorXd lp_, mplus_;
  double norm_ = 0.0;
};

// The Newton direction d at `cur` (see above): CG on the free set to a
// relative residual of min(0.1, √tolerance, √‖∇J_F‖), at most
// kNewtonCgIterations steps.
constexpr int kNewtonCgIterations = 100;
// Step lengths 1, 1/2, … tried before a Newton step gives way to the gradient step.
constexpr int kNewtonLineSearches = 10;
bool NewtonDirection(const NewtonOperator& h, const Iterate& cur, const SimpleNpklOptions& o, Eigen::VectorXd* d) {
  const int m = static_cast<int>(cur.alpha.size());
  const Eigen::VectorXd& g = cur.grad;
  std::vector<char> free(m, 1);
  if (o.loss == NpklLoss::kSquareHinge) {
    // ε-active set (Bertsekas): at the bound, or within ε of it, with ∇J pointing out.
    const double eps = std::min(1e-3 * o.c, (cur.alpha - ProjectDual(cur.alpha + g, o)).norm());
    for (int k = 0; k < m; ++k) free[k] = (cur.alpha[k] > eps || g[k] > 0.0) ? 1 : 0;
  }
  Eigen::VectorXd b = Eigen::VectorXd::Zero(m);
  for (int k = 0; k < m; ++k)
    if (free[k]) b[k] = g[k];
  const double bnorm = b.norm();
  *d = o.c * g;  // the bound pairs: a scaled gradient step (H ⪰ I/C), clamped by Π
  if (bnorm == 0.0) return true;
  // Forcing term η: √‖g‖ (superlinear; Eisenstat & Walker), capped at 0.1
  // and at √tolerance, so that one step from a start within ~√tolerance (a
  // warm start) lands within tolerance instead of stopping at 0.1·‖g‖.
  const double forcing = std::min({0.1, std::sqrt(std::max(o.tolerance, 1e-16)), std::sqrt(bnorm)});
  const double tol = forcing * bnorm;
  Eigen::VectorXd x = Eigen::VectorXd::Zero(m), r = b, p = b;
  double rr = r.squaredNorm();
  for (int it = 0; it < kNewtonCgIterations && std::sqrt(rr) > tol; ++it) {
    const Eigen::VectorXd hp = h.Apply(p, free);
    const double php = p.dot(hp);
    if (!(php > 0.0) || !std::isfinite(php)) break;
    const double step = rr / php;
    x += step * p;
    r -= step * hp;
    const double rr_new = r.squaredNorm();
    p = r + (rr_new / rr) * p;
    rr = rr_new;
  }
  if (!x.allFinite()) return false;
  for (int k = 0; k < m; ++k)
    if (free[k]) (*d)[k] = x[k];
  return true;
}

// The primal at a dual point where A(α)₊ = 0 (constraint form, square /
// square-hinge loss). There the closed form (3.8) gives K(α) = 0, whose
// objective P(0) can stay far above J(α) even when α is optimal: that
// happens when the capacity tr K^p <= B is not active at the optimum (large
// B), whose K* then lies in the null space of A(α*), where the closed form
// cannot reach it (measured: chessboard, C = 0.1, B = 100 stalled at a gap of
// 1.3e-2 for 1,000 iterations). This tries the rank-one face of that null
// space: K = s v vᵀ with v the top eigenvector of A(α), s ∈ [0, B^{1/p}]
// minimizing the convex P(s) = s vᵀLv + Loss(s T_ij v_i v_j) (bisection on
// P'). It is feasible, so P(K) still bounds the gap from above; it replaces
// the iterate's primal value and kernel when lower (its α, z, ∇J and J stay
// those of α). Returns whether it did.
StatusOr<bool> RankZeroFacePrimal(const NpklProblem& problem, const Terms& terms, const SimpleNpklOptions& o,
                                  Iterate* x) {
  if (x->rank != 0 || o.capacity != SimpleNpklOptions::Capacity::kConstraint ||
      (o.loss != NpklLoss::kSquareHinge && o.loss != NpklLoss::kSquare) || terms.size() == 0) {
    return false;
  }
  DualMatrix a(problem.laplacian, terms.row, terms.col);
  a.set_weights(x->alpha.cwiseProduct(terms.t));
  SpectrumOptions so;
  so.dense_threshold = o.dense_threshold;
  so.lanczos_tolerance = o.lanczos_tolerance;
  KLS_ASSIGN_OR_RETURN(const Eigen::MatrixXd top, TopEigenvectors(a, 1, so));
  const Eigen::VectorXd v = top.col(0).normalized();
  const double q = v.dot(problem.laplacian * v);  // vᵀ L v
  const int m = terms.size();
  Eigen::VectorXd c(m);
  for (int k = 0; k < m; ++k) c[k] = terms.t[k] * v[terms.row[k]] * v[terms.col[k]];
  const bool hinge = o.loss == NpklLoss::kSquareHinge;
  auto slope = [&](double s) {  // P'(s)
    double d = q;
    for (int k = 0; k < m; ++k) {
      const double u = 1.0 - s * c[k];
      if (!hinge || u > 0.0) d -= o.c * c[k] * u;
    }
    return d;
  };
  auto value = [&](double s) {
    double loss = 0.0;
    for (int k = 0; k < m; ++k) {
      const double u = 1.0 - s * c[k];
      if (!hinge || u > 0.0) loss += u * u;
    }
    return s * q + 0.5 * o.c * loss;
  };
  const double s_max = std::pow(o.b, 1.0 / o.p);
  double s = 0.0;
  if (slope(0.0) < 0.0) {
    if (slope(s_max) <= 0.0) {
      s = s_max;
    } else {
      double lo = 0.0, hi = s_max;
      for (int it = 0; it < 100; ++it) {
        const double mid = 0.5 * (lo + hi);
        (slope(mid) < 0.0 ? lo : hi) = mid;
      }
      s = 0.5 * (lo + hi);
    }
  }
  const double p_face = value(s);
  if (!(s > 0.0) || !std::isfinite(p_face) || !(p_face < x->primal)) return false;
  x->primal = p_face;
  x->v = std::sqrt(s) * v;
  x->rank = 1;
  return true;
}

// ---- Checkpoints (SolveControl::checkpoint / resume_from) -------------------
//
// Taken after an iteration that did not end the run. After the common prefix
// (core/common/checkpoint_codec.h; the history has iteration + 1 entries, the
// first for α_0): the step state (η, whether the last step backtracked,
// whether the Lanczos tolerance is tight), the current iterate in full (α,
// the n × r factor of K(α), z, ∇J, G, J, P, rank, from_block) and the
// evaluator's warm state, so that nothing is recomputed on resume.
constexpr char kCheckpointTag[] = "simple_npkl/1";
constexpr uint32_t kCheckpointMagic = 0x534e504b;  // "SNPK"
constexpr uint32_t kCheckpointVersion = 2;  // 2: the accelerated method's x_prev and t

struct ResumeState {
  std::vector<double> objective_history;
  double eta = 0.0;
  bool backtracked = true;
  bool tight = true;
  Eigen::VectorXd x_prev;  // accelerated: the previous gradient point (empty before the first step)
  double momentum = 1.0;   // accelerated: FISTA's t_k
  Iterate cur;
  Evaluator::WarmState warm;
};

// The problem and every option that shapes the iterates; not tolerance,
// max_iterations or num_threads.
uint64_t CheckpointFingerprint(const NpklProblem& problem, const SimpleNpklOptions& o) {
  Fingerprint fp;
  fp.AddString(kCheckpointTag).AddSparse(problem.laplacian).AddInt(problem.constraints.size());
  for (const Pair& p : problem.constraints.pairs) fp.AddInt(p.i).AddInt(p.j).AddInt(static_cast<int>(p.kind));
  fp.AddInt(static_cast<int>(o.loss)).AddDouble(o.c).AddDouble(o.b).AddDouble(o.g).AddDouble(o.p);
  fp.AddInt(static_cast<int>(o.capacity)).AddDouble(o.step).AddInt(static_cast<int>(o.lipschitz_bound));
  fp.AddInt(o.adaptive_step).AddInt(o.active_set).AddDouble(o.active_point_fraction).AddInt(o.low_rank);
  fp.AddInt(o.dense_threshold).AddDouble(o.lanczos_tolerance).AddDouble(o.early_lanczos_tolerance);
  fp.AddDouble(o.tighten_factor).AddInt(o.block_warm_start).AddDouble(o.block_tolerance);
  fp.AddInt(o.block_points_per_column).AddInt(o.max_backtracks).AddInt(o.accelerated).AddInt(o.start_rank);
  fp.AddInt(o.newton);
  if (o.initial_factor) fp.AddDense(*o.initial_factor);  // cold fingerprints unchanged
  return fp.value();
}

std::string EncodeCheckpoint(uint64_t fingerprint, int iteration, const SolveReport& stats, double eta,
                             bool backtracked, bool tight, const Eigen::VectorXd& x_prev, double momentum,
                             const Iterate& cur, const Evaluator::WarmState& warm) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kCheckpointMagic, kCheckpointVersion, fingerprint, iteration, stats.objective_history);
  w.Put<double>(eta);
  w.Put<uint8_t>(backtracked ? 1 : 0);
  w.Put<uint8_t>(tight ? 1 : 0);
  w.PutVector(x_prev);
  w.Put<double>(momentum);
  w.PutVector(cur.alpha);
  w.PutMatrix(cur.v);
  w.PutVector(cur.z);
  w.PutVector(cur.grad);
  w.Put<double>(cur.g_eff);
  w.Put<double>(cur.dual);
  w.Put<double>(cur.primal);
  w.Put<int32_t>(cur.rank);
  w.Put<uint8_t>(cur.from_block ? 1 : 0);
  w.Put<int32_t>(warm.rank_hint);
  w.PutVector(warm.warm);
  w.PutMatrix(warm.block);
  w.Put<int32_t>(warm.last_rank);
  w.Put<uint64_t>(warm.block_calls);
  w.Put<int32_t>(warm.blocked_columns);
  return w.Take();
}

// Any error means "not this run's checkpoint": the caller starts afresh.
Status DecodeCheckpoint(const Checkpoint& c, uint64_t fingerprint, int n, int m, ResumeState* s) {
  ByteReader in(c.bytes, "simple_npkl checkpoint");
  KLS_RETURN_IF_ERROR(GetCheckpointPrefix(&in, c, kCheckpointMagic, kCheckpointVersion, fingerprint,
                                          &s->objective_history, /*extra_history_entries=*/1));
  uint8_t backtracked = 0, tight = 0, from_block = 0;
  KLS_RETURN_IF_ERROR(in.Get(&s->eta));
  KLS_RETURN_IF_ERROR(in.Get(&backtracked));
  KLS_RETURN_IF_ERROR(in.Get(&tight));
  s->backtracked = backtracked != 0;
  s->tight = tight != 0;
  KLS_RETURN_IF_ERROR(in.GetVector(&s->x_prev));
  KLS_RETURN_IF_ERROR(in.Get(&s->momentum));
  Iterate& x = s->cur;
  KLS_RETURN_IF_ERROR(in.GetVector(&x.alpha));
  KLS_RETURN_IF_ERROR(in.GetMatrix(&x.v));
  KLS_RETURN_IF_ERROR(in.GetVector(&x.z));
  KLS_RETURN_IF_ERROR(in.GetVector(&x.grad));
  KLS_RETURN_IF_ERROR(in.Get(&x.g_eff));
  KLS_RETURN_IF_ERROR(in.Get(&x.dual));
  KLS_RETURN_IF_ERROR(in.Get(&x.primal));
  int32_t rank = 0;
  KLS_RETURN_IF_ERROR(in.Get(&rank));
  x.rank = rank;
  KLS_RETURN_IF_ERROR(in.Get(&from_block));
  x.from_block = from_block != 0;
  Evaluator::WarmState& w = s->warm;
  int32_t rank_hint = 0, last_rank = 0, blocked_columns = 0;
  KLS_RETURN_IF_ERROR(in.Get(&rank_hint));
  KLS_RETURN_IF_ERROR(in.GetVector(&w.warm));
  KLS_RETURN_IF_ERROR(in.GetMatrix(&w.block));
  KLS_RETURN_IF_ERROR(in.Get(&last_rank));
  KLS_RETURN_IF_ERROR(in.Get(&w.block_calls));
  KLS_RETURN_IF_ERROR(in.Get(&blocked_columns));
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  w.rank_hint = rank_hint;
  w.last_rank = last_rank;
  w.blocked_columns = blocked_columns;
  if ((s->x_prev.size() != 0 && s->x_prev.size() != m) || !(s->momentum >= 1.0) || !std::isfinite(s->momentum) ||
      x.alpha.size() != m || x.z.size() != m || x.grad.size() != m || x.v.rows() != n || x.v.cols() != x.rank ||
      x.rank < 0 || !x.Finite() || !(s->eta >= 0.0) || !std::isfinite(s->eta) ||
      (w.warm.size() != 0 && w.warm.size() != n) || (w.block.size() != 0 && w.block.rows() != n) ||
      rank_hint < 1 || last_rank < 0 || blocked_columns < -1 || blocked_columns > n + 8) {
    return FailedPreconditionError(in.what() + ": does not fit this problem");
  }
  return OkStatus();
}

// The constraint terms the solver works on: all pairs, or (options.active_set,
// §3.3.3) those with the smallest margins under K(α_0), the linear-loss kernel.
// α_0 = C·1: see the header (A(α_0) is the linear-loss matrix C Σ T_ij S_ij − L).
StatusOr<Terms> SolverTerms(const NpklProblem& problem, const SimpleNpklOptions& options) {
  Terms terms = MakeTerms(problem.constraints, nullptr);
  if (!options.active_set) return terms;
  const int n = problem.num_points();
  Evaluator full(problem, options, terms, Eigen::MatrixXd());
  Iterate x0;
  KLS_RETURN_IF_ERROR(full.Evaluate(Eigen::VectorXd::Constant(terms.size(), options.c), &x0));
  Eigen::MatrixXd v0 = x0.rank > 0 ? x0.v : Eigen::MatrixXd::Zero(n, 1);
  KLS_ASSIGN_OR_RETURN(LearnedKernel k0, LearnedKernel::FromEmbedding(LearnedKernel::Embedding(v0)));
  std::vector<char> constrained(n, 0);
  for (const Pair& p : problem.constraints.pairs) constrained[p.i] = constrained[p.j] = 1;
  const int num_constrained = static_cast<int>(std::count(constrained.begin(), constrained.end(), 1));
  const int keep = std::max(1, static_cast<int>(std::ceil(options.active_point_fraction * num_constrained)));
  KLS_ASSIGN_OR_RETURN(std::vector<int> active, SelectActiveConstraints(problem.constraints, k0, keep));
  return MakeTerms(problem.constraints, &active);
}

// §3.3.4 (options.low_rank > 0): V = leading eigenvectors of A(α_0); empty otherwise.
StatusOr<Eigen::MatrixXd> LowRankBasis(const NpklProblem& problem, const Terms& terms,
                                       const SimpleNpklOptions& options) {
  if (options.low_rank == 0) return Eigen::MatrixXd();
  DualMatrix a0(problem.laplacian, terms.row, terms.col);
  a0.set_weights(options.c * terms.t);
  SpectrumOptions so;
  so.dense_threshold = options.dense_threshold;
  so.lanczos_tolerance = options.lanczos_tolerance;
  return TopEigenvectors(a0, options.low_rank, so);
}

// α⁰ = C·1, or for a warm start Π(C (1 − T_ij K_ij)).
Eigen::VectorXd StartingDual(const Terms& terms, const SimpleNpklOptions& options) {
  const int m = terms.size();
  Eigen::VectorXd alpha0 = Eigen::VectorXd::Constant(m, options.c);
  if (options.initial_factor && options.loss != NpklLoss::kLinear) {
    const Eigen::MatrixXd& f = *options.initial_factor;
    for (int k = 0; k < m; ++k) {
      const double z = terms.t[k] * f.row(terms.row[k]).dot(f.row(terms.col[k]));
      alpha0[k] = options.loss == NpklLoss::kHinge ? (z < 1.0 ? options.c : 0.0) : options.c * (1.0 - z);
    }
    alpha0 = ProjectDual(alpha0, options);
  }
  return alpha0;
}

// One SimpleNPKL solve on the iteration driver (core/common/iteration_driver.h):
// the start (α⁰, or a checkpoint's state), projected gradient (or Newton)
// ascent steps on J(α), and the certified gap at the end.
class SimpleRun {
 public:
  SimpleRun(const NpklProblem& problem, const SimpleNpklOptions& options, const SolveControl& control,
            const Stopwatch& setup_watch, Terms terms, Eigen::MatrixXd basis);
  Status Start(Eigen::VectorXd alpha0);
  Status Ascend();
  StatusOr<NpklResult> Finish();

 private:
  double RelativeGap(const Iterate& x) const { return RelativeGapFrom(x, p0_); }
  Status Tighten();
  double GuaranteedEta(const Iterate& x, double fallback) const;
  Status Step(int it, StepOutcome* outcome);
  Status NewtonStep(Iterate* next, Eigen::VectorXd* delta, bool* taken);
  Status GradientStep(bool check, Iterate* next, Eigen::VectorXd* delta, Eigen::VectorXd* x_new, bool* ok);
  void Save(int it);

  const NpklProblem& problem_;
  const SimpleNpklOptions& options_;
  const int n_;
  const bool linear_;
  const int m_;
  const double p0_;
  Evaluator eval_;
  // M(α) = Σ_k α_k T_k S_k − L for the Newton steps, formed densely each iteration (DualMatrix::ToDense).
  DualMatrix newton_matrix_;
  // Accelerated method (options.accelerated with the guaranteed step): the
  // previous gradient point x_{k−1} and FISTA's t_k.
  const bool accelerated_;
  // Projected Newton steps (options.newton): dense path, p = 2, the losses whose dual is strongly concave.
  const bool use_newton_;
  const Stopwatch& setup_watch_;
  IterationDriver driver_;
  // Early iterations may use a looser Lanczos tolerance (issue 3); `tight_`
  // records whether the evaluator is at options.lanczos_tolerance.
  bool tight_ = true;
  Iterate cur_;
  NpklResult result_;
  double eta_ = 0.0;
  bool backtracked_ = true;
  Eigen::VectorXd x_prev_;
  double momentum_ = 1.0;
  uint64_t fingerprint_ = 0;
  double d_norm_sq_ = 0.0;  // η bound of Lemma 3.4 (see the header)
  double quad_term_ = 0.0;
  Termination termination_ = Termination::kIterationLimit;
  Stopwatch solve_watch_;
};

SimpleRun::SimpleRun(const NpklProblem& problem, const SimpleNpklOptions& options, const SolveControl& control,
                     const Stopwatch& setup_watch, Terms terms, Eigen::MatrixXd basis)
    : problem_(problem),
      options_(options),
      n_(problem.num_points()),
      linear_(options.loss == NpklLoss::kLinear),
      m_(terms.size()),
      p0_(ObjectiveAtZero(options, m_)),
      eval_(problem, options, std::move(terms), std::move(basis)),
      newton_matrix_(problem.laplacian, eval_.terms().row, eval_.terms().col),
      accelerated_(options.accelerated && options.step == 0.0 && !options.adaptive_step),
      use_newton_(options.newton && options.step == 0.0 && !options.adaptive_step && options.p == 2.0 &&
                  options.low_rank == 0 && n_ <= options.dense_threshold &&
                  (options.loss == NpklLoss::kSquareHinge || options.loss == NpklLoss::kSquare)),
      setup_watch_(setup_watch),
      driver_(control, kCheckpointTag, linear_ ? 0 : options.max_iterations, setup_watch, &result_.stats) {
  // Only the sparse full-K path uses Lanczos, so only it is ever loose.
  const bool may_loosen = options.low_rank == 0 && n_ > options.dense_threshold && !linear_ &&
                          options.early_lanczos_tolerance > options.lanczos_tolerance;
  tight_ = !may_loosen;
  if (!tight_) eval_.set_lanczos_tolerance(options.early_lanczos_tolerance);
  bool has_diagonal_pair = false;
  for (int k = 0; k < m_ && !has_diagonal_pair; ++k) has_diagonal_pair = eval_.terms().row[k] == eval_.terms().col[k];
  d_norm_sq_ =
      options.lipschitz_bound == SimpleNpklOptions::LipschitzBound::kThesis ? m_ : (has_diagonal_pair ? 1.0 : 0.5);
  const bool quadratic_dual = options.loss == NpklLoss::kSquareHinge || options.loss == NpklLoss::kSquare;
  quad_term_ = quadratic_dual ? 1.0 / options.c : 0.0;
}

// The checkpoint's state, or α⁰ evaluated (scaled down first by the low-rank
// start on the sparse cold path).
Status SimpleRun::Start(Eigen::VectorXd alpha0) {
  SolveReport& stats = result_.stats;
  // The fingerprint costs O(nnz(L) + m): only computed when checkpoints are used.
  fingerprint_ = !linear_ && driver_.uses_checkpoints() ? CheckpointFingerprint(problem_, options_) : 0;
  ResumeState state;
  if (!linear_ && driver_.Resume([&](const Checkpoint& c) { return DecodeCheckpoint(c, fingerprint_, n_, m_, &state); })) {
    stats.iterations = driver_.resumed_from_iteration();
    stats.resumed_from_iteration = driver_.resumed_from_iteration();
    stats.objective_history = std::move(state.objective_history);
    eta_ = state.eta;
    backtracked_ = state.backtracked;
    x_prev_ = std::move(state.x_prev);
    momentum_ = state.momentum;
    tight_ = state.tight;
    eval_.set_lanczos_tolerance(tight_ ? options_.lanczos_tolerance : options_.early_lanczos_tolerance);
    eval_.RestoreWarmState(std::move(state.warm));
    cur_ = std::move(state.cur);
  }  // otherwise not this run's checkpoint (or none): start afresh
  const bool resumed = stats.resumed_from_iteration > 0;
  // Cold start on the sparse path: α⁰ = s·C·1 with s from the low-rank start (options.start_rank).
  const bool low_rank_start = !options_.initial_factor && !linear_ && options_.low_rank == 0 &&
                              n_ > options_.dense_threshold && options_.start_rank > 0;
  if (!resumed && low_rank_start) {
    KLS_ASSIGN_OR_RETURN(const double scale, LowRankStartScale(problem_.laplacian, eval_.terms(), options_));
    if (scale < 1.0) {
      alpha0 *= scale;
      eval_.set_rank_hint(options_.start_rank + std::max(4, options_.start_rank / 8));
    }
  }
  if (!resumed) {
    KLS_RETURN_IF_ERROR(eval_.Evaluate(alpha0, &cur_));
    KLS_RETURN_IF_ERROR(RankZeroFacePrimal(problem_, eval_.terms(), options_, &cur_).status());
  }
  if (!resumed && !tight_ && cur_.Finite() && RelativeGap(cur_) <= options_.tighten_factor * options_.tolerance) {
    KLS_RETURN_IF_ERROR(Tighten());
  }
  stats.setup_seconds = setup_watch_.Seconds();
  solve_watch_.Reset();
  driver_.Start();
  if (!resumed) stats.objective_history.push_back(cur_.primal);
  return OkStatus();
}

// Switches to the tight tolerance for good and re-evaluates the current
// iterate there, so that its gap is certified to lanczos_tolerance.
// Also re-evaluates an iterate whose A₊ came from the block solver, with
// Lanczos: every convergence claim and the returned gap rest on Lanczos.
Status SimpleRun::Tighten() {
  if (tight_ && !cur_.from_block) return OkStatus();
  tight_ = true;
  eval_.set_lanczos_tolerance(options_.lanczos_tolerance);
  Iterate exact;
  KLS_RETURN_IF_ERROR(eval_.Evaluate(cur_.alpha, &exact, /*exact=*/true));
  cur_ = std::move(exact);
  KLS_RETURN_IF_ERROR(RankZeroFacePrimal(problem_, eval_.terms(), options_, &cur_).status());
  return OkStatus();
}

// η bound of Lemma 3.4 at the iterate (see the header).
double SimpleRun::GuaranteedEta(const Iterate& x, double fallback) const {
  if (x.g_eff > 0.0) return d_norm_sq_ / x.g_eff + quad_term_;
  // A₊ = 0 (constraint form): K(α) = 0 and no local curvature estimate;
  // reuse the last η (the ascent check below still guards the step).
  return fallback > 0.0 ? fallback : std::max(quad_term_, 1.0);
}

void SimpleRun::Save(int it) {
  driver_.MaybeCheckpoint(it, [&] {
    return EncodeCheckpoint(fingerprint_, it, result_.stats, eta_, backtracked_, tight_, x_prev_, momentum_, cur_,
                            eval_.SaveWarmState());
  });
}

Status SimpleRun::Ascend() {
  if (!cur_.Finite()) {
    termination_ = Termination::kNumericalIssue;
  } else if (linear_ || RelativeGap(cur_) <= options_.tolerance) {
    termination_ = Termination::kConverged;
  } else {
    Status error;
    termination_ = driver_.Run(result_.stats.iterations + 1, [&](int it) {
      StepOutcome outcome = StepOutcome::kStop;
      error = Step(it, &outcome);
      return error.ok() ? outcome : StepOutcome::kStop;
    });
    KLS_RETURN_IF_ERROR(error);
  }
  return OkStatus();
}

// Projected Newton (see NewtonOperator): `taken` false if the direction fails
// or no step length passes the Armijo test (the gradient step follows then).
Status SimpleRun::NewtonStep(Iterate* next, Eigen::VectorXd* delta, bool* taken) {
  newton_matrix_.set_weights(eval_.Weights(cur_.alpha));
  const NewtonOperator h(newton_matrix_.ToDense(), eval_.terms(), options_);
  Eigen::VectorXd d;
  if (!h.ok() || !NewtonDirection(h, cur_, options_, &d)) return OkStatus();
  double length = 1.0;
  for (int ls = 0; ls < kNewtonLineSearches; ++ls, length *= 0.5) {
    Eigen::VectorXd candidate = ProjectDual(cur_.alpha + length * d, options_);
    const Eigen::VectorXd step = candidate - cur_.alpha;
    const double slope = cur_.grad.dot(step);
    if (!(slope > 0.0)) break;
    Iterate trial;
    KLS_RETURN_IF_ERROR(eval_.Evaluate(candidate, &trial, /*exact=*/true));
    if (!trial.Finite()) break;
    if (trial.dual >= cur_.dual + 1e-4 * slope) {
      *next = std::move(trial);
      *delta = step;
      *taken = true;
      break;
    }
  }
  return OkStatus();
}

// The projected gradient step (accelerated, with restarts, when
// options.accelerated), shortened (η doubled) until the ascent inequality
// holds when `check`; `ok` false when no finite step was found.
Status SimpleRun::GradientStep(bool check, Iterate* next, Eigen::VectorXd* delta, Eigen::VectorXd* x_new, bool* ok) {
  bool use_momentum = accelerated_ && x_prev_.size() == m_;
  bool exact_step = false;  // evaluate the candidate with Lanczos, not the block solver
  for (int bt = 0; bt < options_.max_backtracks; ++bt) {
    *x_new = ProjectDual(cur_.alpha + cur_.grad / eta_, options_);
    Eigen::VectorXd alpha_new = *x_new;
    double beta = 0.0;
    if (use_momentum) {
      // Gradient restart: the momentum x_k − x_{k−1} points against the
      // ascent step x_k − y_k.
      if ((*x_new - cur_.alpha).dot(*x_new - x_prev_) < 0.0) momentum_ = 1.0;
      beta = (momentum_ - 1.0) / NextMomentum(momentum_);
      // y_{k+1} = Π(x_k + β (x_k − x_{k−1})): projected, so that J(y) is a dual bound.
      if (beta > 0.0) alpha_new = ProjectDual(*x_new + beta * (*x_new - x_prev_), options_);
    }
    *delta = alpha_new - cur_.alpha;
    KLS_RETURN_IF_ERROR(eval_.Evaluate(alpha_new, next, exact_step));
    if (!next->Finite()) break;
    if (!check) {
      *ok = true;
      break;
    }
    if (beta > 0.0) {
      // Function restart: keep the extrapolated point only if J did not
      // fall; otherwise retry this iteration as the plain step (whose
      // ascent inequality is checked below), so J(α_t) stays monotone.
      if (next->dual >= cur_.dual - 1e-12 * (1.0 + std::abs(cur_.dual))) {
        *ok = true;
        break;
      }
      momentum_ = 1.0;
      use_momentum = false;
      continue;
    }
    // Ascent inequality behind Prop. 3.28 ((3.21) with α = α_{t+1}).
    const double lower = cur_.dual + cur_.grad.dot(*delta) - 0.5 * eta_ * delta->squaredNorm();
    if (next->dual >= lower - 1e-12 * (1.0 + std::abs(cur_.dual))) {
      *ok = true;
      break;
    }
    if (!exact_step && (cur_.from_block || next->from_block)) {
      // The block solver's loose eigenpairs make J inexact (measured:
      // ~2e-7 relative at n = 6,414), which can fail the inequality at any
      // η. Re-check once with Lanczos (at the current tolerance) for both
      // points before shortening the step.
      if (cur_.from_block) {
        Iterate exact;
        KLS_RETURN_IF_ERROR(eval_.Evaluate(cur_.alpha, &exact, /*exact=*/true));
        cur_ = std::move(exact);
      }
      exact_step = true;
      continue;
    }
    eta_ *= 2.0;
    backtracked_ = true;
  }
  return OkStatus();
}

// One ascent step α_t → α_{t+1}, its report, the stopping rule and the checkpoint.
Status SimpleRun::Step(int it, StepOutcome* outcome) {
  const bool fixed = options_.step > 0.0;
  const bool check = !fixed || options_.adaptive_step;
  if (fixed && (!options_.adaptive_step || it == 1)) {
    eta_ = 1.0 / options_.step;
  } else if (options_.adaptive_step && it > 1) {
    if (!backtracked_) eta_ *= 0.5;
  } else {
    eta_ = GuaranteedEta(cur_, eta_);
  }
  Iterate next;
  Eigen::VectorXd delta, x_new;
  backtracked_ = false;
  bool newton_step = false;
  if (use_newton_) KLS_RETURN_IF_ERROR(NewtonStep(&next, &delta, &newton_step));
  bool ok = newton_step;
  if (!newton_step) KLS_RETURN_IF_ERROR(GradientStep(check, &next, &delta, &x_new, &ok));
  if (!ok) {
    *outcome = driver_.Stop(Termination::kNumericalIssue);
    return OkStatus();
  }
  if (newton_step) {
    x_prev_.resize(0);  // a later gradient step starts without momentum
    momentum_ = 1.0;
  } else if (accelerated_) {
    x_prev_ = std::move(x_new);
    momentum_ = NextMomentum(momentum_);
  }
  const double step_inf = delta.size() > 0 ? delta.cwiseAbs().maxCoeff() : 0.0;
  cur_ = std::move(next);
  KLS_RETURN_IF_ERROR(RankZeroFacePrimal(problem_, eval_.terms(), options_, &cur_).status());
  if (!tight_ && RelativeGap(cur_) <= options_.tighten_factor * options_.tolerance) {
    KLS_RETURN_IF_ERROR(Tighten());
  }
  SolveReport& stats = result_.stats;
  stats.iterations = it;
  stats.objective_history.push_back(cur_.primal);
  double gap = RelativeGap(cur_);
  driver_.Report(IterationRow::GapAndStep(it, cur_.primal, gap, step_inf));
  if (gap <= options_.tolerance && cur_.from_block) {
    KLS_RETURN_IF_ERROR(Tighten());  // confirm with Lanczos before claiming convergence
    gap = RelativeGap(cur_);
  }
  *outcome = StepOutcome::kContinue;
  if (gap <= options_.tolerance) {
    *outcome = driver_.Stop(Termination::kConverged);
  } else if (step_inf == 0.0 && (!tight_ || cur_.from_block)) {
    // The loose eigenpairs may be what stalls the step: tighten and go on.
    KLS_RETURN_IF_ERROR(Tighten());
    Save(it);
  } else if (step_inf == 0.0) {
    // A fixed point of the projected step is optimal in exact arithmetic;
    // a gap that stays above the tolerance there means the eigenvalues
    // are not accurate enough to certify it.
    *outcome = driver_.Stop(Termination::kNumericalIssue);
  } else {
    Save(it);
  }
  return OkStatus();
}

StatusOr<NpklResult> SimpleRun::Finish() {
  SolveReport& stats = result_.stats;
  if (linear_) stats.iterations = 1;
  // Whatever the termination, the returned gap is computed with the tight
  // tolerance (a no-op when already tight).
  if (cur_.alpha.size() == m_ && cur_.Finite()) {
    KLS_RETURN_IF_ERROR(Tighten());
    if (termination_ == Termination::kConverged && RelativeGap(cur_) > options_.tolerance) {
      termination_ = Termination::kIterationLimit;  // cannot happen: convergence is only claimed when tight
    }
  }
  stats.termination = termination_;
  stats.final_objective = cur_.primal;
  stats.solve_seconds = solve_watch_.Seconds();
  result_.stats.certificate = Certificate::FromGap(RelativeGap(cur_), options_.tolerance);
  result_.stats.certificate.lower_bound = cur_.dual;
  result_.dual_residual = cur_.primal - cur_.dual;
  result_.primal_residual = linear_ || m_ == 0
                                ? 0.0
                                : (cur_.alpha - ProjectDual(cur_.alpha + cur_.grad, options_)).cwiseAbs().maxCoeff();
  LearnedKernel::Embedding v =
      cur_.rank > 0 ? LearnedKernel::Embedding(cur_.v) : LearnedKernel::Embedding::Zero(n_, 1);
  KLS_ASSIGN_OR_RETURN(result_.kernel, LearnedKernel::FromEmbedding(std::move(v)));
  return std::move(result_);
}

StatusOr<NpklResult> Solve(const NpklProblem& problem, const SimpleNpklOptions& options,
                           const SolveControl& control) {
  Stopwatch setup_watch;
  KLS_RETURN_IF_ERROR(options.Validate());
  KLS_RETURN_IF_ERROR(problem.Validate());
  KLS_RETURN_IF_ERROR(CheckSymmetric(problem.laplacian, "laplacian"));
  const int n = problem.num_points();
  KLS_RETURN_IF_ERROR(ValidateInitialFactor(options.initial_factor, n));
  if (options.low_rank > n) {
    return InvalidArgumentError("options.low_rank = " + std::to_string(options.low_rank) +
                                " exceeds the number of points " + std::to_string(n));
  }
  KLS_ASSIGN_OR_RETURN(Terms terms, SolverTerms(problem, options));
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd basis, LowRankBasis(problem, terms, options));
  Eigen::VectorXd alpha0 = StartingDual(terms, options);
  SimpleRun run(problem, options, control, setup_watch, std::move(terms), std::move(basis));
  KLS_RETURN_IF_ERROR(run.Start(std::move(alpha0)));
  KLS_RETURN_IF_ERROR(run.Ascend());
  return run.Finish();
}

}  // namespace

Status SimpleNpklOptions::Validate(std::string_view path) const {
  KLS_RETURN_IF_ERROR(CheckPositiveOption("c", c, path));
  KLS_RETURN_IF_ERROR(CheckPositiveOption("b", b, path));
  KLS_RETURN_IF_ERROR(CheckPositiveOption("g", g, path));
  if (!(block_tolerance > 0.0) || !std::isfinite(block_tolerance)) {
    return InvalidArgumentError(std::string(path) + ".block_tolerance = " + FormatNumber(block_tolerance) +
                                " must be finite and > 0");
  }
  if (block_points_per_column < 1) {
    return InvalidArgumentError(std::string(path) + ".block_points_per_column = " + std::to_string(block_points_per_column) +
                                " must be >= 1");
  }
  if (num_threads < 0 || num_threads > kMaxSolverThreads) {
    return InvalidArgumentError(std::string(path) + ".num_threads = " + std::to_string(num_threads) + " must be in [0, " +
                                std::to_string(kMaxSolverThreads) + "] (0 = all hardware threads)");
  }
  if (!(p > 1.0) || !std::isfinite(p)) {
    return InvalidArgumentError(std::string(path) + ".p = " + FormatNumber(p) + " must be finite and > 1");
  }
  if (!(step >= 0.0) || !std::isfinite(step)) {
    return InvalidArgumentError(std::string(path) + ".step = " + FormatNumber(step) + " must be finite and >= 0 (0 = guaranteed)");
  }
  if (max_iterations < 1) {
    return InvalidArgumentError(std::string(path) + ".max_iterations = " + std::to_string(max_iterations) + " must be >= 1");
  }
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError(std::string(path) + ".tolerance = " + FormatNumber(tolerance) + " must be finite and >= 0");
  }
  if (!(active_point_fraction > 0.0 && active_point_fraction <= 1.0)) {
    return InvalidArgumentError(std::string(path) + ".active_point_fraction = " + FormatNumber(active_point_fraction) +
                                " must be in (0, 1]");
  }
  if (low_rank < 0) {
    return InvalidArgumentError(std::string(path) + ".low_rank = " + std::to_string(low_rank) + " must be >= 0 (0 = full)");
  }
  if (dense_threshold < 0) {
    return InvalidArgumentError(std::string(path) + ".dense_threshold = " + std::to_string(dense_threshold) + " must be >= 0");
  }
  KLS_RETURN_IF_ERROR(CheckPositiveOption("lanczos_tolerance", lanczos_tolerance, path));
  if (!(early_lanczos_tolerance >= 0.0) || !std::isfinite(early_lanczos_tolerance)) {
    return InvalidArgumentError(std::string(path) + ".early_lanczos_tolerance = " + FormatNumber(early_lanczos_tolerance) +
                                " must be finite and >= 0");
  }
  if (!(tighten_factor >= 1.0) || !std::isfinite(tighten_factor)) {
    return InvalidArgumentError(std::string(path) + ".tighten_factor = " + FormatNumber(tighten_factor) +
                                " must be finite and >= 1");
  }
  if (start_rank < 0) {
    return InvalidArgumentError(std::string(path) + ".start_rank = " + std::to_string(start_rank) + " must be >= 0 (0 = α⁰ = C·1)");
  }
  if (max_backtracks < 1) {
    return InvalidArgumentError(std::string(path) + ".max_backtracks = " + std::to_string(max_backtracks) + " must be >= 1");
  }
  return OkStatus();
}

StatusOr<std::vector<int>> SelectActiveConstraints(const PairwiseConstraints& constraints,
                                                   const LearnedKernel& kernel, int num_points) {
  const int n = kernel.num_points();
  if (num_points < 1) {
    return InvalidArgumentError("num_points = " + std::to_string(num_points) + " must be >= 1");
  }
  KLS_RETURN_IF_ERROR(constraints.Validate(n));
  std::vector<double> sum(n, 0.0);
  std::vector<int> count(n, 0);
  for (const Pair& p : constraints.pairs) {
    const double value = p.sign() * kernel.value(p.i, p.j);
    sum[p.i] += value;
    ++count[p.i];
    if (p.j != p.i) {
      sum[p.j] += value;
      ++count[p.j];
    }
  }
  std::vector<int> points;
  for (int i = 0; i < n; ++i)
    if (count[i] > 0) points.push_back(i);
  auto margin = [&](int i) { return std::abs(sum[i] / count[i]); };
  std::stable_sort(points.begin(), points.end(), [&](int a, int b) { return margin(a) < margin(b); });
  if (static_cast<int>(points.size()) > num_points) points.resize(num_points);
  std::vector<char> chosen(n, 0);
  for (int i : points) chosen[i] = 1;
  std::vector<int> kept;
  for (int k = 0; k < constraints.size(); ++k) {
    const Pair& p = constraints.pairs[k];
    if (chosen[p.i] || chosen[p.j]) kept.push_back(k);
  }
  return kept;
}

StatusOr<NpklResult> SolveSimpleNpkl(const NpklProblem& problem, const SimpleNpklOptions& options,
                                     const SolveControl& control) {
  return GuardExceptions("SimpleNPKL", [&] { return Solve(problem, options, control); });
}

}  // namespace kls
