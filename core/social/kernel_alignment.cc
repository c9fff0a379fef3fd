#include "core/social/kernel_alignment.h"

#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <string>

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

StatusOr<Eigen::VectorXd> SolveNonNegativeQp(const Eigen::MatrixXd& m, const Eigen::VectorXd& a,
                                             double* kkt_residual) {
  const int p = static_cast<int>(a.size());
  if (p < 1 || p > 16 || m.rows() != p || m.cols() != p)
    return InvalidArgumentError("QP of size " + std::to_string(p) + " with M " + std::to_string(m.rows()) + " x " +
                                std::to_string(m.cols()) + "; need 1 <= p <= 16 and a p x p M");
  if (!m.allFinite() || !a.allFinite()) return InvalidArgumentError("QP data has a non-finite entry");
  const double scale = std::max({1.0, m.cwiseAbs().maxCoeff(), a.cwiseAbs().maxCoeff()});
  const double tol = 1e-9 * scale;
  Eigen::VectorXd best = Eigen::VectorXd::Zero(p);
  double best_obj = 0.0;  // v = 0
  double best_kkt = (-a).cwiseMax(0.0).maxCoeff() > tol ? std::numeric_limits<double>::infinity() : 0.0;
  for (unsigned mask = 1; mask < (1u << p); ++mask) {
    std::vector<int> s;
    for (int j = 0; j < p; ++j)
      if (mask & (1u << j)) s.push_back(j);
    const int k = static_cast<int>(s.size());
    Eigen::MatrixXd ms(k, k);
    Eigen::VectorXd as(k);
    for (int r = 0; r < k; ++r) {
      as[r] = a[s[r]];
      for (int c = 0; c < k; ++c) ms(r, c) = m(s[r], s[c]);
    }
    const Eigen::VectorXd vs = ms.completeOrthogonalDecomposition().solve(as);
    if (!vs.allFinite() || vs.minCoeff() < -tol) continue;
    Eigen::VectorXd v = Eigen::VectorXd::Zero(p);
    for (int r = 0; r < k; ++r) v[s[r]] = std::max(0.0, vs[r]);
    const Eigen::VectorXd g = m * v - a;
    double kkt = 0.0;
    for (int j = 0; j < p; ++j) kkt = std::max(kkt, v[j] > 0 ? std::abs(g[j]) : std::max(0.0, -g[j]));
    const double obj = v.dot(m * v) - 2.0 * v.dot(a);
    // Prefer KKT points; among them the lowest objective.
    const bool ok = kkt <= 1e-7 * scale;
    const bool best_ok = best_kkt <= 1e-7 * scale;
    if ((ok && !best_ok) || (ok == best_ok && obj < best_obj - 1e-15 * scale)) {
      best = v;
      best_obj = obj;
      best_kkt = kkt;
    }
  }
  if (kkt_residual) *kkt_residual = best_kkt;
  return best;
}

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
    KLS_ASSIGN_OR_RETURN(r.raw, SolveNonNegativeQp(r.m, r.a, &r.kkt_residual));
    const double norm = r.raw.norm();
    r.weights = norm > 0 ? Eigen::VectorXd(r.raw / norm) : r.raw;
    const double yy = CenteredProduct(y, y, subset);
    const double kk = r.weights.dot(r.m * r.weights);
    r.alignment = kk > 0 && yy > 0 ? r.weights.dot(r.a) / std::sqrt(kk * yy) : 0.0;
    return r;
  });
}

}  // namespace kls
