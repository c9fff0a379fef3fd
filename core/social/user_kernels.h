// The seven user-similarity kernels of thesis §7.2.2 and their PSD repair
// (§7.5.1), computed from the observed part of a Community (community.h).
//
//   0 visual    K¹ = exp(−‖ū_i − ū_j‖² / σ²), ū the centroid of a user's photo
//               features, σ the mean Euclidean distance between centroids (§7.2.2.1)
//   1 textual   K² = cosine of the users' tf-idf tag vectors, idf = log(N_u /
//               users using the tag) (§7.2.2.2)
//   2 comment   K³ = # comments between u_i and u_j, both directions (§7.2.2.3)
//   3 group     K⁴ = # groups both joined (§7.2.2.4)
//   4 contact   K⁵ = # common friends (§7.2.2.5)
//   5 location  K⁶ = # geo cells (cell_degrees grid) where both took photos (§7.2.2.6)
//   6 fave      K⁷ = # photos both marked favourite (§7.2.2.7)
//
// PSD repair (§7.5.1): divide each row by its maximum, symmetrize
// (K + Kᵀ)/2, and add δI with δ = max(0, −λ_min) (+ a relative margin) when
// the smallest eigenvalue is negative. A row whose maximum is <= 0 is left
// as it is. Dense n × n matrices: 7 n² doubles (n = 2000: 224 MB).
#pragma once

#include <Eigen/Core>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "core/social/community.h"

namespace kls {

enum class UserKernel { kVisual = 0, kTextual, kComment, kGroup, kContact, kLocation, kFave };
constexpr int kNumUserKernels = 7;
/// "visual", "textual", "comment", "group", "contact", "location", "fave".
const char* UserKernelName(UserKernel k);

struct UserKernelOptions {
  double cell_degrees = 0.5;  ///< geo grid cell size in degrees (> 0)
  bool repair_psd = true;     ///< apply the §7.5.1 normalization and δI shift
  /// INVALID_ARGUMENT "<path>.cell_degrees = 0 must be finite and > 0".
  Status Validate(std::string_view path = "options") const;
};

struct UserKernels {
  std::array<Eigen::MatrixXd, kNumUserKernels> k;  ///< indexed by UserKernel
  std::array<double, kNumUserKernels> delta{};     ///< δ added by the PSD repair
  const Eigen::MatrixXd& operator[](UserKernel t) const { return k[static_cast<int>(t)]; }
};

StatusOr<UserKernels> ComputeUserKernels(const Community& data, const UserKernelOptions& options = {});

/// §7.5.1 repair of one similarity matrix (in place); returns δ. λ_min comes
/// from a dense symmetric eigensolver for n <= 600 and from Lanczos otherwise.
StatusOr<double> RepairPsd(Eigen::MatrixXd& k);

/// Smallest eigenvalue of a symmetric matrix (dense for n <= 600, else Spectra).
StatusOr<double> SmallestEigenvalue(const Eigen::MatrixXd& k);

}  // namespace kls
