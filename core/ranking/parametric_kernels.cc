#include "core/ranking/parametric_kernels.h"

#include <string>

namespace kls {

StatusOr<Eigen::MatrixXd> ParametricKernelMatrix(const Eigen::MatrixXd& x, ParametricKernel kind, int degree,
                                                 double width) {
  return GuardExceptions("ParametricKernelMatrix", [&]() -> StatusOr<Eigen::MatrixXd> {
    if (x.rows() == 0) return InvalidArgumentError("x is empty");
    if (!x.allFinite()) return InvalidArgumentError("x has a non-finite entry");
    Eigen::MatrixXd g = x * x.transpose();
    switch (kind) {
      case ParametricKernel::kLinear:
        return g;
      case ParametricKernel::kPolynomial:
        if (degree < 1) return InvalidArgumentError("degree = " + std::to_string(degree) + " must be >= 1");
        return Eigen::MatrixXd((g.array() + 1.0).pow(degree));
      case ParametricKernel::kRbf: {
        const Eigen::VectorXd sq = g.diagonal();
        Eigen::MatrixXd d2 = (-2.0 * g).colwise() + sq;
        d2.rowwise() += sq.transpose();
        d2 = d2.cwiseMax(0.0);
        double w = width;
        if (!(w > 0.0)) {
          const double n = static_cast<double>(x.rows());
          w = n > 1 ? d2.sum() / (n * (n - 1)) : 1.0;
          if (!(w > 0.0)) w = 1.0;
        }
        return Eigen::MatrixXd((-d2 / w).array().exp());
      }
    }
    return InvalidArgumentError("unknown kernel kind");
  });
}

}  // namespace kls
