#include "core/npkl/npkl_problem.h"

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

}  // namespace kls
