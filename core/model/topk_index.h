// TopKIndex: exact top-k queries over a LearnedKernel that read far fewer
// bytes than the float64 scan, by screening a compressed copy of V first.
//
// The copy (built once per kernel, immutable): every row v_i is stored as
// int8 codes c_i ∈ [−127, 127]^r with one scale s_i (v̂_i = s_i c_i, s_i =
// max_c |v_ic| / 127 rounded up), plus upper bounds E_i ≥ ‖v_i − v̂_i‖ and
// N_i ≥ ‖v_i‖. A query q is rounded to int16 codes d with a power-of-two
// scale s_q (q̂ = s_q d, e_q = q − q̂; |d_c| ≤ 127 on CPUs with AVX-512 VNNI,
// whose kernel multiplies bytes), and every row gets the screening score
//
//   a_i = s_q s_i (d · c_i)                (an exact integer dot product)
//
// and the rigorous radius b_i from the identity
//   q·v_i − q̂·v̂_i = q·(v_i − v̂_i) + e_q·v̂_i
// and Cauchy–Schwarz (‖v̂_i‖ ≤ N_i + E_i):
//
//   |f_i − a_i| ≤ b_i = ‖q‖ E_i + ‖e_q‖ (N_i + E_i) + γ Q (N_i + E_i) + η,
//
// where f_i is the float64 score the exact scan computes (core/model/row_scan.h),
// Q = ‖q‖ + ‖e_q‖, and the γ, η terms (γ = 8(r + 32)·2⁻⁵³, η = (r + 16)·2⁻¹⁰⁴⁰)
// over-cover every rounding in f_i, a_i, b_i, in the norms and in a_i ± b_i,
// including gradual underflow. So L_i = a_i − b_i ≤ f_i ≤ a_i + b_i = U_i.
//
// Query (one pass over the copy, then a few float64 rows):
//   1. scan rows in index order; τ = the k-th largest L_i seen so far; keep
//      every row with U_i ≥ τ as a candidate. Since k rows have f ≥ L ≥ τ, the
//      k-th best exact score is ≥ τ, so no row of the true top k is dropped.
//   2. re-score candidates exactly (the same ScoreRows bits as
//      LearnedKernel::TopK) in decreasing U, stopping once U is below the k-th
//      best exact score found — the rest cannot enter.
// The result is therefore identical — same items, same order, same score
// bits, ties to the smaller index — to LearnedKernel::TopK / TopKByVector.
// Queries outside the safe range (q = 0, ‖q‖·max‖v_i‖ ≥ 1e290 where float64
// scores may overflow, a query scale that underflows) and k > n/4 (screening
// cannot save much) are answered by the exact scan itself, so they too agree.
//
// Cost: build O(nr), one pass. Query: a read of n·(⌈r/16⌉·16 + 12) bytes
// (the int8 codes and three float32 per row; 14.0 MB instead of 102.4 MB at
// n = 100,000, r = 128) + O(n) scalar screening + re-scoring of the
// candidates (typically k plus a few rows: O(r) each) + O(n log k) worst case.
//
// Memory: memory_bytes() = n·(⌈r/16⌉·16 + 20) + O(1) (the codes, three float
// bounds and the float64 1/‖v_i‖ the cosine uses), i.e. for r a multiple of
// 16 about (r + 20)/(8r) of the float64 embedding: 14.5 % at r = 128,
// 20.3 % at r = 32. The index also holds a shared_ptr to its kernel (it
// re-scores from V), so the kernel lives as long as the index. Kernels whose
// copy would exceed max_index_fraction of the embedding (rank ≤ 6 by default) or whose rank
// exceeds 133,000 (int32 dot products could overflow) get no copy and every
// query runs the exact scan (screening() is false; memory_bytes() is then the
// n·8 bytes of 1/‖v_i‖ + sizeof(TopKIndex)).
//
// Thread safety: immutable after Build; const methods are safe to call
// concurrently (each query allocates its own scratch, O(r + candidates)).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/model/item_bitmap.h"
#include "core/model/learned_kernel.h"

