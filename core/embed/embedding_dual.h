// The dual matrix of the SimpleNPKL embedding solvers (thesis §3.4) and its
// positive spectrum.
//
// CMVU (3.25), MVE (3.26) and SPE (§3.4.3) all need, once per iteration, the
// positive part A₊ of
//
//     A = H (M + Σ_k w_k T_k) H,      T_k = (e_i − e_j)(e_i − e_j)ᵀ,
//
// where tr(T_k K) = K_ii + K_jj − 2K_ij is the squared embedding distance of
// pair k = (i, j), H = I − 11ᵀ/n the centering projection and M the method's
// fixed "prior" matrix, given as a sum of three cheap parts:
//
//     M = S + F diag(s) Fᵀ + σ I      (S sparse symmetric, F n × q).
//
// CMVU: M = Y (the label kernel; F = class indicators), MVE: M = K₀ =
// 2 U_d U_dᵀ − I (F = U_d, s = 2, σ = −1), SPE: M = W (S = the k-NN
// adjacency). H enforces the centering constraint Σ_ij K_ij = 0 of MVU/MVE/SPE
// exactly: max tr(A K) over centered K ⪰ 0 is max tr(HAH K) over all K ⪰ 0,
// and the maximizer of the closed form (3.8) then lies in range(H). (T_k 1 = 0,
// so H changes only the prior.)
//
// A is applied in O(nnz(S) + n q + m) and never densified on the Lanczos
// path (thesis §3.3.2). Compare core/npkl/positive_spectrum.h: the positive
// spectrum below follows the same rank-growth rule, but on this operator;
// ComputePositiveSpectrum there is written for DualMatrix only (a template on
// the operator type would let both share one implementation).
//
// Thread safety: const methods are re-entrant.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <vector>

#include "core/common/status.h"
#include "core/npkl/positive_spectrum.h"

namespace kls {

/// The fixed part M = S + F diag(s) Fᵀ + σ I of the embedding dual matrix.
struct EmbeddingPrior {
  Eigen::SparseMatrix<double> sparse;  ///< S: n × n symmetric (both triangles), or 0 × 0 for none
  Eigen::MatrixXd factor;              ///< F: n × q, or n × 0
  Eigen::VectorXd factor_scale;        ///< s: q values
  double identity = 0.0;               ///< σ

  /// Shapes consistent with n points, finite values, S symmetric.
  Status Validate(int n) const;
  /// tr(M V Vᵀ) = Σ_c v_cᵀ M v_c for an n × r factor V. O(r (nnz(S) + n q)).
  double TraceWith(const Eigen::MatrixXd& v) const;
  /// Dense M (n × n).
  Eigen::MatrixXd ToDense(int n) const;
  /// y = M x.
  void Apply(const Eigen::Ref<const Eigen::VectorXd>& x, Eigen::Ref<Eigen::VectorXd> y) const;
};

/// y = A x for A = H (M + Σ_k w_k T_k) H (see the file comment), in the
/// operator shape Spectra expects. Keeps references to `prior`, `pair_i`,
/// `pair_j`, which must outlive it.
class EmbeddingDualMatrix {
 public:
  using Scalar = double;

  EmbeddingDualMatrix(int n, const EmbeddingPrior& prior, const std::vector<int>& pair_i,
                      const std::vector<int>& pair_j);

  /// Pair weights w (one per pair).
  void set_weights(const Eigen::VectorXd& w) { weights_ = w; }
  const Eigen::VectorXd& weights() const { return weights_; }

  Eigen::Index rows() const { return n_; }
  Eigen::Index cols() const { return n_; }
  int num_pairs() const { return static_cast<int>(pair_i_->size()); }

  /// y_out = A x_in. O(nnz(S) + n q + m).
  void perform_op(const double* x_in, double* y_out) const;
  /// Dense A (n × n), for the dense path and tests.
  Eigen::MatrixXd ToDense() const;

 private:
  int n_;
  const EmbeddingPrior* prior_;
  const std::vector<int>* pair_i_;
  const std::vector<int>* pair_j_;
  Eigen::VectorXd weights_;
};

/// A₊ of an EmbeddingDualMatrix: the dense solver when n <= dense_threshold
/// (or the wanted rank reaches n/2), otherwise Spectra Lanczos (largest
/// algebraic) starting at `options.initial_rank` (<= 0: 2) eigenpairs and
/// doubling until the smallest computed eigenvalue is <= positive_threshold.
/// `warm_start` (optional, n values) seeds Lanczos. Same contract as
/// ComputePositiveSpectrum (core/npkl/positive_spectrum.h).
StatusOr<PositiveSpectrum> EmbeddingPositiveSpectrum(const EmbeddingDualMatrix& a, const SpectrumOptions& options,
                                                     const Eigen::VectorXd* warm_start = nullptr);

}  // namespace kls
