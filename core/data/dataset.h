// The data model every solver reads: a dense feature matrix with optional
// integer labels and optional string item keys.
#pragma once

#include <Eigen/Core>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace kls {

/// n points × d features, dense, row i = point i.
struct Dataset {
  Eigen::MatrixXd features;            ///< n × d; must be finite
  std::vector<int> labels;             ///< empty, or n class ids in [0, num_classes)
  std::vector<std::string> item_keys;  ///< empty, or n unique, non-empty keys
  std::vector<std::string> feature_names;  ///< empty, or d names (from a CSV header)

  int num_points() const { return static_cast<int>(features.rows()); }
  int dim() const { return static_cast<int>(features.cols()); }
  bool has_labels() const { return !labels.empty(); }
  /// 1 + the largest label (0 if unlabeled).
  int num_classes() const;

  /// Checks shapes, finiteness (names the first bad row and column), label
  /// range (non-negative) and key uniqueness. O(nd).
  Status Validate() const;
};

/// Checks that `labels` holds one non-negative id per point; `what` names the
/// caller in the error ("labels").
Status ValidateLabels(const std::vector<int>& labels, int num_points, const char* what);

}  // namespace kls
