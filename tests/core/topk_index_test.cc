// TopKIndex: the int8-screened top-k must return exactly what the float64
// scan returns — same items, same order, same score bits, ties to the smaller
// index — on data built to stress the screen: ties, duplicates, zero rows,
// extreme and subnormal magnitudes, and rows whose quantization error is
// aligned with the query so that the screening scores mis-order them.
#include "core/model/topk_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "core/model/row_scan.h"

namespace kls {

// Readable failure messages (gtest would print the padded struct's bytes).
void PrintTo(const ScoredItem& s, std::ostream* os) { *os << "{" << s.index << ", " << s.score << "}"; }

namespace {

using ::testing::HasSubstr;
using Embedding = LearnedKernel::Embedding;

bool Better(const ScoredItem& a, const ScoredItem& b) {
  return a.score > b.score || (a.score == b.score && a.index < b.index);
}

// Brute force: every row scored with the same float64 arithmetic as the scan
// (ScoreRows, one row at a time), a full sort, the first k; `skip` left out.
// nullopt when some score is NaN (inf − inf under overflow): then the order
// is not defined by a sort, and only agreement with the scan is checked.
std::optional<std::vector<ScoredItem>> BruteForce(const Embedding& v, const double* q, int k, int skip) {
  std::vector<ScoredItem> all;
  for (int i = 0; i < v.rows(); ++i) {
    if (i == skip) continue;
    double s = 0;
    ScoreRows(v.data() + int64_t{i} * v.cols(), 1, static_cast<int>(v.cols()), q, &s);
    if (std::isnan(s)) return std::nullopt;
    all.push_back({i, s});
  }
  std::sort(all.begin(), all.end(), Better);
  all.resize(std::min<size_t>(all.size(), static_cast<size_t>(std::max(k, 0))));
  return all;
}

// Same items, same order, same score bits (NaN == NaN here, +0 != −0).
::testing::AssertionResult SameBits(const std::vector<ScoredItem>& x, const std::vector<ScoredItem>& y) {
  if (x.size() != y.size()) return ::testing::AssertionFailure() << "sizes " << x.size() << " vs " << y.size();
  for (size_t t = 0; t < x.size(); ++t) {
    if (x[t].index != y[t].index || std::memcmp(&x[t].score, &y[t].score, sizeof(double)) != 0) {
      return ::testing::AssertionFailure() << "position " << t << ": {" << x[t].index << ", " << x[t].score
                                           << "} vs {" << y[t].index << ", " << y[t].score << "}";
    }
  }
  return ::testing::AssertionSuccess();
}

std::shared_ptr<const LearnedKernel> Kernel(Embedding v) {
  auto k = LearnedKernel::FromEmbedding(std::move(v));
  EXPECT_TRUE(k.ok()) << k.status();
  return std::make_shared<const LearnedKernel>(std::move(k).value());
}

TopKIndex Index(std::shared_ptr<const LearnedKernel> kernel, bool simd = true) {
  TopKIndexOptions o;
  o.use_simd = simd;
  auto index = TopKIndex::Build(std::move(kernel), o);
  EXPECT_TRUE(index.ok()) << index.status();
  return std::move(index).value();
}

Embedding Gaussian(int n, int r, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Embedding v(n, r);
  for (Eigen::Index t = 0; t < v.size(); ++t) v.data()[t] = normal(rng);
  return v;
}

// Checks item queries (both exclude_self settings) and vector queries
// against the brute force and against LearnedKernel's own scan.
void ExpectExact(const TopKIndex& index, const std::vector<int>& items, const std::vector<Eigen::VectorXd>& queries,
                 const std::vector<int>& ks) {
  const Embedding& v = index.kernel().embedding();
  for (int k : ks) {
    for (int i : items) {
      for (bool excl : {true, false}) {
        const auto got = index.TopK(i, k, excl);
        const auto brute = BruteForce(v, v.data() + int64_t{i} * v.cols(), k, excl ? i : -1);
        if (brute) {
          EXPECT_TRUE(SameBits(got, *brute)) << "item " << i << " k " << k << " exclude_self " << excl;
        }
        EXPECT_TRUE(SameBits(got, index.kernel().TopK(i, k, excl)))
            << "item " << i << " k " << k << " exclude_self " << excl;
      }
    }
    for (size_t t = 0; t < queries.size(); ++t) {
      const auto got = index.TopKByVector(queries[t], k);
      const auto brute = BruteForce(v, queries[t].data(), k, -1);
      ASSERT_TRUE(brute.has_value()) << "query " << t;
      EXPECT_TRUE(SameBits(got, *brute)) << "query " << t << " k " << k;
      EXPECT_TRUE(SameBits(got, index.kernel().TopKByVector(queries[t], k))) << "query " << t << " k " << k;
    }
  }
}

// Every row: L_i = a_i − b_i ≤ f_i ≤ a_i + b_i = U_i, with f_i the float64
// scan's score, and |q·v_i − a_i| ≤ b_i against a long-double dot product.
void ExpectBoundsHold(const TopKIndex& index, const Eigen::VectorXd& q) {
  std::vector<double> a, b;
  ASSERT_TRUE(index.Screen(q, &a, &b));
  const Embedding& v = index.kernel().embedding();
  for (int i = 0; i < v.rows(); ++i) {
    double f = 0;
    ScoreRows(v.data() + int64_t{i} * v.cols(), 1, static_cast<int>(v.cols()), q.data(), &f);
    long double exact = 0;
    for (int c = 0; c < v.cols(); ++c) exact += static_cast<long double>(v(i, c)) * q(c);
    ASSERT_LE(a[i] - b[i], f) << "row " << i;
    ASSERT_GE(a[i] + b[i], f) << "row " << i;
    ASSERT_LE(std::abs(exact - static_cast<long double>(a[i])), static_cast<long double>(b[i])) << "row " << i;
  }
}

TEST(TopKIndex, GaussianMatchesBruteForceAndScreensMostRows) {
  std::mt19937_64 rng(7);
  const int n = 4000, r = 37;  // r not a multiple of 16: padded codes
  auto index = Index(Kernel(Gaussian(n, r, rng)));
  ASSERT_TRUE(index.screening());
  std::vector<Eigen::VectorXd> queries;
  for (int t = 0; t < 5; ++t) queries.push_back(Gaussian(1, r, rng).row(0).transpose());
  ExpectExact(index, {0, 1234, n - 1}, queries, {1, 10, 100, n / 4});
  for (const auto& q : queries) ExpectBoundsHold(index, q);
  // The screen must actually screen: for k = 10, only a small fraction of
  // the rows is re-scored in float64.
  for (const auto& q : queries) {
    TopKQueryStats st;
    index.TopKByVector(q, 10, &st);
    EXPECT_TRUE(st.screened);
    EXPECT_GE(st.rescored, 10);
    EXPECT_LT(st.rescored, n / 40) << "screen too loose";
    EXPECT_GE(st.candidates, st.rescored);
  }
}

// The AVX2 and AVX-512 VNNI kernels compute the very integer dot products of
// the portable loop at the same query precision (16-bit codes for AVX2, 8-bit
// for VNNI); r = 48 exercises VNNI's 32-column steps and its 16-column tail.
TEST(TopKIndex, SimdAndPortableKernelsAgree) {
  std::mt19937_64 rng(11);
  auto kernel = Kernel(Gaussian(1003, 48, rng));  // 1003: a tail of 3 rows after groups of four
  TopKIndexOptions avx2, vnni, portable16, portable8;
  avx2.use_vnni = false;
  portable16.use_simd = portable8.use_simd = false;
  portable8.max_query_code = 127;
  const auto build = [&](const TopKIndexOptions& o) { return *TopKIndex::Build(kernel, o); };
  const TopKIndex fast = build(avx2), fastest = build(vnni), slow16 = build(portable16), slow8 = build(portable8);
  EXPECT_FALSE(slow16.uses_simd());
  EXPECT_FALSE(fast.uses_vnni());
  for (int t = 0; t < 4; ++t) {
    const Eigen::VectorXd q = Gaussian(1, 48, rng).row(0).transpose();
    std::vector<double> a1, b1, a2, b2;
    ASSERT_TRUE(fast.Screen(q, &a1, &b1));
    ASSERT_TRUE(slow16.Screen(q, &a2, &b2));
    EXPECT_EQ(a1, a2);
    EXPECT_EQ(b1, b2);
    EXPECT_EQ(fast.TopKByVector(q, 7), slow16.TopKByVector(q, 7));
    if (fastest.uses_vnni()) {  // only on CPUs with AVX-512 VNNI
      ASSERT_TRUE(fastest.Screen(q, &a1, &b1));
      ASSERT_TRUE(slow8.Screen(q, &a2, &b2));
      EXPECT_EQ(a1, a2);
      EXPECT_EQ(b1, b2);
      EXPECT_EQ(fastest.TopKByVector(q, 7), slow16.TopKByVector(q, 7));
    }
  }
}

TEST(TopKIndex, TiesAndDuplicatesGoToTheSmallerIndex) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> small(-1, 1);
  const int n = 2000, r = 16;
  Embedding v(n, r);
  for (Eigen::Index t = 0; t < v.size(); ++t) v.data()[t] = small(rng);  // many exactly equal scores
  for (int i = 1000; i < 1400; ++i) v.row(i) = v.row(i % 37);           // exact duplicate rows
  auto index = Index(Kernel(v));
  ASSERT_TRUE(index.screening());
  std::vector<Eigen::VectorXd> queries;
  for (int t = 0; t < 4; ++t) {
    Eigen::VectorXd q(r);
    for (int c = 0; c < r; ++c) q(c) = small(rng);
    queries.push_back(q);
  }
  queries.push_back(Eigen::VectorXd::Ones(r));
  ExpectExact(index, {0, 5, 1005, 1999}, queries, {1, 3, 17, 250, 500});
  // A tie group straddles k: the winners are the smallest indices.
  const auto top = index.TopKByVector(Eigen::VectorXd::Ones(r), 40);
  for (size_t t = 1; t < top.size(); ++t) {
    EXPECT_TRUE(top[t - 1].score > top[t].score ||
                (top[t - 1].score == top[t].score && top[t - 1].index < top[t].index));
  }
}

TEST(TopKIndex, EdgeValuesOfK) {
  std::mt19937_64 rng(5);
  const int n = 300;
  auto index = Index(Kernel(Gaussian(n, 20, rng)));
  const Eigen::VectorXd q = Gaussian(1, 20, rng).row(0).transpose();
  EXPECT_TRUE(index.TopKByVector(q, 0).empty());
  EXPECT_TRUE(index.TopKByVector(q, -3).empty());
  EXPECT_EQ(index.TopKByVector(q, n + 50).size(), static_cast<size_t>(n));
  EXPECT_EQ(index.TopK(4, n).size(), static_cast<size_t>(n - 1));
  EXPECT_EQ(index.TopK(4, n, /*exclude_self=*/false).size(), static_cast<size_t>(n));
  ExpectExact(index, {0, 4, n - 1}, {q}, {1, 2, n / 4, n / 4 + 1, n - 1, n, n + 7});
  TopKQueryStats st;
  index.TopKByVector(q, 1, &st);
  EXPECT_TRUE(st.screened);
  index.TopKByVector(q, n, &st);
  EXPECT_FALSE(st.screened);  // k > n/4: the exact scan answers

  auto single = Index(Kernel(Embedding::Constant(1, 8, 2.0)));
  EXPECT_TRUE(single.TopK(0, 1).empty());
  EXPECT_EQ(single.TopK(0, 1, false), (std::vector<ScoredItem>{{0, 32.0}}));
}

TEST(TopKIndex, ZeroRowsAndZeroQueries) {
  std::mt19937_64 rng(9);
  const int n = 1200, r = 24;
  Embedding v = Gaussian(n, r, rng);
  for (int i = 0; i < n; i += 7) v.row(i).setZero();
  auto index = Index(Kernel(v));
  ASSERT_TRUE(index.screening());
  std::vector<Eigen::VectorXd> queries{Eigen::VectorXd::Zero(r), -Eigen::VectorXd::Ones(r)};
  // Mostly-negative scores: the zero rows (score 0) are among the best.
  queries.push_back(-v.row(1).transpose() * 3);
  ExpectExact(index, {0, 7, 8}, queries, {1, 10, 200, 300});
  ExpectBoundsHold(index, queries[1]);
  TopKQueryStats st;
  index.TopKByVector(queries[0], 5, &st);
  EXPECT_FALSE(st.screened);

  auto zero = Index(Kernel(Embedding::Zero(50, 16)));  // zero kernel: no copy, every score 0
  EXPECT_FALSE(zero.screening());
  ExpectExact(zero, {0, 49}, {Eigen::VectorXd::Ones(16)}, {1, 5, 50});
}

TEST(TopKIndex, HugeTinyAndSubnormalMagnitudes) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> expo(-150, 150);
  const int n = 1500, r = 32;
  Embedding v = Gaussian(n, r, rng);
  for (int i = 0; i < n; ++i) v.row(i) *= std::pow(10.0, expo(rng));  // row norms 1e-150 .. 1e150
  for (int i = 3; i < n; i += 50) v.row(i) *= 1e-160;                  // some rows near 1e-300
  for (int c = 0; c < r; ++c) v(10, c) = (c % 3 - 1) * 4e-320;          // a subnormal row
  v(11, 5) = 1e-250;                                                      // one tiny entry
  v(12, 0) = 5e149;                                                       // one huge entry among normal ones
  auto index = Index(Kernel(v));
  ASSERT_TRUE(index.screening());
  std::vector<Eigen::VectorXd> queries;
  for (double scale : {1.0, 1e-100, 1e100, 1e-200}) queries.push_back(Gaussian(1, r, rng).row(0).transpose() * scale);
  queries.push_back(v.row(10).transpose());
  ExpectExact(index, {0, 3, 10, 11, 12, 777}, queries, {1, 10, 300});
  ExpectBoundsHold(index, queries[0]);
  ExpectBoundsHold(index, queries[1]);

