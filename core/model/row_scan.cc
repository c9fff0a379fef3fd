#include "core/model/row_scan.h"

#include <cstdint>
#include <cstring>

namespace kls {
namespace {

// Rows are scored one after the other (a single sequential stream, which the
// hardware prefetcher follows best — interleaving four rows measured slower),
// each with sixteen partial sums in four 4-lane vectors (GCC/Clang vector
// extensions: AVX registers with -march=native, SSE2 pairs otherwise) so four
// independent add chains hide the latency. The summation order is fixed —
// vector lanes over columns in steps of 16 (then one step of 8 if r mod 16
// ≥ 8), a fixed fold, then the r mod 8 tail in order — so a row's score is the
// same bits wherever it falls. This function lives in its own translation
// unit so that LearnedKernel and TopKIndex call the very same machine code.
typedef double V4 __attribute__((vector_size(32)));

inline V4 Load(const double* p) {
  V4 x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

}  // namespace

void ScoreRows(const double* v, int rows, int r, const double* q, double* out) {
  const int r16 = r & ~15;
  const bool has8 = (r & 8) != 0;
  const int r8 = r & ~7;
  for (int i = 0; i < rows; ++i) {
    const double* a = v + int64_t{i} * r;
    V4 s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
    for (int t = 0; t < r16; t += 16) {
      s0 += Load(a + t) * Load(q + t);
      s1 += Load(a + t + 4) * Load(q + t + 4);
      s2 += Load(a + t + 8) * Load(q + t + 8);
      s3 += Load(a + t + 12) * Load(q + t + 12);
    }
    if (has8) {
      s0 += Load(a + r16) * Load(q + r16);
      s1 += Load(a + r16 + 4) * Load(q + r16 + 4);
    }
    const V4 u = (s0 + s2) + (s1 + s3);
    double score = (u[0] + u[1]) + (u[2] + u[3]);
    for (int t = r8; t < r; ++t) score += a[t] * q[t];
    out[i] = score;
  }
}

}  // namespace kls
