// Feature scaling (core/data/feature_scaling.h): statistics, constant columns,
// non-finite input, the binary form, and the range ratio behind the server's hint.
#include "core/data/feature_scaling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/data/csv_reader.h"

namespace kls {
namespace {

using ::testing::HasSubstr;

Eigen::MatrixXd Sample() {
  Eigen::MatrixXd x(4, 3);
  x << 1, 10, 5,
       2, 20, 5,
       3, 30, 5,
       4, 1000, 5;  // column 2 is constant
  return x;
}

TEST(FeatureScalingTest, ZScoreHasZeroMeanAndUnitSampleDeviation) {
  auto s = FeatureScaler::Fit(Sample(), FeatureScaling::kZScore);
  ASSERT_TRUE(s.ok()) << s.status();
  auto z = s->Apply(Sample());
  ASSERT_TRUE(z.ok());
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(z->col(j).mean(), 0.0, 1e-12);
    EXPECT_NEAR((z->col(j).array() - z->col(j).mean()).square().sum() / 3.0, 1.0, 1e-12);
  }
  EXPECT_NEAR(s->divisor[0], std::sqrt(5.0 / 3.0), 1e-12);
  // The constant column is shifted to 0, not divided by 0.
  EXPECT_EQ(s->divisor[2], 1.0);
  EXPECT_TRUE((z->col(2).array() == 0.0).all());
}

TEST(FeatureScalingTest, MinMaxMapsEachVaryingColumnOntoUnitInterval) {
  auto s = FeatureScaler::Fit(Sample(), FeatureScaling::kMinMax);
  ASSERT_TRUE(s.ok());
  auto m = s->Apply(Sample());
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ((*m)(0, 0), 0.0);
  EXPECT_DOUBLE_EQ((*m)(3, 0), 1.0);
  EXPECT_DOUBLE_EQ((*m)(1, 0), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ((*m)(3, 1), 1.0);
  EXPECT_TRUE((m->col(2).array() == 0.0).all());
  // Unseen rows use the fitted statistics (may leave [0, 1]).
  Eigen::MatrixXd y(1, 3);
  y << 7, 10, 6;
  auto my = s->Apply(y);
  ASSERT_TRUE(my.ok());
  EXPECT_DOUBLE_EQ((*my)(0, 0), 2.0);
  EXPECT_DOUBLE_EQ((*my)(0, 2), 1.0);
}

TEST(FeatureScalingTest, NoneIsTheIdentityAndEmptyStatistics) {
  auto s = FeatureScaler::Fit(Sample(), FeatureScaling::kNone);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->identity());
  EXPECT_EQ(s->offset.size(), 0);
  EXPECT_EQ(*s->Apply(Sample()), Sample());
}

TEST(FeatureScalingTest, RejectsNonFiniteInputAndWrongWidth) {
  Eigen::MatrixXd x = Sample();
  x(2, 1) = std::numeric_limits<double>::quiet_NaN();
  auto s = FeatureScaler::Fit(x, FeatureScaling::kZScore);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("features[2][1] = nan is not finite"));
  x(2, 1) = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(FeatureScaler::Fit(x, FeatureScaling::kNone).ok());
  EXPECT_FALSE(FeatureScaler::Fit(Eigen::MatrixXd(0, 3), FeatureScaling::kZScore).ok());

  auto fitted = FeatureScaler::Fit(Sample(), FeatureScaling::kMinMax);
  ASSERT_TRUE(fitted.ok());
  auto wrong = fitted->Apply(Eigen::MatrixXd::Zero(1, 2));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("2 columns but the scaling was fitted on 3"));
}

TEST(FeatureScalingTest, SerializeRoundTripsAndRejectsDamage) {
  for (FeatureScaling m : {FeatureScaling::kNone, FeatureScaling::kZScore, FeatureScaling::kMinMax}) {
    auto s = FeatureScaler::Fit(Sample(), m);
    ASSERT_TRUE(s.ok());
    auto back = ParseFeatureScaler(s->Serialize());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->method, m);
    EXPECT_EQ(back->offset, s->offset);
    EXPECT_EQ(back->divisor, s->divisor);
  }
  const std::string bytes = FeatureScaler::Fit(Sample(), FeatureScaling::kZScore)->Serialize();
  EXPECT_EQ(ParseFeatureScaler(bytes.substr(0, bytes.size() - 3)).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ParseFeatureScaler(bytes + "x").status().code(), StatusCode::kDataLoss);
  std::string future = bytes;
  future[4] = 9;  // format version 9
  EXPECT_THAT(ParseFeatureScaler(future).status().message(), HasSubstr("format version 9"));
}

TEST(FeatureScalingTest, RangeRatioIsLargeForWineAndSmallForIris) {
  auto wine = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/wine.csv");
  ASSERT_TRUE(wine.ok()) << wine.status();
  EXPECT_GT(FeatureRangeRatio(wine->features), 1000.0);  // proline ≈ 10³ vs hue ≈ 1
  auto z = FeatureScaler::Fit(wine->features, FeatureScaling::kZScore)->Apply(wine->features);
  ASSERT_TRUE(z.ok());
  EXPECT_LT(FeatureRangeRatio(*z), 10.0);
  EXPECT_EQ(FeatureRangeRatio(Sample().col(2)), 1.0);  // one constant column: nothing to compare
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(iris.ok());
  EXPECT_NEAR(FeatureRangeRatio(iris->features), 5.9 / 2.4, 1e-9);  // no hint for iris
}

}  // namespace
}  // namespace kls
