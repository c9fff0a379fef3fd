#include "core/data/feature_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/common/byte_io.h"

namespace kls {
namespace {

constexpr uint32_t kMagic = 0x4C43534B;  // "KSCL"
constexpr uint32_t kVersion = 1;

}  // namespace

const char* FeatureScalingName(FeatureScaling s) {
  switch (s) {
    case FeatureScaling::kNone: return "none";
    case FeatureScaling::kZScore: return "zscore";
    case FeatureScaling::kMinMax: return "minmax";
  }
  return "none";
}

StatusOr<FeatureScaler> FeatureScaler::Fit(const Eigen::MatrixXd& x, FeatureScaling method) {
  const Eigen::Index n = x.rows(), d = x.cols();
  if (n < 1 || d < 1) {
    return InvalidArgumentError("features: " + std::to_string(n) + " × " + std::to_string(d) +
                                "; scaling needs at least one row and one column");
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < d; ++j) {
      if (!std::isfinite(x(i, j))) {
        return InvalidArgumentError("features[" + std::to_string(i) + "][" + std::to_string(j) +
                                    "] = " + FormatNumber(x(i, j)) + " is not finite");
      }
    }
  }
  FeatureScaler s;
  s.method = method;
  if (method == FeatureScaling::kNone) return s;
  if (method == FeatureScaling::kZScore) {
    s.offset = x.colwise().mean();
    const Eigen::MatrixXd c = x.rowwise() - s.offset;
    const double dof = static_cast<double>(std::max<Eigen::Index>(1, n - 1));
    s.divisor = (c.cwiseProduct(c).colwise().sum() / dof).cwiseSqrt();
  } else {
    s.offset = x.colwise().minCoeff();
    s.divisor = x.colwise().maxCoeff() - s.offset;
  }
  for (Eigen::Index j = 0; j < d; ++j) {
    // Constant columns (and spreads too small to divide by safely) are only shifted.
    if (!(s.divisor[j] > std::numeric_limits<double>::min() && std::isfinite(s.divisor[j]))) s.divisor[j] = 1.0;
  }
  return s;
}

StatusOr<Eigen::MatrixXd> FeatureScaler::Apply(const Eigen::MatrixXd& x) const {
  if (identity()) return x;
  if (x.cols() != offset.size()) {
    return InvalidArgumentError("features have " + std::to_string(x.cols()) + " columns but the scaling was fitted on " +
                                std::to_string(offset.size()));
  }
  return Eigen::MatrixXd((x.rowwise() - offset).array().rowwise() / divisor.array());
}

std::string FeatureScaler::Serialize() const {
  ByteWriter w;
  w.PutHeader(kMagic, kVersion);
  w.Put<int32_t>(static_cast<int32_t>(method));
  w.PutMatrix(offset);
  w.PutMatrix(divisor);
  return w.Take();
}

StatusOr<FeatureScaler> ParseFeatureScaler(const std::string& bytes) {
  ByteReader r(bytes, "feature_scaling");
  KLS_RETURN_IF_ERROR(r.ReadHeader(kMagic, kVersion));
  int32_t method = 0;
  KLS_RETURN_IF_ERROR(r.Get(&method));
  if (method < 0 || method > static_cast<int32_t>(FeatureScaling::kMinMax)) {
    return DataLossError("feature_scaling: unknown method " + std::to_string(method));
  }
  Eigen::MatrixXd offset, divisor;
  KLS_RETURN_IF_ERROR(r.GetMatrix(&offset));
  KLS_RETURN_IF_ERROR(r.GetMatrix(&divisor));
  KLS_RETURN_IF_ERROR(r.ExpectEnd());
  FeatureScaler s;
  s.method = static_cast<FeatureScaling>(method);
  if (s.identity()) {
    if (offset.size() != 0 || divisor.size() != 0) return DataLossError("feature_scaling: none with statistics");
    return s;
  }
  if (offset.rows() != 1 || divisor.rows() != 1 || offset.cols() != divisor.cols() || offset.cols() < 1) {
    return DataLossError("feature_scaling: statistics shapes " + std::to_string(offset.rows()) + "x" +
                         std::to_string(offset.cols()) + " / " + std::to_string(divisor.rows()) + "x" +
                         std::to_string(divisor.cols()));
  }
  if (!offset.allFinite() || !divisor.allFinite() || (divisor.array() <= 0).any()) {
    return DataLossError("feature_scaling: statistics are not finite with positive divisors");
  }
  s.offset = offset.row(0);
  s.divisor = divisor.row(0);
  return s;
}

double FeatureRangeRatio(const Eigen::MatrixXd& x) {
  if (x.rows() < 1) return 1.0;
  const Eigen::RowVectorXd range = x.colwise().maxCoeff() - x.colwise().minCoeff();
  double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
  int varying = 0;
  for (Eigen::Index j = 0; j < range.size(); ++j) {
    if (!(range[j] > 0) || !std::isfinite(range[j])) continue;
    ++varying;
    lo = std::min(lo, range[j]);
    hi = std::max(hi, range[j]);
  }
  return varying < 2 ? 1.0 : hi / lo;
}

}  // namespace kls
