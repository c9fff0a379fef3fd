#include "core/ranking/kernel_extension.h"

#include <Eigen/LU>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace kls {

namespace {

Eigen::MatrixXd SquaredDistances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  Eigen::MatrixXd d2 = (-2.0 * a * b.transpose()).colwise() + a.rowwise().squaredNorm();
  d2.rowwise() += b.rowwise().squaredNorm().transpose();
  return d2.cwiseMax(0.0);
}

}  // namespace

StatusOr<KernelWarping> KernelWarping::Create(const Eigen::MatrixXd& train, const Eigen::MatrixXd& learned,
                                              double width, double strength) {
  return GuardExceptions("KernelWarping::Create", [&]() -> StatusOr<KernelWarping> {
    const Eigen::Index n = train.rows();
    if (n == 0) return InvalidArgumentError("train is empty");
    if (!train.allFinite()) return InvalidArgumentError("train has a non-finite entry");
    if (learned.rows() != n || learned.cols() != n)
      return InvalidArgumentError("learned is " + std::to_string(learned.rows()) + " x " +
                                  std::to_string(learned.cols()) + " but train has " + std::to_string(n) + " rows");
    if (!learned.allFinite()) return InvalidArgumentError("learned has a non-finite entry");
    if (!(width > 0.0) || !std::isfinite(width))
      return InvalidArgumentError("width = " + FormatNumber(width) + " must be finite and > 0");
    if (!(strength >= 0.0) || !std::isfinite(strength))
      return InvalidArgumentError("strength = " + FormatNumber(strength) + " must be finite and >= 0");
    KernelWarping w;
    w.train_ = train;
    w.width_ = width;
    Eigen::MatrixXd s = (0.5 * (learned + learned.transpose())).cwiseMax(0.0);
    s.diagonal().setZero();  // self-loops do not change a Laplacian
    Eigen::MatrixXd lap = -s;
    lap.diagonal() = s.rowwise().sum();  // L̂ = diag(K̂ 1) − K̂   (§6.3.3)
    w.m_ = strength * lap;
    const Eigen::MatrixXd kx = w.InputKernel(train, train);
    const Eigen::MatrixXd a = Eigen::MatrixXd::Identity(n, n) + w.m_ * kx;
    Eigen::FullPivLU<Eigen::MatrixXd> lu(a);
    if (!lu.isInvertible()) return FailedPreconditionError("I + M K_x is singular; lower the warping strength");
    w.w_ = lu.solve(w.m_);                 // W = (I + M K_x)⁻¹ M
    w.w_ = 0.5 * (w.w_ + w.w_.transpose());  // symmetric in exact arithmetic
    return w;
  });
}

Eigen::MatrixXd KernelWarping::InputKernel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) const {
  return (-SquaredDistances(a, b) / width_).array().exp().matrix();
}

StatusOr<Eigen::MatrixXd> KernelWarping::Matrix(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) const {
  return GuardExceptions("KernelWarping::Matrix", [&]() -> StatusOr<Eigen::MatrixXd> {
    if (a.cols() != train_.cols() || b.cols() != train_.cols())
      return InvalidArgumentError("points have " + std::to_string(a.cols()) + " and " + std::to_string(b.cols()) +
                                  " features but the training items have " + std::to_string(train_.cols()));
    if (!a.allFinite() || !b.allFinite()) return InvalidArgumentError("points have a non-finite entry");
    const Eigen::MatrixXd ka = InputKernel(train_, a);  // n × |a|: columns κ_x
    const Eigen::MatrixXd kb = InputKernel(train_, b);
    return Eigen::MatrixXd(InputKernel(a, b) - ka.transpose() * w_ * kb);  // eq. (6.9)
  });
}

Status HarmonicExtensionOptions::Validate() const {
  if (neighbors < 1)
    return InvalidArgumentError("options.neighbors = " + std::to_string(neighbors) + " must be >= 1");
  if (!std::isfinite(sigma)) return InvalidArgumentError("options.sigma = " + FormatNumber(sigma) + " must be finite");
  if (!(duplicate_tolerance >= 0.0) || !std::isfinite(duplicate_tolerance))
    return InvalidArgumentError("options.duplicate_tolerance = " + FormatNumber(duplicate_tolerance) +
                                " must be finite and >= 0");
  return OkStatus();
}

StatusOr<LearnedKernel::Embedding> HarmonicExtension(const LearnedKernel& kernel, const Eigen::MatrixXd& train,
                                                     const Eigen::MatrixXd& queries,
                                                     const HarmonicExtensionOptions& options,
                                                     const SolveControl& control) {
  return GuardExceptions("HarmonicExtension", [&]() -> StatusOr<LearnedKernel::Embedding> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const int n = static_cast<int>(train.rows());
    if (n != kernel.num_points())
      return InvalidArgumentError("train has " + std::to_string(n) + " rows but the kernel has " +
                                  std::to_string(kernel.num_points()) + " items");
    if (queries.cols() != train.cols())
      return InvalidArgumentError("queries have " + std::to_string(queries.cols()) + " features but train has " +
                                  std::to_string(train.cols()));
    if (!train.allFinite() || !queries.allFinite()) return InvalidArgumentError("points have a non-finite entry");
    const int k = std::min(options.neighbors, n);
    LearnedKernel::Embedding out(queries.rows(), kernel.rank());
    std::vector<int> idx(n);
    Eigen::MatrixXd d2;  // squared distances of the current block of query rows
    for (Eigen::Index q = 0; q < queries.rows(); ++q) {
      if (q % kExtensionBlock == 0) {
        KLS_RETURN_IF_ERROR(control.CheckStop("HarmonicExtension"));
        const Eigen::Index rows = std::min<Eigen::Index>(kExtensionBlock, queries.rows() - q);
        d2 = SquaredDistances(queries.middleRows(q, rows), train);
      }
      const Eigen::Index qd = q % kExtensionBlock;  // the row of q in d2
      std::iota(idx.begin(), idx.end(), 0);
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
        return d2(qd, a) < d2(qd, b) || (d2(qd, a) == d2(qd, b) && a < b);
      });
      // The Gram-form distances carry rounding of order ε‖x‖²; recompute the k winners exactly.
      std::vector<double> exact(k);
      for (int t = 0; t < k; ++t) exact[t] = (queries.row(q) - train.row(idx[t])).squaredNorm();
      const int nearest = static_cast<int>(std::min_element(exact.begin(), exact.end()) - exact.begin());
      if (std::sqrt(exact[nearest]) <= options.duplicate_tolerance) {
        out.row(q) = kernel.embedding().row(idx[nearest]);  // a training item keeps its transductive row
        continue;
      }
      double sigma = options.sigma;
      if (!(sigma > 0.0)) {
        sigma = 0.0;
        for (int t = 0; t < k; ++t) sigma += std::sqrt(exact[t]) / k;
      }
      // Weights relative to the nearest neighbour avoid underflow for far queries.
      double total = 0.0;
      Eigen::RowVectorXd v = Eigen::RowVectorXd::Zero(kernel.rank());
      for (int t = 0; t < k; ++t) {
        const double w = std::exp(-(exact[t] - exact[nearest]) / (2.0 * sigma * sigma));
        total += w;
        v += w * kernel.embedding().row(idx[t]);
      }
      out.row(q) = v / total;
    }
    return out;
  });
}

}  // namespace kls
