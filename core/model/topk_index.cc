#include "core/model/topk_index.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/model/row_scan.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KLS_TOPK_X86 1
#endif

namespace kls {
namespace {

constexpr double kUnit = 0x1p-53;  // unit roundoff u of float64
// Rows screened per block: the int32 dot products of one block stay in L1.
constexpr int kBlock = 256;
// Largest ‖q‖·max‖v_i‖ screened: below it no float64 score or bound overflows.
constexpr double kMaxScoreMagnitude = 1e290;

// An upper bound on ‖x‖₂ (x finite, length r). Scaled like LAPACK's dnrm2 so
// that squares neither overflow nor underflow to a meaningful degree: every
// term is (x_c/m)² ≤ 1 and the largest is 1, so dropped subnormal squares
// change the sum by ≤ r·2⁻¹⁰⁷⁴ relative. The computed value is within
// (r + 4)u of the true norm of the given x; the (r + 16)·2⁻⁵² = 2(r + 16)u
// factor covers that and one more relative rounding u per element of x (the
// quantization residuals are computed with one rounding each).
double UpperNorm(const double* x, int r) {
  double m = 0;
  for (int c = 0; c < r; ++c) m = std::max(m, std::abs(x[c]));
  if (m == 0) return 0;
  double s = 0;
  for (int c = 0; c < r; ++c) {
    const double y = x[c] / m;
    s += y * y;
  }
  return m * std::sqrt(s) * (1.0 + (r + 16) * 0x1p-52);
}

// The float nearest above x ≥ 0 (x stored in a float must never shrink).
float FloatUp(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

// x / G as a float upper bound; values below 1e-200 (so far below float's
// range that x/G's own rounding there is irrelevant) become the smallest
// positive float.
float FloatUpOver(double x, double g) {
  if (x == 0) return 0.0f;
  double y = x / g;
  y = y < 1e-200 ? 1e-200 : y * (1.0 + 0x1p-50);
  return FloatUp(y);
}

// The smallest power of two ≥ x (x > 0, normal).
double PowerOfTwoAbove(double x) {
  int e = 0;
  const double f = std::frexp(x, &e);  // x = f·2^e, f ∈ [0.5, 1)
  return f == 0.5 ? std::ldexp(1.0, e - 1) : std::ldexp(1.0, e);
}

// out[t] = d · c_t over `stride` (a multiple of 16) columns; exact in int32
// because stride·127·max|d| < 2³¹ (Build picks max|d| so).
void DotRowsPortable(const int8_t* codes, int rows, int stride, const int16_t* d, int32_t* out) {
  for (int t = 0; t < rows; ++t) {
    const int8_t* c = codes + int64_t{t} * stride;
    int32_t s = 0;
    for (int j = 0; j < stride; ++j) s += int32_t{c[j]} * int32_t{d[j]};
    out[t] = s;
  }
}

#ifdef KLS_TOPK_X86
// AVX2: 16 codes sign-extended to int16 per load (vpmovsxbw), multiplied by
// the int16 query and summed in adjacent pairs to int32 (vpmaddwd); four rows
// at a time share each query load, and one hadd tree reduces the four rows.
__attribute__((target("avx2"))) void DotRowsAvx2(const int8_t* codes, int rows, int stride, const int16_t* d,
                                                 int32_t* out) {
  int t = 0;
  for (; t + 4 <= rows; t += 4) {
    const int8_t* r0 = codes + int64_t{t} * stride;
    const int8_t* r1 = r0 + stride;
    const int8_t* r2 = r1 + stride;
    const int8_t* r3 = r2 + stride;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int j = 0; j < stride; j += 16) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + j));
      // (written out: a lambda would not inherit the avx2 target)
      const __m256i c0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + j)));
      const __m256i c1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + j)));
      const __m256i c2 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r2 + j)));
      const __m256i c3 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r3 + j)));
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(c0, q));
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(c1, q));
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(c2, q));
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(c3, q));
    }
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + t), s);
  }
  if (t < rows) DotRowsPortable(codes + int64_t{t} * stride, rows - t, stride, d, out + t);
}

bool CpuHasAvx2() { return __builtin_cpu_supports("avx2"); }
#endif

struct Candidate {
  int index;
  double upper;
};

bool Better(const ScoredItem& a, const ScoredItem& b) {
  return a.score > b.score || (a.score == b.score && a.index < b.index);
}

}  // namespace

