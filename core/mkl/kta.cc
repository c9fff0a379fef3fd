#include "core/mkl/kta.h"

#include <Eigen/Dense>
#include <cmath>
#include <string>
#include <vector>

#include "core/mkl/box_projection.h"

namespace kls {

StatusOr<Eigen::VectorXd> SolveNonnegativeQp(const Eigen::MatrixXd& m, const Eigen::VectorXd& a, double ridge,
                                             int max_iterations) {
  return GuardExceptions("SolveNonnegativeQp", [&]() -> StatusOr<Eigen::VectorXd> {
    const Eigen::Index k = a.size();
    if (m.rows() != k || m.cols() != k) {
      return InvalidArgumentError("nonnegative QP: M is " + std::to_string(m.rows()) + "x" +
                                  std::to_string(m.cols()) + " but a has " + std::to_string(k) + " entries");
    }
    if (!m.allFinite() || !a.allFinite()) return InvalidArgumentError("nonnegative QP: non-finite M or a");
    const double scale = std::max(m.diagonal().cwiseAbs().maxCoeff(), 1e-300);
    const double tol = 1e-12 * std::max(scale, a.cwiseAbs().maxCoeff());
    Eigen::VectorXd theta = Eigen::VectorXd::Zero(k);
    std::vector<char> free(k, 0);
    auto solve_free = [&](Eigen::VectorXd& s) {
      std::vector<int> idx;
      for (Eigen::Index j = 0; j < k; ++j)
        if (free[j]) idx.push_back(static_cast<int>(j));
      Eigen::MatrixXd mf(idx.size(), idx.size());
      Eigen::VectorXd af(idx.size());
      for (std::size_t p = 0; p < idx.size(); ++p) {
        af[p] = a[idx[p]];
        for (std::size_t q = 0; q < idx.size(); ++q) mf(p, q) = m(idx[p], idx[q]);
        mf(p, p) += ridge * scale;
      }
      const Eigen::VectorXd sf = mf.ldlt().solve(af);
      s = Eigen::VectorXd::Zero(k);
      for (std::size_t p = 0; p < idx.size(); ++p) s[idx[p]] = sf[p];
    };
    for (int outer = 0; outer < max_iterations; ++outer) {
      // Negative gradient w = a − Mθ; optimal when w_j <= 0 on the bound set.
      const Eigen::VectorXd w = a - m * theta;
      Eigen::Index best = -1;
      double best_w = tol;
      for (Eigen::Index j = 0; j < k; ++j)
        if (!free[j] && w[j] > best_w) {
          best_w = w[j];
          best = j;
        }
      if (best < 0) return theta;
      free[best] = 1;
      Eigen::VectorXd s;
      for (int inner = 0; inner < static_cast<int>(k) + 1; ++inner) {
        solve_free(s);
        bool positive = true;
        for (Eigen::Index j = 0; j < k; ++j)
          if (free[j] && s[j] <= 0) positive = false;
        if (positive) break;
        // Step towards s until the first free coordinate hits zero.
        double step = 1.0;
        for (Eigen::Index j = 0; j < k; ++j)
          if (free[j] && s[j] <= 0) step = std::min(step, theta[j] / (theta[j] - s[j]));
        theta += step * (s - theta);
        for (Eigen::Index j = 0; j < k; ++j)
          if (free[j] && theta[j] <= 1e-15 * (1 + theta.cwiseAbs().maxCoeff())) {
            free[j] = 0;
            theta[j] = 0;
          }
      }
      for (Eigen::Index j = 0; j < k; ++j) theta[j] = free[j] ? s[j] : 0.0;
    }
    return theta;  // iteration cap: best iterate (feasible)
  });
}

StatusOr<KtaResult> LearnKtaWeights(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                    const std::vector<BaseKernelSpec>& bank) {
  return GuardExceptions("LearnKtaWeights", [&]() -> StatusOr<KtaResult> {
    const int n = static_cast<int>(x.rows());
    if (y.size() != n) {
      return InvalidArgumentError("kta labels: " + std::to_string(y.size()) + " labels for " + std::to_string(n) +
                                  " points");
    }
    KLS_RETURN_IF_ERROR(ValidateSignLabels(y, "kta labels"));
    if (bank.empty()) return InvalidArgumentError("kta bank is empty");
    for (const auto& s : bank) KLS_RETURN_IF_ERROR(s.Validate(static_cast<int>(x.cols())));
    const int m = static_cast<int>(bank.size());
    const Eigen::Index packed = static_cast<Eigen::Index>(n) * (n + 1) / 2;
    Eigen::MatrixXd a_mat(packed, m);
    const double r2 = std::sqrt(2.0);
    auto pack = [&](const Eigen::MatrixXd& k, double* out) {
      Eigen::Index p = 0;
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < j; ++i) out[p++] = r2 * k(i, j);
        out[p++] = k(j, j);
      }
    };
    for (int t = 0; t < m; ++t) {
      Eigen::MatrixXd k = EvaluateKernel(bank[t], x, x);
      // Centering H K H (thesis §7.3).
      const Eigen::VectorXd col_mean = k.colwise().mean().transpose();
      const double all_mean = col_mean.mean();
      k.rowwise() -= col_mean.transpose();
      k.colwise() -= col_mean;
      k.array() += all_mean;
      pack(k, a_mat.col(t).data());
    }
    Eigen::MatrixXd yy = y * y.transpose();
    Eigen::VectorXd target(packed);
    pack(yy, target.data());
    const Eigen::MatrixXd gram = a_mat.transpose() * a_mat;  // M_kl = ⟨K_kᶜ, K_lᶜ⟩_F
    const Eigen::VectorXd align = a_mat.transpose() * target; // a_k = ⟨K_kᶜ, yyᵀ⟩_F
    KLS_ASSIGN_OR_RETURN(Eigen::VectorXd theta, SolveNonnegativeQp(gram, align));
    const double norm = theta.norm();
    if (!(norm > 0)) return FailedPreconditionError("kta: every base kernel has non-positive alignment with the labels");
    theta /= norm;
    KtaResult r;
    r.bank_size = m;
    std::vector<double> w;
    for (int t = 0; t < m; ++t)
      if (theta[t] > 0) {
        r.kernels.push_back(bank[t]);
        w.push_back(theta[t]);
      }
    r.weights = Eigen::Map<Eigen::VectorXd>(w.data(), static_cast<Eigen::Index>(w.size()));
    const double kk = theta.dot(gram * theta);
    r.alignment = theta.dot(align) / std::sqrt(kk * target.squaredNorm());
    return r;
  });
}

}  // namespace kls
