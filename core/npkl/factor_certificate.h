// The global-optimality certificate of a low-rank (Burer–Monteiro) factorized
// solve, and the rank escalation that follows a failed one — shared by the
// solvers that factor K = VᵀV (BCDNPKL, KL-ADMM).
//
// Setting. f is convex and smooth in K ⪰ 0, and a solver minimizes f(VᵀV)
// over V ∈ R^{r×n}. With S = ∇f(K) at K = VᵀV, convexity gives for every
// optimal K* ⪰ 0
//     f(K) − f(K*) ≤ ⟨S, K − K*⟩ ≤ ⟨S, K⟩ − λ_min(S)·tr(K*),
// so K is within (|⟨S, K⟩| + max(0, −λ_min(S))·tr(K)) of the optimum when
// tr(K) stands in for tr(K*) (equal at the optimum). A stationary V has
// V S = 0 (Burer & Monteiro 2003; Journée, Bach, Absil & Sepulchre 2010;
// BCDNPKL Prop. 2): the row space of V lies in S's null space, so only S on
// its orthogonal complement can carry a negative eigenvalue. We deflate it
// (Q = orthonormal basis of range Vᵀ by column-pivoted QR):
//     M = P S P + σ Q Qᵀ,   P = I − Q Qᵀ,   σ > 0,
// which moves range(Q) out of the way (to σ) while the rest of M's spectrum
// is that of S on range(Q)^⊥, and take M's smallest eigenvalues — densely
// below kDenseCertificateMax points, else by Spectra's restarted Lanczos.
//
// Escalation. Each eigenpair (λ < 0, x) is a descent direction of rank one:
// f(K + t x xᵀ) = f(K) + t λ + O(t²). AppendNegativeDirections appends the
// rows √t·xᵀ with t = −λ / f''(0) (the caller supplies f'' along x xᵀ),
// divided by the number of directions taken, so that the joint step still
// descends (Cauchy–Schwarz bounds the joint curvature by K·Σ f''_k t_k²).
#pragma once

#include <Eigen/Core>
#include <functional>
#include <limits>
#include <string_view>
#include <vector>

#include "core/common/byte_io.h"
#include "core/common/status.h"

