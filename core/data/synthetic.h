// Seeded generators for the synthetic data sets the source papers use (and
// stand-ins for the ones they download). See docs/SYNTHETIC_DATA.md for which
// paper uses which set, at what size, and how ours differs from the original.
//
// Every generator is deterministic for a given (parameters, seed): it seeds one
// std::mt19937_64 with `seed` and turns raw engine output into uniforms and
// Gaussians itself, so results do not depend on the standard library's
// <random> distribution implementations (only on libm's sin/cos/log/sqrt).
// Different seeds give different draws.
//
// Errors: InvalidArgument naming the argument and its value ("n = 0 must be at
// least 1"); ResourceExhausted if the output cannot be allocated. Every
// returned Dataset passes Dataset::Validate(). Item keys are left empty.
//
// Thread safety: all functions are reentrant (no shared mutable state).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/data/dataset.h"

namespace kls {

/// Default cells per side of the chessboard (4×4 board, 16 cells).
constexpr int kChessboardDefaultCells = 4;
/// Default Gaussian noise (standard deviation, per coordinate) for each set.
constexpr double kDoubleSpiralDefaultNoise = 0.02;
constexpr double kSwissRollDefaultNoise = 0.0;
constexpr double kTwoMoonsDefaultNoise = 0.1;

/// Chessboard (BCDNPKL §4.2 first group; KL-ADMM Table 1: n = 100, d = 2,
/// 2 classes). n points uniform in [0,1)², the square cut into
/// cells_per_side × cells_per_side equal cells; the label of a point in cell
/// (cx, cy) = (⌊x·c⌋, ⌊y·c⌋) is (cx + cy) mod 2. Classes are balanced in
/// expectation when c is even. Features: "x", "y". O(n).
/// Errors: n < 1, cells_per_side < 2.
StatusOr<Dataset> MakeChessboard(int n, int cells_per_side, uint64_t seed);
/// Same with kChessboardDefaultCells cells per side.
StatusOr<Dataset> MakeChessboard(int n, uint64_t seed);

/// Double spiral (BCDNPKL "double-spiral", KL-ADMM "dbl-spiral": n = 100,
/// d = 3, 2 classes). Two interleaved Archimedean spiral arms rotated by π:
/// for class c and arc parameter t ∈ [π/2, 4π] (drawn so points are roughly
/// uniform in arc length), r = t / 4π, (x, y) = r·(cos(t + cπ), sin(t + cπ)),
/// z = (t − π/2) / (4π − π/2) ∈ [0, 1] (height along the arc), plus
/// N(0, noise²) on each coordinate. Point i has label i mod 2 (exact balance,
/// classes interleaved in row order). Arms are ≈ 0.25 apart radially, so
/// noise ≲ 0.05 keeps them separated. Features: "x", "y", "z". O(n).
/// Errors: n < 1, noise negative or not finite.
StatusOr<Dataset> MakeDoubleSpiral(int n, double noise, uint64_t seed);

/// Number of classes MakeSwissRoll cuts the roll angle into.
constexpr int kSwissRollNumClasses = 4;

/// A Swiss roll with its ground-truth 2-D parametrisation.
struct SwissRoll {
  Dataset data;               ///< n × 3 points ("x", "y", "z"), labels in [0, 4)
  Eigen::MatrixXd intrinsic;  ///< n × 2: column 0 = roll angle t, column 1 = height h
};

/// Swiss roll (SQLP paper §4, Fig. 1(b) and Table 1: n = 2000, after Roweis'
/// LLE page).
/// t = (3π/2)(1 + 2u), h = 21v with u, v ~ U[0,1); point = (t cos t, h, t sin t)
/// + N(0, noise²) per coordinate. Label = which of kSwissRollNumClasses
/// equal-width bins of t ∈ [3π/2, 9π/2) holds t (≈ equal counts, since t is
/// uniform); classes are contiguous bands along the unrolled sheet, so they are
/// separable in `intrinsic` but not linearly in the ambient 3-D space. O(n).
/// Errors: n < 1, noise negative or not finite.
StatusOr<SwissRoll> MakeSwissRoll(int n, double noise, uint64_t seed);

/// Two moons (not in the papers; a standard sanity-check set for demos and
/// tests). Class 0: (cos θ, sin θ); class 1: (1 − cos θ, 1/2 − sin θ);
/// θ ~ U[0, π), plus N(0, noise²) per coordinate. Point i has label i mod 2.
/// Features: "x", "y". O(n). Errors: n < 1, noise negative or not finite.
StatusOr<Dataset> MakeTwoMoons(int n, double noise, uint64_t seed);

/// Dimension of MakeTwoGaussians (KL-ADMM §4.2: "a synthetic 10-dimensional
/// binary classification data set").
constexpr int kTwoGaussiansDim = 10;

/// Two Gaussians (KL-ADMM §4.2, the scalability experiment of Figures 3–4):
/// class 0 ~ N(1, I), class 1 ~ N(−1, I) in kTwoGaussiansDim dimensions
/// (1 = the all-ones vector). Point i has label i mod 2. Features "x0"…"x9".
/// O(n · 10). Errors: n < 1.
StatusOr<Dataset> MakeTwoGaussians(int n, uint64_t seed);

/// Feature layout of MakeAdultLike: 14 one-hot groups, 123 columns in total.
constexpr int kAdultLikeNumGroups = 14;
constexpr int kAdultLikeNumFeatures = 123;
/// Expected fraction of label-1 points (">50K") in MakeAdultLike.
constexpr double kAdultLikePositiveRate = 0.24;

/// One attribute of the adult census record and its one-hot block.
struct AdultLikeGroup {
  std::string name;   ///< UCI attribute name, e.g. "marital-status"
  int size = 0;       ///< number of binary columns (categories or quantile bins)
  int first_column = 0;  ///< index of the group's first column
};

/// The 14 groups in column order (sizes sum to kAdultLikeNumFeatures).
const std::vector<AdultLikeGroup>& AdultLikeGroups();

/// Adult-like (BCDNPKL Table 2: a1a–a7a, n = 1605, 2265, 3185, 4781, 6414,
/// 11220, 16100; KL-ADMM Table 1; thesis Table 3.6): n × 123 binary features,
/// exactly one active column per AdultLikeGroups() group (14 non-zeros per
/// row). Label y ~ Bernoulli(kAdultLikePositiveRate); given y, groups are drawn
/// independently from fixed class-conditional categorical distributions (the
/// same for every seed) tuned so a linear classifier reaches ≈ 82–84 %
/// accuracy, close to what linear models get on the real adult data. Columns
/// are named "<group>=<k>". O(n · 123).
/// Errors: n < 1.
StatusOr<Dataset> MakeAdultLike(int n, uint64_t seed);

/// The names MakeSyntheticByName accepts, in a fixed order:
/// "chessboard", "double_spiral", "swiss_roll", "two_moons", "adult_like",
/// "two_gaussians".
const std::vector<std::string>& SyntheticNames();

/// Dispatches to the generator called `name` with its default parameters
/// (kChessboardDefaultCells, k*DefaultNoise); "swiss_roll" returns its `data`.
/// Errors: unknown name (the message lists the valid ones), and the
/// generator's own errors.
StatusOr<Dataset> MakeSyntheticByName(const std::string& name, int n, uint64_t seed);

}  // namespace kls
