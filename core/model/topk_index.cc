#include "core/model/topk_index.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/common/parallel.h"
#include "core/model/row_scan.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KLS_TOPK_X86 1
#endif

namespace kls {
namespace {

constexpr double kUnit = 0x1p-53;  // unit roundoff u of float64
// Rows screened per block: the int32 dot products of one block stay in L1.
constexpr int kBlock = 256;  // a multiple of 64 (bitmap words) and of TopKIndex::kLanes
// Fewest passing rows a query screens (fewer: scored exactly, cheaper).
constexpr int64_t kMinScreenedRows = 256;
// Largest ‖q‖·max‖v_i‖ screened: below it no float64 score or bound overflows.
constexpr double kMaxScoreMagnitude = 1e290;

// An upper bound on ‖x‖₂ (x finite, length r). Scaled like LAPACK's dnrm2 so
// that squares neither overflow nor underflow to a meaningful degree: every
// term is (x_c/m)² ≤ 1 and the largest is 1, so dropped subnormal squares
// change the sum by ≤ r·2⁻¹⁰⁷⁴ relative. The computed value is within
// (r + 4)u of the true norm of the given x; the (r + 16)·2⁻⁵² = 2(r + 16)u
// factor covers that and one more relative rounding u per element of x (the
// quantization residuals are computed with one rounding each).
// ScaledNorm is the plain value, UpperNorm the bound.
double ScaledNorm(const double* x, int r) {
  double m = 0;
  for (int c = 0; c < r; ++c) m = std::max(m, std::abs(x[c]));
  if (m == 0) return 0;
  double s = 0;
  for (int c = 0; c < r; ++c) {
    const double y = x[c] / m;
    s += y * y;
  }
  return m * std::sqrt(s);
}
double UpperNorm(const double* x, int r) { return ScaledNorm(x, r) * (1.0 + (r + 16) * 0x1p-52); }

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

// AVX-512 VNNI on the interleaved layout (TopKIndex::CodeOffset): a 64-byte
// load holds four columns of sixteen rows, and vpdpbusd multiplies them by the
// query's four bytes of those columns (broadcast) and adds each row's four
// products into that row's int32 lane — sixteen rows advance per instruction,
// with no horizontal sums. The query is stored as u_c = d_c + 128 (d_c ∈
// [−127, 127]) because vpdpbusd's first operand is unsigned, so
//   d · c_i = u · c_i − 128 Σ_c c_ic,
// exact in int32 (|u · c_i| ≤ stride·255·127 < 2³¹ for stride < 66,000).
// `codes` starts at a group boundary; `rows` need not fill the last group
// (the padding lanes are computed and dropped).
// u · c_i for the sixteen rows of one group starting at `block` (four
// accumulators over the 4-column groups, then their sum); see DotRowsVnni.
__attribute__((target("avx2,avx512f,avx512bw,avx512vnni"))) inline __m512i UCodesVnni(const int8_t* block,
                                                                                const int32_t* u32, int groups) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (int g = 0; g < groups; g += 4) {
    a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(u32[g]), _mm512_loadu_si512(block + int64_t{g} * 64));
    a1 = _mm512_dpbusd_epi32(a1, _mm512_set1_epi32(u32[g + 1]), _mm512_loadu_si512(block + int64_t{g + 1} * 64));
    a2 = _mm512_dpbusd_epi32(a2, _mm512_set1_epi32(u32[g + 2]), _mm512_loadu_si512(block + int64_t{g + 2} * 64));
    a3 = _mm512_dpbusd_epi32(a3, _mm512_set1_epi32(u32[g + 3]), _mm512_loadu_si512(block + int64_t{g + 3} * 64));
  }
  return _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
}

__attribute__((target("avx2,avx512f,avx512bw,avx512vnni"))) void DotRowsVnni(
    const int8_t* codes, int rows, int stride, const uint8_t* u, const int32_t* rowsum, int32_t* out) {
  const int groups = stride / 4;  // a multiple of 4: stride is a multiple of 16
  const int32_t* u32 = reinterpret_cast<const int32_t*>(u);
  for (int t = 0; t < rows; t += 16) {
    const int8_t* block = codes + int64_t{t} * stride;
    const __m512i sum = UCodesVnni(block, u32, groups);
    const int lanes = std::min(16, rows - t);
    alignas(64) int32_t lane[16];
    _mm512_store_si512(lane, sum);
    for (int l = 0; l < lanes; ++l) out[t + l] = lane[l] - 128 * rowsum[t + l];
  }
}

