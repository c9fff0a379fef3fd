// Cache-blocked dense × sparse product Y·L for the symmetric graph Laplacian
// L of the NPKL solvers (KL-ADMM eq. (26): the O(nnz(L)·r) term).
//
// (Y L)_i = Σ_s L_si y_s = Σ_s L_is y_s (L symmetric): one axpy of a
// contiguous column y_s per non-zero of L's column i, split across threads by
// output column, each column computed by the same serial code whatever the
// split.
//
// The y_s it reads are gathered in graph order, i.e. at random. Once Y (r × n
// doubles) no longer fits in cache that gather runs at DRAM latency: on the
// development machine KL-ADMM's time per iteration grew 4.9× from n = 16,000
// to 32,000 (r = 62; 2 MiB L2, 32 MiB L3). So the rows s are cut into
// contiguous blocks of Y columns that fill the L2, and the product runs
// block by block: (YL)_i = Σ_b Σ_{s∈b} L_si y_s. Blocks are increasing row
// ranges and CSC rows are sorted, so every column's additions happen in
// exactly the order of the unblocked loop: the result is bitwise the same for
// every block size and thread count; only the memory traffic changes (random
// DRAM gathers become one sequential re-read of the output per block).
#ifndef KLS_CORE_NPKL_BLOCKED_LAPLACIAN_H_
#define KLS_CORE_NPKL_BLOCKED_LAPLACIAN_H_

#include <vector>

#include <Eigen/Dense>
#include <Eigen/SparseCore>

namespace kls {

class BlockedLaplacian {
 public:
  /// Splits the rows of the square sparse `l` into blocks of `block_columns`
  /// rows (≥ 1; ≥ cols() means one block). O(nnz(l) + blocks · n) memory.
  BlockedLaplacian(const Eigen::SparseMatrix<double>& l, int block_columns);

  /// The block size used by the solvers for an r × n factor: n (one block)
  /// while Y fits in 4 MiB, else the columns that fill 2 MiB (≥ 256).
  static int CacheBlockColumns(int r, int n);

  int num_blocks() const { return static_cast<int>(parts_.size()); }

  /// out = Y L, Y with cols() == l.cols(). `num_threads` ≥ 1.
  void Apply(const Eigen::MatrixXd& y, int num_threads, Eigen::MatrixXd* out) const;

 private:
  struct Part {  // CSC of the rows [b·block, (b+1)·block) of L, global row ids
    std::vector<int> offset, row;
    std::vector<double> value;
  };
  int n_;
  std::vector<Part> parts_;
};

}  // namespace kls

#endif  // KLS_CORE_NPKL_BLOCKED_LAPLACIAN_H_
