// Unsupervised multiple kernel learning (thesis ch. 5,
// Protocol 4).
//
// Kernel domain (5.1): K = Σ_t μ_t K_t with μ on the simplex (μ >= 0, Σμ = 1).
// With X the standardized points and local bases B_i (|B_i| = B), problem
// (5.2)/(5.3) without the constant γ₂ Σ|B_i| is
//     min_{μ, D}  Σ_i ½‖x_i − Σ_{j∈B_i} k_ij x_j‖² + γ₁ Σ_i Σ_{j∈B_i} k_ij ‖x_i − x_j‖².
// Notation of §5.2.2: P = XXᵀ (linear kernel, p_i its i-th column), M the
// squared-distance matrix (v_i its i-th column), κ_{t,i} the i-th column of
// K_t, d_i ∈ {0,1}ⁿ the indicator of B_i.
//
// μ-step (5.4), D fixed: with A_i = [κ_{1,i} ∘ d_i, …, κ_{m,i} ∘ d_i] (n × m),
//     min_{μ∈Δ} ½ μᵀWμ + qᵀμ,  W = Σ_i A_iᵀ P A_i,  q = Σ_i A_iᵀ(γ₁ v_i − p_i).
// Twice this is the thesis's μᵀWμ + uᵀμ with [u]_t = Σ_i (v∘d_i − 2p∘d_i)ᵀκ_{t,i}
// exactly when γ₁ = ½ (the thesis's printed W is the same matrix written with
// an ill-formed Σ_t; we use the one that the objective expands to). Solved by
// SolveSimplexQp (accelerated projected gradient with an exact simplex
// projection, then an exact KKT solve on the support).
//
// D-step (5.6), kernel fixed, per point i: with κ the i-th column of K,
//     J(d) = dᵀUd + ṽᵀd,  U = κκᵀ ∘ P,  ṽ = κ ∘ (2γ₁ v − 2p)   (= 2 × the
// objective's i-th term minus a constant; γ₁ = ½ gives Protocol 4, line 6). The
// greedy of Protocol 4 (lines 7–11) starts from B_i = ∅ and adds
//     x* = argmin_{j ∉ B_i, j ≠ i} 2Σ_{t∈B_i} U_tj + U_jj + ṽ_j
// (the increase of J) until |B_i| = B. A point is not its own basis, as in the
// sparse coding (5.5). Because greedy selection is approximate, once B_i has
// B elements a new B_i is kept only if its term is not larger than the old
// B_i's under the current kernel — so from the first D-step on the objective
// never increases. (The first D-step replaces the sparse-coding sets, whose
// sizes differ from B, unconditionally: comparing sets of different size
// would need the γ₂Σ|B_i| term that fixing B drops.)
//
// Initialization (§5.2.2.2): μ = 1/m (Protocol 4, line 1) and D from the
// sparse coding (5.5) min_d ½‖x_i − Σ_{j≠i} d_j x_j‖² + γ₂‖d‖₁ in the input
// space (B_i = support of d), solved by cyclic coordinate descent; γ₂ is set
// per point as a fraction of λ_max = max_{j≠i} |x_jᵀx_i|.
//
// Cost per iteration: the m base kernels are evaluated once (O(m n² d)) to
// gather A (n·B × m); W costs O(n B m² ), the QP O(m²) per step, the D-step
// O(n² B). Memory: A (n B m doubles), W (m²), one n × n combined kernel.
//
// Thread safety: pure functions.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/mkl/kernel_bank.h"
#include "core/mkl/mkl_protocol.h"