Status TopKIndexOptions::Validate() const {
  if (!(max_index_fraction > 0 && max_index_fraction <= 1)) {
    return InvalidArgumentError("max_index_fraction = " + std::to_string(max_index_fraction) +
                                " must be in (0, 1]");
  }
  return OkStatus();
}

struct TopKIndex::PreparedQuery {
  std::vector<int16_t> codes;  // d, length stride_
  double scale_product = 0;    // s_q·G (exact: both powers of two, checked normal)
  double err_coef = 0;         // α·G = (‖q‖ + ‖e_q‖ + γQ)·G, multiplies err_[i]
  double norm_coef = 0;        // β·G = (‖e_q‖ + γQ)·G, multiplies norm_[i]
  double eta = 0;              // absolute slack for underflow
};

StatusOr<TopKIndex> TopKIndex::Build(std::shared_ptr<const LearnedKernel> kernel, const TopKIndexOptions& options) {
  if (!kernel) return InvalidArgumentError("kernel: null");
  KLS_RETURN_IF_ERROR(options.Validate());
  return GuardExceptions("TopKIndex::Build", [&]() -> StatusOr<TopKIndex> {
    TopKIndex index;
    index.kernel_ = std::move(kernel);
    const int n = index.kernel_->num_points();
    const int r = index.kernel_->rank();
    const int stride = (r + 15) & ~15;
    // |d · c_i| ≤ stride·127·max|d| must stay below 2³¹.
    const int64_t max_code = std::min<int64_t>(32767, ((int64_t{1} << 31) - 1) / (int64_t{127} * stride));
    const double copy_bytes = double(stride) + 3.0 * sizeof(float);
    if (max_code < 127 || copy_bytes > options.max_index_fraction * 8.0 * r || n == 0) return index;

    const double* v = index.kernel_->embedding().data();
    double max_abs = 0;
    for (int64_t t = 0; t < int64_t{n} * r; ++t) max_abs = std::max(max_abs, std::abs(v[t]));
    if (max_abs == 0 || !std::isfinite(max_abs / 127)) return index;  // zero kernel: all scores tie at 0
    const double g = PowerOfTwoAbove(std::max(max_abs / 127, DBL_MIN));

    index.stride_ = stride;
    index.max_query_code_ = static_cast<int>(max_code);
    index.global_scale_ = g;
#ifdef KLS_TOPK_X86
    index.simd_ = options.use_simd && CpuHasAvx2();
#endif
    index.codes_.assign(size_t(n) * stride, 0);
    index.scale_.assign(n, 0.0f);
    index.err_.assign(n, 0.0f);
    index.norm_.assign(n, 0.0f);
    std::vector<double> residual(r);
    for (int i = 0; i < n; ++i) {
      const double* row = v + int64_t{i} * r;
      int8_t* code = index.codes_.data() + int64_t{i} * stride;
      double m = 0;
      for (int c = 0; c < r; ++c) m = std::max(m, std::abs(row[c]));
      // s_i = f·G with f a float ≥ m/(127 G): then s_i·c is exact in float64
      // (24 + 8 significant bits) whenever s_i is normal; rows so small that
      // s_i would be subnormal keep v̂_i = 0 (their error bound is ‖v_i‖).
      float f = FloatUp(m / 127 / g);
      double s = double(f) * g;
      if (s < DBL_MIN) {
        f = 0.0f;
        s = 0;
      }
      for (int c = 0; c < r; ++c) {
        int q = 0;
        if (s > 0) q = static_cast<int>(std::max(-127.0, std::min(127.0, std::nearbyint(row[c] / s))));
        code[c] = static_cast<int8_t>(q);
        residual[c] = row[c] - s * q;  // one rounding: covered by UpperNorm's factor
      }
      index.scale_[i] = f;
      index.err_[i] = FloatUpOver(UpperNorm(residual.data(), r), g);
      const double norm = UpperNorm(row, r);
      index.norm_[i] = FloatUpOver(norm, g);
      index.max_norm_ = std::max(index.max_norm_, norm);
    }
    return index;
  });
}

int64_t TopKIndex::memory_bytes() const {
  return static_cast<int64_t>(codes_.capacity() * sizeof(int8_t) +
                              (scale_.capacity() + err_.capacity() + norm_.capacity()) * sizeof(float)) +
         static_cast<int64_t>(sizeof(TopKIndex));
}

