// Exact Euclidean projection onto the SVM dual domain
//     P = { x : 0 <= x <= C·e,  xᵀy = 0 },  y ∈ {±1}ⁿ
// (onk paper §4.2, eq. (15)), the key step of constrained gradient descent.
//
// Method. By the KKT conditions (16)–(20) the projection is
//     x*_i = max(min(v_i − λ* y_i, C), 0)                               (21)
// where λ* is the root of the nonincreasing, piecewise linear function
//     h(λ) = Σ_i y_i max(min(v_i − λ y_i, C), 0)                        (22)
// (Theorem 3). Writing w_i = y_i v_i, each term is y_i·clip(…) =
//     L_i (λ <= a_i),  w_i − λ (a_i < λ < a_i + C),  R_i (λ >= a_i + C)
// with a_i = w_i − C, L_i = C, R_i = 0 for y_i = +1 and a_i = w_i, L_i = 0,
// R_i = −C for y_i = −1; so h has the 2n breakpoints {a_i, a_i + C} and slope
// −#(free terms) between them.
//
// Instead of bisection or a secant search we locate λ* exactly by a
// median-of-breakpoints search: keep an open interval (lo, hi) that contains
// λ*, the indices whose breakpoints still lie inside it, and the sums of the
// terms already fixed on it; evaluate h at the median breakpoint, halve the
// breakpoint set, and move indices with no breakpoint left inside into the
// sums. Each round costs O(#breakpoints inside), which halves, so the total is
// O(n) (nth_element is linear on average). When no breakpoint is left h is
// linear on (lo, hi): h(λ) = A − Fλ and λ* = A/F. If F = 0, h is constant
// (and zero) on the interval; every λ in it gives the same x*.
//
// Degenerate y (all labels equal): then P = {0} and the projection is 0.
//
// Thread safety: pure function. Memory: O(n) scratch.
#pragma once

#include <Eigen/Core>

#include "core/common/status.h"

namespace kls {

/// Result of ProjectOntoBoxHyperplane.
struct BoxHyperplaneProjection {
  Eigen::VectorXd x;     ///< π_P(v), n entries in [0, C] with xᵀy = 0 (to rounding)
  double lambda = 0.0;   ///< λ* of (22): the multiplier of xᵀy = 0
  int rounds = 0;        ///< median-search rounds performed (≈ log₂ 2n)
};

/// π_P(v) for P = {0 <= x <= C, xᵀy = 0} (eq. (15)) in expected O(n) time.
/// `y` holds ±1 entries (any other value is an error naming its index),
/// `c` must be finite and > 0, and v must be finite.
StatusOr<BoxHyperplaneProjection> ProjectOntoBoxHyperplane(const Eigen::VectorXd& v,
                                                           const Eigen::VectorXd& y, double c);

/// Same, without validation or allocation of the result: writes π_P(v) into
/// `x` (resized to n) and returns λ*. For inner loops whose inputs were
/// validated once (y ∈ {±1}, c > 0 finite, v finite). `scratch` is reused
/// between calls to avoid allocations.
double ProjectOntoBoxHyperplaneUnchecked(const Eigen::VectorXd& v, const Eigen::VectorXd& y, double c,
                                         Eigen::VectorXd& x, std::vector<double>* scratch = nullptr,
                                         std::vector<int>* index_scratch = nullptr, int* rounds = nullptr);

/// Validates labels as ±1 (field name used in errors) — shared by ONK and MKL.
Status ValidateSignLabels(const Eigen::VectorXd& y, const char* field);

}  // namespace kls
