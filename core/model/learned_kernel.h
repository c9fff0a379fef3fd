// LearnedKernel: the result type of every kernel-learning solver, in factored
// form K = V Vᵀ with V the n × r embedding (docs/ARCHITECTURE.md). It never
// materializes the n × n matrix.
//
// Thread safety: const methods are safe to call concurrently.
#pragma once

#include <Eigen/Core>
#include <string>
#include <utility>
#include <vector>

#include "core/common/status.h"

namespace kls {

struct ScoredItem {
  int index = 0;
  double score = 0.0;
  bool operator==(const ScoredItem& o) const { return index == o.index && score == o.score; }
};

class LearnedKernel {
 public:
  using Embedding = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  LearnedKernel() = default;

  /// Takes an n × r embedding; errors on an empty or non-finite matrix.
  static StatusOr<LearnedKernel> FromEmbedding(Embedding embedding);
  /// Factors a small dense PSD kernel K = U Λ Uᵀ, V = U Λ₊^{1/2}, keeping the
  /// eigenvalues above `relative_tolerance` · λ_max. Errors if K is not square,
  /// not symmetric to 1e-8 relative, or not finite. O(n³): small n only.
  static StatusOr<LearnedKernel> FromDenseKernel(const Eigen::MatrixXd& kernel,
                                                 double relative_tolerance = 1e-12);

  int num_points() const { return static_cast<int>(embedding_.rows()); }
  int rank() const { return static_cast<int>(embedding_.cols()); }
  const Embedding& embedding() const { return embedding_; }

  /// K_ij = v_i · v_j. O(r). Indices must be in range (checked by CheckIndex).
  double value(int i, int j) const { return embedding_.row(i).dot(embedding_.row(j)); }
  /// K e_i, all n values. O(nr).
  Eigen::VectorXd row(int i) const;
  /// The k largest K_ij over j (excluding j = i when exclude_self), highest
  /// first, ties by smaller index. O(nr + n log k).
  ///
  /// One pass over V (the query-path cost model: one GEMV +
  /// partial selection, fused): rows are scored in blocks of kScanBlock into a
  /// buffer that stays in L1, four rows at a time with independent SIMD
  /// partial sums, and only scores that beat the current k-th best touch the
  /// size-k heap. No n-length temporary, so the cost is one streaming read of
  /// the float64 embedding. Scores are exact float64 dot products (fixed
  /// summation order, core/model/row_scan.h; they may differ from value(i, j)
  /// in the last bits, since Eigen's dot sums in another order).
  ///
  /// For repeated queries, TopKIndex (core/model/topk_index.h) returns the
  /// identical answer from an int8 screening copy (+13.7 % memory at r = 128)
  /// several times faster (7.5× at n = 100,000, r = 128; bench: `kls-bench topk`).
  std::vector<ScoredItem> TopK(int i, int k, bool exclude_self = true) const;
  /// The k largest v_j · q for a query vector q of length r (same scan).
  std::vector<ScoredItem> TopKByVector(const Eigen::VectorXd& query, int k) const;

  /// Rows scored per block of the TopK scan.
  static constexpr int kScanBlock = 256;

  /// INVALID_ARGUMENT naming `field` and the value when i is out of range.
  Status CheckIndex(int i, const char* field) const;

  /// Dense K (n × n); for tests and small n only.
  Eigen::MatrixXd Dense() const { return embedding_ * embedding_.transpose(); }

 private:
  explicit LearnedKernel(Embedding e) : embedding_(std::move(e)) {}
  /// The fused scan behind TopK / TopKByVector; `skip` = an index to leave out, or -1.
  std::vector<ScoredItem> ScanTop(const double* query, int k, int skip) const;

  Embedding embedding_;
};

}  // namespace kls
