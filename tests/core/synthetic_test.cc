// Synthetic generators: shapes, label rules, balance, determinism, and that
// each set carries the structure it is meant to (local neighbours agree on
// the label; adult-like is learnable by a linear rule but noisy).
#include "core/data/synthetic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace kls {
namespace {

using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

double Fraction(const std::vector<int>& labels, int cls) {
  int count = 0;
  for (int l : labels) count += (l == cls);
  return static_cast<double>(count) / labels.size();
}

// Leave-one-out 1-nearest-neighbour accuracy: high when classes are locally
// coherent (what the papers' k-NN graph Laplacians rely on). O(n² d).
double LeaveOneOutNearestNeighbourAccuracy(const Dataset& d) {
  int correct = 0;
  for (int i = 0; i < d.num_points(); ++i) {
    double best = std::numeric_limits<double>::infinity();
    int best_j = -1;
    for (int j = 0; j < d.num_points(); ++j) {
      if (j == i) continue;
      const double dist = (d.features.row(i) - d.features.row(j)).squaredNorm();
      if (dist < best) best = dist, best_j = j;
    }
    correct += d.labels[best_j] == d.labels[i];
  }
  return static_cast<double>(correct) / d.num_points();
}

// Accuracy on `test` of naive Bayes (Laplace smoothing) fitted on `train`.
// With one-hot features this is a linear rule w·x + b.
double NaiveBayesAccuracy(const Dataset& train, const Dataset& test) {
  const int dim = train.dim();
  Eigen::MatrixXd counts = Eigen::MatrixXd::Ones(2, dim);
  double class_count[2] = {0, 0};
  for (int i = 0; i < train.num_points(); ++i) {
    ++class_count[train.labels[i]];
    counts.row(train.labels[i]) += train.features.row(i);
  }
  Eigen::VectorXd w(dim);
  for (int j = 0; j < dim; ++j) {
    w[j] = std::log(counts(1, j) / (class_count[1] + 2)) - std::log(counts(0, j) / (class_count[0] + 2));
  }
  const double b = std::log(class_count[1] / class_count[0]);
  int correct = 0;
  for (int i = 0; i < test.num_points(); ++i) {
    const bool predicted_positive = test.features.row(i).dot(w) + b > 0;
    correct += predicted_positive == (test.labels[i] == 1);
  }
  return static_cast<double>(correct) / test.num_points();
}

TEST(Synthetic, ChessboardShapeAndCellParity) {
  for (int cells : {2, 3, 4, 7}) {
    StatusOr<Dataset> d = MakeChessboard(1000, cells, 11);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(d->Validate().ok());
    ASSERT_EQ(d->num_points(), 1000);
    ASSERT_EQ(d->dim(), 2);
    ASSERT_EQ(d->labels.size(), 1000u);
    for (int i = 0; i < 1000; ++i) {
      const double x = d->features(i, 0), y = d->features(i, 1);
      ASSERT_GE(x, 0.0);
      ASSERT_LT(x, 1.0);
      ASSERT_GE(y, 0.0);
      ASSERT_LT(y, 1.0);
      const int cx = static_cast<int>(std::floor(x * cells));
      const int cy = static_cast<int>(std::floor(y * cells));
      EXPECT_EQ(d->labels[i], (cx + cy) % 2) << "cells " << cells << " point " << i;
    }
  }
}

TEST(Synthetic, ChessboardBalanceAndDefaultCells) {
  StatusOr<Dataset> d = MakeChessboard(4000, 3);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_GT(Fraction(d->labels, 1), 0.45);
  EXPECT_LT(Fraction(d->labels, 1), 0.55);
  StatusOr<Dataset> explicit_cells = MakeChessboard(4000, kChessboardDefaultCells, 3);
  ASSERT_TRUE(explicit_cells.ok());
  EXPECT_EQ(d->features, explicit_cells->features);
  EXPECT_EQ(d->labels, explicit_cells->labels);
  // The papers' size (n = 100): still two classes, locally coherent.
  StatusOr<Dataset> small = MakeChessboard(100, 5);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->num_classes(), 2);
  EXPECT_GT(Fraction(small->labels, 1), 0.3);
  EXPECT_LT(Fraction(small->labels, 1), 0.7);
}

