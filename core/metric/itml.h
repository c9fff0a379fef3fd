// ITML: information-theoretic metric learning (Davis, Kulis, Jain, Sra &
// Dhillon, "Information-theoretic metric learning", ICML 2007, Algorithm 1).
//
// Problem (paper (4.3)), over Mahalanobis matrices M ⪰ 0 (d × d) and slacks ξ:
//
//     min_{M ⪰ 0, ξ}  D_ld(M, M0) + γ · D_ld(diag(ξ), diag(ξ0))
//     s.t.  d_M(x_i, x_j) <= ξ_c(i,j)   for must-link pairs (i, j),
//           d_M(x_i, x_j) >= ξ_c(i,j)   for cannot-link pairs,
//
// with d_M(x, y) = (x − y)ᵀ M (x − y), D_ld the LogDet divergence, and ξ0 the
// bounds: `lower` for must-link (similar) pairs and `upper` for cannot-link
// (dissimilar) pairs (paper §3 writes u for the similar-pair bound and l for
// the dissimilar one; §5 sets them from the 5th and 95th percentiles of the
// distance distribution; here lower < upper are those percentiles of
// d_{M0}(x_i, x_j) over the constrained pairs).
//
// Method (Algorithm 1): cyclic Bregman projections, one constraint at a time,
// each a rank-one update
//     p = d_M(x_i, x_j),  δ = +1 (must-link) / −1 (cannot-link),
//     α = min(λ_ij, δ · γ/(γ+1) · (1/p − 1/ξ_ij)),  β = δα / (1 − δαp),
//     ξ_ij ← γ ξ_ij / (γ + δ α ξ_ij),  λ_ij ← λ_ij − α,
//     M ← M + β M (x_i − x_j)(x_i − x_j)ᵀ M,
// at O(d²) per projection, sweeping the constraints in their order. The α
// line is the exact projection (after it d_M = ξ_ij unless λ_ij hits 0): by
// Sherman–Morrison the update gives M⁻¹ ← M⁻¹ − δα vvᵀ, d_M ← p/(1 − δαp) and
// 1/ξ ← 1/ξ + δα/γ, and equating the two gives α = δ γ/(γ+1) (1/p − 1/ξ). The
// paper's printed Algorithm 1 has (δ/2)(1/p − γ/ξ) there, whose fixed point is
// d_M = ξ/γ and violates the KKT conditions below; the authors' reference code
// (itml_alg.m) uses γ/(γ+1) (1/p − 1/ξ), as here. At the fixed point:
// λ ≥ 0, λ_ij > 0 only for active constraints (d_M = ξ_ij), and
//     M⁻¹ = M0⁻¹ + Σ δ_ij λ_ij (x_i − x_j)(x_i − x_j)ᵀ,
//     1/ξ_ij = 1/ξ0_ij − δ_ij λ_ij / γ.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <Eigen/Dense>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/constraints.h"

namespace kls {

/// The largest feature dimension SolveItml accepts: every projection costs
/// O(d²) and M is d × d (dense).
inline constexpr int kItmlMaxDimension = 2000;

struct ItmlOptions {
  /// Slack trade-off γ > 0 (paper (4.3), Algorithm 1): large γ = hard constraints.
  double gamma = 1.0;
  /// Must-link (similar-pair) distance bound, finite and > 0; unset = the 5th
  /// percentile of d_{M0}(x_i, x_j) over the constrained pairs (a seeded
  /// sample of 100,000 when there are more; paper §5).
  std::optional<double> lower;
  /// Cannot-link (dissimilar-pair) distance bound, finite and > 0; unset = the
  /// 95th percentile.
  std::optional<double> upper;
  /// Sweeps over the constraints, >= 1.
  int max_iterations = 1000;
  /// Stop when the relative change of λ over a sweep, ‖Δλ‖₁ / ‖λ‖₁, is below it.
  double tolerance = 1e-3;
  /// Seeds the percentile sample (the sweep order is the constraints' order).
  uint64_t seed = 1;
  /// Reserved (the projections are sequential); 0 = all hardware threads.
  int num_threads = 1;
  /// M0 (d × d, symmetric positive definite); empty = identity.
  Eigen::MatrixXd prior;

  /// Errors name the field: "<path>.gamma = -1 must be positive and finite",
  /// "<path>.lower = 0 must be finite and > 0 (unset = …)", "<path>.prior[k] =
  /// nan is not finite" (k row-major). Checks every option on its own; the
  /// prior's shape is checked against the features by SolveItml.
  Status Validate(std::string_view path = "itml") const;
};

struct ItmlResult {
  Eigen::MatrixXd metric;  ///< M (d × d), symmetric PSD
  Eigen::MatrixXd factor;  ///< L (d × r), M = L Lᵀ, r = rank of M (eigenvalues clipped at 0)
  int sweeps = 0;
  bool converged = false;
  double lower = 0.0, upper = 0.0;  ///< the bounds used
  /// Max over the used pairs of the violation of d_M(x_i, x_j) against its
  /// slack-adjusted bound ξ_ij (must: d − ξ; cannot: ξ − d), relative to ξ_ij.
  double max_violation = 0.0;
  /// Pairs skipped as carrying no information: i == j, or x_i == x_j.
  int skipped_pairs = 0;
  /// Per constraint (indexed like constraints.pairs): the dual λ_ij ≥ 0 and
  /// the final slack bound ξ_ij; 0 and 0 for skipped pairs.
  Eigen::VectorXd lambda;
  Eigen::VectorXd slack;
  SolveReport stats;
};

/// features n × d; the constraints' pairs index rows. Errors: invalid options,
/// invalid constraints, d > kItmlMaxDimension, a prior of the wrong shape or
/// not positive definite, non-finite features.
StatusOr<ItmlResult> SolveItml(const Eigen::MatrixXd& features, const PairwiseConstraints& constraints,
                               const ItmlOptions& options, const SolveControl& control = {});

}  // namespace kls