namespace kls {

/// How a top-k query scores item j against the query q.
enum class ScoreMetric {
  kInnerProduct,  ///< q · v_j (for an item query q = v_i: K_ij)
  kCosine,        ///< q · v_j / (‖q‖ ‖v_j‖) (for an item query: K_ij / sqrt(K_ii K_jj)); 0 for a zero row or query
};
/// "inner_product", "cosine".
const char* ScoreMetricName(ScoreMetric m);

/// Settings shared by every query of one TopKIndex::Search call.
struct TopKSearchOptions {
  /// Results per query, after `offset` (≤ 0: empty answers).
  int k = 10;
  /// Best results skipped first (paging): (offset, k) returns ranks
  /// offset+1 .. offset+k of the one large query with k' = offset + k, so
  /// pages never overlap or miss an item. ≥ 0.
  int offset = 0;
  /// How items are scored.
  ScoreMetric metric = ScoreMetric::kInnerProduct;
  /// Results scoring below this are dropped (an answer may then hold fewer
  /// than k items). -inf: none. Not NaN.
  double min_score = -std::numeric_limits<double>::infinity();
  /// Threads a batch may use (its queries are split among them; ≤ 0 = one
  /// per core). One query always runs on the calling thread alone.
  int threads = 1;

  /// INVALID_ARGUMENT naming the field when a value is out of range.
  Status Validate() const;
};

/// One query of a TopKIndex::Search batch.
struct TopKQuery {
  /// ≥ 0: query by item `item`'s row of V; < 0: by `vector`.
  int item = -1;
  /// When item < 0: rank() values (borrowed; the caller keeps them alive).
  const double* vector = nullptr;
  /// Item queries: leave the item itself out of its answer.
  bool exclude_self = true;
  /// The items this query may return (size num_points()); null = all.
  /// Queries of one batch that share the same bitmap (the same pointer) are
  /// answered in one pass over the items that pass it.
  const ItemBitmap* allowed = nullptr;
  /// Items this query must not return (borrowed; any order, repeats and
  /// items `allowed` fails are fine); null = none. Cheaper than a bitmap of
  /// its own for a short list (items already seen): the query keeps
  /// sharing its group's pass and asks it for as many more results.
  const std::vector<int>* exclude = nullptr;
};

/// What one Search did (optional out-parameter; for tests and benchmarks).
struct TopKSearchStats {
  int64_t gathered = 0;    ///< queries answered by scoring only the allowed items (selective filters)
  int64_t screened = 0;    ///< queries answered through the int8 screen
  int64_t scanned = 0;     ///< queries answered by the exact float64 scan
  int64_t candidates = 0;  ///< rows kept by the screens
  int64_t rescored = 0;    ///< rows re-scored exactly after a screen
};

/// Settings of TopKIndex::Build.
struct TopKIndexOptions {
  /// Use the AVX2 screening kernel when the CPU has AVX2 (checked at run
  /// time, so a portable -march=x86-64 build still gets it); false forces the
  /// portable loop (tests compare the two).
  bool use_simd = true;
  /// With use_simd: the AVX-512 VNNI kernel when the CPU has it (8-bit query
  /// codes: looser bounds, four times the products per instruction).
  bool use_vnni = true;
  /// Largest |query code|: 0 = the kernel's own (127 with VNNI, else the
  /// int32-safe maximum); a value in [127, 32767] narrows it (tests compare
  /// kernels at equal precision).
  int max_query_code = 0;
  /// Skip the compressed copy (exact scan only) when it would take more than
  /// this fraction of the float64 embedding's n·r·8 bytes. In (0, 1].
  double max_index_fraction = 0.5;

  /// INVALID_ARGUMENT naming the field when a value is out of range.
  Status Validate() const;
};

/// What one query did (optional out-parameter; for tests and benchmarks).
struct TopKQueryStats {
  bool screened = false;   ///< false: answered by the exact float64 scan alone
  int64_t candidates = 0;  ///< rows kept by the screen (U_i ≥ running τ), after pruning
  int64_t rescored = 0;    ///< rows re-scored exactly in float64
};

class TopKIndex {
 public:
  /// Builds the screening copy of `kernel` (non-null). O(nr) time.
  static StatusOr<TopKIndex> Build(std::shared_ptr<const LearnedKernel> kernel,
                                   const TopKIndexOptions& options = {});