// The VNNI dot products fused with the bounds of the inner-product screen:
// for each group of 16 rows, d · c_i (as DotRowsVnni), then
//   U_i = (s_q G · s_i) · (d · c_i) + ((α G · E_i + β G · N_i) + η)
// in float64 — the same operations, in the same order, as the scalar bounds
// of SearchGroup — and the rows with U_i ≥ τ appended to `hits`. dots[] and
// upper[] get every row's values (the hit rows' lower bounds reuse them).
// Returns the number of hits.
__attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni"))) int ScreenRowsVnni(
    const int8_t* codes, int rows, int stride, const uint8_t* u, const int32_t* rowsum, const float* scale,
    const float* err, const float* norm, double scale_product, double err_coef, double norm_coef, double eta,
    double tau, int32_t* dots, double* upper, int* hits) {
  const int groups = stride / 4;
  const int32_t* u32 = reinterpret_cast<const int32_t*>(u);
  const __m512d sp = _mm512_set1_pd(scale_product), ec = _mm512_set1_pd(err_coef), nc = _mm512_set1_pd(norm_coef),
                et = _mm512_set1_pd(eta), tv = _mm512_set1_pd(tau);
  int count = 0;
  for (int t = 0; t < rows; t += 16) {
    const int8_t* block = codes + int64_t{t} * stride;
    const int lanes = std::min(16, rows - t);
    const __mmask16 valid = static_cast<__mmask16>(lanes == 16 ? 0xFFFF : (1u << lanes) - 1);
    const __m512i sum = UCodesVnni(block, u32, groups);
    const __m512i dot = _mm512_sub_epi32(sum, _mm512_slli_epi32(_mm512_maskz_loadu_epi32(valid, rowsum + t), 7));
    _mm512_mask_storeu_epi32(dots + t, valid, dot);
    const __m512 sc = _mm512_maskz_loadu_ps(valid, scale + t);
    const __m512 er = _mm512_maskz_loadu_ps(valid, err + t);
    const __m512 no = _mm512_maskz_loadu_ps(valid, norm + t);
    unsigned mask = 0;
    for (int h = 0; h < 2; ++h) {
      const __mmask8 vh = static_cast<__mmask8>(valid >> (8 * h));
      if (!vh) break;
      const __m512d d = _mm512_cvtepi32_pd(h ? _mm512_extracti64x4_epi64(dot, 1) : _mm512_castsi512_si256(dot));
      const __m512d s = _mm512_cvtps_pd(h ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sc), 1))
                                   : _mm512_castps512_ps256(sc));
      const __m512d e = _mm512_cvtps_pd(h ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(er), 1))
                                   : _mm512_castps512_ps256(er));
      const __m512d m = _mm512_cvtps_pd(h ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(no), 1))
                                   : _mm512_castps512_ps256(no));
      const __m512d au = _mm512_mul_pd(_mm512_mul_pd(sp, s), d);
      const __m512d b = _mm512_add_pd(_mm512_add_pd(_mm512_mul_pd(ec, e), _mm512_mul_pd(nc, m)), et);
      const __m512d up = _mm512_add_pd(au, b);
      _mm512_mask_storeu_pd(upper + t + 8 * h, vh, up);
      mask |= unsigned(_mm512_mask_cmp_pd_mask(vh, up, tv, _CMP_GE_OQ)) << (8 * h);
    }
    while (mask) {
      hits[count++] = t + __builtin_ctz(mask);
      mask &= mask - 1;
    }
  }
  return count;
}

bool CpuHasVnni() {
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw");
}
#endif

struct Candidate {
  int index;
  double upper;
};

bool Better(const ScoredItem& a, const ScoredItem& b) {
  return a.score > b.score || (a.score == b.score && a.index < b.index);
}

// The best `want` items: a min-heap under Better (the worst kept item on top).
inline void Offer(std::vector<ScoredItem>& heap, int want, const ScoredItem& item) {
  if (static_cast<int>(heap.size()) < want) {
    heap.push_back(item);
    std::push_heap(heap.begin(), heap.end(), Better);
  } else if (Better(item, heap.front())) {
    std::pop_heap(heap.begin(), heap.end(), Better);
    heap.back() = item;
    std::push_heap(heap.begin(), heap.end(), Better);
  }
}