bool TopKIndex::Prepare(const double* query, PreparedQuery* out) const {
  const int r = rank();
  double m = 0;
  for (int c = 0; c < r; ++c) m = std::max(m, std::abs(query[c]));
  if (!(m > 0) || !std::isfinite(m)) return false;
  const double qnorm = UpperNorm(query, r);
  if (!(qnorm * max_norm_ < kMaxScoreMagnitude) || !(qnorm > 1e-290)) return false;
  // s_q: a power of two with m / s_q ≤ max code, so q_c / s_q and s_q·d_c are
  // exact (unless subnormal, where the residual is still computed exactly).
  const double sq = PowerOfTwoAbove(std::max(m / max_query_code_, DBL_MIN));
  out->scale_product = sq * global_scale_;
  if (!(out->scale_product >= DBL_MIN) || !std::isfinite(out->scale_product)) return false;
  out->codes.assign(stride_, 0);
  std::vector<double> residual(r);
  for (int c = 0; c < r; ++c) {
    const double d = std::max<double>(-max_query_code_, std::min<double>(max_query_code_, std::nearbyint(query[c] / sq)));
    out->codes[c] = static_cast<int16_t>(d);
    residual[c] = query[c] - sq * d;
  }
  const double enorm = UpperNorm(residual.data(), r);
  // γ = 8(r + 32)u over-covers: the float64 scan's γ_r‖q‖‖v_i‖ (≈ r u), the
  // two roundings of a_i (2u·‖q̂‖‖v̂_i‖), the roundings of α, β, b_i and of
  // a_i ± b_i (≤ 10u·Q(N_i + E_i)); see the header.
  const double gamma = 8.0 * (r + 32) * kUnit;
  const double big_q = qnorm + enorm;
  out->err_coef = (qnorm + enorm + gamma * big_q) * global_scale_;
  out->norm_coef = (enorm + gamma * big_q) * global_scale_;
  // Underflow: ≤ r·2⁻¹⁰⁷⁴ in the float64 scan, ≤ 2³¹·2⁻¹⁰⁷⁵ in a_i, a few
  // 2⁻¹⁰⁷⁵·(N_i + E_i)/G in the products of b_i.
  out->eta = (r + 16) * 0x1p-1040;
  return true;
}

bool TopKIndex::Screen(const Eigen::VectorXd& query, std::vector<double>* approx,
                       std::vector<double>* radius) const {
  if (!screening() || query.size() != rank()) return false;
  PreparedQuery p;
  if (!Prepare(query.data(), &p)) return false;
  const int n = num_points();
  std::vector<int32_t> dots(n);
#ifdef KLS_TOPK_X86
  if (simd_) {
    DotRowsAvx2(codes_.data(), n, stride_, p.codes.data(), dots.data());
  } else
#endif
  {
    DotRowsPortable(codes_.data(), n, stride_, p.codes.data(), dots.data());
  }
  approx->resize(n);
  radius->resize(n);
  for (int i = 0; i < n; ++i) {
    (*approx)[i] = (p.scale_product * scale_[i]) * dots[i];
    (*radius)[i] = p.err_coef * err_[i] + p.norm_coef * norm_[i] + p.eta;
  }
  return true;
}