TEST(Synthetic, DoubleSpiralLiesOnTwoArms) {
  StatusOr<Dataset> d = MakeDoubleSpiral(100, 0.0, 5);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(d->Validate().ok());
  ASSERT_EQ(d->num_points(), 100);
  ASSERT_EQ(d->dim(), 3);
  EXPECT_DOUBLE_EQ(Fraction(d->labels, 1), 0.5);
  for (int i = 0; i < 100; ++i) {
    // Noise-free: z encodes t, and (x, y) = (t/4π)(cos(t + cπ), sin(t + cπ)).
    const double z = d->features(i, 2);
    ASSERT_GE(z, 0.0);
    ASSERT_LE(z, 1.0);
    const double t = 0.5 * kPi + z * 3.5 * kPi;
    const double phase = t + d->labels[i] * kPi;
    EXPECT_NEAR(d->features(i, 0), t / (4 * kPi) * std::cos(phase), 1e-12) << i;
    EXPECT_NEAR(d->features(i, 1), t / (4 * kPi) * std::sin(phase), 1e-12) << i;
  }
}

TEST(Synthetic, LocallyCoherentLabels) {
  StatusOr<Dataset> spiral = MakeDoubleSpiral(200, kDoubleSpiralDefaultNoise, 1);
  StatusOr<Dataset> moons = MakeTwoMoons(400, kTwoMoonsDefaultNoise, 1);
  StatusOr<Dataset> board = MakeChessboard(1000, 4, 1);
  ASSERT_TRUE(spiral.ok() && moons.ok() && board.ok());
  EXPECT_GT(LeaveOneOutNearestNeighbourAccuracy(*spiral), 0.95);
  EXPECT_GT(LeaveOneOutNearestNeighbourAccuracy(*moons), 0.95);
  EXPECT_GT(LeaveOneOutNearestNeighbourAccuracy(*board), 0.9);
}

TEST(Synthetic, SwissRollGeometryAndAngleBands) {
  StatusOr<SwissRoll> roll = MakeSwissRoll(2000, 0.0, 9);
  ASSERT_TRUE(roll.ok()) << roll.status();
  const Dataset& d = roll->data;
  ASSERT_TRUE(d.Validate().ok());
  ASSERT_EQ(d.num_points(), 2000);
  ASSERT_EQ(d.dim(), 3);
  ASSERT_EQ(roll->intrinsic.rows(), 2000);
  ASSERT_EQ(roll->intrinsic.cols(), 2);
  EXPECT_EQ(d.num_classes(), kSwissRollNumClasses);
  const double t_min = 1.5 * kPi, t_max = 4.5 * kPi;
  for (int i = 0; i < 2000; ++i) {
    const double t = roll->intrinsic(i, 0), h = roll->intrinsic(i, 1);
    ASSERT_GE(t, t_min);
    ASSERT_LT(t, t_max);
    ASSERT_GE(h, 0.0);
    ASSERT_LT(h, 21.0);
    EXPECT_NEAR(d.features(i, 0), t * std::cos(t), 1e-12);
    EXPECT_NEAR(d.features(i, 1), h, 1e-12);
    EXPECT_NEAR(d.features(i, 2), t * std::sin(t), 1e-12);
    const int band = static_cast<int>((t - t_min) / (t_max - t_min) * kSwissRollNumClasses);
    EXPECT_EQ(d.labels[i], std::min(band, kSwissRollNumClasses - 1)) << i;
  }
  for (int c = 0; c < kSwissRollNumClasses; ++c) {
    EXPECT_GT(Fraction(d.labels, c), 0.2) << c;
    EXPECT_LT(Fraction(d.labels, c), 0.3) << c;
  }
  // Noise moves the ambient points but not the intrinsic coordinates.
  StatusOr<SwissRoll> noisy = MakeSwissRoll(2000, 0.5, 9);
  ASSERT_TRUE(noisy.ok());
  EXPECT_EQ(noisy->intrinsic, roll->intrinsic);
  const double rms = std::sqrt((noisy->data.features - d.features).squaredNorm() / (3 * 2000));
  EXPECT_NEAR(rms, 0.5, 0.05);
}