// 1/‖x‖₂ for the cosine (x finite, length r), 0 for a zero vector or one whose
// norm is too small to invert (below 1e-300).
double InverseNorm(const double* x, int r) {
  const double norm = ScaledNorm(x, r);
  return norm >= 1e-300 ? 1.0 / norm : 0.0;
}

}  // namespace

Status TopKIndexOptions::Validate() const {
  if (max_query_code != 0 && (max_query_code < 127 || max_query_code > 32767)) {
    return InvalidArgumentError("max_query_code = " + std::to_string(max_query_code) +
                                " must be 0 or in [127, 32767]");
  }
  if (!(max_index_fraction > 0 && max_index_fraction <= 1)) {
    return InvalidArgumentError("max_index_fraction = " + std::to_string(max_index_fraction) +
                                " must be in (0, 1]");
  }
  return OkStatus();
}

struct TopKIndex::PreparedQuery {
  std::vector<int16_t> codes;  // d, length stride_
  std::vector<uint8_t> codes8; // d + 128 (the VNNI kernel's unsigned operand), when vnni_
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
    // The cosine's row factors, whether or not there is a screening copy.
    index.inv_norm_.resize(n);
    const double* rows = index.kernel_->embedding().data();
    for (int i = 0; i < n; ++i) index.inv_norm_[i] = InverseNorm(rows + int64_t{i} * r, r);
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
    // VNNI takes 8-bit query codes: a coarser query rounding (looser bounds,
    // a few more rows re-scored) for four times the products per instruction.
    index.vnni_ = index.simd_ && options.use_vnni && CpuHasVnni() && stride < 66000;
    if (index.vnni_) index.max_query_code_ = 127;
    if (options.max_query_code > 0) index.max_query_code_ = std::min(index.max_query_code_, options.max_query_code);
#endif
    // VNNI: rows interleaved in groups of kLanes (see CodeOffset), padded to a whole group.
    index.codes_.assign(size_t(index.vnni_ ? (n + kLanes - 1) / kLanes * kLanes : n) * stride, 0);
    std::vector<int8_t> row_codes(stride, 0);
    index.scale_.assign(n, 0.0f);
    index.err_.assign(n, 0.0f);
    index.norm_.assign(n, 0.0f);
    if (index.vnni_) index.rowsum_.assign(n, 0);
    std::vector<double> residual(r);
    for (int i = 0; i < n; ++i) {
      const double* row = v + int64_t{i} * r;
      int8_t* code = row_codes.data();
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
      index.StoreCodes(i, code, index.codes_.data());
      if (index.vnni_) {
        int32_t sum = 0;
        for (int c = 0; c < r; ++c) sum += code[c];
        index.rowsum_[i] = sum;
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
                              (scale_.capacity() + err_.capacity() + norm_.capacity()) * sizeof(float) +
                              inv_norm_.capacity() * sizeof(double) + rowsum_.capacity() * sizeof(int32_t)) +
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
  if (vnni_) {
    out->codes8.assign(stride_, 128);  // padding columns: d = 0
    for (int c = 0; c < r; ++c) out->codes8[c] = static_cast<uint8_t>(out->codes[c] + 128);
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

int64_t TopKIndex::CodeOffset(int64_t i, int c) const {
  if (!vnni_) return i * stride_ + c;
  // Groups of kLanes rows; inside a group, four columns of every row in turn.
  return (i / kLanes) * kLanes * stride_ + int64_t{c / 4} * (kLanes * 4) + (i % kLanes) * 4 + c % 4;
}

void TopKIndex::StoreCodes(int64_t i, const int8_t* row, int8_t* dest) const {
  if (!vnni_) {
    std::copy_n(row, stride_, dest + i * stride_);
    return;
  }
  for (int c = 0; c < stride_; c += 4) std::copy_n(row + c, 4, dest + CodeOffset(i, c));
}

void TopKIndex::CopyCodes(int j, int u, int8_t* block) const {
  if (!vnni_) {
    std::copy_n(codes_.data() + int64_t{j} * stride_, stride_, block + int64_t{u} * stride_);
    return;
  }
  for (int c = 0; c < stride_; c += 4) std::copy_n(codes_.data() + CodeOffset(j, c), 4, block + CodeOffset(u, c));
}

void TopKIndex::Dots(const int8_t* codes, const int32_t* rowsum, int rows, const PreparedQuery& p,
                     int32_t* out) const {
#ifdef KLS_TOPK_X86
  if (vnni_) {
    DotRowsVnni(codes, rows, stride_, p.codes8.data(), rowsum, out);
  } else if (simd_) {
    DotRowsAvx2(codes, rows, stride_, p.codes.data(), out);
  } else
#endif
  {
    DotRowsPortable(codes, rows, stride_, p.codes.data(), out);
  }
}

void TopKIndex::PrefetchBlock(int64_t start, int rows) const {
#ifdef KLS_TOPK_X86
  const char* c = reinterpret_cast<const char*>(codes_.data() + start * stride_);
  const int64_t code_bytes = int64_t{rows} * stride_;
  for (int64_t b = 0; b < code_bytes; b += 64) _mm_prefetch(c + b, _MM_HINT_T0);
  const int64_t factor_bytes = int64_t{rows} * 4;
  const char* arrays[4] = {reinterpret_cast<const char*>(scale_.data() + start),
                           reinterpret_cast<const char*>(err_.data() + start),
                           reinterpret_cast<const char*>(norm_.data() + start),
                           vnni_ ? reinterpret_cast<const char*>(rowsum_.data() + start) : nullptr};
  for (const char* a : arrays) {
    if (!a) continue;
    for (int64_t b = 0; b < factor_bytes; b += 64) _mm_prefetch(a + b, _MM_HINT_T0);
  }
#else
  (void)start;
  (void)rows;
#endif
}

bool TopKIndex::Screen(const Eigen::VectorXd& query, std::vector<double>* approx,
                       std::vector<double>* radius) const {
  if (!screening() || query.size() != rank()) return false;
  PreparedQuery p;
  if (!Prepare(query.data(), &p)) return false;
  const int n = num_points();
  std::vector<int32_t> dots(n);
  Dots(codes_.data(), rowsum_.data(), n, p, dots.data());
  approx->resize(n);
  radius->resize(n);
  for (int i = 0; i < n; ++i) {
    (*approx)[i] = (p.scale_product * scale_[i]) * dots[i];
    (*radius)[i] = p.err_coef * err_[i] + p.norm_coef * norm_[i] + p.eta;
  }
  return true;
}



struct TopKIndex::QueryState {
  std::vector<double> q;  // the query (q/‖q‖ under the cosine)
  int skip = -1;          // an item to leave out, or -1
  int want = 0;           // offset + k (+ excluded items that pass), capped by the passing items
  std::vector<int> exclude;  // sorted, unique: excluded items that pass and are not `skip`
  enum class Mode { kScreen, kScan } mode = Mode::kScan;
  PreparedQuery prep;
  std::vector<double> lower;  // screen: min-heap of the best lower bounds
  double tau = -std::numeric_limits<double>::infinity();
  std::vector<Candidate> cand;
  size_t prune_at = 0;
  std::vector<ScoredItem> heap;  // the best `want` exact scores
};

Status TopKSearchOptions::Validate() const {
  if (offset < 0) return InvalidArgumentError("offset = " + std::to_string(offset) + " must be >= 0");
  if (std::isnan(min_score)) return InvalidArgumentError("min_score is NaN");
  return OkStatus();
}

const char* ScoreMetricName(ScoreMetric m) {
  return m == ScoreMetric::kCosine ? "cosine" : "inner_product";
}

StatusOr<std::vector<std::vector<ScoredItem>>> TopKIndex::Search(const std::vector<TopKQuery>& queries,
                                                                 const TopKSearchOptions& options,
                                                                 const SolveControl& control,
                                                                 TopKSearchStats* stats) const {
  KLS_RETURN_IF_ERROR(options.Validate());
  const int n = num_points();
  const int r = rank();
  const bool cosine = options.metric == ScoreMetric::kCosine;
  std::vector<QueryState> states(queries.size());
  // Groups of queries sharing a bitmap, in order of first appearance.
  std::vector<std::pair<const ItemBitmap*, std::vector<int>>> groups;
  for (size_t t = 0; t < queries.size(); ++t) {
    const TopKQuery& query = queries[t];
    const std::string field = "queries[" + std::to_string(t) + "]";
    QueryState& st = states[t];
    if (query.item >= 0) {
      KLS_RETURN_IF_ERROR(kernel_->CheckIndex(query.item, (field + ".item").c_str()));
      const double* row = kernel_->embedding().data() + int64_t{query.item} * r;
      st.q.assign(row, row + r);
      st.skip = query.exclude_self ? query.item : -1;
    } else {
      if (!query.vector) return InvalidArgumentError(field + ".vector is missing");
      st.q.assign(query.vector, query.vector + r);
      for (int c = 0; c < r; ++c) {
        if (!std::isfinite(st.q[c])) {
          return InvalidArgumentError(field + ".vector[" + std::to_string(c) + "] = " + std::to_string(st.q[c]) +
                                      " is not finite");
        }
      }
    }
    if (query.allowed && query.allowed->size() != n) {
      return InvalidArgumentError(field + ".allowed has " + std::to_string(query.allowed->size()) +
                                  " bits but the kernel has " + std::to_string(n) + " items");
    }
    if (query.exclude) {
      for (int j : *query.exclude) {
        if (j < 0 || j >= n) {
          return InvalidArgumentError(field + ".exclude has item " + std::to_string(j) + "; the kernel has " +
                                      std::to_string(n) + " items");
        }
        if (j != st.skip && (!query.allowed || query.allowed->Test(j))) st.exclude.push_back(j);
      }
      std::sort(st.exclude.begin(), st.exclude.end());
      st.exclude.erase(std::unique(st.exclude.begin(), st.exclude.end()), st.exclude.end());
    }
    if (cosine) {
      const double inv = InverseNorm(st.q.data(), r);
      for (double& x : st.q) x *= inv;
    }
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == query.allowed; });
    if (g == groups.end()) {
      groups.push_back({query.allowed, {}});
      g = groups.end() - 1;
    }
    g->second.push_back(static_cast<int>(t));
  }
  TopKSearchStats local;
  TopKSearchStats& st = stats ? *stats : local;
  st = TopKSearchStats{};
  return GuardExceptions("TopKIndex::Search", [&]() -> StatusOr<std::vector<std::vector<ScoredItem>>> {
    for (const auto& [allowed, group] : groups) {
      KLS_RETURN_IF_ERROR(SearchGroup(states, group, allowed, options, control, &st));
    }
    std::vector<std::vector<ScoredItem>> out(queries.size());
    for (size_t t = 0; t < states.size(); ++t) {
      std::vector<ScoredItem>& heap = states[t].heap;
      std::sort(heap.begin(), heap.end(), Better);
      const std::vector<int>& ex = states[t].exclude;
      if (!ex.empty()) {
        heap.erase(std::remove_if(heap.begin(), heap.end(),
                                  [&ex](const ScoredItem& s) { return std::binary_search(ex.begin(), ex.end(), s.index); }),
                   heap.end());
      }
      const size_t first = std::min(heap.size(), static_cast<size_t>(options.offset));
      size_t last = std::min(heap.size(), first + static_cast<size_t>(std::max(0, options.k)));
      while (last > first && heap[last - 1].score < options.min_score) --last;
      out[t].assign(heap.begin() + first, heap.begin() + last);
    }
    return out;
  });
}

void TopKIndex::PlanQueries(std::vector<QueryState>& states, const std::vector<int>& group, const ItemBitmap* allowed,
                            int64_t passing, const TopKSearchOptions& options, std::vector<int>* screened,
                            std::vector<int>* scanned, TopKSearchStats* stats) const {
  const int64_t asked = std::max<int64_t>(0, int64_t{options.offset} + std::max(0, options.k));
  for (int t : group) {
    QueryState& s = states[t];
    const bool skip_passes = s.skip >= 0 && (!allowed || allowed->Test(s.skip));
    s.want = static_cast<int>(std::min<int64_t>(asked + static_cast<int64_t>(s.exclude.size()),
                                                passing - (skip_passes ? 1 : 0)));
    if (s.want == 0) continue;
    // The screen pays off when the answer is a small part of what passes;
    // a handful of passing rows is cheaper to score exactly.
    if (screening() && int64_t{s.want} * 4 <= passing && passing >= kMinScreenedRows && Prepare(s.q.data(), &s.prep)) {
      s.mode = QueryState::Mode::kScreen;
      s.lower.reserve(s.want);
      s.prune_at = std::max<size_t>(4096, size_t(s.want) * 8);
      s.cand.reserve(std::min<size_t>(s.prune_at, size_t(passing)));
      screened->push_back(t);
      ++stats->screened;
    } else {
      s.mode = QueryState::Mode::kScan;
      s.heap.reserve(s.want);
      scanned->push_back(t);
      ++stats->scanned;
    }
  }
}

Status TopKIndex::SearchGroup(std::vector<QueryState>& states, const std::vector<int>& group,
                              const ItemBitmap* allowed, const TopKSearchOptions& options,
                              const SolveControl& control, TopKSearchStats* stats) const {
  const int n = num_points();
  const int r = rank();
  const int64_t passing = allowed ? allowed->Count() : n;
  const double* inv = options.metric == ScoreMetric::kCosine ? inv_norm_.data() : nullptr;
  const double* v = kernel_->embedding().data();
  std::vector<int> screened, scanned;
  PlanQueries(states, group, allowed, passing, options, &screened, &scanned, stats);
  if (screened.empty() && scanned.empty()) return OkStatus();

  // Blocks of kBlock rows: consecutive rows, or — when at most half the
  // items pass — the next kBlock passing rows gathered into local buffers
  // (their codes and bounds for the screened queries, their float64 rows for
  // the scanned ones), so a selective filter costs in proportion to what
  // passes. Each block then serves every query of the group while in cache.
  // A batch is split across threads by queries (each thread makes its own
  // pass; the work is compute-bound once several queries share a block).
  const bool gather = allowed && passing * 2 <= n;
  if (gather) stats->gathered += static_cast<int64_t>(screened.size() + scanned.size());
  const std::vector<int> idx = gather ? allowed->Indices() : std::vector<int>();
  const int64_t total = gather ? static_cast<int64_t>(idx.size()) : n;
  const uint64_t* words = allowed && !gather ? allowed->words().data() : nullptr;

  auto pass = [&](const std::vector<int>& screened, const std::vector<int>& scanned) -> Status {
    std::vector<int8_t> block_codes(gather && !screened.empty() ? size_t(kBlock) * std::max(stride_, 1) : 0);
    std::vector<int32_t> block_rowsum(gather && vnni_ ? kBlock : 0);
    std::vector<double> block_rows(gather && !scanned.empty() ? size_t(kBlock) * r : 0);
    std::vector<double> block_inv(gather && inv ? kBlock : 0);
    // The block's per-row factors (float; widened exactly in the bounds
    // loop): the index's own arrays for consecutive rows, local copies when
    // gathering.
    std::vector<float> block_scale(gather ? kBlock : 0), block_err(gather ? kBlock : 0),
        block_norm(gather ? kBlock : 0);
    const float *scale = nullptr, *err = nullptr, *norm = nullptr;
    int block_index[kBlock], hits[kBlock];
    int32_t dots[kBlock];
    double upper[kBlock], scores[kBlock];
    auto passes = [words](int j) { return !words || ((words[j >> 6] >> (j & 63)) & 1u); };
    for (int64_t start = 0, block = 0; start < total; start += kBlock, ++block) {
      if (block % 16 == 0) KLS_RETURN_IF_ERROR(control.CheckStop("top-k"));
      const int rows = static_cast<int>(std::min<int64_t>(kBlock, total - start));
      const int8_t* codes = nullptr;
      const int32_t* rowsum = nullptr;
      const double *rows_v, *row_inv;
      if (gather) {
        for (int u = 0; u < rows; ++u) {
          const int j = idx[start + u];
          block_index[u] = j;
          if (!screened.empty()) {
            CopyCodes(j, u, block_codes.data());
            block_scale[u] = scale_[j];
            block_err[u] = err_[j];
            block_norm[u] = norm_[j];
            if (vnni_) block_rowsum[u] = rowsum_[j];
          }
          if (!scanned.empty()) std::copy_n(v + int64_t{j} * r, r, block_rows.data() + size_t(u) * r);
          if (inv) block_inv[u] = inv[j];
        }
        codes = block_codes.data();
        rowsum = block_rowsum.data();
        scale = block_scale.data();
        err = block_err.data();
        norm = block_norm.data();
        rows_v = block_rows.data();
        row_inv = inv ? block_inv.data() : nullptr;
      } else {
        if (words) {  // kBlock is a multiple of 64: the block is whole words
          bool none = true;
          for (int64_t w = start / 64; w < (start + rows + 63) / 64 && none; ++w) none = words[w] == 0;
          if (none) continue;
        }
        for (int u = 0; u < rows; ++u) block_index[u] = static_cast<int>(start + u);
        if (!screened.empty()) {  // (never on a copy-less index: no arithmetic on its empty arrays)
          codes = codes_.data() + start * stride_;
          rowsum = vnni_ ? rowsum_.data() + start : nullptr;
          scale = scale_.data() + start;
          err = err_.data() + start;
          norm = norm_.data() + start;
          // One streaming pass: ask for the next block's codes and factors
          // now, so that memory works while this block is screened (the
          // hardware prefetcher alone leaves it idle during the bounds loop).
          if (start + kBlock < total) {
            PrefetchBlock(start + kBlock, static_cast<int>(std::min<int64_t>(kBlock, total - start - kBlock)));
          }
        }
        rows_v = v + start * r;
        row_inv = inv ? inv + start : nullptr;
      }
      for (int t : screened) {
        QueryState& s = states[t];
        const int count = ScreenBlock(s, codes, rowsum, rows, scale, err, norm, row_inv, dots, upper, hits);
        TakeHits(s, count, hits, block_index, upper, dots, scale, err, norm, row_inv, words);
      }
      for (int t : scanned) {
        QueryState& s = states[t];
        ScoreRows(rows_v, rows, r, s.q.data(), scores);
        for (int u = 0; u < rows; ++u) {
          const int j = block_index[u];
          if (j == s.skip || !passes(j)) continue;
          const double score = row_inv ? scores[u] * row_inv[u] : scores[u];
          if (static_cast<int>(s.heap.size()) == s.want && score < s.heap.front().score) continue;
          Offer(s.heap, s.want, {j, score});
        }
      }
    }
    return OkStatus();
  };
  const int threads = std::min<int>(ResolveThreadCount(options.threads),
                                     static_cast<int>(screened.size() + scanned.size()));
  if (threads <= 1) {
    KLS_RETURN_IF_ERROR(pass(screened, scanned));
  } else {
    // Queries dealt round-robin, so each thread gets a like mix of screened and scanned ones.
    std::vector<std::vector<int>> part_screened(threads), part_scanned(threads);
    for (size_t t = 0; t < screened.size(); ++t) part_screened[t % threads].push_back(screened[t]);
    for (size_t t = 0; t < scanned.size(); ++t) part_scanned[t % threads].push_back(scanned[t]);
    std::vector<Status> status(threads);
    ParallelFor(threads, threads, [&](int begin, int end) {
      for (int t = begin; t < end; ++t) status[t] = pass(part_screened[t], part_scanned[t]);
    });
    for (const Status& st : status) KLS_RETURN_IF_ERROR(st);
  }

  RescoreCandidates(states, screened, inv, stats);
  return OkStatus();
}

int TopKIndex::ScreenBlock(const QueryState& s, const int8_t* codes, const int32_t* rowsum, int rows,
                           const float* scale, const float* err, const float* norm, const double* row_inv,
                           int32_t* dots, double* upper, int* hits) const {
  const PreparedQuery& p = s.prep;
  int count = 0;
#ifdef KLS_TOPK_X86
  if (vnni_ && !row_inv) {
    count = ScreenRowsVnni(codes, rows, stride_, p.codes8.data(), rowsum, scale, err, norm, p.scale_product,
                           p.err_coef, p.norm_coef, p.eta, s.tau, dots, upper, hits);
  } else
#endif
  {
    Dots(codes, rowsum, rows, p, dots);
    // Bounds for the whole block (a branch-free loop the compiler
    // vectorizes), then the indices of the rows whose upper bound
    // reaches τ (branch-free compaction); TakeHits then takes those few rows.
    for (int u = 0; u < rows; ++u) {
      const double au = (p.scale_product * double(scale[u])) * dots[u];
      upper[u] = au + (p.err_coef * double(err[u]) + p.norm_coef * double(norm[u]) + p.eta);
    }
    if (row_inv) {
      // Cosine: the exact score is fl(f_j · inv_j) with L_j ≤ f_j ≤ U_j;
      // scaling the bounds by inv_j ≥ 0 and widening them by 8u relative
      // (two roundings) plus an underflow slack keeps them bounds.
      for (int u = 0; u < rows; ++u) {
        const double hi = upper[u] * row_inv[u];
        upper[u] = hi + std::abs(hi) * (8 * kUnit) + 0x1p-1060;
      }
    }
    // Rows whose upper bound reaches τ, found eight at a time (one
    // vectorized test per group; most groups have none).
    const double tau = s.tau;
    for (int g = 0; g < rows; g += 8) {
      const int end = std::min(rows, g + 8);
      bool any = false;
      for (int u = g; u < end; ++u) any |= upper[u] >= tau;
      if (!any) continue;
      for (int u = g; u < end; ++u) {
        hits[count] = u;
        count += upper[u] >= tau ? 1 : 0;
      }
    }
  }
  return count;
}

void TopKIndex::TakeHits(QueryState& s, int count, const int* hits, const int* block_index, const double* upper,
                         const int32_t* dots, const float* scale, const float* err, const float* norm,
                         const double* row_inv, const uint64_t* words) const {
  const PreparedQuery& p = s.prep;
  auto passes = [words](int j) { return !words || ((words[j >> 6] >> (j & 63)) & 1u); };
  for (int h = 0; h < count; ++h) {
    const int u = hits[h];
    if (!(upper[u] >= s.tau)) continue;  // τ may have grown within the block
    const int j = block_index[u];
    if (j == s.skip || !passes(j)) continue;
    s.cand.push_back({j, upper[u]});
    // L_j = a_j − b_j, recomputed for the few rows that get here.
    const double au = (p.scale_product * double(scale[u])) * dots[u];
    double lo = au - (p.err_coef * double(err[u]) + p.norm_coef * double(norm[u]) + p.eta);
    if (row_inv) {
      lo *= row_inv[u];
      lo = lo - std::abs(lo) * (8 * kUnit) - 0x1p-1060;
    }
    if (static_cast<int>(s.lower.size()) < s.want) {
      s.lower.push_back(lo);
      std::push_heap(s.lower.begin(), s.lower.end(), std::greater<double>());
      if (static_cast<int>(s.lower.size()) == s.want) s.tau = s.lower.front();
    } else if (lo > s.lower.front()) {
      std::pop_heap(s.lower.begin(), s.lower.end(), std::greater<double>());
      s.lower.back() = lo;
      std::push_heap(s.lower.begin(), s.lower.end(), std::greater<double>());
      s.tau = s.lower.front();
    }
  }
  if (s.cand.size() >= s.prune_at) {  // τ has grown since early candidates were kept
    const double tau_now = s.tau;
    s.cand.erase(std::remove_if(s.cand.begin(), s.cand.end(),
                                [tau_now](const Candidate& c) { return c.upper < tau_now; }),
                 s.cand.end());
    if (s.cand.size() * 2 > s.prune_at) s.prune_at *= 2;
  }
}

// Screened queries: re-score the candidates exactly, most promising first;
// once U_j is below the want-th best exact score, score_j ≤ U_j cannot
// enter (not even by a tie).
void TopKIndex::RescoreCandidates(std::vector<QueryState>& states, const std::vector<int>& screened,
                                  const double* inv, TopKSearchStats* stats) const {
  const int r = rank();
  const double* v = kernel_->embedding().data();
  for (int t : screened) {
    QueryState& s = states[t];
    const double tau = s.tau;
    s.cand.erase(std::remove_if(s.cand.begin(), s.cand.end(), [tau](const Candidate& c) { return c.upper < tau; }),
                 s.cand.end());
    stats->candidates += static_cast<int64_t>(s.cand.size());
    std::sort(s.cand.begin(), s.cand.end(), [](const Candidate& x, const Candidate& y) { return x.upper > y.upper; });
    s.heap.reserve(s.want);
    for (const Candidate& c : s.cand) {
      if (static_cast<int>(s.heap.size()) == s.want && c.upper < s.heap.front().score) break;
      double f = 0;
      ScoreRows(v + int64_t{c.index} * r, 1, r, s.q.data(), &f);
      ++stats->rescored;
      Offer(s.heap, s.want, {c.index, inv ? f * inv[c.index] : f});
    }
    std::vector<Candidate>().swap(s.cand);
  }
}

std::vector<ScoredItem> TopKIndex::TopK(int i, int k, bool exclude_self, TopKQueryStats* stats) const {
  TopKQuery q;
  q.item = i;
  q.exclude_self = exclude_self;
  return SearchOne(q, k, stats);
}

std::vector<ScoredItem> TopKIndex::TopKByVector(const Eigen::VectorXd& query, int k, TopKQueryStats* stats) const {
  TopKQuery q;
  q.vector = query.data();
  return SearchOne(q, k, stats);
}

std::vector<ScoredItem> TopKIndex::SearchOne(const TopKQuery& query, int k, TopKQueryStats* stats) const {
  TopKSearchOptions options;
  options.k = k;
  TopKSearchStats st;
  StatusOr<std::vector<std::vector<ScoredItem>>> out = Search({query}, options, SolveControl(), &st);
  if (stats) {
    *stats = TopKQueryStats{};
    stats->screened = st.screened > 0;
    stats->candidates = st.candidates;
    stats->rescored = st.rescored;
  }
  if (!out.ok()) return {};  // only an out-of-memory (the inputs are the caller's contract)
  return std::move((*out)[0]);
}

}  // namespace kls
