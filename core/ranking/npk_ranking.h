// Non-parametric kernel ranking (thesis ch. 6, §6.3).
//
// Problem (6.2): learn K ⪰ 0 on n items that is maximally dependent (HSIC,
// Definition 6.1) on a text kernel K_t while visual neighbours stay close:
//
//     min_{K,ξ}  −tr(H K H K_t) + (C/2) Σ_{(i,j)∈N} ξ_ij²
//     s.t.       K ⪰ 0,  tr(K K) <= B,  tr(K A^{ij}) <= d_ij² + ξ_ij  ∀(i,j) ∈ N,
//
// H = I − 11ᵀ/n, N the symmetric k-NN pairs of the visual features, d_ij their
// visual distance, tr(K A^{ij}) = K_ii + K_jj − 2K_ij.
//
// Dual (6.3)–(6.5): with α >= 0 and ξ = α/C,
//     J(K, α) = tr((Σ α_ij A^{ij} − H K_t H) K) − Σ α_ij d_ij² − (1/2C) Σ α_ij²,
//     g(α) = min_K J = −√B ‖A₊‖_F − Σ α d² − (1/2C)‖α‖²,  A = H K_t H − Σ α_ij A^{ij}
// (Protocol 5 step 3; the sign in (6.6) as printed is flipped), and the inner
// maximizer is the closed form of Theorem 6.34 / eq. (6.8):
//     K*(α) = A₊ √(B / tr(A₊ A₊)).
// Protocol 5: α ← max(0, α + s ∇g),  ∇g_ij = tr(K* A^{ij}) − d_ij² − α_ij/C  (step 6).
// g is concave; the step length s is found by backtracking on the ascent
// inequality g(α⁺) >= g(α) + ⟨∇g, α⁺ − α⟩ − ‖α⁺ − α‖²/(2s) (s doubled after
// an accepted step, halved on failure).
//
// Certified stopping rule: K*(α) is primal feasible (ξ = max(0, ·)), so
// P(K*(α)) − g(α) >= P(K*(α)) − P* >= 0; the solver stops when the relative
// gap (P − g)/max(1, |P|) <= tolerance.
//
// Low-rank form (§6.3.4): K = V P Vᵀ with V (n × m) the m eigenvectors of the
// smallest eigenvalues of the normalized k-NN graph Laplacian of the visual
// features (orthonormal, so tr(KK) = tr(PP)); the problem is the same in P
// with A_m = Vᵀ H K_t H V − Σ α_ij e_ij e_ijᵀ, e_ij = V_i − V_j, and each
// iteration decomposes an m × m matrix: O(|N| m² + m³). m = 0 (full mode)
// uses V = I_n: O(|N| + n³) per iteration.
//
// Scale. d_ij (feature units) and K (tr KK <= B) have unrelated units. With
// distance_ratio > 0 the d_ij² are multiplied by one factor so that their mean
// equals distance_ratio × the mean over N of tr(K₀ A^{ij}), K₀ = K*(0) the
// pure-HSIC kernel: ratio < 1 makes the visual constraints bind. 0 keeps the
// raw d_ij². K_t is divided by ‖H K_t H‖_F (A's scale then does not depend on
// the text representation), which rescales the objective but not its minimizer.
//
// Thread safety: re-entrant.
#pragma once

#include <string_view>

#include <Eigen/Core>
#include <utility>
#include <vector>

#include "core/common/certificate.h"
#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"

namespace kls {

struct NpkRankingOptions {
  /// C > 0: weight of the squared slack of the distance constraints (6.2).
  double c = 10.0;
  /// B > 0: capacity tr(KK) <= B (6.2).
  double b = 1.0;
  /// k of the visual k-NN pairs N (the constraints) (>= 1, < n).
  int constraint_neighbors = 5;
  /// k of the visual k-NN graph whose Laplacian gives V in the low-rank form (>= 1, < n).
  int laplacian_neighbors = 10;
  /// m: number of smallest Laplacian eigenvectors (§6.3.4); 0 = full K (V = I). 0 <= m <= n.
  int low_rank = 30;
  /// > 0: rescale d² so mean d² = ratio · mean tr(K₀A^{ij}) (see file comment); 0 = raw d².
  double distance_ratio = 0.5;
  /// Projected-gradient iterations (>= 1).
  int max_iterations = 500;
  /// Stop when the relative duality gap <= tolerance (>= 0).
  double tolerance = 1e-4;
  /// First step length s (> 0); 0 = C (the curvature of the α² term is 1/C).
  double initial_step = 0.0;

  /// Errors name each field as "<path>.<field>" (a caller passes the field
  /// path its user wrote, e.g. the service passes the family's name).
  Status Validate(std::string_view path = "options") const;
};

struct NpkRankingResult {
  LearnedKernel kernel;          ///< K = V P Vᵀ in factored form (n × rank)
  Eigen::MatrixXd basis;         ///< V (n × m), empty in full mode (V = I)
  Eigen::MatrixXd core;          ///< P (m × m), or K itself (n × n) in full mode
  std::vector<std::pair<int, int>> pairs;  ///< N, i < j
  Eigen::VectorXd alpha;         ///< dual variables, one per pair
  Eigen::VectorXd squared_distances;  ///< the (rescaled) d_ij², one per pair
  double hsic = 0.0;             ///< tr(H K H K_t) / (n−1)² (Definition 6.1; K_t as given)
  /// objective_history = primal P per iteration;
  /// certificate: gap = the relative gap (P − g)/max(1, |P|) at the
  /// returned K, certified when <= tolerance; lower_bound = the dual value g.
  SolveReport stats;
};

/// Learns the kernel of (6.2) from visual features (n × d) and a text kernel
/// K_t (n × n, symmetric). Errors: INVALID_ARGUMENT for bad options or
/// shapes, non-finite input, or a non-symmetric K_t.
StatusOr<NpkRankingResult> SolveNpkRanking(const Eigen::MatrixXd& visual, const Eigen::MatrixXd& text_kernel,
                                           const NpkRankingOptions& options,
                                           const SolveControl& control = SolveControl());

/// The m eigenvectors of the smallest eigenvalues of the normalized k-NN graph
/// Laplacian of `points` (binary weights), n × m orthonormal, ascending.
StatusOr<Eigen::MatrixXd> SmoothLaplacianBasis(const Eigen::MatrixXd& points, int neighbors, int m);

}  // namespace kls
