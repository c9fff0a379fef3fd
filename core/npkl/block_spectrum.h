// Warm-started block eigensolver for the positive spectrum of the SimpleNPKL
// dual matrix A = Σ_k w_k S_k − L (thesis Prop. 3.25; see positive_spectrum.h).
//
// SimpleNPKL needs A₊ at every iterate α_t (thesis (3.8), Algorithm 1), and
// A(α_t) moves little from one iterate to the next. Spectra's restarted
// Lanczos can only be seeded with one vector, so it re-converges all r wanted
// pairs from scratch every time. This solver instead starts from the whole
// previous block of Ritz vectors and refines it by block Rayleigh–Ritz on
// span[X, R, P] — LOBPCG without a preconditioner (Knyazev, SIAM J. Sci.
// Comput. 23(2), 2001): X the current Ritz block, R = AX − XΘ its residuals
// (only the unconverged wanted columns), P the previous update direction.
// Orthonormalization is by two Gram–Schmidt passes against X and SVQB
// (Stathopoulos & Wu, SIAM J. Sci. Comput. 23(6), 2002), which drops
// directions that have become linearly dependent.
//
// Wanted pairs: every Ritz value > positive_threshold. Converged when each
// wanted pair has ‖A x − θ x‖ ≤ tolerance · max(1, |θ_1|) (θ_1 the largest Ritz
// value, an estimate of ‖A₊‖ — positive eigenvalues below tolerance·‖A‖ add
// nothing to A₊ at that accuracy) and at least `guard_min` Ritz values of the
// block are ≤ positive_threshold; when the block has fewer non-positive Ritz
// values it grows by `guard` columns. Like any Krylov or subspace method it
// cannot prove that no positive eigenvalue was missed; SimpleNPKL therefore
// claims convergence only from a Spectra evaluation (simple_npkl.cc).
//
// Blocks are stored transposed (p × n: one Ritz vector per row) so that the
// Laplacian product is the cache-blocked Y·L of blocked_laplacian.h and every
// term S_k touches two contiguous columns. Deterministic for fixed inputs and
// seed; the thread count changes only which thread computes a column.
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "core/common/status.h"
#include "core/npkl/blocked_laplacian.h"
#include "core/npkl/positive_spectrum.h"

namespace kls {

struct BlockSpectrumOptions {
  /// Residual tolerance relative to max(1, largest Ritz value) (> 0).
  double tolerance = 1e-10;
  /// Rayleigh–Ritz iterations before giving up (>= 1).
  int max_iterations = 200;
  /// Columns added when the block holds fewer than guard_min non-positive
  /// Ritz values (>= 1).
  int guard = 4;
  /// Non-positive Ritz values the block must hold at convergence (>= 1).
  int guard_min = 2;
  /// Eigenvalues <= this count as non-positive (>= 0).
  double positive_threshold = 0.0;
  /// Seed of the random columns that pad or grow the block.
  uint64_t seed = 1;
  /// Threads of the block products (>= 1).
  int num_threads = 1;

  /// INVALID_ARGUMENT naming the field and value.
  Status Validate() const;
};

struct BlockSpectrumResult {
  PositiveSpectrum spectrum;   ///< A₊ (positive Ritz pairs, descending)
  Eigen::MatrixXd block;       ///< n × p: every Ritz vector, descending, for the next warm start
  Eigen::VectorXd ritz_values; ///< p Ritz values, descending
  int iterations = 0;          ///< Rayleigh–Ritz iterations
  bool converged = false;
};

/// Refines `start` (n × p₀, any p₀ >= 1 columns, need not be orthonormal) into
/// the top Ritz pairs of A. `laplacian` must be a BlockedLaplacian of
/// a.laplacian(). The block has max(p₀, guard + 1) columns, more if it grows.
/// Returns converged = false (not an error) when max_iterations is reached;
/// the caller then falls back to Lanczos.
/// Errors: INVALID_ARGUMENT for bad options or a start with the wrong number
/// of rows; INTERNAL for non-finite values or a block larger than n / 2.
StatusOr<BlockSpectrumResult> BlockPositiveSpectrum(const DualMatrix& a, const BlockedLaplacian& laplacian,
                                                    const Eigen::MatrixXd& start,
                                                    const BlockSpectrumOptions& options);

}  // namespace kls
