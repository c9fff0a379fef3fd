// The growing-rank Lanczos loop behind every sparse positive-spectrum
// computation: SimpleNPKL's A = Σ w_k S_k − L (positive_spectrum.h) and the
// embedding duals' A = H(K₀ + Σ α_k T_k)H (core/embed/embedding_dual.h).
//
// Lanczos needs the number of wanted eigenpairs up front, so the loop asks for
// r of them, and doubles r while every computed eigenvalue is still above the
// growth floor: only then are all positive eigenvalues known. Each run gets one
// retry with a doubled Krylov subspace (ncv) before the loop gives up on
// Lanczos and falls back to DensePositiveSpectrum(a.ToDense()); so does a wanted r of n/2 or
// more (Lanczos then costs about as much as a dense solve, and Spectra needs
// nev < ncv <= n), and so does a Spectra exception (a collapsed Krylov space,
// e.g. a matrix of rank 1–2).
//
// Thread safety: a pure function of its arguments; `Op::perform_op` must be
// const and re-entrant.
#pragma once

#include <Eigen/Core>
#include <Spectra/SymEigsSolver.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <string>

#include "core/common/lanczos_retry.h"
#include "core/common/status.h"
#include "core/npkl/positive_spectrum.h"

namespace kls {

/// Spectra's operator shape (Scalar, rows(), cols(), perform_op) over any
/// `Op` with those members; holds a pointer to `op`, which must outlive it.
template <typename Op>
class SpectraView {
 public:
  using Scalar = double;
  explicit SpectraView(const Op& op) : op_(&op) {}
  Eigen::Index rows() const { return op_->rows(); }
  Eigen::Index cols() const { return op_->cols(); }
  void perform_op(const double* x_in, double* y_out) const { op_->perform_op(x_in, y_out); }

 private:
  const Op* op_;
};

/// The eigenpairs with λ > threshold of (values, vectors), in descending order.
void KeepAbove(const Eigen::VectorXd& values, const Eigen::MatrixXd& vectors, double threshold,
               PositiveSpectrum* out);

/// A₊ of `a` by the loop above, starting at `initial_rank` (>= 1) pairs. r
/// doubles while the smallest computed eigenvalue exceeds
/// max(options.positive_threshold, relative_floor · |λ_max|). `warm_start`
/// (optional; n values) seeds every run when finite and non-zero. The dense
/// fallback (`Op::ToDense()`, n² memory) is also used when n <=
/// options.dense_threshold or n < 4; its result counts the Lanczos work done
/// before it (matrix_vector_products, lanczos_runs).
/// Errors: INVALID_ARGUMENT for bad options or a warm start of the wrong size;
/// INTERNAL when the dense solver fails.
template <typename Op>
StatusOr<PositiveSpectrum> LanczosPositiveSpectrum(const Op& a, const SpectrumOptions& options, int initial_rank,
                                                   double relative_floor, const Eigen::VectorXd* warm_start) {
  auto dense = [&](long long matvecs, int runs) -> StatusOr<PositiveSpectrum> {
    KLS_ASSIGN_OR_RETURN(PositiveSpectrum s, DensePositiveSpectrum(a.ToDense(), options.positive_threshold));
    s.matrix_vector_products = matvecs;
    s.lanczos_runs = runs;
    return s;
  };
  KLS_RETURN_IF_ERROR(options.Validate().WithContext("SpectrumOptions"));
  const int n = static_cast<int>(a.rows());
  if (warm_start != nullptr && warm_start->size() != n) {
    return InvalidArgumentError("warm_start: has " + std::to_string(warm_start->size()) +
                                " entries but the matrix has " + std::to_string(n) + " rows");
  }
  if (n <= options.dense_threshold || n < 4) return dense(0LL, 0);
  int nev = std::max(1, initial_rank);
  const bool use_warm = warm_start != nullptr && warm_start->norm() > 0.0 && warm_start->allFinite();
  long long matvecs = 0;
  int runs = 0;
  SpectraView<Op> view(a);
  while (true) {
    if (2 * nev >= n) return dense(matvecs, runs);
    std::optional<PositiveSpectrum> found;
    const bool converged = LanczosWithRetry(n, nev, /*margin=*/20, [&](int ncv) {
      Spectra::SymEigsSolver<SpectraView<Op>> eigs(view, nev, ncv);
      if (use_warm) {
        eigs.init(warm_start->data());
      } else {
        eigs.init();  // Spectra's fixed-seed start vector: deterministic
      }
      ++runs;
      if (!ComputeEigenpairs(eigs, nev, Spectra::SortRule::LargestAlge, options.lanczos_max_restarts,
                             options.lanczos_tolerance, Spectra::SortRule::LargestAlge, &matvecs)) {
        return false;
      }
      const Eigen::VectorXd values = eigs.eigenvalues();
      const double floor = std::max(options.positive_threshold, relative_floor * std::abs(values.maxCoeff()));
      if (values.minCoeff() > floor) return true;  // every computed eigenvalue is positive: maybe more; grow r
      PositiveSpectrum out;
      KeepAbove(values, eigs.eigenvectors(), options.positive_threshold, &out);
      out.used_dense = false;
      out.lanczos_runs = runs;
      out.final_rank_requested = nev;
      out.matrix_vector_products = matvecs;
      found = std::move(out);
      return true;
    });
    if (found) return *std::move(found);
    if (!converged) return dense(matvecs, runs);
    nev *= 2;
  }
}

}  // namespace kls