  // Rows near 1e300: scores may overflow, so such queries run the exact scan.
  Embedding w = Gaussian(400, 16, rng);
  w.row(17) *= 1e300;
  w.row(18) *= -1e300;
  auto big = Index(Kernel(w));
  ExpectExact(big, {0, 17, 18}, {Eigen::VectorXd::Ones(16), Eigen::VectorXd::Ones(16) * 1e-300}, {1, 5, 100});
  TopKQueryStats st;
  big.TopKByVector(Eigen::VectorXd::Ones(16), 3, &st);
  EXPECT_FALSE(st.screened);

  // An embedding that is all tiny (1e-300) and one that is all subnormal.
  auto tiny = Index(Kernel(Gaussian(500, 16, rng) * 1e-300));
  ExpectExact(tiny, {0, 499}, {Eigen::VectorXd::Ones(16), Eigen::VectorXd::Ones(16) * 1e250}, {1, 10});
  auto sub = Index(Kernel(Gaussian(500, 16, rng) * 1e-315));
  ExpectExact(sub, {0, 499}, {Eigen::VectorXd::Ones(16) * 1e300}, {1, 10});
}

// Rows whose quantization residual is aligned with the query: with scale 1
// (one coordinate is exactly ±127), every other coordinate is an integer plus
// ±0.49, so it rounds to the integer and the screening score misses q·(±0.49
// sign q) in every coordinate — "under" rows are better than they screen,
// "over" rows worse. Their true scores are packed around the k-th best, so
// the screen's order is wrong near the threshold and only a rigorous bound
// finds the right rows. Plus near-duplicates that differ in the last bits.
TEST(TopKIndex, AdversarialRowsNearTheThreshold) {
  std::mt19937_64 rng(17);
  const int r = 64, n = 3000;
  Eigen::VectorXd q = Gaussian(1, r, rng).row(0).transpose();
  q(0) = 0.0;  // the pinned coordinate does not score
  std::uniform_int_distribution<int> code(-60, 60);
  std::uniform_real_distribution<double> unit(0, 1);
  Embedding v(n, r);
  for (int i = 0; i < n; ++i) {
    v(i, 0) = (i % 2 ? 127.0 : -127.0);
    const double side = (i % 3 == 0) ? 0.49 : (i % 3 == 1 ? -0.49 : 0.0);
    for (int c = 1; c < r; ++c) v(i, c) = code(rng) + side * (q(c) > 0 ? 1 : -1);
  }
  // Scale rows along q so that true scores crowd into a narrow band: shift
  // each row's score to a target near 0 by moving its largest-|q| coordinate.
  int cmax = 1;
  for (int c = 1; c < r; ++c)
    if (std::abs(q(c)) > std::abs(q(cmax))) cmax = c;
  for (int i = 0; i < n; ++i) {
    const double target = 5.0 * unit(rng);
    const double rest = v.row(i).dot(q) - v(i, cmax) * q(cmax);
    const double needed = std::round((target - rest) / q(cmax));
    if (std::abs(needed) < 120) v(i, cmax) = needed + (v(i, cmax) - std::round(v(i, cmax)));
  }
  for (int i = 2000; i < 2100; ++i) {  // near-duplicates: same codes, last-bit differences
    v.row(i) = v.row(5);
    v(i, 1 + i % (r - 1)) = std::nextafter(v(i, 1 + i % (r - 1)), (i % 2) ? 1e9 : -1e9);
  }
  auto index = Index(Kernel(v));
  ASSERT_TRUE(index.screening());
  ExpectBoundsHold(index, q);
  std::vector<double> a, b;
  ASSERT_TRUE(index.Screen(q, &a, &b));
  // The construction works: the screening order differs from the true order
  // among the true top 50.
  const auto truth = *BruteForce(v, q.data(), 50, -1);
  int misordered = 0;
  for (size_t t = 1; t < truth.size(); ++t) misordered += a[truth[t].index] > a[truth[t - 1].index];
  EXPECT_GT(misordered, 5);
  ExpectExact(index, {5, 2000, 2001, 2999}, {q, -q, q * 1e-3}, {1, 10, 50, 700});
}

