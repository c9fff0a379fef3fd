// The reduced Laplacian Δ̃ = Δ_LL − Δ_LU Δ_UU⁻¹ Δ_UL of BCDNPKL's boundary
// reduction (BCDNPKL paper, Prop. 1) as an operator for Gauss–Seidel sweeps.
//
// Two representations, chosen by cost:
//   dense     Δ̃ as an l × l matrix (what the paper forms). Memory 8 l² bytes;
//             a column product V Δ̃_{:,i} costs r·l.
//   factored  Δ̃ = Δ_LL − BᵀB with B = D^{-1/2} L⁻¹ P Δ_UL (u × l), from the
//             sparse LDLᵀ factorization Δ_UU = Pᵀ L D Lᵀ P. Memory 8 u·l bytes;
//             a column product costs r·(nnz(Δ_LL)_i + 2u) through Z = V Bᵀ,
//             which the sweep keeps current.
// With the paper's protocols most points are constrained (l ≈ 0.9 n on adult
// with 1.2 n pairs) and u = n − l is small, so the factored form is ~l/(2u)
// times cheaper per sweep and never holds an l × l matrix: at n = 16,100 the
// dense Δ̃ needs 1.7 GB, B 0.17 GB.
//
// A sweep visits columns in blocks of kBlock. BeginBlock forms
// P = Z B_blk (one GEMM); within the block, column i's product adds the
// changes d_k of the block's earlier columns through the block Gram matrix
// G = B_blkᵀ B_blk (precomputed); EndBlock folds them into Z (one GEMM). So the
// Gauss–Seidel order is exact (every column sees its predecessors' new
// values) while the O(r·u·l) work per sweep runs as matrix–matrix products.
#pragma once

#include <Eigen/Core>
#include <Eigen/OrderingMethods>
#include <Eigen/SparseCholesky>
#include <Eigen/SparseCore>
#include <memory>
#include <utility>
#include <vector>

#include "core/common/status.h"

namespace kls {

class ReducedLaplacian {
 public:
  using SparseMatrix = Eigen::SparseMatrix<double>;
  using Ldlt = Eigen::SimplicialLDLT<SparseMatrix, Eigen::Lower, Eigen::AMDOrdering<int>>;
  enum class Representation { kAuto, kDense, kFactored };
  static constexpr int kBlock = 256;

  /// Splits the symmetric `laplacian` into L (points with local[g] >= 0, local
  /// index local[g]) and U (the others, in increasing global order), factors
  /// Δ_UU and builds Δ̃. INVALID_ARGUMENT when Δ_UU is not positive definite
  /// (the message names the smallest pivot and suggests δ > 0) or some
  /// Δ̃_ii <= 0. kAuto picks factored when 2u < l.
  static StatusOr<ReducedLaplacian> Build(const SparseMatrix& laplacian, const std::vector<int>& boundary,
                                          Representation representation = Representation::kAuto);

  int l() const { return static_cast<int>(boundary_.size()); }
  int u() const { return static_cast<int>(interior_.size()); }
  bool factored() const { return factored_; }
  double Diagonal(int i) const { return diag_[i]; }
  const std::vector<int>& boundary() const { return boundary_; }
  const std::vector<int>& interior() const { return interior_; }

  /// Φ_U = −Δ_UU⁻¹ Δ_UL Vᵀ (Prop. 1's harmonic extension), u × r.
  Eigen::MatrixXd ExtendInterior(const Eigen::MatrixXd& v) const;

  /// out = V Δ̃ (r × l), for objectives and residuals (not the sweep path).
  void Apply(const Eigen::MatrixXd& v, Eigen::MatrixXd* out) const;
  /// y = Δ̃ x for one l-vector (the certificate's Lanczos operator):
  /// Δ_LL x − Δ_LU Δ_UU⁻¹ Δ_UL x by the sparse LDLᵀ (dense Δ̃ x in the dense
  /// form), O(nnz(Δ) + nnz(L)) — no pass over the dense B.
  void ApplyVector(const double* x, double* y) const;
  /// tr(V Δ̃ Vᵀ).
  double Quadratic(const Eigen::MatrixXd& v) const;
  /// ‖Δ̃‖_F (computed once, on first call).
  double FrobeniusNorm() const;

  /// Threads for the sweep's GEMMs (>= 1). The work is split into `threads`
  /// contiguous slices of Z's u columns, and partial products are summed in
  /// slice order, so results depend only on the thread count.
  void SetThreads(int threads) { threads_ = threads < 1 ? 1 : threads; }

  // ---- The sweep protocol (Gauss–Seidel over columns 0..l−1 in order) ----
  /// Starts a sweep at V. Z = V Bᵀ is carried over from the previous sweep
  /// (the blocks keep it current); `resync` (and the first sweep) recompute it
  /// from V, which bounds the drift of the incremental updates.
  void BeginSweep(const Eigen::MatrixXd& v, bool resync);
  /// tr(V Δ̃ Vᵀ) at the end of a sweep, from the carried Z (cheaper than
  /// Quadratic, which recomputes V Bᵀ).
  double QuadraticAfterSweep(const Eigen::MatrixXd& v) const;
  /// Columns [first, first + width) come next; width <= kBlock, blocks in
  /// order. Call before the block's first ColumnProduct.
  void BeginBlock(int first, int width);
  /// out = V Δ̃_{:,i} with the current V (i in the open block; columns
  /// before i already updated and reported with ColumnChanged).
  void ColumnProduct(const Eigen::MatrixXd& v, int i, Eigen::VectorXd* out);
  /// Column i changed by `delta` (new − old).
  void ColumnChanged(int i, const Eigen::VectorXd& delta);
  /// Closes the open block (folds its changes into Z).
  void EndBlock();
  /// The Z = V Bᵀ carried between sweeps (empty in the dense form or before
  /// the first sweep), so that a checkpoint can restore it bit for bit.
  const Eigen::MatrixXd& CarriedProduct() const { return z_; }
  /// Restores a CarriedProduct() saved after a sweep at the same V. Ignored in
  /// the dense form; a Z of the wrong shape is recomputed by BeginSweep.
  void RestoreCarriedProduct(Eigen::MatrixXd z) {
    if (factored_) z_ = std::move(z);
  }

 private:
  ReducedLaplacian() = default;

  std::vector<int> boundary_, interior_;
  SparseMatrix lap_ll_;  // Δ_LL, l × l
  SparseMatrix lap_ul_;  // Δ_UL, u × l
  std::unique_ptr<Ldlt> interior_ldlt_;  // Δ_UU (heap: SimplicialLDLT is not movable)
  bool factored_ = false;
  Eigen::MatrixXd dense_;  // Δ̃ (dense representation)
  Eigen::MatrixXd b_;      // B, u × l (factored representation)
  std::vector<Eigen::MatrixXd> block_gram_;  // B_blkᵀ B_blk per block
  Eigen::VectorXd diag_;
  mutable double frobenius_ = -1.0;

  // Sweep state (factored).
  Eigen::MatrixXd z_;        // V Bᵀ, r × u
  Eigen::MatrixXd p_;        // Z B_blk at BeginBlock, r × width
  Eigen::MatrixXd changes_;  // d_k of the open block, r × width
  int block_first_ = 0, block_width_ = 0;
  int threads_ = 1;
  std::vector<Eigen::MatrixXd> partial_;  // per-slice Z B_blk
};

}  // namespace kls
