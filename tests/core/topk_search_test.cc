// TopKIndex::Search: batches, filters (allowed bitmaps), exclusions, the
// cosine, paging and min_score, checked against brute force on random data.
// Exactness is the contract: the k best items that pass, whatever the
// filter's selectivity — never fewer than k when k pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/model/row_scan.h"
#include "core/model/topk_index.h"

namespace kls {
namespace {

using Embedding = LearnedKernel::Embedding;

bool Better(const ScoredItem& a, const ScoredItem& b) {
  return a.score > b.score || (a.score == b.score && a.index < b.index);
}

std::shared_ptr<const LearnedKernel> GaussianKernel(int n, int r, uint64_t seed, double row_scale_spread = 0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform(0, 1);
  Embedding v(n, r);
  for (int i = 0; i < n; ++i) {
    const double s = std::exp(row_scale_spread * (uniform(rng) - 0.5));  // rows of different norms
    for (int c = 0; c < r; ++c) v(i, c) = s * normal(rng);
  }
  auto k = LearnedKernel::FromEmbedding(std::move(v));
  EXPECT_TRUE(k.ok()) << k.status();
  return std::make_shared<const LearnedKernel>(std::move(k).value());
}

TopKIndex Index(std::shared_ptr<const LearnedKernel> kernel) {
  auto index = TopKIndex::Build(std::move(kernel));
  EXPECT_TRUE(index.ok()) << index.status();
  return std::move(index).value();
}

ItemBitmap RandomBitmap(int n, double selectivity, std::mt19937_64& rng) {
  ItemBitmap b(n);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < n; ++i)
    if (u(rng) < selectivity) b.Set(i);
  return b;
}

// The oracle: every passing item scored independently in long double (inner
// product or cosine), a full sort, then offset / k / min_score.
std::vector<ScoredItem> Oracle(const Embedding& v, const double* q, const ItemBitmap* allowed, int skip,
                               const TopKSearchOptions& o) {
  const int r = static_cast<int>(v.cols());
  long double qn = 0;
  for (int c = 0; c < r; ++c) qn += static_cast<long double>(q[c]) * q[c];
  std::vector<ScoredItem> all;
  for (int j = 0; j < v.rows(); ++j) {
    if (j == skip || (allowed && !allowed->Test(j))) continue;
    long double dot = 0, vn = 0;
    for (int c = 0; c < r; ++c) {
      dot += static_cast<long double>(v(j, c)) * q[c];
      vn += static_cast<long double>(v(j, c)) * v(j, c);
    }
    if (o.metric == ScoreMetric::kCosine) dot = (qn > 0 && vn > 0) ? dot / std::sqrt(qn * vn) : 0;
    all.push_back({j, static_cast<double>(dot)});
  }
  std::sort(all.begin(), all.end(), Better);
  std::vector<ScoredItem> out;
  for (size_t t = o.offset; t < all.size() && static_cast<int>(out.size()) < o.k; ++t) {
    if (all[t].score < o.min_score) break;
    out.push_back(all[t]);
  }
  return out;
}

// Same items and order as the oracle, scores within 1e-12 relative (the data
// are Gaussian, so no two scores are that close).
::testing::AssertionResult MatchesOracle(const std::vector<ScoredItem>& got, const std::vector<ScoredItem>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  }
  for (size_t t = 0; t < got.size(); ++t) {
    if (got[t].index != want[t].index ||
        std::abs(got[t].score - want[t].score) > 1e-12 * std::max(1.0, std::abs(want[t].score))) {
      return ::testing::AssertionFailure() << "position " << t << ": {" << got[t].index << ", " << got[t].score
                                           << "} vs {" << want[t].index << ", " << want[t].score << "}";
    }
  }
  return ::testing::AssertionSuccess();
}

bool SameBits(const std::vector<ScoredItem>& x, const std::vector<ScoredItem>& y) {
  if (x.size() != y.size()) return false;
  for (size_t t = 0; t < x.size(); ++t) {
    if (x[t].index != y[t].index || std::memcmp(&x[t].score, &y[t].score, sizeof(double)) != 0) return false;
  }
  return true;
}

