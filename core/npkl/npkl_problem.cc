#include "core/npkl/npkl_problem.h"

#include <Eigen/SVD>
#include <cmath>
#include <string>

namespace kls {

const char* NpklLossName(NpklLoss loss) {
  switch (loss) {
    case NpklLoss::kLinear: return "linear";
    case NpklLoss::kHinge: return "hinge";
    case NpklLoss::kSquareHinge: return "square_hinge";
    case NpklLoss::kSquare: return "square";
  }
  return "unknown";
}

Status NpklProblem::Validate() const {
  if (laplacian.rows() != laplacian.cols()) {
    return InvalidArgumentError("laplacian: must be square, got " + std::to_string(laplacian.rows()) +
                                " x " + std::to_string(laplacian.cols()));
  }
  if (laplacian.rows() < 2) {
    return InvalidArgumentError("laplacian: needs at least 2 points, got " + std::to_string(laplacian.rows()));
  }
  for (int j = 0; j < laplacian.outerSize(); ++j) {
    for (Eigen::SparseMatrix<double>::InnerIterator it(laplacian, j); it; ++it) {
      if (!std::isfinite(it.value())) {
        return InvalidArgumentError("laplacian(" + std::to_string(it.row()) + ", " + std::to_string(j) +
                                    ") = " + std::to_string(it.value()) + " is not finite");
      }
    }
  }
  if (constraints.size() == 0) return InvalidArgumentError("constraints: none given");
  return constraints.Validate(num_points());
}

Status ValidateInitialFactor(const InitialFactor& factor, int num_points) {
  if (!factor) return OkStatus();
  if (factor->rows() != num_points) {
    return InvalidArgumentError("options.initial_factor has " + std::to_string(factor->rows()) + " rows for " +
                                std::to_string(num_points) + " points");
  }
  if (factor->cols() < 1) return InvalidArgumentError("options.initial_factor has no columns");
  if (!factor->allFinite()) return InvalidArgumentError("options.initial_factor has non-finite entries");
  return OkStatus();
}

Eigen::MatrixXd WarmStartRows(const Eigen::MatrixXd& factor, const std::vector<int>& points, int r,
                              const Eigen::MatrixXd& pad) {
  const int m = static_cast<int>(points.size());
  const int rf = static_cast<int>(factor.cols());
  Eigen::MatrixXd ft(rf, m);
  for (int k = 0; k < m; ++k) ft.col(k) = factor.row(points[k]).transpose();
  if (rf == r) return ft;
  if (rf > r) {
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(ft, Eigen::ComputeThinU);
    return svd.matrixU().leftCols(r).transpose() * ft;
  }
  Eigen::MatrixXd out(r, m);
  out.topRows(rf) = ft;
  out.bottomRows(r - rf) = 1e-3 * pad.bottomRows(r - rf);
  return out;
}

}  // namespace kls
