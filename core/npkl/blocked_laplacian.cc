#include "core/npkl/blocked_laplacian.h"

#include <algorithm>

#include "core/common/parallel.h"

namespace kls {

int BlockedLaplacian::CacheBlockColumns(int r, int n) {
  // Measured on the development machine (2 MiB L2, 32 MiB L3), KL-ADMM
  // r = 62, n = 32,000: blocks of 0.5 / 1 / 2 MiB of Y gave 15.2 / 11.5 /
  // 9.9 s, one block (no blocking) 19.6–44.8 s.
  //
  // Every block re-scans the n column offsets and re-touches each output
  // column with an entry in it, so many blocks cost more than the gathers
  // they save: at n = 1,000,000, r = 32 and ≈ 71 non-zeros a column (a random
  // graph; Intel Xeon VM, 2 MiB L2) blocks of 2 MiB (123 blocks) took 1.89 s
  // a product, 16 MiB (16 blocks) 0.76 s, 32 MiB 0.77 s, one block 1.48 s; at
  // n = 200,000 2 to 16 MiB were within 8 % (0.122–0.131 s). So the blocks
  // stay at the L2 size up to kMaxBlocks of them and grow beyond.
  constexpr double kBlockBytes = 1 << 21;  // the L2 size
  constexpr double kOneBlockBytes = 1 << 22;
  constexpr double kMaxBlocks = 16;
  const double y_bytes = 8.0 * r * n;
  if (y_bytes <= kOneBlockBytes) return std::max(n, 1);
  const double block_bytes = std::max(kBlockBytes, y_bytes / kMaxBlocks);
  return std::max(256, static_cast<int>(block_bytes / (8.0 * std::max(r, 1))));
}

BlockedLaplacian::BlockedLaplacian(const Eigen::SparseMatrix<double>& l, int block_columns)
    : n_(static_cast<int>(l.cols())) {
  const int block = std::max(1, block_columns);
  const int blocks = std::max(1, (n_ + block - 1) / block);
  parts_.resize(blocks);
  for (Part& part : parts_) part.offset.assign(n_ + 1, 0);
  for (int i = 0; i < n_; ++i) {
    for (Eigen::SparseMatrix<double>::InnerIterator it(l, i); it; ++it) {
      ++parts_[static_cast<int>(it.row()) / block].offset[i + 1];
    }
  }
  std::vector<std::vector<int>> fill(blocks);
  for (int b = 0; b < blocks; ++b) {
    Part& part = parts_[b];
    for (int i = 0; i < n_; ++i) part.offset[i + 1] += part.offset[i];
    part.row.resize(part.offset[n_]);
    part.value.resize(part.offset[n_]);
    fill[b].assign(part.offset.begin(), part.offset.end() - 1);
  }
  for (int i = 0; i < n_; ++i) {
    for (Eigen::SparseMatrix<double>::InnerIterator it(l, i); it; ++it) {
      const int b = static_cast<int>(it.row()) / block;
      const int k = fill[b][i]++;
      parts_[b].row[k] = static_cast<int>(it.row());
      parts_[b].value[k] = it.value();
    }
  }
}

void BlockedLaplacian::Apply(const Eigen::MatrixXd& y, int num_threads, Eigen::MatrixXd* out) const {
  out->setZero(y.rows(), n_);
  for (const Part& part : parts_) {
    ParallelFor(n_, num_threads, [&](int begin, int end) {
      for (int i = begin; i < end; ++i) {
        auto col = out->col(i);
        for (int k = part.offset[i]; k < part.offset[i + 1]; ++k) {
          col.noalias() += part.value[k] * y.col(part.row[k]);
        }
      }
    });
  }
}

}  // namespace kls
