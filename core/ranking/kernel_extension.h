// Extending a transductively learned kernel to unseen items (thesis §6.3.3).
//
// 1. Kernel warping (eq. 6.9, Sindhwani, Niyogi & Belkin 2005): deform the
//    RKHS of an input kernel k_x by the data-dependent norm fᵀ M f, M = γ L̂,
//    L̂ = diag(K̂ 1) − K̂ the graph Laplacian of the learned kernel K̂:
//        k̃(x, y) = k_x(x, y) − κ_yᵀ (I + M K_x)⁻¹ M κ_x,
//    κ_x = (k_x(x_1, x), …, k_x(x_n, x)). W = (I + M K_x)⁻¹ M is symmetric and
//    computed once (O(n³)); each k̃(x, y) then costs O(n d + n²). Negative
//    entries of K̂ are clipped to 0 first so that L̂ is a true (PSD) graph
//    Laplacian, as the warping theory requires M ⪰ 0. The input kernel is the
//    RBF exp(−‖x − y‖² / width) on the visual features.
//    On the training items, k̃ gives K̃ = K_x (I + M K_x)⁻¹ = (K_x⁻¹ + M)⁻¹.
//
// 2. Harmonic extension (any embedding kernel K = V Vᵀ): a new point gets
//    v(x) = Σ_{j ∈ kNN(x)} w_j v_j / Σ w_j, w_j = exp(−‖x − x_j‖² / 2σ²), the
//    value at x of the harmonic function that interpolates V on the training
//    points over the k-NN star graph of x. A point that coincides with a
//    training item (distance <= duplicate_tolerance) keeps that item's row —
//    harmonic functions are fixed on the labelled (here: training) set — so
//    training items reproduce the transductive kernel exactly.
//
// Thread safety: const methods are re-entrant.
#pragma once

#include <Eigen/Core>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/learned_kernel.h"

namespace kls {

class KernelWarping {
 public:
  /// `train` n × d visual features of the training items; `learned` K̂ (n × n,
  /// symmetric); `width` > 0 of the RBF input kernel; `strength` γ >= 0.
  /// Errors: INVALID_ARGUMENT naming the bad argument; FAILED_PRECONDITION if
  /// I + M K_x is singular.
  static StatusOr<KernelWarping> Create(const Eigen::MatrixXd& train, const Eigen::MatrixXd& learned, double width,
                                        double strength = 1.0);

  /// k̃ between every row of `a` and every row of `b` (|a| × |b|), eq. (6.9).
  /// Errors: feature dimension mismatch or non-finite input.
  StatusOr<Eigen::MatrixXd> Matrix(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) const;

  /// k_x between rows (|a| × |b|).
  Eigen::MatrixXd InputKernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) const;

  const Eigen::MatrixXd& deformation() const { return m_; }  ///< M = γ L̂
  const Eigen::MatrixXd& warp() const { return w_; }         ///< W = (I + M K_x)⁻¹ M

 private:
  Eigen::MatrixXd train_, m_, w_;
  double width_ = 1.0;
};

struct HarmonicExtensionOptions {
  int neighbors = 10;                 ///< k nearest training points (>= 1)
  double sigma = 0.0;                 ///< Gaussian width; <= 0: mean distance to the k neighbours
  double duplicate_tolerance = 1e-12; ///< distance at or below which x is a training item (>= 0)
  Status Validate() const;
};

/// Rows v(x) (|queries| × r) of the harmonic extension of `kernel`'s embedding
/// from `train` (n × d, the points of the kernel's n items) to `queries`.
/// Errors: INVALID_ARGUMENT for bad options, shape mismatches, non-finite input;
/// CANCELLED / DEADLINE_EXCEEDED when `control` stops it (checked before each
/// block of kExtensionBlock query rows: one rows × n × d distance product).
inline constexpr int kExtensionBlock = 16;
StatusOr<LearnedKernel::Embedding> HarmonicExtension(const LearnedKernel& kernel, const Eigen::MatrixXd& train,
                                                     const Eigen::MatrixXd& queries,
                                                     const HarmonicExtensionOptions& options = {},
                                                     const SolveControl& control = SolveControl());

}  // namespace kls
