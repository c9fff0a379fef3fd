#include "core/embed/embedding_dual.h"

#include <Eigen/Eigenvalues>
#include <Spectra/SymEigsSolver.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <utility>

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

class View {
 public:
  using Scalar = double;
  explicit View(const EmbeddingDualMatrix& a) : a_(&a) {}
  Eigen::Index rows() const { return a_->rows(); }
  Eigen::Index cols() const { return a_->cols(); }
  void perform_op(const double* x_in, double* y_out) const { a_->perform_op(x_in, y_out); }

 private:
  const EmbeddingDualMatrix* a_;
};

void KeepAbove(const Eigen::VectorXd& values, const Eigen::MatrixXd& vectors, double threshold,
               PositiveSpectrum* out) {
  std::vector<int> keep;
  for (int c = 0; c < values.size(); ++c)
    if (values[c] > threshold) keep.push_back(c);
  std::sort(keep.begin(), keep.end(), [&](int a, int b) { return values[a] > values[b]; });
  out->eigenvalues.resize(static_cast<Eigen::Index>(keep.size()));
  out->eigenvectors.resize(vectors.rows(), static_cast<Eigen::Index>(keep.size()));
  for (size_t t = 0; t < keep.size(); ++t) {
    out->eigenvalues[static_cast<Eigen::Index>(t)] = values[keep[t]];
    out->eigenvectors.col(static_cast<Eigen::Index>(t)) = vectors.col(keep[t]);
  }
}

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

StatusOr<PositiveSpectrum> SpectrumImpl(const EmbeddingDualMatrix& a, const SpectrumOptions& options,
                                        const Eigen::VectorXd* warm_start);

}  // namespace

StatusOr<PositiveSpectrum> EmbeddingPositiveSpectrum(const EmbeddingDualMatrix& a, const SpectrumOptions& options,
                                                     const Eigen::VectorXd* warm_start) {
  KLS_ASSIGN_OR_RETURN(PositiveSpectrum s, SpectrumImpl(a, options, warm_start));
  return DropRoundingLevel(std::move(s));
}

namespace {

StatusOr<PositiveSpectrum> SpectrumImpl(const EmbeddingDualMatrix& a, const SpectrumOptions& options,
                                        const Eigen::VectorXd* warm_start) {
  KLS_RETURN_IF_ERROR(options.Validate().WithContext("SpectrumOptions"));
  const int n = static_cast<int>(a.rows());
  if (warm_start != nullptr && warm_start->size() != n) {
    return InvalidArgumentError("warm_start: has " + std::to_string(warm_start->size()) +
                                " entries but the matrix has " + std::to_string(n) + " rows");
  }
  long long matvecs = 0;
  int runs = 0;
  auto dense = [&]() -> StatusOr<PositiveSpectrum> {
    KLS_ASSIGN_OR_RETURN(PositiveSpectrum s, DensePositiveSpectrum(a.ToDense(), options.positive_threshold));
    s.matrix_vector_products = matvecs;
    s.lanczos_runs = runs;
    return s;
  };
  if (n <= options.dense_threshold || n < 4) return dense();
  int nev = std::max(1, options.initial_rank > 0 ? options.initial_rank : 2);
  const bool use_warm = warm_start != nullptr && warm_start->allFinite() && warm_start->norm() > 0.0;
  View view(a);
  while (true) {
    if (2 * nev >= n) return dense();
    bool converged = false;
    for (int attempt = 0; attempt < 2 && !converged; ++attempt) {
      const int base_ncv = std::max(2 * nev + 1, nev + 20);
      const int ncv = std::min(n, attempt == 0 ? base_ncv : 2 * base_ncv);
      Spectra::SymEigsSolver<View> eigs(view, nev, ncv);
      if (use_warm) {
        eigs.init(warm_start->data());
      } else {
        eigs.init();
      }
      try {
        eigs.compute(Spectra::SortRule::LargestAlge, options.lanczos_max_restarts, options.lanczos_tolerance,
                     Spectra::SortRule::LargestAlge);
      } catch (const std::exception&) {
        // Spectra throws when the Krylov space collapses (e.g. A of rank 1–2
        // at α = 0 in CMVU); the dense solver below handles those cases.
        ++runs;
        continue;
      }
      ++runs;
      matvecs += eigs.num_operations();
      if (eigs.info() != Spectra::CompInfo::Successful) continue;
      const Eigen::VectorXd values = eigs.eigenvalues();
      const Eigen::MatrixXd vectors = eigs.eigenvectors();
      if (values.size() != nev || !values.allFinite() || !vectors.allFinite()) continue;
      converged = true;
      const double floor = std::max(options.positive_threshold, 1e-12 * std::abs(values.maxCoeff()));
      if (values.minCoeff() > floor) break;  // maybe more positive ones: grow
      PositiveSpectrum out;
      KeepAbove(values, vectors, options.positive_threshold, &out);
      out.lanczos_runs = runs;
      out.final_rank_requested = nev;
      out.matrix_vector_products = matvecs;
      return out;
    }
    if (!converged) return dense();
    nev *= 2;
  }
}

}  // namespace

}  // namespace kls
