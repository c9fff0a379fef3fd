// The one symmetry check (core/common/symmetry.h) the NPKL solvers share:
// relative to the matrix's norm, naming the field.
#include "core/common/symmetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace kls {
namespace {

using ::testing::HasSubstr;

Eigen::SparseMatrix<double> PathLaplacian(int n, double weight) {
  std::vector<Eigen::Triplet<double>> t;
  for (int i = 0; i + 1 < n; ++i) {
    t.emplace_back(i, i + 1, -weight);
    t.emplace_back(i + 1, i, -weight);
    t.emplace_back(i, i, weight);
    t.emplace_back(i + 1, i + 1, weight);
  }
  Eigen::SparseMatrix<double> l(n, n);
  l.setFromTriplets(t.begin(), t.end());
  return l;
}

TEST(CheckSymmetric, ASymmetricLaplacianPassesAtAnyScale) {
  for (double w : {1e-12, 1.0, 1e12}) EXPECT_TRUE(CheckSymmetric(PathLaplacian(6, w), "laplacian").ok()) << w;
}

TEST(CheckSymmetric, TheToleranceIsRelativeToTheNorm) {
  // An asymmetry of 1e-14 is rounding on a Laplacian of norm ~1 and a real
  // defect on one of norm ~1e-12.
  Eigen::SparseMatrix<double> unit = PathLaplacian(6, 1.0);
  unit.coeffRef(0, 1) += 1e-14;
  EXPECT_TRUE(CheckSymmetric(unit, "laplacian").ok());
  Eigen::SparseMatrix<double> tiny = PathLaplacian(6, 1e-12);
  tiny.coeffRef(0, 1) += 1e-14;
  const Status s = CheckSymmetric(tiny, "laplacian");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(CheckSymmetric, TheErrorNamesTheFieldAndBothNorms) {
  Eigen::SparseMatrix<double> l = PathLaplacian(4, 1.0);
  l.coeffRef(0, 1) += 0.25;
  const Status s = CheckSymmetric(l, "problem.laplacian");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("problem.laplacian: must be symmetric, ‖A − Aᵀ‖_F = "));
  EXPECT_THAT(s.message(), HasSubstr(" with ‖A‖_F = "));
}

}  // namespace
}  // namespace kls