std::vector<ScoredItem> One(const TopKIndex& index, const TopKQuery& q, const TopKSearchOptions& o,
                            TopKSearchStats* stats = nullptr) {
  auto out = index.Search({q}, o, SolveControl(), stats);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : std::vector<ScoredItem>{};
}

// Filters from 0.01 % to 100 % selectivity, both metrics, item and vector
// queries: the answer is the oracle's, with exactly min(k, passing) items.
TEST(TopKSearch, FilteredAnswersMatchTheOracleAtEverySelectivity) {
  const int n = 20000, r = 24;
  const auto kernel = GaussianKernel(n, r, 7, 2.0);
  const TopKIndex index = Index(kernel);
  ASSERT_TRUE(index.screening());
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  TopKSearchStats total;
  int cases = 0;
  for (double sel : {0.0001, 0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 1.0}) {
    const ItemBitmap allowed = RandomBitmap(n, sel, rng);
    const int passing = static_cast<int>(allowed.Count());
    for (ScoreMetric metric : {ScoreMetric::kInnerProduct, ScoreMetric::kCosine}) {
      for (int k : {1, 10, 100, 3000}) {
        for (int rep = 0; rep < 3; ++rep, ++cases) {
          TopKSearchOptions o;
          o.k = k;
          o.metric = metric;
          TopKQuery q;
          std::vector<double> vec(r);
          int skip = -1;
          if (rep == 0) {
            for (double& x : vec) x = normal(rng);
            q.vector = vec.data();
          } else {
            q.item = static_cast<int>(rng() % n);
            q.exclude_self = rep == 1;
            if (q.exclude_self) skip = q.item;
            vec.assign(kernel->embedding().row(q.item).data(), kernel->embedding().row(q.item).data() + r);
          }
          q.allowed = &allowed;
          TopKSearchStats st;
          const auto got = One(index, q, o, &st);
          total.gathered += st.gathered;
          total.screened += st.screened;
          total.scanned += st.scanned;
          const int expect_size = std::min(k, passing - (skip >= 0 && allowed.Test(skip) ? 1 : 0));
          EXPECT_EQ(static_cast<int>(got.size()), expect_size) << "selectivity " << sel << " k " << k;
          EXPECT_TRUE(MatchesOracle(got, Oracle(kernel->embedding(), vec.data(), &allowed, skip, o)))
              << "selectivity " << sel << " k " << k << " metric " << ScoreMetricName(metric) << " rep " << rep;
          for (const ScoredItem& s : got) EXPECT_TRUE(allowed.Test(s.index));
        }
      }
    }
  }
  EXPECT_EQ(cases, 8 * 2 * 4 * 3);
  // Every strategy was exercised.
  EXPECT_GT(total.gathered, 0);
  EXPECT_GT(total.screened, 0);
  EXPECT_GT(total.scanned, 0);
}

// Unfiltered inner-product searches give the very bits of TopK / the scan.
TEST(TopKSearch, UnfilteredInnerProductEqualsTheScan) {
  const auto kernel = GaussianKernel(3000, 32, 3);
  const TopKIndex index = Index(kernel);
  for (int i : {0, 17, 2999}) {
    TopKQuery q;
    q.item = i;
    TopKSearchOptions o;
    o.k = 25;
    EXPECT_TRUE(SameBits(One(index, q, o), kernel->TopK(i, 25, true)));
  }
}

// A batch's answers equal the one-by-one answers bit for bit, with one
// shared filter, per-query filters and no filter mixed.
TEST(TopKSearch, BatchEqualsOneByOne) {
  const int n = 5000, r = 16;
  const auto kernel = GaussianKernel(n, r, 5, 1.0);
  const TopKIndex index = Index(kernel);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  const ItemBitmap shared = RandomBitmap(n, 0.2, rng), rare = RandomBitmap(n, 0.002, rng);
  std::vector<std::vector<double>> vectors(40, std::vector<double>(r));
  for (ScoreMetric metric : {ScoreMetric::kInnerProduct, ScoreMetric::kCosine}) {
    std::vector<TopKQuery> batch;
    for (int t = 0; t < 120; ++t) {
      TopKQuery q;
      if (t % 3 == 0) {
        for (double& x : vectors[t / 3]) x = normal(rng);
        q.vector = vectors[t / 3].data();
      } else {
        q.item = static_cast<int>(rng() % n);
        q.exclude_self = t % 2 == 0;
      }
      q.allowed = t % 4 == 0 ? nullptr : t % 4 == 1 ? &shared : t % 4 == 2 ? &rare : &shared;
      batch.push_back(q);
    }
    TopKSearchOptions o;
    o.k = 30;
    o.metric = metric;
    const auto all = index.Search(batch, o);
    ASSERT_TRUE(all.ok()) << all.status();
    TopKSearchOptions threaded = o;
    threaded.threads = 3;  // queries split across threads: the same answers
    const auto split = index.Search(batch, threaded);
    ASSERT_TRUE(split.ok()) << split.status();
    for (size_t t = 0; t < batch.size(); ++t) {
      EXPECT_TRUE(SameBits((*all)[t], One(index, batch[t], o))) << "query " << t;
      EXPECT_TRUE(SameBits((*split)[t], (*all)[t])) << "query " << t;
    }
  }
}