namespace kls {

/// y = S x for the n-vectors x and y (S symmetric).
using SymmetricApply = std::function<void(const double* x, double* y)>;

struct FactorCertificate {
  double min_eigenvalue = 0.0;      ///< λ_min(S) on range(Vᵀ)^⊥ (capped at σ); −∞ if Lanczos failed
  double inner_product = 0.0;       ///< ⟨S, K⟩ = Σ_k v^kᵀ S v^k over the rows v^k of V
  double gap = 0.0;                 ///< the relative gap bound (|⟨S, K⟩| + max(0, −λ_min)·tr K) / max(|f|, scale)
  Eigen::VectorXd eigenvalues;      ///< the computed smallest eigenvalues of M, ascending
  Eigen::MatrixXd eigenvectors;     ///< their unit eigenvectors (n × nev)
  long long operations = 0;         ///< applications of S (n on the dense path)
  int numerical_rank = 0;           ///< rank(V) (QR pivots > 1e-10·largest)
};

/// Below this n the deflated operator is formed densely (n² doubles): exact
/// and cheaper than a restarted Lanczos.
inline constexpr int kDenseCertificateMax = 600;

struct FactorCertificateOptions {
  /// Smallest eigenpairs wanted (the escalation's step), >= 1.
  int nev = 1;
  /// σ > 0 of the deflation (the caller's bound on S's scale, e.g. max_i S_ii).
  double sigma = 1.0;
  /// Spectra's relative eigenvalue tolerance and its restart cap.
  double lanczos_tolerance = 1e-6;
  int max_restarts = 2000;
  /// The denominator of the relative bound is max(|f|, objective_floor).
  double objective_floor = 1e-300;
};

/// The certificate of the factor `v` (r × n) with objective value `objective`.
/// Deterministic (Spectra's fixed start vector; `apply_s` must be).
FactorCertificate CertifyFactor(int n, const SymmetricApply& apply_s, const Eigen::MatrixXd& v, double objective,
                                const FactorCertificateOptions& options);

/// f''(0) of t ↦ f(K + t x xᵀ) for the unit vector x.
using DirectionCurvature = std::function<double(const Eigen::VectorXd& x)>;

/// Appends √t·xᵀ to `v` for each of the certificate's eigenpairs with λ < 0,
/// at most `max_rows` of them, t as in the header. Returns the rows added.
int AppendNegativeDirections(const FactorCertificate& cert, const DirectionCurvature& curvature, int max_rows,
                             Eigen::MatrixXd* v);

/// The rows of a warm-start factor `v` (r × n) without its degenerate
/// directions: U_kᵀ v for the eigenvectors u_k of v vᵀ whose singular value
/// σ_k exceeds relative_floor · σ_max (all rows kept when none is degenerate;
/// K = vᵀv loses Σ σ_k² over the dropped ones, ≤ relative_floor² · ‖K‖₂ each).
///
/// Why: a previous optimum of lower rank than its factor carries directions
/// at σ ≈ 0 (10⁻⁴·σ_max after a converged solve). Where the new problem needs
/// one of them, the factorized solve has to grow it from there — near a saddle
/// point, where the gradient v S is as small as the row itself — and crawls
/// for tens to hundreds of iterations. Dropped instead, the certificate at the
/// compact factor finds the direction the new problem needs and
/// AppendNegativeDirections places it at its exact step.
///
/// `extra` > 0 keeps that many of the next directions as well, and `multiple`
/// > 1 rounds the count kept up to a multiple of it (never more than r): the
/// multilevel start hands a few more than the coarse solution's significant
/// directions to the finer level, at a rank whose columns fill whole cache
/// lines.
Eigen::MatrixXd DropDegenerateDirections(const Eigen::MatrixXd& v, double relative_floor, int extra = 0,
                                         int multiple = 1);

/// The relative_floor of DropDegenerateDirections at a warm start: a direction
/// below 1 % of the largest singular value holds at most 10⁻⁴ of ‖K‖₂.
inline constexpr double kWarmStartDegenerateFloor = 1e-2;

/// A factor's certificate and objective f at that factor (the solver's own
/// CertifyFactor call, with its S and its nev).
using FactorCertify = std::function<FactorCertificate(const Eigen::MatrixXd& v, double* objective)>;

/// A solver's own iteration(s) on a factor, counted as its iterations.
using FactorSettle = std::function<void(Eigen::MatrixXd* v)>;

/// The start of a warm-started factorized solve at a previous optimum `v`:
/// DropDegenerateDirections(v, kWarmStartDegenerateFloor); then `settle`, if
/// given, on the compact factor (BCDNPKL: one sweep, so that the rows it has
/// absorb what they can of the new pairs first); then the certificate of the
/// new problem, and its negative directions appended at their exact step
/// (AppendNegativeDirections) — only those whose eigenvalue alone fails the
/// certificate, |λ|·tr K > certificate_tolerance · max(|f|, 1), since a row of
/// an insignificant direction would itself start near the saddle — up to the
/// previous factor's rank (at least one row; never beyond max_rank). The same
/// rule the escalation applies after a converged stage, applied before the
/// first one.
Eigen::MatrixXd PrepareWarmFactor(const Eigen::MatrixXd& v, const FactorCertify& certify,
                                  const DirectionCurvature& curvature, int max_rank, double certificate_tolerance,
                                  const FactorSettle& settle = nullptr);

/// INVALID_ARGUMENT naming options.initial_rank (>= 1), options.escalation_step
/// (>= 1) or options.certificate_tolerance (finite, >= 0) and its value.
Status ValidateEscalationOptions(int initial_rank, int escalation_step, double certificate_tolerance,
                                 std::string_view path = "options");

/// What a rank escalation and its optimality certificates found (BCDNPKL,
/// KL-ADMM), as reported by the solvers and carried in their checkpoints.
/// One coarse level of KL-ADMM's multilevel start (KlAdmmOptions::multilevel_min_points).
struct CoarseLevelReport {
  int points = 0;        ///< the coarse problem's points (aggregates)
  int entries = 0;       ///< its ordered constraint entries (the kept pairs)
  int iterations = 0;    ///< its polish iterations
  int rank = 0;          ///< directions handed to the finer level (after the degenerate ones are dropped)
  double seconds = 0.0;  ///< aggregation, coarse problem and solve
};

struct FactorDiagnostics {
  int final_rank = 0;          ///< rows of V at the end
  /// rank(V) at the last check (column-pivoted QR, pivots > 1e-10·largest).
  int numerical_rank = 0;
  int certificate_checks = 0;  ///< certificate evaluations
  /// λ_min(S) on the complement of V's row space at the last check (NaN: none
  /// made, e.g. the hinge loss or a run stopped before convergence).
  double min_eigenvalue = std::numeric_limits<double>::quiet_NaN();
  /// ⟨S, Z⟩ = tr(V S Vᵀ) at the last check (0 at a stationary point).
  double inner_product = std::numeric_limits<double>::quiet_NaN();
  /// The relative gap bound (|⟨S, Z⟩| + max(0, −λ_min)·tr(Z)) / |f| at the last check.
  double gap = std::numeric_limits<double>::quiet_NaN();
  bool certified = false;      ///< gap <= the solver's certificate tolerance
  long long lanczos_operations = 0;
  double certificate_seconds = 0.0;
  std::vector<int> rank_history;  ///< r of each stage
  std::vector<int> stage_sweeps;  ///< iterations (sweeps) of each stage
  /// KL-ADMM's multilevel start, coarsest level first (empty: none). Not in
  /// checkpoints: a resumed run redoes its coarse levels.
  std::vector<CoarseLevelReport> coarse_levels;

  /// Takes the numbers of a certificate evaluation that took `seconds`.
  void Record(const FactorCertificate& cert, double seconds, double certificate_tolerance);
};

/// The diagnostics in a checkpoint (fixed layout; GetFactorDiagnostics reads
/// what PutFactorDiagnostics wrote, DATA_LOSS on truncated bytes).
void PutFactorDiagnostics(ByteWriter* w, const FactorDiagnostics& d);
Status GetFactorDiagnostics(ByteReader* in, FactorDiagnostics* d);

}  // namespace kls
