#include "core/embed/embedding_dual.h"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <utility>

#include "core/npkl/lanczos_spectrum.h"

namespace kls {

Status EmbeddingPrior::Validate(int n) const {
  if (sparse.size() != 0 || sparse.rows() != 0) {
    if (sparse.rows() != n || sparse.cols() != n) {
      return InvalidArgumentError("prior.sparse: is " + std::to_string(sparse.rows()) + " × " +
                                  std::to_string(sparse.cols()) + " but there are " + std::to_string(n) + " points");
    }
    for (int k = 0; k < sparse.outerSize(); ++k)
      for (Eigen::SparseMatrix<double>::InnerIterator it(sparse, k); it; ++it)
        if (!std::isfinite(it.value())) {
          return InvalidArgumentError("prior.sparse(" + std::to_string(it.row()) + ", " + std::to_string(it.col()) +
                                      ") = " + FormatNumber(it.value()) + " is not finite");
        }
    const Eigen::SparseMatrix<double> t = sparse.transpose();
    const double diff = (sparse - t).norm();
    if (!(diff <= 1e-10 * std::max(1.0, sparse.norm()))) {
      return InvalidArgumentError("prior.sparse: not symmetric (‖S − Sᵀ‖_F = " + FormatNumber(diff) + ")");
    }
  }
  if (factor.cols() > 0 && factor.rows() != n) {
    return InvalidArgumentError("prior.factor: has " + std::to_string(factor.rows()) + " rows but there are " +
                                std::to_string(n) + " points");
  }
  if (factor_scale.size() != factor.cols()) {
    return InvalidArgumentError("prior.factor_scale: has " + std::to_string(factor_scale.size()) +
                                " values but prior.factor has " + std::to_string(factor.cols()) + " columns");
  }
  if (!factor.allFinite() || !factor_scale.allFinite()) {
    return InvalidArgumentError("prior.factor: contains a non-finite value");
  }
  if (!std::isfinite(identity)) {
    return InvalidArgumentError("prior.identity = " + FormatNumber(identity) + " is not finite");
  }
  return OkStatus();
}

void EmbeddingPrior::Apply(const Eigen::Ref<const Eigen::VectorXd>& x, Eigen::Ref<Eigen::VectorXd> y) const {
  y = identity * x;
  if (sparse.rows() > 0) y.noalias() += sparse * x;
  if (factor.cols() > 0) {
    const Eigen::VectorXd coef = factor_scale.cwiseProduct(factor.transpose() * x);
    y.noalias() += factor * coef;
  }
}

double EmbeddingPrior::TraceWith(const Eigen::MatrixXd& v) const {
  if (v.cols() == 0) return 0.0;
  double t = identity * v.squaredNorm();
  if (sparse.rows() > 0) t += v.cwiseProduct(sparse * v).sum();
  if (factor.cols() > 0) {
    const Eigen::MatrixXd fv = factor.transpose() * v;  // q × r
    t += (fv.cwiseProduct(fv).rowwise().sum()).dot(factor_scale);
  }
  return t;
}

Eigen::MatrixXd EmbeddingPrior::ToDense(int n) const {
  Eigen::MatrixXd m = identity * Eigen::MatrixXd::Identity(n, n);
  if (sparse.rows() > 0) m += Eigen::MatrixXd(sparse);
  if (factor.cols() > 0) m += factor * factor_scale.asDiagonal() * factor.transpose();
  return m;
}

EmbeddingDualMatrix::EmbeddingDualMatrix(int n, const EmbeddingPrior& prior, const std::vector<int>& pair_i,
                                         const std::vector<int>& pair_j)
    : n_(n),
      prior_(&prior),
      pair_i_(&pair_i),
      pair_j_(&pair_j),
      weights_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(pair_i.size()))) {}

void EmbeddingDualMatrix::perform_op(const double* x_in, double* y_out) const {
  Eigen::Map<const Eigen::VectorXd> x_raw(x_in, n_);
  Eigen::Map<Eigen::VectorXd> y(y_out, n_);
  const Eigen::VectorXd x = x_raw.array() - x_raw.mean();  // H x
  prior_->Apply(x, y);
  const int m = num_pairs();
  for (int k = 0; k < m; ++k) {
    // T_k x = (x_i − x_j)(e_i − e_j).
    const int i = (*pair_i_)[k], j = (*pair_j_)[k];
    const double d = weights_[k] * (x[i] - x[j]);
    y[i] += d;
    y[j] -= d;
  }
  y.array() -= y.mean();  // H (·)
}

Eigen::MatrixXd EmbeddingDualMatrix::ToDense() const {
  Eigen::MatrixXd a = prior_->ToDense(n_);
  for (int k = 0; k < num_pairs(); ++k) {
    const int i = (*pair_i_)[k], j = (*pair_j_)[k];
    const double w = weights_[k];
    a(i, i) += w;
    a(j, j) += w;
    a(i, j) -= w;
    a(j, i) -= w;
  }
  // H A H: subtract row and column means (A symmetric).
  const Eigen::VectorXd col_mean = a.colwise().mean().transpose();
  const double total_mean = col_mean.mean();
  a.rowwise() -= col_mean.transpose();
  a.colwise() -= col_mean;
  a.array() += total_mean;
  return 0.5 * (a + a.transpose());
}

namespace {

// Drops eigenvalues at rounding level, <= 1e-12 · λ_max: the centering makes
// 1 an exact null vector of A, which rounding can turn into a tiny positive
// eigenvalue on one path and not on the other.
PositiveSpectrum DropRoundingLevel(PositiveSpectrum s) {
  if (s.rank() == 0) return s;
  const double floor = 1e-12 * s.eigenvalues[0];
  int keep = s.rank();
  while (keep > 0 && s.eigenvalues[keep - 1] <= floor) --keep;
  if (keep < s.rank()) {
    s.eigenvalues.conservativeResize(keep);
    s.eigenvectors.conservativeResize(Eigen::NoChange, keep);
  }
  return s;
}

}  // namespace

StatusOr<PositiveSpectrum> EmbeddingPositiveSpectrum(const EmbeddingDualMatrix& a, const SpectrumOptions& options,
                                                     const Eigen::VectorXd* warm_start) {
  // Growth floor 1e-12·|λ_max|: the centering's null vector 1 can come out as a
  // rounding-level positive eigenvalue (see DropRoundingLevel).
  const int initial_rank = options.initial_rank > 0 ? options.initial_rank : 2;
  KLS_ASSIGN_OR_RETURN(PositiveSpectrum s,
                       LanczosPositiveSpectrum(a, options, initial_rank, /*relative_floor=*/1e-12, warm_start));
  return DropRoundingLevel(std::move(s));
}

}  // namespace kls