  /// Same contract and same result as kernel().TopK(i, k, exclude_self):
  /// the k largest K_ij, highest first, ties by smaller index. `i` must be in
  /// range (kernel().CheckIndex); k ≤ 0 gives an empty result.
  std::vector<ScoredItem> TopK(int i, int k, bool exclude_self = true, TopKQueryStats* stats = nullptr) const;
  /// Same contract and same result as kernel().TopKByVector(query, k);
  /// query.size() must equal rank().
  std::vector<ScoredItem> TopKByVector(const Eigen::VectorXd& query, int k,
                                       TopKQueryStats* stats = nullptr) const;

  /// A batch of queries, each answered exactly: the k best items (after
  /// `offset`) among those its `allowed` bitmap passes (minus the item
  /// itself for exclude_self item queries) by options.metric, highest first,
  /// ties by smaller index, whatever the filter's selectivity. An answer has
  /// exactly min(k, passing items − offset) entries unless min_score drops
  /// some. Every query's answer equals that query's answer when searched
  /// alone (same items, order and score bits), and with the inner product and
  /// no filter equals TopK / TopKByVector.
  ///
  /// How: queries that share a bitmap are grouped; a group whose bitmap
  /// passes few items (when reading those rows of V costs less than the
  /// screen's pass) scores just them, gathered block by block so each block
  /// serves the whole group; otherwise one pass over the items in blocks
  /// of 256 rows screens (int8) or scores (float64) the block for every
  /// query of the group while it is in cache, skipping blocks no bit passes.
  /// Cosine scores are the inner product with q/‖q‖ times 1/‖v_j‖ (kept per
  /// row by Build), and screen with the same bounds scaled.
  ///
  /// `control`'s deadline and cancellation are polled every few blocks:
  /// DEADLINE_EXCEEDED / CANCELLED then. INVALID_ARGUMENT naming
  /// "queries[t].item" (out of range), "queries[t].vector" (null or not finite),
  /// "queries[t].allowed" (wrong size) or the option.
  StatusOr<std::vector<std::vector<ScoredItem>>> Search(const std::vector<TopKQuery>& queries,
                                                        const TopKSearchOptions& options,
                                                        const SolveControl& control = SolveControl(),
                                                        TopKSearchStats* stats = nullptr) const;

  /// The screening scores a_i and radii b_i of every row for `query` (see the
  /// file comment), for tests and diagnostics. Returns false (outputs
  /// untouched) when this query would not be screened.
  bool Screen(const Eigen::VectorXd& query, std::vector<double>* approx, std::vector<double>* radius) const;

  const LearnedKernel& kernel() const { return *kernel_; }
  const std::shared_ptr<const LearnedKernel>& shared_kernel() const { return kernel_; }
  int num_points() const { return kernel_->num_points(); }
  int rank() const { return kernel_->rank(); }
  /// Whether a compressed copy exists (false: every query runs the exact scan).
  bool screening() const { return stride_ > 0; }
  /// Whether queries use the AVX2 kernel.
  bool uses_simd() const { return simd_; }
  /// Whether queries use the AVX-512 VNNI kernel (8-bit query codes).
  bool uses_vnni() const { return vnni_; }
  /// Bytes held by the index on top of the kernel's n·r·8.
  int64_t memory_bytes() const;

