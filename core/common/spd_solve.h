// Dense symmetric positive definite solves that a SolveControl can stop.
//
// SolveSpd factors A = L Lᵀ by a blocked right-looking Cholesky (blocks of
// kSpdBlock columns; the trailing update A₂₂ −= L₂₁ L₂₁ᵀ in column panels of
// kSpdPanel), asking control.CheckStop before every block and every panel,
// so a cancelled or expired call returns within one panel update (at
// n = 5,000: 5,000 × 128 × 128 multiply-adds, a few milliseconds) instead of
// after the whole O(n³/3) factorization. Then X = L⁻ᵀ L⁻¹ B by two
// triangular solves. The blocks use Eigen's LLT, triangular solve and GEMM,
// so the arithmetic is that of a blocked Cholesky (results agree with
// Eigen::LLT to rounding, not bit for bit).
//
// Thread safety: pure function; concurrent calls are safe.
#pragma once

#include <Eigen/Core>
#include <string>

#include "core/common/solve_control.h"
#include "core/common/status.h"

namespace kls {

inline constexpr int kSpdBlock = 128;
inline constexpr int kSpdPanel = 128;

/// X with A X = B (A n × n symmetric positive definite — only its lower
/// triangle is read —, B n × c). Errors: INVALID_ARGUMENT on mismatched
/// shapes; FAILED_PRECONDITION "<what>: the matrix is not positive definite"
/// when a pivot is not positive; CANCELLED / DEADLINE_EXCEEDED "<what>: ..."
/// when `control` stops it.
StatusOr<Eigen::MatrixXd> SolveSpd(Eigen::MatrixXd a, const Eigen::MatrixXd& b, const SolveControl& control,
                                   const std::string& what);

}  // namespace kls
