#include "core/ranking/text_kernel.h"

#include <cmath>
#include <string>

namespace kls {

StatusOr<Eigen::SparseMatrix<double, Eigen::RowMajor>> TfIdf(const Eigen::SparseMatrix<double>& tags) {
  return GuardExceptions("TfIdf", [&]() -> StatusOr<Eigen::SparseMatrix<double, Eigen::RowMajor>> {
    const Eigen::Index n = tags.rows(), v = tags.cols();
    if (n == 0 || v == 0) return InvalidArgumentError("tags is empty");
    Eigen::SparseMatrix<double, Eigen::RowMajor> t = tags;
    Eigen::VectorXd df = Eigen::VectorXd::Zero(v);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::SparseMatrix<double, Eigen::RowMajor>::InnerIterator it(t, i); it; ++it) {
        if (!(it.value() >= 0.0) || !std::isfinite(it.value()))
          return InvalidArgumentError("tags(" + std::to_string(i) + ", " + std::to_string(it.col()) + ") = " +
                                      FormatNumber(it.value()) + " must be finite and >= 0");
        if (it.value() > 0.0) df[it.col()] += 1.0;
      }
    for (Eigen::Index i = 0; i < n; ++i) {
      double norm2 = 0.0;
      for (Eigen::SparseMatrix<double, Eigen::RowMajor>::InnerIterator it(t, i); it; ++it) {
        it.valueRef() = it.value() > 0.0 ? std::log(static_cast<double>(n) / df[it.col()]) : 0.0;
        norm2 += it.value() * it.value();
      }
      if (norm2 > 0.0)
        for (Eigen::SparseMatrix<double, Eigen::RowMajor>::InnerIterator it(t, i); it; ++it)
          it.valueRef() /= std::sqrt(norm2);
    }
    t.prune(0.0);
    return t;
  });
}

StatusOr<Eigen::MatrixXd> TextKernel(const Eigen::MatrixXd& counts) {
  KLS_ASSIGN_OR_RETURN(auto tfidf, TfIdf(counts.sparseView()));
  const Eigen::MatrixXd t = Eigen::MatrixXd(tfidf);
  return Eigen::MatrixXd(t * t.transpose());
}

StatusOr<Eigen::VectorXd> QueryScores(const Eigen::SparseMatrix<double, Eigen::RowMajor>& tfidf, int tag) {
  if (tag < 0 || tag >= tfidf.cols())
    return InvalidArgumentError("query tag = " + std::to_string(tag) + " is outside the vocabulary [0, " +
                                std::to_string(tfidf.cols()) + ")");
  Eigen::VectorXd s = Eigen::VectorXd::Zero(tfidf.rows());
  for (Eigen::Index i = 0; i < tfidf.rows(); ++i) s[i] = tfidf.coeff(i, tag);
  return s;
}

}  // namespace kls
