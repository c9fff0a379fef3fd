#include "core/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace kls {

int Dataset::num_classes() const {
  if (labels.empty()) return 0;
  return *std::max_element(labels.begin(), labels.end()) + 1;
}

Status ValidateLabels(const std::vector<int>& labels, int num_points, const char* what) {
  if (static_cast<int>(labels.size()) != num_points) {
    return InvalidArgumentError(std::string(what) + ": has " + std::to_string(labels.size()) +
                                " entries but the data set has " + std::to_string(num_points) +
                                " points");
  }
  for (int i = 0; i < num_points; ++i) {
    if (labels[i] < 0) {
      return InvalidArgumentError(std::string(what) + "[" + std::to_string(i) + "] = " +
                                  std::to_string(labels[i]) + " is negative");
    }
  }
  return OkStatus();
}

Status Dataset::Validate() const {
  const Eigen::Index n = features.rows(), d = features.cols();
  if (n == 0) return InvalidArgumentError("features: the data set is empty (0 points)");
  if (d == 0) return InvalidArgumentError("features: the data set has 0 features");
  for (Eigen::Index j = 0; j < d; ++j) {
    for (Eigen::Index i = 0; i < n; ++i) {
      const double v = features(i, j);
      if (!std::isfinite(v)) {
        return InvalidArgumentError("features[" + std::to_string(i) + "][" + std::to_string(j) +
                                    "] = " + std::to_string(v) + " is not finite");
      }
    }
  }
  if (!labels.empty()) KLS_RETURN_IF_ERROR(ValidateLabels(labels, static_cast<int>(n), "labels"));
  if (!item_keys.empty()) {
    if (static_cast<Eigen::Index>(item_keys.size()) != n) {
      return InvalidArgumentError("item_keys: has " + std::to_string(item_keys.size()) +
                                  " entries but the data set has " + std::to_string(n) + " points");
    }
    std::unordered_set<std::string> seen;
    for (size_t i = 0; i < item_keys.size(); ++i) {
      if (item_keys[i].empty()) {
        return InvalidArgumentError("item_keys[" + std::to_string(i) + "] is empty");
      }
      if (!seen.insert(item_keys[i]).second) {
        return InvalidArgumentError("item_keys[" + std::to_string(i) + "] = \"" + item_keys[i] +
                                    "\" is a duplicate");
      }
    }
  }
  if (!feature_names.empty() && static_cast<Eigen::Index>(feature_names.size()) != d) {
    return InvalidArgumentError("feature_names: has " + std::to_string(feature_names.size()) +
                                " entries but the data set has " + std::to_string(d) + " features");
  }
  return OkStatus();
}

}  // namespace kls