TEST(TopKIndex, ConcurrentQueriesAgree) {
  std::mt19937_64 rng(19);
  auto index = Index(Kernel(Gaussian(3000, 32, rng)));
  std::vector<std::vector<ScoredItem>> expected(40);
  for (int t = 0; t < 40; ++t) expected[t] = index.kernel().TopK(t * 70, 9);
  std::vector<int> mismatches(2, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < 3; ++rep)
        for (int t = 0; t < 40; ++t) mismatches[w] += index.TopK(t * 70, 9) != expected[t];
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches[0] + mismatches[1], 0);
}

TEST(TopKIndex, MemoryAndSmallRank) {
  std::mt19937_64 rng(23);
  auto index = Index(Kernel(Gaussian(1000, 40, rng)));
  // 40 → 48 bytes of codes per row, plus three floats and the cosine's 1/‖v_i‖.
  const int per_row = 48 + 12 + 8 + (index.uses_vnni() ? 4 : 0);  // + Σ_c c_ic for the VNNI kernel
  EXPECT_GE(index.memory_bytes(), 1000 * per_row);
  EXPECT_LT(index.memory_bytes(), 1000 * per_row + 1024);
  auto low = Index(Kernel(Gaussian(1000, 3, rng)));  // 28 bytes/row would not save enough over 24
  EXPECT_FALSE(low.screening());
  EXPECT_GE(low.memory_bytes(), 1000 * 8);  // 1/‖v_i‖ only
  EXPECT_LT(low.memory_bytes(), 1000 * 8 + 1024);
  ExpectExact(low, {0, 999}, {Eigen::VectorXd::Ones(3)}, {1, 10});
}

TEST(TopKIndex, Errors) {
  EXPECT_THAT(TopKIndex::Build(nullptr).status().message(), HasSubstr("kernel"));
  TopKIndexOptions o;
  o.max_index_fraction = 0;
  const Status s = o.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_index_fraction = 0"));
  std::mt19937_64 rng(1);
  EXPECT_EQ(TopKIndex::Build(Kernel(Gaussian(10, 8, rng)), o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kls
