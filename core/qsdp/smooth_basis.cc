#include "core/qsdp/smooth_basis.h"

#include <Eigen/Eigenvalues>
#include <Spectra/MatOp/SparseSymShiftSolve.h>
#include <Spectra/SymEigsShiftSolver.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/common/lanczos_retry.h"

namespace kls {

Status SmoothBasisOptions::Validate() const {
  if (!(relative_shift > 0.0) || !std::isfinite(relative_shift)) {
    return InvalidArgumentError("relative_shift = " + FormatNumber(relative_shift) + " must be finite and > 0");
  }
  if (!(tolerance > 0.0) || !std::isfinite(tolerance)) {
    return InvalidArgumentError("tolerance = " + FormatNumber(tolerance) + " must be finite and > 0");
  }
  if (max_restarts < 1) return InvalidArgumentError("max_restarts = " + std::to_string(max_restarts) + " must be >= 1");
  if (dense_threshold < 0) {
    return InvalidArgumentError("dense_threshold = " + std::to_string(dense_threshold) + " must be >= 0");
  }
  return OkStatus();
}

Eigen::SparseMatrix<double> CombinatorialLaplacian(const Eigen::SparseMatrix<double>& adjacency) {
  const Eigen::Index n = adjacency.rows();
  Eigen::VectorXd degree = Eigen::VectorXd::Zero(n);
  std::vector<Eigen::Triplet<double>> t;
  t.reserve(static_cast<size_t>(adjacency.nonZeros()) + static_cast<size_t>(n));
  for (int c = 0; c < adjacency.outerSize(); ++c) {
    for (Eigen::SparseMatrix<double>::InnerIterator it(adjacency, c); it; ++it) {
      if (it.row() == it.col()) continue;
      t.emplace_back(static_cast<int>(it.row()), static_cast<int>(it.col()), -it.value());
      degree[it.col()] += it.value();
    }
  }
  for (Eigen::Index i = 0; i < n; ++i) t.emplace_back(static_cast<int>(i), static_cast<int>(i), degree[i]);
  Eigen::SparseMatrix<double> l(n, n);
  l.setFromTriplets(t.begin(), t.end());
  return l;
}

namespace {

// Keeps the columns with the (skip, skip + m] smallest eigenvalues, ascending.
void Select(const Eigen::VectorXd& values, const Eigen::MatrixXd& vectors, int m, int skip, SmoothBasis* out) {
  std::vector<int> order(static_cast<size_t>(values.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return values[a] < values[b]; });
  out->skipped_eigenvalues.resize(skip);
  for (int s = 0; s < skip; ++s) out->skipped_eigenvalues[s] = values[order[s]];
  out->eigenvalues.resize(m);
  out->vectors.resize(vectors.rows(), m);
  for (int c = 0; c < m; ++c) {
    out->eigenvalues[c] = values[order[skip + c]];
    out->vectors.col(c) = vectors.col(order[skip + c]);
  }
}

}  // namespace

StatusOr<SmoothBasis> SmoothestEigenvectors(const Eigen::SparseMatrix<double>& laplacian, int m, int skip,
                                            const SmoothBasisOptions& options) {
  return GuardExceptions("SmoothestEigenvectors", [&]() -> StatusOr<SmoothBasis> {
    KLS_RETURN_IF_ERROR(options.Validate().WithContext("SmoothBasisOptions"));
    const int n = static_cast<int>(laplacian.rows());
    if (laplacian.cols() != n) {
      return InvalidArgumentError("laplacian: is " + std::to_string(n) + " × " + std::to_string(laplacian.cols()) +
                                  ", not square");
    }
    if (m < 1) return InvalidArgumentError("m = " + std::to_string(m) + " must be >= 1");
    if (skip < 0) return InvalidArgumentError("skip = " + std::to_string(skip) + " must be >= 0");
    if (m + skip > n) {
      return InvalidArgumentError("m = " + std::to_string(m) + " plus skip = " + std::to_string(skip) +
                                  " exceeds the " + std::to_string(n) + " points");
    }
    const int nev = m + skip;
    SmoothBasis out;
    bool done = false;
    if (n > options.dense_threshold && 2 * nev < n) {
      const double max_diag = laplacian.diagonal().cwiseAbs().maxCoeff();
      const double sigma = -options.relative_shift * std::max(max_diag, 1e-300);
      Spectra::SparseSymShiftSolve<double> op(laplacian);
      done = LanczosWithRetry(n, nev, /*margin=*/20, [&](int ncv) {
        Spectra::SymEigsShiftSolver<Spectra::SparseSymShiftSolve<double>> eigs(op, nev, ncv, sigma);
        eigs.init();
        long long solves = 0;
        const bool ok = ComputeEigenpairs(eigs, nev, Spectra::SortRule::LargestMagn, options.max_restarts,
                                          options.tolerance, Spectra::SortRule::SmallestAlge, &solves);
        out.solves += solves;
        if (ok) Select(eigs.eigenvalues(), eigs.eigenvectors(), m, skip, &out);
        return ok;
      });
    }
    if (!done) {
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig{Eigen::MatrixXd(laplacian)};
      if (eig.info() != Eigen::Success) return InternalError("dense symmetric eigensolver did not converge");
      Select(eig.eigenvalues(), eig.eigenvectors(), m, skip, &out);
      out.used_dense = true;
    }
    Eigen::MatrixXd r = laplacian * out.vectors - out.vectors * out.eigenvalues.asDiagonal();
    out.max_residual = r.colwise().norm().maxCoeff();
    if (!std::isfinite(out.max_residual)) return InternalError("eigenvectors are not finite");
    return out;
  });
}

}  // namespace kls
