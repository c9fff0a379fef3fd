#include "core/mkl/mkl_protocol.h"

#include <cmath>
#include <string>

namespace kls {

Status MklProtocolOptions::Validate() const {
  if (c_grid.empty()) return InvalidArgumentError("options.c_grid is empty");
  for (std::size_t i = 0; i < c_grid.size(); ++i) {
    if (!(c_grid[i] > 0) || !std::isfinite(c_grid[i])) {
      return InvalidArgumentError("options.c_grid[" + std::to_string(i) + "] = " + FormatNumber(c_grid[i]) +
                                  " must be finite and > 0");
    }
  }
  if (c_grid.size() > 1 && cv_folds < 2) {
    return InvalidArgumentError("options.cv_folds = " + std::to_string(cv_folds) + " must be >= 2");
  }
  if (positive_class == negative_class) {
    return InvalidArgumentError("options.positive_class = options.negative_class = " +
                                std::to_string(positive_class));
  }
  return OkStatus();
}

StatusOr<PreparedMklData> PrepareMklData(const Eigen::MatrixXd& x_raw, bool standardize, bool single_features) {
  if (x_raw.rows() < 2 || x_raw.cols() < 1) {
    return InvalidArgumentError("training data is " + std::to_string(x_raw.rows()) + "x" +
                                std::to_string(x_raw.cols()) + ": need at least 2 points and 1 feature");
  }
  if (!x_raw.allFinite()) return InvalidArgumentError("training data has a non-finite feature");
  PreparedMklData p;
  if (standardize) {
    p.standardizer = Standardizer::Fit(x_raw);
    p.x = p.standardizer.Apply(x_raw);
  } else {
    p.x = x_raw;
  }
  p.bank = StandardKernelBank(static_cast<int>(p.x.cols()), single_features);
  KLS_RETURN_IF_ERROR(NormalizeToUnitTrace(&p.bank, p.x));
  return p;
}

std::vector<Eigen::MatrixXd> EvaluateKernels(const std::vector<BaseKernelSpec>& specs, const Eigen::MatrixXd& a,
                                             const Eigen::MatrixXd& b) {
  std::vector<Eigen::MatrixXd> out;
  out.reserve(specs.size());
  for (const auto& s : specs) out.push_back(EvaluateKernel(s, a, b));
  return out;
}

int ArgBestAccuracy(const std::vector<double>& accuracy) {
  int best = 0;
  for (std::size_t i = 1; i < accuracy.size(); ++i)
    if (accuracy[i] > accuracy[best] + 1e-12) best = static_cast<int>(i);
  return best;
}

}  // namespace kls
