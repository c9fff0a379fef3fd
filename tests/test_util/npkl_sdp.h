// The NPKL formulations written as SDPs for CSDP, shared by the tests (exact
// reference on small n) and `kls-bench exact` (the side-by-side peer at
// n = 1,000). No gtest dependency.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "core/common/status.h"
#include "core/npkl/npkl_problem.h"

namespace kls::test_util {

struct NpklSdpAnswer {
  double objective = 0.0;  ///< the SDP's optimal value in the solver's sign (a minimum)
  Eigen::MatrixXd kernel;  ///< the optimal n × n kernel
  double seconds = 0.0;    ///< CSDP wall time (writing the file and parsing included)
};

/// BCDNPKL eq. (1): min tr(ΔZ) + C Σ_{pairs} ℓ(T_ij Z_ij), Z ⪰ 0, every
/// unordered pair once, for ℓ = square, square hinge or hinge.
double BcdObjective(const NpklProblem& p, NpklLoss loss, double c, const Eigen::MatrixXd& z);
StatusOr<NpklSdpAnswer> SolveBcdWithCsdp(const NpklProblem& p, NpklLoss loss, double c);

/// KL-ADMM's ordered constraint entries (i, j, T_ij): each i ≠ j pair twice,
/// self pairs once; T_ij = 1 must-link or self, 0 cannot-link.
struct PcpEntry {
  int i, j;
  double t;
};
std::vector<PcpEntry> OrderedPcpEntries(const PairwiseConstraints& c);

/// KL-ADMM eq. (1): min tr(LK) + (γ/2) Σ_{(i,j) ∈ T, ordered} (K_ij − T_ij)²,
/// T_ij = 1 must-link or self pair, 0 cannot-link; K ⪰ 0.
double PcpObjective(const NpklProblem& p, double gamma, const Eigen::MatrixXd& k);
StatusOr<NpklSdpAnswer> SolvePcpWithCsdp(const NpklProblem& p, double gamma);

}  // namespace kls::test_util