 private:
  struct PreparedQuery;
  TopKIndex() = default;
  struct QueryState;
  bool Prepare(const double* query, PreparedQuery* out) const;
  /// Rows per interleaved group of the VNNI layout.
  static constexpr int kLanes = 16;
  /// Where code c of row i lives in a codes array: row-major (i·stride + c),
  /// or with VNNI interleaved in groups of kLanes rows — four columns of each
  /// row of the group in turn, so one 64-byte load holds columns 4g..4g+3 of
  /// sixteen rows. A block starting at a multiple of kLanes starts at i·stride either way.
  int64_t CodeOffset(int64_t i, int c) const;
  /// Writes row i's `stride_` codes `row` into `dest` (a codes array) at row i.
  void StoreCodes(int64_t i, const int8_t* row, int8_t* dest) const;
  /// Copies row j's codes of this index to row u of `block` (same layout).
  void CopyCodes(int j, int u, int8_t* block) const;
  /// Software prefetch of rows [start, start + rows) of the screening copy (codes and factors).
  void PrefetchBlock(int64_t start, int rows) const;
  /// out[t] = d · c_t for `rows` rows of codes (the fastest kernel the CPU has).
  void Dots(const int8_t* codes, const int32_t* rowsum, int rows, const PreparedQuery& p, int32_t* out) const;
  std::vector<ScoredItem> SearchOne(const TopKQuery& query, int k, TopKQueryStats* stats) const;
  /// Answers the queries `group` of `states` (all sharing `allowed`).
  Status SearchGroup(std::vector<QueryState>& states, const std::vector<int>& group, const ItemBitmap* allowed,
                     const TopKSearchOptions& options, const SolveControl& control, TopKSearchStats* stats) const;
  // SearchGroup's phases.
  /// Sets each query's `want` (of the `passing` allowed rows) and mode: the
  /// screen (into *screened) or the exact scan (into *scanned); queries that
  /// want nothing go to neither.
  void PlanQueries(std::vector<QueryState>& states, const std::vector<int>& group, const ItemBitmap* allowed,
                   int64_t passing, const TopKSearchOptions& options, std::vector<int>* screened,
                   std::vector<int>* scanned, TopKSearchStats* stats) const;
  /// Screens one block of `rows` rows (codes, rowsum and factors of those
  /// rows; row_inv: the cosine's row factors, or null) for query `s`: fills
  /// dots[] and upper[] (the upper bounds U) for every row and hits[] with the
  /// rows whose U reaches s.tau; returns the number of hits.
  int ScreenBlock(const QueryState& s, const int8_t* codes, const int32_t* rowsum, int rows, const float* scale,
                  const float* err, const float* norm, const double* row_inv, int32_t* dots, double* upper,
                  int* hits) const;
  /// Keeps a screened query's hits of one block (item block_index[u] of row
  /// u; `words`: the allowed bitmap, or null) as candidates and raises s.tau
  /// with their lower bounds.
  void TakeHits(QueryState& s, int count, const int* hits, const int* block_index, const double* upper,
                const int32_t* dots, const float* scale, const float* err, const float* norm, const double* row_inv,
                const uint64_t* words) const;
  /// Re-scores the screened queries' candidates exactly (`inv`: the cosine's row factors, or null).
  void RescoreCandidates(std::vector<QueryState>& states, const std::vector<int>& screened, const double* inv,
                         TopKSearchStats* stats) const;

  std::shared_ptr<const LearnedKernel> kernel_;
  int stride_ = 0;            ///< bytes per row of codes_ (r rounded up to 16); 0 = no copy
  int max_query_code_ = 0;    ///< |d_c| ≤ this, so |d · c_i| < 2³¹
  bool simd_ = false;
  bool vnni_ = false;         ///< AVX-512 VNNI kernel: 8-bit query codes, rowsum_ kept
  double global_scale_ = 0;   ///< G, a power of two: s_i = scale_[i]·G, E_i = err_[i]·G, N_i = norm_[i]·G
  double max_norm_ = 0;       ///< ≥ max_i ‖v_i‖
  std::vector<int8_t> codes_;  ///< n × stride_, row-major, zero padded
  std::vector<float> scale_;   ///< s_i / G
  std::vector<float> err_;     ///< ≥ ‖v_i − v̂_i‖ / G
  std::vector<float> norm_;    ///< ≥ ‖v_i‖ / G
  std::vector<int32_t> rowsum_;   ///< Σ_c c_ic per row (VNNI only: u·c_i − 128·rowsum_i = d·c_i)
  std::vector<double> inv_norm_;  ///< 1/‖v_i‖ (0 for a zero or subnormal-norm row): the cosine's row factor
};

}  // namespace kls