TEST(Synthetic, TwoMoonsOnTheirArcs) {
  StatusOr<Dataset> d = MakeTwoMoons(500, 0.0, 4);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(d->Validate().ok());
  ASSERT_EQ(d->num_points(), 500);
  ASSERT_EQ(d->dim(), 2);
  EXPECT_DOUBLE_EQ(Fraction(d->labels, 0), 0.5);
  for (int i = 0; i < 500; ++i) {
    const double x = d->features(i, 0), y = d->features(i, 1);
    if (d->labels[i] == 0) {
      EXPECT_NEAR(std::hypot(x, y), 1.0, 1e-12);
      EXPECT_GE(y, 0.0);
    } else {
      EXPECT_NEAR(std::hypot(x - 1.0, y - 0.5), 1.0, 1e-12);
      EXPECT_LE(y, 0.5);
    }
  }
}

TEST(Synthetic, AdultLikeOneHotGroups) {
  const std::vector<AdultLikeGroup>& groups = AdultLikeGroups();
  ASSERT_EQ(static_cast<int>(groups.size()), kAdultLikeNumGroups);
  int total = 0;
  for (const AdultLikeGroup& g : groups) {
    EXPECT_EQ(g.first_column, total) << g.name;
    EXPECT_GE(g.size, 2) << g.name;
    total += g.size;
  }
  EXPECT_EQ(total, 123);
  EXPECT_EQ(groups.back().name, "native-country");
  EXPECT_EQ(groups.back().size, 41);

  StatusOr<Dataset> d = MakeAdultLike(5000, 21);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(d->Validate().ok());
  ASSERT_EQ(d->num_points(), 5000);
  ASSERT_EQ(d->dim(), 123);
  ASSERT_EQ(d->feature_names.size(), 123u);
  EXPECT_EQ(d->feature_names[0], "age=0");
  for (int i = 0; i < 5000; ++i) {
    for (const AdultLikeGroup& g : groups) {
      int active = 0;
      for (int k = 0; k < g.size; ++k) {
        const double v = d->features(i, g.first_column + k);
        ASSERT_TRUE(v == 0.0 || v == 1.0) << "row " << i << " column " << g.first_column + k;
        active += v == 1.0;
      }
      ASSERT_EQ(active, 1) << "row " << i << " group " << g.name;
    }
  }
  EXPECT_EQ(d->features.sum(), 14.0 * 5000);
  const double positive_rate = Fraction(d->labels, 1);
  EXPECT_GE(positive_rate, 0.20);
  EXPECT_LE(positive_rate, 0.28);
}

TEST(Synthetic, AdultLikeLearnableButNoisy) {
  // Train on an a1a-sized set, test on a fresh draw (different seed = new
  // sample from the same population).
  StatusOr<Dataset> train = MakeAdultLike(1605, 1);
  StatusOr<Dataset> test = MakeAdultLike(10000, 2);
  ASSERT_TRUE(train.ok() && test.ok());
  const double majority = 1.0 - Fraction(test->labels, 1);
  const double accuracy = NaiveBayesAccuracy(*train, *test);
  EXPECT_GT(accuracy, majority + 0.03) << "labels should be learnable";
  EXPECT_GE(accuracy, 0.80);
  EXPECT_LE(accuracy, 0.87) << "labels should be noisy, like real adult";
}

// KL-ADMM §4.2: class 0 ~ N(1, I), class 1 ~ N(−1, I). With 20,000 points
// the per-class sample mean of every coordinate is within 0.05 of ±1 (5 sd)
// and the per-coordinate variance within 0.1 of 1.
TEST(Synthetic, TwoGaussiansHaveThePaperMoments) {
  StatusOr<Dataset> d = MakeTwoGaussians(20000, 5);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int c = 0; c < 2; ++c) {
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(kTwoGaussiansDim), sq = sum;
    int count = 0;
    for (int i = 0; i < d->num_points(); ++i) {
      if (d->labels[i] != c) continue;
      ++count;
      sum += d->features.row(i).transpose();
      sq += d->features.row(i).transpose().cwiseAbs2();
    }
    ASSERT_EQ(count, 10000);
    const Eigen::VectorXd mean = sum / count;
    const Eigen::VectorXd var = sq / count - mean.cwiseAbs2();
    const double expected = c == 0 ? 1.0 : -1.0;
    for (int j = 0; j < kTwoGaussiansDim; ++j) {
      EXPECT_NEAR(mean(j), expected, 0.05) << "class " << c << " coordinate " << j;
      EXPECT_NEAR(var(j), 1.0, 0.1) << "class " << c << " coordinate " << j;
    }
  }
}

