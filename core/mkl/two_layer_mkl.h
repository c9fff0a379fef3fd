// Two-layer multiple kernel learning (thesis ch. 4).
//
// Kernel domain (4.2):  k⁽²⁾(x, z; μ) = exp(Σ_t μ_t k_t⁽¹⁾(x, z)),  μ >= 0,
// with unit-trace base kernels k_t⁽¹⁾. Problem (4.3):
//     min_{μ>=0} F(μ),  F(μ) = max_α D(α, μ),
//     D(α, μ) = Σ_i α_i − ½ Σ_ij α_i α_j y_i y_j k⁽²⁾_ij(μ) + Σ_t μ_t,
//     0 <= α <= C, αᵀy = 0.
// The thesis writes J(α, μ) = −D(α, μ), so "α = argmin_α J" is the SVM dual
// and "gradient ascent on J in μ" is projected gradient descent on F.
//
// Protocol 2 (TwoLayerMKLwithTheta), SolveTwoLayerMkl:
//   μ⁰ random (uniform on [0, init_scale]); repeat
//     K⁽²⁾ = exp(Σ μ_t K_t)                                  (step 3)
//     α = SVM dual on K⁽²⁾ (libsvm)                           (step 4)
//     ∇J_d = ½ Σ_ij α_iα_j y_iy_j K⁽²⁾_ij (K_d)_ij − 1         (4.5), step 5
//     μ⁺ = max(μ + η∇J, 0), η by Armijo's rule along the projection arc:
//       F(μ⁺) <= F(μ) − σ ∇Jᵀ(μ⁺ − μ)   (Bertsekas' projected Armijo; ∇F = −∇J
//       by Danskin's theorem since α is the maximizer)        (step 6)
//   until the relative decrease of F is below `tolerance`.
// Every accepted step decreases F, so the objective history is monotone.
// F is evaluated with libsvm's α, i.e. to libsvm's KKT tolerance.
//
// Protocol 3 (2LMKL^Inf), SolveInfiniteTwoLayerMkl: Θ = Θ₀ (13 kernels on all
// features); repeat
//   (α, μ) = Protocol 2 on Θ;
//   θ = NewKernel(α): gradient ascent from a random θ⁰ on
//       J(α, θ) = ½ Σ_ij α_iα_j y_iy_j exp(k(x_i, x_j; θ)),
//       k(x, z; θ) = exp(−θ‖x − z‖²)                          (4.6)
//     with dJ/dθ = −½ Σ α_iα_j y_iy_j e^{k_ij} k_ij ‖x_i − x_j‖²  ((4.7); the
//     thesis prints it without the minus sign, which is the derivative of
//     exp(−θ d) only up to sign — we use the true derivative);
//   if J(α, θ) <= J(α, μ) stop, else Θ = Θ ∪ {θ}.
// J(α, μ) in the stopping test is read as the same quantity as (4.6) for the
// current kernel, ½ Σ α_iα_j y_iy_j k⁽²⁾_ij(μ): both sides then drop the same
// −Σα_i, and the test is the column-generation test of infinite kernel
// learning [GN08] (a new kernel enters when its margin term beats the current
// combination's). The added kernel is normalized to unit trace like Θ₀. The
// next Protocol 2 call is warm-started from the previous μ, the new weight drawn
// like μ⁰ (the thesis restarts from a random μ⁰; warm starting only saves
// iterations and is an option).
//
// Cost per Protocol 2 iteration: one n×n combination Σ μ_t K_t (O(m n²)), one
// libsvm solve per line-search trial, and the gradient (O(m n²)). Memory: the m
// base kernel matrices (m n² doubles).
//
// Thread safety: pure functions; concurrent calls on different inputs are safe.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/mkl_protocol.h"
#include "core/mkl/svm.h"

