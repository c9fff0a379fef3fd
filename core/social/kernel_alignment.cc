#include "core/social/kernel_alignment.h"

#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <string>

#include "core/mkl/kta.h"

namespace kls {

double CenteredProduct(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const std::vector<int>& subset) {
  if (subset.empty()) {
    const double n = static_cast<double>(a.rows());
    const Eigen::VectorXd ra = a.rowwise().sum(), rb = b.rowwise().sum();
    return a.cwiseProduct(b).sum() - 2.0 / n * ra.dot(rb) + ra.sum() * rb.sum() / (n * n);
  }
  const int s = static_cast<int>(subset.size());
  double frob = 0.0;
  Eigen::VectorXd ra = Eigen::VectorXd::Zero(s), rb = Eigen::VectorXd::Zero(s);
  for (int q = 0; q < s; ++q) {
    const int j = subset[q];
    for (int p = 0; p < s; ++p) {
      const int i = subset[p];
      const double x = a(i, j), y = b(i, j);
      frob += x * y;
      ra[q] += x;
      rb[q] += y;
    }
  }
  const double n = s;
  return frob - 2.0 / n * ra.dot(rb) + ra.sum() * rb.sum() / (n * n);
}

double CenteredAlignment(const Eigen::MatrixXd& k, const Eigen::MatrixXd& y, const std::vector<int>& subset) {
  const double ky = CenteredProduct(k, y, subset);
  const double kk = CenteredProduct(k, k, subset), yy = CenteredProduct(y, y, subset);
  if (!(kk > 0.0) || !(yy > 0.0)) return 0.0;
  return ky / std::sqrt(kk * yy);
}

namespace {
// max_j of the KKT violation of min ½vᵀMv − aᵀv, v >= 0: |∇_j| on the
// support, max(0, −∇_j) off it.
double KktResidual(const Eigen::MatrixXd& m, const Eigen::VectorXd& a, const Eigen::VectorXd& v) {
  const Eigen::VectorXd g = m * v - a;
  double kkt = 0.0;
  for (Eigen::Index j = 0; j < v.size(); ++j) kkt = std::max(kkt, v[j] > 0 ? std::abs(g[j]) : std::max(0.0, -g[j]));
  return kkt;
}
}  // namespace

StatusOr<UserKtaResult> SolveKta(const std::vector<const Eigen::MatrixXd*>& kernels, const Eigen::MatrixXd& y,
                             const std::vector<int>& subset) {
  return GuardExceptions("SolveKta", [&]() -> StatusOr<UserKtaResult> {
    const int p = static_cast<int>(kernels.size());
    if (p < 1 || p > 16) return InvalidArgumentError("kernels has " + std::to_string(p) + " entries; need 1..16");
    const Eigen::Index n = y.rows();
    if (y.cols() != n || n == 0) return InvalidArgumentError("y must be square and non-empty");
    for (int t = 0; t < p; ++t)
      if (!kernels[t] || kernels[t]->rows() != n || kernels[t]->cols() != n)
        return InvalidArgumentError("kernels[" + std::to_string(t) + "] is not " + std::to_string(n) + " x " +
                                    std::to_string(n));
    for (size_t q = 0; q < subset.size(); ++q)
      if (subset[q] < 0 || subset[q] >= n)
        return InvalidArgumentError("subset[" + std::to_string(q) + "] = " + std::to_string(subset[q]) +
                                    " is outside [0, " + std::to_string(n) + ")");
    UserKtaResult r;
    r.m.resize(p, p);
    r.a.resize(p);
    for (int k = 0; k < p; ++k) {
      r.a[k] = CenteredProduct(*kernels[k], y, subset);
      for (int l = 0; l <= k; ++l) r.m(k, l) = r.m(l, k) = CenteredProduct(*kernels[k], *kernels[l], subset);
    }
    // min vᵀMv − 2vᵀa over v >= 0 = 2 (½vᵀMv − aᵀv): the MKL layer's exact
    // Lawson–Hanson active-set solver (one implementation for both).
    KLS_ASSIGN_OR_RETURN(r.raw, SolveNonnegativeQp(r.m, r.a));
    r.kkt_residual = KktResidual(r.m, r.a, r.raw);
    const double norm = r.raw.norm();
    r.weights = norm > 0 ? Eigen::VectorXd(r.raw / norm) : r.raw;
    const double yy = CenteredProduct(y, y, subset);
    const double kk = r.weights.dot(r.m * r.weights);
    r.alignment = kk > 0 && yy > 0 ? r.weights.dot(r.a) / std::sqrt(kk * yy) : 0.0;
    return r;
  });
}

}  // namespace kls