TEST(Synthetic, DeterministicForSeedAndDifferentAcrossSeeds) {
  for (const std::string& name : SyntheticNames()) {
    StatusOr<Dataset> a = MakeSyntheticByName(name, 300, 42);
    StatusOr<Dataset> b = MakeSyntheticByName(name, 300, 42);
    StatusOr<Dataset> c = MakeSyntheticByName(name, 300, 43);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << name;
    EXPECT_EQ(a->features, b->features) << name;
    EXPECT_EQ(a->labels, b->labels) << name;
    EXPECT_NE(a->features, c->features) << name;
  }
  StatusOr<SwissRoll> r1 = MakeSwissRoll(100, 0.1, 8), r2 = MakeSwissRoll(100, 0.1, 8);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(r1->data.features, r2->data.features);
  EXPECT_EQ(r1->intrinsic, r2->intrinsic);
}

TEST(Synthetic, ByNameShapesAndValidity) {
  struct Expected {
    const char* name;
    int dim;
    int num_classes;
  };
  for (const Expected& e : {Expected{"chessboard", 2, 2}, Expected{"double_spiral", 3, 2},
                            Expected{"swiss_roll", 3, kSwissRollNumClasses},
                            Expected{"two_moons", 2, 2}, Expected{"adult_like", 123, 2},
                            Expected{"two_gaussians", kTwoGaussiansDim, 2}}) {
    StatusOr<Dataset> d = MakeSyntheticByName(e.name, 400, 3);
    ASSERT_TRUE(d.ok()) << e.name << ": " << d.status();
    EXPECT_TRUE(d->Validate().ok()) << e.name;
    EXPECT_EQ(d->num_points(), 400) << e.name;
    EXPECT_EQ(d->dim(), e.dim) << e.name;
    EXPECT_EQ(d->num_classes(), e.num_classes) << e.name;
    EXPECT_EQ(static_cast<int>(d->feature_names.size()), e.dim) << e.name;
  }
  // n = 1 is the smallest valid size and still validates.
  for (const std::string& name : SyntheticNames()) {
    StatusOr<Dataset> d = MakeSyntheticByName(name, 1, 0);
    ASSERT_TRUE(d.ok()) << name;
    EXPECT_TRUE(d->Validate().ok()) << name;
  }
}

TEST(Synthetic, BadArgumentsNameTheValue) {
  auto expect_invalid = [](const Status& s, const std::string& text) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(text));
  };
  expect_invalid(MakeChessboard(0, 4, 1).status(), "n = 0 must be at least 1");
  expect_invalid(MakeChessboard(10, 1, 1).status(), "cells_per_side = 1 must be at least 2");
  expect_invalid(MakeDoubleSpiral(-5, 0.1, 1).status(), "n = -5 must be at least 1");
  expect_invalid(MakeDoubleSpiral(10, -0.25, 1).status(), "noise = -0.25");
  expect_invalid(MakeSwissRoll(0, 0.0, 1).status(), "n = 0");
  expect_invalid(MakeSwissRoll(10, std::numeric_limits<double>::quiet_NaN(), 1).status(),
                 "noise = nan");
  expect_invalid(MakeTwoMoons(10, std::numeric_limits<double>::infinity(), 1).status(),
                 "noise = inf must be finite and non-negative");
  expect_invalid(MakeAdultLike(0, 1).status(), "n = 0 must be at least 1");
  expect_invalid(MakeTwoGaussians(0, 1).status(), "n = 0 must be at least 1");
  expect_invalid(MakeSyntheticByName("adult_like", -1, 1).status(), "n = -1");

  const Status unknown = MakeSyntheticByName("dbl-spiral", 100, 1).status();
  expect_invalid(unknown, "name = \"dbl-spiral\"");
  for (const std::string& name : SyntheticNames()) EXPECT_THAT(unknown.message(), HasSubstr(name));
}

}  // namespace
}  // namespace kls