// Paging: pages of k after offset concatenate to the one large query.
TEST(TopKSearch, PagesConcatenateToOneLargeQuery) {
  const int n = 4000;
  const auto kernel = GaussianKernel(n, 20, 9);
  const TopKIndex index = Index(kernel);
  std::mt19937_64 rng(1);
  const ItemBitmap allowed = RandomBitmap(n, 0.3, rng);
  for (const ItemBitmap* filter : {static_cast<const ItemBitmap*>(nullptr), &allowed}) {
    for (ScoreMetric metric : {ScoreMetric::kInnerProduct, ScoreMetric::kCosine}) {
      TopKQuery q;
      q.item = 12;
      q.allowed = filter;
      TopKSearchOptions big;
      big.k = 200;
      big.metric = metric;
      const auto whole = One(index, q, big);
      ASSERT_EQ(whole.size(), 200u);
      std::vector<ScoredItem> pages;
      for (int offset = 0; offset < 200; offset += 7) {
        TopKSearchOptions page = big;
        page.offset = offset;
        page.k = std::min(7, 200 - offset);
        const auto p = One(index, q, page);
        pages.insert(pages.end(), p.begin(), p.end());
      }
      EXPECT_TRUE(SameBits(pages, whole));
    }
  }
  // Past the end: empty.
  TopKQuery q;
  q.item = 0;
  TopKSearchOptions o;
  o.offset = n;
  o.k = 10;
  EXPECT_TRUE(One(index, q, o).empty());
}

// Under the cosine an item's own row ranks first with score ≈ 1, even when
// other rows have far larger norms (they would win the inner product).
TEST(TopKSearch, CosinePutsTheItemFirst) {
  const int n = 3000;
  const auto kernel = GaussianKernel(n, 12, 21, 6.0);
  const TopKIndex index = Index(kernel);
  int inner_product_self_first = 0;
  for (int i = 0; i < n; i += 37) {
    TopKQuery q;
    q.item = i;
    q.exclude_self = false;
    TopKSearchOptions o;
    o.k = 5;
    o.metric = ScoreMetric::kCosine;
    const auto got = One(index, q, o);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got[0].index, i);
    EXPECT_NEAR(got[0].score, 1.0, 1e-14);
    for (const ScoredItem& s : got) EXPECT_LE(s.score, 1.0 + 1e-14);
    o.metric = ScoreMetric::kInnerProduct;
    inner_product_self_first += One(index, q, o)[0].index == i;
  }
  // The data are built so that the inner product often does not.
  EXPECT_LT(inner_product_self_first, (n + 36) / 37);
}