namespace kls {

struct UmklOptions {
  double gamma1 = 0.5;     ///< γ₁ of (5.2): weight of the locality distortion (>= 0); ½ reproduces (5.4) as printed
  int num_bases = 10;      ///< B = |B_i| of the greedy D-step (>= 1; Table 5.3 uses 10)
  int max_iterations = 30;     ///< outer iterations of Protocol 4 (>= 1)
  double tolerance = 1e-6;     ///< stop when the relative objective decrease is below this (or D is unchanged)
  double sparse_coding_lambda_fraction = 0.1;  ///< γ₂ of (5.5) as a fraction of λ_max, in (0, 1)
  int sparse_coding_max_sweeps = 200;          ///< coordinate-descent sweeps per point (>= 1)
  double qp_tolerance = 1e-10;  ///< simplex QP: stop when ‖μ − Π(μ − ∇/L)‖∞ <= this
  int qp_max_iterations = 20000;  ///< simplex QP iteration cap (>= 1)
  Status Validate() const;
};

struct UmklResult {
  Eigen::VectorXd weights;               ///< μ on the simplex, one per bank kernel
  std::vector<std::vector<int>> bases;   ///< B_i (sorted point indices) for every point
  double objective = 0.0;                ///< (5.3) without γ₂Σ|B_i| at (μ, D)
  double initial_objective = 0.0;        ///< at μ = 1/m and the sparse-coding D (|B_i| != B in general)
  SolveReport stats;                      ///< objective_history: after each iteration (nonincreasing)
};

/// Protocol 4 on standardized points x (n × d) and a bank whose specs carry
/// their unit-trace scales. No labels. Errors: shapes, options, n < 2.
StatusOr<UmklResult> SolveUmkl(const Eigen::MatrixXd& x, const std::vector<BaseKernelSpec>& bank,
                               const UmklOptions& options, const SolveControl& control = {});

/// The μ-step problem (5.4) for fixed bases: the objective at K = Σ μ_t K_t
/// equals ½μᵀWμ + qᵀμ + constant.
struct UmklMuProblem {
  Eigen::MatrixXd w;       ///< W = Σ_i A_iᵀ P A_i (m × m, PSD)
  Eigen::VectorXd q;       ///< q = Σ_i A_iᵀ(γ₁ v_i − p_i)
  double constant = 0.0;   ///< ½ Σ_i ‖x_i‖²
};
UmklMuProblem BuildUmklMuProblem(const Eigen::MatrixXd& x, const std::vector<BaseKernelSpec>& bank,
                                 const std::vector<std::vector<int>>& bases, double gamma1);

/// The objective of (5.3) (without γ₂Σ|B_i|) for a combined kernel matrix K.
double UmklObjective(const Eigen::MatrixXd& x, const Eigen::MatrixXd& k, const std::vector<std::vector<int>>& bases,
                     double gamma1);

/// Protocol 4, lines 6–11 for one point i: greedy B_i of size min(b, n−1)
/// minimizing J(d) = dᵀ(κκᵀ∘P)d + ṽᵀd, with κ = K's column i, P = XXᵀ and
/// ṽ = κ ∘ (2γ₁ v_i − 2p_i). Returns the chosen indices in selection order.
std::vector<int> GreedyLocalBases(const Eigen::VectorXd& kappa, const Eigen::MatrixXd& p,
                                  const Eigen::VectorXd& linear, int i, int b);

/// Sparse coding (5.5) for point i by coordinate descent: the support of d.
std::vector<int> SparseCodingBases(const Eigen::MatrixXd& x, int i, double lambda_fraction, int max_sweeps);

/// Euclidean projection onto the simplex {μ >= 0, Σμ = 1} (sort-based, O(m log m)).
Eigen::VectorXd ProjectOntoSimplex(const Eigen::VectorXd& v);

struct SimplexQpResult {
  Eigen::VectorXd x;          ///< the minimizer on the simplex
  double objective = 0.0;     ///< ½xᵀWx + qᵀx
  int iterations = 0;         ///< accelerated projected-gradient steps
  bool polished = false;      ///< the exact KKT solve on the support was accepted
};

/// min ½xᵀWx + qᵀx over the simplex for symmetric PSD W (m × m). Errors:
/// shapes, non-finite input.
StatusOr<SimplexQpResult> SolveSimplexQp(const Eigen::MatrixXd& w, const Eigen::VectorXd& q, double tolerance = 1e-10,
                                         int max_iterations = 20000);

struct UmklClassifierOptions {
  UmklOptions solver;             ///< kernel learning (unsupervised)
  MklProtocolOptions protocol;    ///< standardization, bank, C grid, folds, class ids
  Status Validate() const;
};

/// UMKL classifier (thesis §5.3.2): standardize, bank (unit trace), μ by
/// Protocol 4 without labels, then C by k-fold CV of an SVM on the fixed
/// K = Σ μ_t K_t, final SVM; model with KernelCombination::kLinear and only
/// the kernels with μ_t > 0. y ∈ {±1} is used for the SVM only.
StatusOr<MklClassifierResult> TrainUmklClassifier(const Eigen::MatrixXd& x_raw, const Eigen::VectorXd& y,
                                                  const UmklClassifierOptions& options,
                                                  const SolveControl& control = {});

}  // namespace kls
