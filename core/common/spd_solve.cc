#include "core/common/spd_solve.h"

#include <Eigen/Cholesky>
#include <algorithm>

namespace kls {

StatusOr<Eigen::MatrixXd> SolveSpd(Eigen::MatrixXd a, const Eigen::MatrixXd& b, const SolveControl& control,
                                   const std::string& what) {
  const Eigen::Index n = a.rows();
  if (a.cols() != n || b.rows() != n) {
    return InvalidArgumentError(what + ": A is " + std::to_string(a.rows()) + " x " + std::to_string(a.cols()) +
                                " and B has " + std::to_string(b.rows()) + " rows");
  }
  for (Eigen::Index k = 0; k < n; k += kSpdBlock) {
    KLS_RETURN_IF_ERROR(control.CheckStop(what));
    const Eigen::Index kb = std::min<Eigen::Index>(kSpdBlock, n - k);
    Eigen::LLT<Eigen::MatrixXd> llt(a.block(k, k, kb, kb));
    if (llt.info() != Eigen::Success) return FailedPreconditionError(what + ": the matrix is not positive definite");
    a.block(k, k, kb, kb) = llt.matrixL();
    const Eigen::Index rest = n - k - kb;
    if (rest == 0) break;
    // L₂₁ = A₂₁ L₁₁⁻ᵀ.
    auto l21 = a.block(k + kb, k, rest, kb);
    a.block(k, k, kb, kb).triangularView<Eigen::Lower>().transpose().solveInPlace<Eigen::OnTheRight>(l21);
    // A₂₂ −= L₂₁ L₂₁ᵀ, lower part, panel by panel.
    for (Eigen::Index j = 0; j < rest; j += kSpdPanel) {
      KLS_RETURN_IF_ERROR(control.CheckStop(what));
      const Eigen::Index jb = std::min<Eigen::Index>(kSpdPanel, rest - j);
      a.block(k + kb + j, k + kb + j, rest - j, jb).noalias() -=
          l21.bottomRows(rest - j) * l21.middleRows(j, jb).transpose();
    }
  }
  KLS_RETURN_IF_ERROR(control.CheckStop(what));
  Eigen::MatrixXd x = a.triangularView<Eigen::Lower>().solve(b);
  a.triangularView<Eigen::Lower>().transpose().solveInPlace(x);
  return x;
}

}  // namespace kls
