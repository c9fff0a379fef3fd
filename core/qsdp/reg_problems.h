// RegPCP and RegMVU (SQLP paper §2.3 and §4) as QSDPs
// (qsdp_problem.h), from raw points to the m × m problem in Y.
//
// RegMVU (eq. (11), Weinberger et al. 2007), paper §4 settings: the 4-NN graph
// with w_ij = 1 if x_i is among the 4 NN of x_j or vice versa, L = D − W,
// Q = (v_2, …, v_{m+1}) (smooth_basis.h; dropping v_1 = 1/√n makes Qᵀ1 = 0, so
// K = QYQᵀ is centered, eq. (2), and tr(K) = tr(Y) is the variance), and
//     max_{Y ⪰ 0} tr(Y) − ν Σ_{(i,j) ∈ N} ((QYQᵀ)_ii − 2(QYQᵀ)_ij + (QYQᵀ)_jj − d_ij²)²,
// N = the graph's edges, d_ij the input distances. ν is not given in the
// paper; default 1 (the soft version of MVU's distance equalities (3)).
// Boundedness: the edge terms are (q_i − q_j)ᵀ Y (q_i − q_j) with
// Σ_N (q_i − q_j)(q_i − q_j)ᵀ = QᵀLQ = diag(λ_2..λ_{m+1}) ≻ 0 for a connected
// graph, so the penalty grows quadratically in every PSD direction and beats
// the linear tr(Y): the maximum exists (a disconnected graph is an error).
//
// RegPCP (eq. (12), Li et al. 2009), paper §4 settings: the 20-NN graph with
// w_ij = exp(−‖x_i − x_j‖²/(2σ²)) on k-NN edges (either direction), σ = the
// mean distance of each point to its 20-th nearest neighbour; Q = the m
// smallest eigenvectors of the normalized Laplacian I − D^{-1/2}WD^{-1/2};
//     min_{Y ⪰ 0} Σ_{(i,j,t) ∈ S} ((QYQᵀ)_ij − t)²,
// S = {(i, i, 1)} ∪ {(i, j, 1) : must-link} ∪ {(i, j, 0) : cannot-link}.
// Constraints (paper §4): 20 must-links per class, 20 cannot-links per class
// pair (GeneratePerClassConstraints).
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "core/data/constraints.h"
#include "core/graph/connect.h"
#include "core/model/learned_kernel.h"
#include "core/qsdp/qsdp_problem.h"
#include "core/qsdp/smooth_basis.h"

namespace kls {

struct RegMvuOptions {
  int m = 10;          ///< basis size (>= 1, m + 1 <= n)
  int neighbors = 4;   ///< k of the k-NN graph (paper: 4)
  double nu = 1.0;     ///< ν > 0, weight of the distance penalty in (11)
  int num_threads = 1; ///< k-NN search threads (0 = all cores)
  /// A disconnected k-NN graph: an error (the paper's setting), grow k, or
  /// join the components by their shortest edges (core/graph/connect.h); the
  /// added edges join N like k-NN edges.
  ConnectMode connect = ConnectMode::kError;
  SmoothBasisOptions basis;
  /// INVALID_ARGUMENT "<path>.<field> = <value> <rule>" ("qsdp.m = 12 must be
  /// in [1, n - 1] for n = 10"); num_points <= 0 = not known yet: only the
  /// bounds that do not need n (m >= 1, neighbors >= 1, nu > 0).
  Status Validate(int num_points, std::string_view path = "options") const;
};

struct RegPcpOptions {
  int m = 15;           ///< basis size (1 <= m <= n)
  int neighbors = 20;   ///< k of the k-NN graph (paper: 20)
  int sigma_neighbor = 20;  ///< σ = mean distance to this nearest neighbour (paper: 20)
  int num_threads = 1;
  SmoothBasisOptions basis;
  /// As RegMvuOptions::Validate: "<path>.m = 0 must be >= 1"; num_points <= 0
  /// checks only what does not need n.
  Status Validate(int num_points, std::string_view path = "options") const;
};

/// A problem ready for SolveQsdp plus what produced it.
struct RegularizedKernelProblem {
  QsdpProblem problem;         ///< the QSDP in Y (m × m)
  SmoothBasis basis;           ///< Q and its eigenvalues
  Eigen::SparseMatrix<double> laplacian;
  double sigma = 0.0;          ///< Gaussian width (RegPCP), 0 for RegMVU
  int num_edges = 0;           ///< |N| (RegMVU) or graph edges (RegPCP)
  double graph_seconds = 0.0;  ///< k-NN + Laplacian
  double basis_seconds = 0.0;  ///< eigenvectors
  /// The paper's objective value for a solution Y: tr(Y) − ν Σ(…)² for RegMVU
  /// (= −f), Σ(…)² for RegPCP (= f). `sign` is −1 and +1 respectively.
  double sign = 1.0;
  ConnectReport connect;       ///< RegMVU: components found and edges added
};

/// RegMVU terms for a given basis: a_k = b_k = q_i − q_j, t_k = d_k², w_k = ν,
/// c = 1. Edges (i_k, j_k) index rows of q.
QsdpProblem MakeRegMvuProblem(const Eigen::MatrixXd& q, const std::vector<int>& edge_i,
                              const std::vector<int>& edge_j, const Eigen::VectorXd& squared_distance, double nu);

/// RegPCP terms for a given basis: (i, i, 1) for every row, then every pair of
/// `constraints` (t = 1 must-link, 0 cannot-link); w = 1, c = 0.
QsdpProblem MakeRegPcpProblem(const Eigen::MatrixXd& q, const PairwiseConstraints& constraints);

/// Full pipeline for RegMVU on `points` (n × d). Errors: bad options, a
/// disconnected graph left disconnected by options.connect (FAILED_PRECONDITION:
/// its second Laplacian eigenvalue ~ 0, (11) is unbounded).
StatusOr<RegularizedKernelProblem> BuildRegMvu(const Eigen::MatrixXd& points, const RegMvuOptions& options);

/// Full pipeline for RegPCP. Errors: bad options, constraints out of range.
StatusOr<RegularizedKernelProblem> BuildRegPcp(const Eigen::MatrixXd& points, const PairwiseConstraints& constraints,
                                               const RegPcpOptions& options);

/// The learned kernel K = Q Y Qᵀ of a solution Y (m × m, symmetrized) over
/// the basis Q (n × m), as a factor V = Q U Λ₊^{1/2} (Y = U Λ Uᵀ; eigenvalues
/// below 1e-12 · the largest are dropped; Y = 0 gives a zero kernel of rank 1).
/// Cost: O(m³ + n m r).
StatusOr<LearnedKernel> KernelFromBasis(const Eigen::MatrixXd& q, const Eigen::MatrixXd& y);

/// Paper §4: `must_per_class` random must-link pairs inside every class and
/// `cannot_per_pair` random cannot-link pairs for every pair of classes,
/// without repetition (fewer when a class has too few pairs). Seeded.
StatusOr<PairwiseConstraints> GeneratePerClassConstraints(const std::vector<int>& labels, int must_per_class,
                                                          int cannot_per_pair, uint64_t seed);

}  // namespace kls
