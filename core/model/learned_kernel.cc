#include "core/model/learned_kernel.h"

#include "core/model/row_scan.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <string>

namespace kls {

StatusOr<LearnedKernel> LearnedKernel::FromEmbedding(Embedding embedding) {
  if (embedding.rows() == 0 || embedding.cols() == 0) {
    return InvalidArgumentError("embedding: empty (" + std::to_string(embedding.rows()) + " x " +
                                std::to_string(embedding.cols()) + ")");
  }
  if (!embedding.allFinite()) return InvalidArgumentError("embedding: contains NaN or Inf");
  return LearnedKernel(std::move(embedding));
}

StatusOr<LearnedKernel> LearnedKernel::FromDenseKernel(const Eigen::MatrixXd& kernel,
                                                       double relative_tolerance) {
  if (kernel.rows() == 0 || kernel.rows() != kernel.cols()) {
    return InvalidArgumentError("kernel: must be square and non-empty, got " +
                                std::to_string(kernel.rows()) + " x " + std::to_string(kernel.cols()));
  }
  if (!kernel.allFinite()) return InvalidArgumentError("kernel: contains NaN or Inf");
  const double scale = std::max(1.0, kernel.cwiseAbs().maxCoeff());
  const double asym = (kernel - kernel.transpose()).cwiseAbs().maxCoeff();
  if (asym > 1e-8 * scale) {
    return InvalidArgumentError("kernel: not symmetric (max |K - K^T| = " + std::to_string(asym) + ")");
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (kernel + kernel.transpose()));
  if (eig.info() != Eigen::Success) return InternalError("kernel: eigendecomposition failed");
  const Eigen::VectorXd& lambda = eig.eigenvalues();  // ascending
  const double cutoff = std::max(0.0, lambda.maxCoeff()) * relative_tolerance;
  std::vector<int> keep;
  for (int t = static_cast<int>(lambda.size()) - 1; t >= 0; --t)
    if (lambda[t] > cutoff) keep.push_back(t);
  if (keep.empty()) keep.push_back(static_cast<int>(lambda.size()) - 1);  // zero kernel: rank-1 zero factor
  Embedding v(kernel.rows(), static_cast<Eigen::Index>(keep.size()));
  for (size_t c = 0; c < keep.size(); ++c) {
    v.col(c) = eig.eigenvectors().col(keep[c]) * std::sqrt(std::max(0.0, lambda[keep[c]]));
  }
  return LearnedKernel(std::move(v));
}

Eigen::VectorXd LearnedKernel::row(int i) const { return embedding_ * embedding_.row(i).transpose(); }

std::vector<ScoredItem> LearnedKernel::ScanTop(const double* query, int k, int skip) const {
  const int n = num_points();
  const int r = rank();
  const int want = std::max(0, std::min(k, n - (skip >= 0 && skip < n ? 1 : 0)));
  auto better = [](const ScoredItem& a, const ScoredItem& b) {
    return a.score > b.score || (a.score == b.score && a.index < b.index);
  };
  std::vector<ScoredItem> heap;  // min-heap under `better`: worst kept item on top
  if (want == 0) return heap;
  heap.reserve(want);
  // The query is copied so that TopK(i) may pass a row of V itself.
  std::vector<double> q(query, query + r);
  double scores[kScanBlock];
  const double* v = embedding_.data();
  for (int start = 0; start < n; start += kScanBlock) {
    const int rows = std::min(kScanBlock, n - start);
    ScoreRows(v + int64_t{start} * r, rows, r, q.data(), scores);
    for (int t = 0; t < rows; ++t) {
      const int j = start + t;
      if (j == skip) continue;
      const ScoredItem c{j, scores[t]};
      if (static_cast<int>(heap.size()) < want) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), better);
      } else if (better(c, heap.front())) {  // rows arrive by index: a tie never displaces
        std::pop_heap(heap.begin(), heap.end(), better);
        heap.back() = c;
        std::push_heap(heap.begin(), heap.end(), better);
      }
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  return heap;
}

std::vector<ScoredItem> LearnedKernel::TopK(int i, int k, bool exclude_self) const {
  return ScanTop(embedding_.data() + int64_t{i} * rank(), k, exclude_self ? i : -1);
}

std::vector<ScoredItem> LearnedKernel::TopKByVector(const Eigen::VectorXd& query, int k) const {
  return ScanTop(query.data(), k, -1);
}

Status LearnedKernel::CheckIndex(int i, const char* field) const {
  if (i < 0 || i >= num_points()) {
    return InvalidArgumentError(std::string(field) + " = " + std::to_string(i) +
                                " is out of range for a kernel over " + std::to_string(num_points()) +
                                " points");
  }
  return OkStatus();
}

}  // namespace kls