std::vector<ScoredItem> TopKIndex::Query(const double* query, int k, int skip, TopKQueryStats* stats) const {
  const int n = num_points();
  const int r = rank();
  const int want = std::max(0, std::min(k, n - (skip >= 0 && skip < n ? 1 : 0)));
  TopKQueryStats local;
  TopKQueryStats& st = stats ? *stats : local;
  st = TopKQueryStats{};
  if (want == 0) return {};
  // The query is copied so that TopK(i) may pass a row of V itself.
  std::vector<double> q(query, query + r);
  PreparedQuery p;
  if (!screening() || int64_t{want} * 4 > n || !Prepare(q.data(), &p)) {
    return skip >= 0 ? kernel_->TopK(skip, k, true)
                     : kernel_->TopKByVector(Eigen::Map<const Eigen::VectorXd>(q.data(), r), k);
  }
  st.screened = true;

  // 1. Screen: τ = the want-th largest lower bound L_i = a_i − b_i so far (a
  // min-heap of lower bounds); rows with U_i = a_i + b_i ≥ τ are candidates.
  std::vector<double> lower;  // min-heap
  lower.reserve(want);
  double tau = -std::numeric_limits<double>::infinity();
  std::vector<Candidate> cand;
  size_t prune_at = std::max<size_t>(4096, size_t(want) * 8);
  cand.reserve(std::min<size_t>(prune_at, size_t(n)));
  int32_t dots[kBlock];
  double upper[kBlock], lower_bound[kBlock];
  const int8_t* codes = codes_.data();
  const float* scale = scale_.data();
  const float* err = err_.data();
  const float* norm = norm_.data();
  for (int start = 0; start < n; start += kBlock) {
    const int rows = std::min(kBlock, n - start);
#ifdef KLS_TOPK_X86
    if (simd_) {
      DotRowsAvx2(codes + int64_t{start} * stride_, rows, stride_, p.codes.data(), dots);
    } else
#endif
    {
      DotRowsPortable(codes + int64_t{start} * stride_, rows, stride_, p.codes.data(), dots);
    }
    // Bounds for the whole block first (a branch-free loop the compiler
    // vectorizes), then the rare rows that pass the threshold.
    for (int t = 0; t < rows; ++t) {
      const int j = start + t;
      const double a = (p.scale_product * scale[j]) * dots[t];
      const double b = p.err_coef * err[j] + p.norm_coef * norm[j] + p.eta;
      upper[t] = a + b;
      lower_bound[t] = a - b;
    }
    for (int t = 0; t < rows; ++t) {
      if (!(upper[t] >= tau)) continue;
      const int j = start + t;
      if (j == skip) continue;
      cand.push_back({j, upper[t]});
      const double lo = lower_bound[t];
      if (static_cast<int>(lower.size()) < want) {
        lower.push_back(lo);
        std::push_heap(lower.begin(), lower.end(), std::greater<double>());
        if (static_cast<int>(lower.size()) == want) tau = lower.front();
      } else if (lo > lower.front()) {
        std::pop_heap(lower.begin(), lower.end(), std::greater<double>());
        lower.back() = lo;
        std::push_heap(lower.begin(), lower.end(), std::greater<double>());
        tau = lower.front();
      }
    }
    if (cand.size() >= prune_at) {  // τ has grown since early candidates were kept
      cand.erase(std::remove_if(cand.begin(), cand.end(), [tau](const Candidate& c) { return c.upper < tau; }),
                 cand.end());
      if (cand.size() * 2 > prune_at) prune_at *= 2;
    }
  }
  cand.erase(std::remove_if(cand.begin(), cand.end(), [tau](const Candidate& c) { return c.upper < tau; }),
             cand.end());
  st.candidates = static_cast<int64_t>(cand.size());

  // 2. Re-score exactly, most promising first; once U_j is below the
  // want-th best exact score, f_j ≤ U_j cannot enter (not even by a tie).
  std::sort(cand.begin(), cand.end(), [](const Candidate& x, const Candidate& y) { return x.upper > y.upper; });
  std::vector<ScoredItem> heap;  // min-heap under Better: worst kept item on top
  heap.reserve(want);
  const double* v = kernel_->embedding().data();
  for (const Candidate& c : cand) {
    if (static_cast<int>(heap.size()) == want && c.upper < heap.front().score) break;
    double score = 0;
    ScoreRows(v + int64_t{c.index} * r, 1, r, q.data(), &score);
    ++st.rescored;
    const ScoredItem item{c.index, score};
    if (static_cast<int>(heap.size()) < want) {
      heap.push_back(item);
      std::push_heap(heap.begin(), heap.end(), Better);
    } else if (Better(item, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), Better);
      heap.back() = item;
      std::push_heap(heap.begin(), heap.end(), Better);
    }
  }
  std::sort(heap.begin(), heap.end(), Better);
  return heap;
}

std::vector<ScoredItem> TopKIndex::TopK(int i, int k, bool exclude_self, TopKQueryStats* stats) const {
  const double* row = kernel_->embedding().data() + int64_t{i} * rank();
  if (!exclude_self) return Query(row, k, -1, stats);
  return Query(row, k, i, stats);
}

std::vector<ScoredItem> TopKIndex::TopKByVector(const Eigen::VectorXd& query, int k, TopKQueryStats* stats) const {
  return Query(query.data(), k, -1, stats);
}

}  // namespace kls