// An exclude list answers as a bitmap without those items would, and the
// query still shares its group's pass.
TEST(TopKSearch, ExcludeListsEqualClearedBits) {
  const int n = 6000;
  const auto kernel = GaussianKernel(n, 16, 4);
  const TopKIndex index = Index(kernel);
  std::mt19937_64 rng(8);
  for (double sel : {0.001, 0.05, 0.5, 1.0}) {
    const ItemBitmap allowed = RandomBitmap(n, sel, rng);
    for (int k : {5, 50}) {
      TopKQuery q;
      q.item = 42;
      q.allowed = &allowed;
      TopKSearchOptions o;
      o.k = k;
      o.offset = 3;
      // Exclude some of the true best, some non-passing items, repeats and the item itself.
      const auto best = One(index, q, [&] { TopKSearchOptions b = o; b.offset = 0; b.k = 20; return b; }());
      std::vector<int> exclude = {42, 42, static_cast<int>(rng() % n)};
      for (size_t t = 0; t < best.size(); t += 2) exclude.push_back(best[t].index);
      ItemBitmap cleared = allowed;
      for (int j : exclude) cleared.Clear(j);
      q.exclude = &exclude;
      TopKSearchStats st;
      const auto got = One(index, q, o, &st);
      TopKQuery reference = q;
      reference.exclude = nullptr;
      reference.allowed = &cleared;
      EXPECT_TRUE(SameBits(got, One(index, reference, o))) << "selectivity " << sel << " k " << k;
    }
  }
}

TEST(TopKSearch, MinScoreDropsLowScores) {
  const auto kernel = GaussianKernel(2000, 8, 2);
  const TopKIndex index = Index(kernel);
  TopKQuery q;
  q.item = 3;
  TopKSearchOptions o;
  o.k = 2000;
  o.metric = ScoreMetric::kCosine;
  o.min_score = 0.5;
  const auto got = One(index, q, o);
  ASSERT_FALSE(got.empty());
  for (const ScoredItem& s : got) EXPECT_GE(s.score, 0.5);
  EXPECT_TRUE(MatchesOracle(got, Oracle(kernel->embedding(), kernel->embedding().row(3).data(), nullptr, 3, o)));
}

TEST(TopKSearch, EmptyFilterGivesEmptyAnswers) {
  const auto kernel = GaussianKernel(1000, 8, 2);
  const TopKIndex index = Index(kernel);
  const ItemBitmap none(1000);
  TopKQuery q;
  q.item = 3;
  q.allowed = &none;
  EXPECT_TRUE(One(index, q, TopKSearchOptions()).empty());
  // Only the item itself passes, and it is excluded.
  ItemBitmap self(1000);
  self.Set(3);
  q.allowed = &self;
  EXPECT_TRUE(One(index, q, TopKSearchOptions()).empty());
  q.exclude_self = false;
  EXPECT_EQ(One(index, q, TopKSearchOptions()).size(), 1u);
}

TEST(TopKSearch, BadQueriesNameTheField) {
  const auto kernel = GaussianKernel(100, 4, 2);
  const TopKIndex index = Index(kernel);
  TopKQuery ok, bad_item, bad_vec, bad_size;
  ok.item = 1;
  bad_item.item = 100;
  const double nan_vec[4] = {1, std::nan(""), 0, 0};
  bad_vec.vector = nan_vec;
  const ItemBitmap wrong(99);
  bad_size.item = 1;
  bad_size.allowed = &wrong;
  auto r1 = index.Search({ok, bad_item}, TopKSearchOptions());
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("queries[1].item"), std::string::npos) << r1.status();
  auto r2 = index.Search({bad_vec}, TopKSearchOptions());
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("queries[0].vector[1]"), std::string::npos) << r2.status();
  auto r3 = index.Search({bad_size}, TopKSearchOptions());
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("queries[0].allowed"), std::string::npos) << r3.status();
  TopKSearchOptions neg;
  neg.offset = -1;
  EXPECT_FALSE(index.Search({ok}, neg).ok());
}

// A cancelled control stops the batch with CANCELLED, a past deadline with
// DEADLINE_EXCEEDED.
TEST(TopKSearch, CancellationAndDeadlineStopABatch) {
  const auto kernel = GaussianKernel(20000, 8, 2);
  const TopKIndex index = Index(kernel);
  std::vector<TopKQuery> batch(50);
  for (int t = 0; t < 50; ++t) batch[t].item = t;
  SolveControl cancelled;
  cancelled.cancel.Cancel();
  auto a = index.Search(batch, TopKSearchOptions(), cancelled);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kCancelled);
  SolveControl late;
  late.deadline = SolveControl::Clock::now() - std::chrono::seconds(1);
  auto b = index.Search(batch, TopKSearchOptions(), late);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kDeadlineExceeded);
  TopKSearchOptions threaded;
  threaded.threads = 2;
  auto c = index.Search(batch, threaded, cancelled);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace kls
