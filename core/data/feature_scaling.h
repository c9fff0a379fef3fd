// Per-column feature scaling fitted on a data set's rows and applied, with the
// same statistics, to rows seen later (feature queries of unseen items).
//
//   zscore:  x'_j = (x_j − mean_j) / sd_j        sd = sample standard deviation
//   minmax:  x'_j = (x_j − min_j) / (max_j − min_j)
//   none:    x' = x
//
// A constant column (sd or range 0) is only shifted (divisor 1), so it maps to
// 0 and never divides by zero. Non-finite inputs are rejected, naming the cell.
//
// Serialized (Serialize / ParseFeatureScaler) with a magic number and a format
// version; the server stores it as a kernel attachment, and a kernel without
// one is unscaled (identity).
//
// Thread safety: const methods are safe to call concurrently.
#pragma once

#include <Eigen/Core>
#include <string>

#include "core/common/status.h"

namespace kls {

enum class FeatureScaling { kNone, kZScore, kMinMax };

/// "none", "zscore", "minmax".
const char* FeatureScalingName(FeatureScaling s);

/// The statistics of one fitted scaling: x' = (x − offset) / divisor per column.
struct FeatureScaler {
  FeatureScaling method = FeatureScaling::kNone;
  Eigen::RowVectorXd offset;   ///< empty for kNone
  Eigen::RowVectorXd divisor;  ///< > 0 and finite; 1 for constant columns

  bool identity() const { return method == FeatureScaling::kNone; }
  int dim() const { return static_cast<int>(offset.size()); }

  /// Fits `method` on the rows of x (n × d, n ≥ 1). INVALID_ARGUMENT naming
  /// the first non-finite cell ("features[3][2] = nan is not finite").
  /// O(n·d).
  static StatusOr<FeatureScaler> Fit(const Eigen::MatrixXd& x, FeatureScaling method);

  /// The scaled copy of x. INVALID_ARGUMENT when x has another number of
  /// columns than the fitted data (identity accepts any width). O(n·d).
  StatusOr<Eigen::MatrixXd> Apply(const Eigen::MatrixXd& x) const;

  /// Versioned binary form (core/common/byte_io.h).
  std::string Serialize() const;
};

/// Inverse of FeatureScaler::Serialize. DATA_LOSS on a malformed or
/// unsupported-version encoding, or statistics that are not finite / positive.
StatusOr<FeatureScaler> ParseFeatureScaler(const std::string& bytes);

/// max_j range_j / min_j range_j over the non-constant columns (range =
/// max − min); 1 when fewer than two columns vary. A large value (> 100) means
/// one feature dominates Euclidean distances unless the features are scaled.
double FeatureRangeRatio(const Eigen::MatrixXd& x);

}  // namespace kls
