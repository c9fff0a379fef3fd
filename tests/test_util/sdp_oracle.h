// Exact SDP oracle for tests: builds a block-diagonal semidefinite program in
// SDPA sparse format and solves it with CSDP (Debian package coinor-csdp,
// binary /usr/bin/csdp). Tests use it to check that first-order solvers reach
// the true optimum of their formulation on small problems.
//
// CSDP's primal form (what you build here):
//     maximize   tr(C X)
//     subject to tr(A_k X) = b_k,  k = 1..m,   X = diag(X_1, ..., X_p) ⪰ 0
// Blocks are dense symmetric (size s) or diagonal (an LP block of s
// non-negative scalars). Entries are given on or above the diagonal; an
// off-diagonal entry (i, j) with value v contributes v·(X_ij + X_ji) = 2v·X_ij
// to tr(A X) — write v/2 when you mean a coefficient c on X_ij.
#pragma once

#include <Eigen/Core>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace kls::test_util {

class SdpOracle {
 public:
  /// Adds a dense symmetric s × s block; returns its 0-based id.
  int AddBlock(int size);
  /// Adds a diagonal block of `size` non-negative scalars; returns its id.
  int AddDiagonalBlock(int size);
  /// Adds an equality constraint tr(A_k X) = rhs; returns its 0-based id k.
  int AddConstraint(double rhs);
  /// Objective coefficient C(i, j) in `block` (0-based i <= j).
  void AddObjective(int block, int i, int j, double value);
  /// Coefficient A_k(i, j) in `block` (0-based i <= j).
  void AddCoefficient(int constraint, int block, int i, int j, double value);

  struct Solution {
    std::vector<Eigen::MatrixXd> blocks;  ///< primal X per block (diagonal blocks as s × 1)
    Eigen::VectorXd y;                    ///< dual multipliers
    double primal_objective = 0.0;        ///< tr(C X) at the returned X
    std::string log;                      ///< CSDP's output
    int exit_code = 0;                    ///< csdp's exit code (0, 3, or 7 when accepted)
    /// |pobj − dobj| / (1 + |pobj| + |dobj|) from CSDP's summary lines (NaN if absent).
    double relative_gap = 0.0;
  };
  /// Writes the SDPA file, runs csdp, parses the solution. Errors when csdp is
  /// missing or reports a failure (exit codes 1–4 are infeasible/bad; 0 success,
  /// 3 "partial success" is accepted with a note in the log).
  StatusOr<Solution> Solve() const;
  /// Also accept exit code 7 ("lack of progress"): the returned X is CSDP's
  /// last iterate; callers must look at Solution::relative_gap.
  void AcceptLackOfProgress() { accept_lack_of_progress_ = true; }

  int num_constraints() const { return static_cast<int>(rhs_.size()); }

 private:
  struct Entry { int matrix; int block; int i; int j; double value; };
  std::vector<int> block_sizes_;  // negative = diagonal block (SDPA convention)
  std::vector<double> rhs_;
  std::vector<Entry> entries_;
  bool accept_lack_of_progress_ = false;
};

/// True when /usr/bin/csdp (or csdp on PATH) is runnable.
bool CsdpAvailable();

}  // namespace kls::test_util
