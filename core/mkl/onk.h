// Optimal neighborhood kernel (Liu, Chen, Chen & Ye, IJCAI 2009).
//
// Given a PSD kernel K (n × n) and labels y ∈ {±1}ⁿ, the ONK saddle problem (3)
// reduces (Theorem 1) to the convex quartic
//     min_{α ∈ P} f(α) = −2αᵀe + αᵀYKYα + (αᵀα)² / (4ρ),                  (7)
//     P = {0 <= α <= C, αᵀy = 0},
// with gradient f'(α) = −2e + 2YKYα + (αᵀα) α / ρ, and the learned kernel
//     G* = K + (Yα)(Yα)ᵀ / (2ρ)                                            (5)
// which is K plus a rank-one term. An unseen point has φ̃(x) = (φ(x), 0)
// (§2.2), so its kernel row against the training points is K's row.
//
// Methods (OnkMethod):
//  * kGradient — constrained gradient descent, Algorithm 2: the gradient
//    mapping step x⁺ = π_P(x − f'(x)/γ) (11) with γ "appropriate" by the
//    Armijo–Goldstein rule (13), γ doubled until (13) holds; the trial γ of
//    each iteration is the secant estimate ‖f'(x_k) − f'(x_{k−1})‖/‖x_k − x_{k−1}‖
//    (never below γ_min). π_P is the exact O(n) projection of box_projection.h
//    (eq. 15–22). Stop when ‖x_{k+1} − x_k‖ <= tol·max(‖x_k‖, 1) (step 5).
//  * kAccelerated — the Nesterov/FISTA variant the paper's conclusion plans:
//    the same gradient-mapping step taken from the extrapolated point
//    s_k = x_k + ((t_{k−1} − 1)/t_k)(x_k − x_{k−1}), the same rule (13) at s_k,
//    and a restart (t = 1) whenever f increases. Same stopping test, on the
//    step from s_k.
//  * kLevel — the level method, Algorithm 1 (§3): cutting-plane model f_i,
//    lower bound from the LP (8) over P (GLPK dual simplex, warm-started as
//    cuts are added), level l_i = f_low + τΔ (9), and the projection (10) of
//    α_i onto {α ∈ P : f_i(α) <= l_i}, solved through its dual over the cut
//    multipliers λ >= 0, whose primal point is π_P(α_i − Σ λ_j f'(α_j)) — so
//    every iterate lies in P exactly — by accelerated projected ascent. Stop
//    when the certified gap Δ_i = f_up − f_low <= tol·max(1, |f_up|).
//
// Cost per iteration: one product K·(Yα) (O(n²)) per trial point; the
// gradient at an accepted point reuses the product of its function value.
// The level method adds an LP and a small dual QP whose size grows with the
// number of cuts.
//
// Thread safety: SolveOnk reads K and y only; concurrent calls are fine.
#pragma once

#include <Eigen/Core>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"

namespace kls {

enum class OnkMethod {
  kGradient,     ///< constrained gradient descent (Algorithm 2)
  kAccelerated,  ///< Nesterov/FISTA gradient mapping with restart
  kLevel,        ///< level method (Algorithm 1)
};

/// "gradient", "accelerated", "level".
const char* OnkMethodName(OnkMethod m);
StatusOr<OnkMethod> ParseOnkMethod(const std::string& name);

struct OnkOptions {
  double c = 1.0;                ///< SVM box bound C of P, > 0
  double rho = 100.0;            ///< ρ > 0 of (3): weight of ‖G − K‖²_F; ρ → ∞ gives G → K
  OnkMethod method = OnkMethod::kGradient;
  double tolerance = 1e-6;       ///< gradient methods: relative step (Alg. 2 step 5); level: relative gap
  int max_iterations = 5000;     ///< outer iterations
  double level_tau = 0.5;        ///< τ ∈ (0, 1) of the level (9)
  /// Cap on the dual ascent steps of the projection (10) per level iteration;
  /// the projection need not be exact (the bounds are), only inside P.
  int level_projection_iterations = 1000;
  double min_gamma = 1e-12;      ///< floor of the trial γ of (13)
  /// INVALID_ARGUMENT "<path>.rho = -1 must be finite and > 0" etc.
  Status Validate(std::string_view path = "onk") const;
};

struct OnkResult {
  Eigen::VectorXd alpha;         ///< the minimizer α* of (7), in P
  double objective = 0.0;        ///< f(α*)
  double lower_bound = 0.0;      ///< level method: certified lower bound f_low; others: f(α*)
  int function_evaluations = 0;  ///< products K·(Yα) performed
  double last_gamma = 0.0;       ///< gradient methods: the accepted γ of the last step
  SolveReport stats;
};

/// Minimizes (7) for the kernel K (n × n, symmetric) and labels y (±1, both
/// classes present). Starts from α = 0 ∈ P.
///
/// Checkpoints (format "onk/1"). With control.checkpoint set, the state is
/// handed to it (CheckpointTimer) after an iteration that does not end the run
/// once control.checkpoint_interval_seconds of solve time have passed since
/// the start or the last checkpoint: for the gradient methods x_k, x_{k−1},
/// their kernel products, f'(x_{k−1}), γ, t and the secant flag (6n + 5
/// doubles); for the level method α_{i+1}, the best point, f_up, f_low, every
/// cut (g_j, offset_j), the projection's multipliers and the LP's simplex
/// basis (i cuts of n + 1 doubles); always the objective history and the
/// kernel-product count. With control.ResumeFrom("onk/1") set and matching,
/// the run continues from it: stats.iterations, objective_history and the
/// ProgressEvent numbering go on from checkpoint.iteration,
/// stats.resumed_from_iteration = checkpoint.iteration, and the result is
/// bit-identical to the uninterrupted run's (the level method's LP is rebuilt
/// with the saved basis, so GLPK takes the same pivots). A checkpoint matches
/// when it was taken for the same K, y and the options that shape the
/// iterates (c, rho, method, min_gamma; level_tau and
/// level_projection_iterations for the level method; tolerance for the
/// accelerated one, whose restart test uses it — a fingerprint); any other
/// checkpoint is ignored and the solve starts afresh (resumed_from_iteration = 0).
StatusOr<OnkResult> SolveOnk(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, const OnkOptions& options,
                             const SolveControl& control = {});

/// f(α) of (7).
double OnkObjective(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, const Eigen::VectorXd& alpha, double rho);

/// f'(α) of (7).
Eigen::VectorXd OnkGradient(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y, const Eigen::VectorXd& alpha,
                            double rho);

/// G* = K + (Yα)(Yα)ᵀ/(2ρ), eq. (5). O(n²) memory: for training-set sizes.
Eigen::MatrixXd OnkLearnedKernel(const Eigen::MatrixXd& kernel, const Eigen::VectorXd& y,
                                 const Eigen::VectorXd& alpha, double rho);

/// σ_k = 4^{k−1} · Σ_ij ‖x_i − x_j‖² / n² (§5), the width rule of the
/// paper's kernel exp(−‖x − z‖²/σ). O(nd).
double OnkSigma(const Eigen::MatrixXd& x, int k);

}  // namespace kls