namespace kls {

struct TwoLayerMklOptions {
  double c = 1.0;                  ///< SVM box bound C of (4.3), > 0
  int max_iterations = 100;        ///< Protocol 2 outer iterations (>= 1)
  double tolerance = 1e-4;         ///< stop when (F_prev − F)/max(1, |F|) < tolerance
  double armijo_sigma = 1e-4;      ///< sufficient-decrease constant σ ∈ (0, 1)
  double armijo_beta = 0.5;        ///< step shrink factor β ∈ (0, 1) per backtrack
  int max_line_search_steps = 30;  ///< backtracks per iteration before declaring a stall (>= 1)
  double init_scale = 1.0;         ///< μ⁰_t ~ U[0, init_scale] (step 1 "randomly initialize"), > 0
  uint64_t seed = 1;               ///< seed of μ⁰
  double svm_tolerance = 1e-4;     ///< libsvm KKT tolerance of each inner SVM, in (0, 1)
  Status Validate() const;
};

struct TwoLayerMklResult {
  Eigen::VectorXd weights;   ///< μ >= 0, one per base kernel
  SvmSolution svm;           ///< α, b of the SVM on K⁽²⁾(μ) (the final μ)
  double objective = 0.0;    ///< F(μ) = D(α, μ) (Σα − ½uᵀK⁽²⁾u + Σμ)
  SolveReport stats;          ///< objective_history: F after each accepted step (monotone)
};

/// K⁽²⁾ = exp(Σ_t μ_t K_t) (4.2) from the base kernel matrices.
Eigen::MatrixXd TwoLayerKernel(const std::vector<Eigen::MatrixXd>& base_kernels, const Eigen::VectorXd& mu);

/// ∇_μ J(α, μ) of (4.5): ½ uᵀ(K⁽²⁾ ∘ K_d)u − 1 with u = α ∘ y, given K⁽²⁾(μ).
Eigen::VectorXd TwoLayerGradient(const std::vector<Eigen::MatrixXd>& base_kernels, const Eigen::MatrixXd& k2,
                                 const Eigen::VectorXd& alpha, const Eigen::VectorXd& y);

/// Protocol 2 on precomputed base kernel matrices (each n × n, symmetric PSD,
/// normally unit trace) with labels y ∈ {±1}. `initial_weights`, if non-empty,
/// replaces the random μ⁰ (m entries >= 0). Errors: shapes, labels, options.
StatusOr<TwoLayerMklResult> SolveTwoLayerMkl(const std::vector<Eigen::MatrixXd>& base_kernels,
                                             const Eigen::VectorXd& y, const TwoLayerMklOptions& options,
                                             const SolveControl& control = {},
                                             const Eigen::VectorXd& initial_weights = Eigen::VectorXd());

struct InfiniteTwoLayerMklOptions {
  TwoLayerMklOptions inner;          ///< Protocol 2 settings (C, Armijo, μ⁰, …)
  int max_new_kernels = 10;          ///< cap on kernels added by NewKernel (>= 0)
  int new_kernel_max_iterations = 50;   ///< gradient-ascent steps of NewKernel (>= 1)
  double new_kernel_tolerance = 1e-6;   ///< NewKernel stops when J improves by less (relative)
  double min_initial_width = 0.125;  ///< θ⁰: Gaussian width σ⁰ log-uniform in [min, max] …
  double max_initial_width = 64.0;   ///< … and θ⁰ = 1/(2σ⁰²) (the bank's width range 2⁻³…2⁶)
  bool warm_start = true;            ///< reuse μ for the old kernels in the next Protocol 2 call
  uint64_t seed = 1;                 ///< seed of the θ⁰ draws
  Status Validate() const;
};

/// One NewKernel call (Protocol 3, lines 11–16).
struct NewKernelResult {
  double theta = 0.0;        ///< θ of exp(−θ‖x − z‖²), > 0
  double objective = 0.0;    ///< J(α, θ) of (4.6)
  double initial_theta = 0.0;
  int iterations = 0;
  std::vector<double> history;  ///< J after each accepted step (nondecreasing)
};

/// J(α, θ) of (4.6) and its derivative in θ ((4.7), sign corrected), from the
/// squared distances ‖x_i − x_j‖² and u = α ∘ y.
void NewKernelObjective(const Eigen::MatrixXd& squared_distances, const Eigen::VectorXd& u, double theta,
                        double* value, double* derivative);

/// NewKernel: gradient ascent on (4.6) from θ⁰ with a backtracking line search
/// (Armijo, θ kept > 0) while J improves by more than `tolerance` (relative).
NewKernelResult FindNewKernel(const Eigen::MatrixXd& squared_distances, const Eigen::VectorXd& u,
                              double initial_theta, int max_iterations, double tolerance);

struct InfiniteTwoLayerMklResult {
  std::vector<BaseKernelSpec> kernels;  ///< Θ: Θ₀ then the added Gaussians (unit trace on x)
  Eigen::VectorXd weights;              ///< μ over `kernels`
  SvmSolution svm;                      ///< α, b at the final μ
  double objective = 0.0;               ///< F(μ) of the last Protocol 2 call
  std::vector<double> added_theta;      ///< θ of each added kernel, in order
  std::vector<double> j_theta;          ///< J(α, θ) of each NewKernel call (incl. the rejected last one)
  std::vector<double> j_mu;             ///< J(α, μ) = ½uᵀK⁽²⁾u it was compared with
  int inner_iterations = 0;             ///< Protocol 2 iterations summed over the calls
  SolveReport stats;  ///< iterations = Protocol 2 calls; objective_history = F after each call
};

/// Protocol 3 on standardized points x (n × d) with labels y ∈ {±1}, starting
/// from `initial_kernels` (Θ₀; specs carry their unit-trace scales).
StatusOr<InfiniteTwoLayerMklResult> SolveInfiniteTwoLayerMkl(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                                             std::vector<BaseKernelSpec> initial_kernels,
                                                             const InfiniteTwoLayerMklOptions& options,
                                                             const SolveControl& control = {});

/// Θ₀ of the thesis's 2LMKL^Inf experiments (§4.5.1): the 10 Gaussian widths
/// and 3 polynomial degrees on all features, unit trace on x.
StatusOr<std::vector<BaseKernelSpec>> InfiniteInitialKernels(const Eigen::MatrixXd& x);

// ---- Classifiers (what the service stores), thesis protocol §4.5.1 ----

struct TwoLayerMklClassifierOptions {
  TwoLayerMklOptions solver;      ///< solver.c is replaced by the cross-validated C
  MklProtocolOptions protocol;    ///< standardization, bank, C grid, folds, class ids
  Status Validate() const;
};

/// 2LMKL classifier: standardize, bank (unit trace), C by nested k-fold CV
/// (Protocol 2 is re-run on each fold's training part for every C, then the
/// fold is predicted with exp(Σ μ_t k_t)), final Protocol 2 on all points, SVM
/// model with KernelCombination::kExponential and only the kernels with μ_t > 0.
/// y ∈ {±1} (+1 ↔ protocol.positive_class).
StatusOr<MklClassifierResult> TrainTwoLayerMklClassifier(const Eigen::MatrixXd& x_raw, const Eigen::VectorXd& y,
                                                         const TwoLayerMklClassifierOptions& options,
                                                         const SolveControl& control = {});

struct InfiniteTwoLayerMklClassifierOptions {
  InfiniteTwoLayerMklOptions solver;  ///< solver.inner.c is replaced by the cross-validated C
  MklProtocolOptions protocol;        ///< single_feature_kernels is ignored (Θ₀ is on all features)
  /// true (default): C by nested CV of the full Protocol 3; false: C by nested
  /// CV of Protocol 2 on Θ₀ (the kernels Protocol 3 starts from), then
  /// Protocol 3 once at that C — up to (max_new_kernels + 1)× cheaper.
  bool cross_validate_full_protocol = true;
  Status Validate() const;
};

/// 2LMKL^Inf classifier (thesis §4.5.1: Θ₀ = 10 Gaussians + 3 polynomials on
/// all features, one Gaussian added per outer iteration).
StatusOr<MklClassifierResult> TrainInfiniteTwoLayerMklClassifier(const Eigen::MatrixXd& x_raw,
                                                                 const Eigen::VectorXd& y,
                                                                 const InfiniteTwoLayerMklClassifierOptions& options,
                                                                 const SolveControl& control = {});

}  // namespace kls
