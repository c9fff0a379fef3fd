// The paper's baseline: the Schur-complement SDP (SCSDP, SQLP paper eq. (15)–(16))
//
//     min_{Y, s}  s + bᵀ vec(Y)   s.t.  Y ⪰ 0,   [ I_{m²}          A^{1/2} vec(Y) ]
//                                                [ (A^{1/2}vec(Y))ᵀ       s       ] ⪰ 0,
//
// written for an SDPA-format SDP solver (CSDP) in *its dual form* (the paper:
// "considering Problem (15-16) as an SDP in the standard dual form"):
//     min aᵀz  s.t.  Σ_k z_k F_k − C ⪰ 0,
// with z = (the m(m+1)/2 entries Y_pq, p <= q, in column order; then s). The
// blocks are the m × m Y and the (m² + 1) × (m² + 1) Schur matrix, whose
// constant part is −C = diag(I_{m²}, 0). A^{1/2} is the symmetric square root
// of the dense m² × m² A of (14) (eigendecomposition, O(m⁶)) — the baseline is
// deliberately the paper's, and meant for m <= 20–30.
//
// `Sink` is any SDPA builder with AddBlock(size), AddConstraint(rhs) and
// AddObjective/AddCoefficient(…, block, i, j, value) (entries on or above the
// diagonal, 0-based), e.g. tests/test_util/sdp_oracle.h's SdpOracle.
#pragma once

#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>

#include "core/qsdp/qsdp_problem.h"

namespace kls {

/// Number of SDP variables z: m(m+1)/2 entries of Y, then s.
inline int SchurSdpNumVariables(int m) { return m * (m + 1) / 2 + 1; }

/// Writes the SCSDP of `problem` into `sink`.
template <typename Sink>
void BuildSchurComplementSdp(const QsdpProblem& problem, Sink* sink) {
  const int m = problem.dim();
  const int mm = m * m;
  const Eigen::MatrixXd a = problem.DenseQuadratic();
  const Eigen::VectorXd b = problem.DenseLinear();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(a);
  const Eigen::VectorXd root = eig.eigenvalues().cwiseMax(0.0).cwiseSqrt();
  const Eigen::MatrixXd a_half = eig.eigenvectors() * root.asDiagonal() * eig.eigenvectors().transpose();
  const double drop = 1e-15 * std::max(1.0, a_half.cwiseAbs().maxCoeff());
  const int block_y = sink->AddBlock(m);
  const int block_s = sink->AddBlock(mm + 1);
  for (int i = 0; i < mm; ++i) sink->AddObjective(block_s, i, i, -1.0);  // −C = diag(I, 0)
  for (int q = 0; q < m; ++q) {
    for (int p = 0; p <= q; ++p) {
      // ∂vec(Y)/∂Y_pq = e_{p+qm} + e_{q+pm} (one term when p = q).
      Eigen::VectorXd col = a_half.col(p + q * m);
      double cost = b[p + q * m];
      if (p != q) {
        col += a_half.col(q + p * m);
        cost += b[q + p * m];
      }
      const int z = sink->AddConstraint(cost);
      sink->AddCoefficient(z, block_y, p, q, 1.0);
      for (int i = 0; i < mm; ++i)
        if (std::abs(col[i]) > drop) sink->AddCoefficient(z, block_s, i, mm, col[i]);
    }
  }
  const int z_s = sink->AddConstraint(1.0);
  sink->AddCoefficient(z_s, block_s, mm, mm, 1.0);
}

/// Y from the SDP variables z (the dual vector an SDPA solver returns).
inline Eigen::MatrixXd SchurSdpSolutionY(const Eigen::VectorXd& z, int m) {
  Eigen::MatrixXd y(m, m);
  int k = 0;
  for (int q = 0; q < m; ++q)
    for (int p = 0; p <= q; ++p, ++k) y(p, q) = y(q, p) = z[k];
  return y;
}

}  // namespace kls
