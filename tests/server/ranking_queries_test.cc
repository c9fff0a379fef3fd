// Ranking queries through the service (both stores): item attributes uploaded
// with a data set and replaced later, filters, exclusions, allow lists,
// batches, cosine scores, paging and min_score on TopK, keys in Similarity,
// filters on ReRank — every answer checked against a brute force over the
// kernel and the attributes computed in this test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "kls/v1/queries.grpc.pb.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "test_server.h"

namespace kls::server {
namespace {

using kls::testing::Ref;

using ::testing::HasSubstr;

constexpr int kN = 600;
constexpr int kRank = 8;
const char* const kCategories[] = {"shoes", "bags", "hats", "coats"};

struct Item {
  std::string category;
  double price = 0;
  bool has_price = true;
  int64_t stock = 0;
  bool discontinued = false;
};

class RankingQueriesTest : public kls::testing::ServerJobTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ServerJobTest::SetUp());

    std::mt19937_64 rng(17);
    std::normal_distribution<double> normal;
    std::uniform_real_distribution<double> uniform(0, 1);
    Dataset data;
    data.features.resize(kN, 3);
    for (int i = 0; i < kN; ++i) {
      for (int c = 0; c < 3; ++c) data.features(i, c) = normal(rng);
      data.item_keys.push_back("sku-" + std::to_string(i));
      Item item;
      item.category = kCategories[rng() % 4];
      item.price = std::round(uniform(rng) * 20000) / 100;
      item.has_price = uniform(rng) > 0.05;
      item.stock = static_cast<int64_t>(rng() % 50);
      item.discontinued = uniform(rng) < 0.2;
      items_.push_back(item);
    }
    UploadOptions o;
    o.name = "catalog";
    o.attributes_csv = AttributesCsv();
    const auto info = client_->UploadDataset(data, {}, o);
    ASSERT_TRUE(info.ok()) << info.status();
    dataset_id_ = info->id();
    EXPECT_EQ(info->attributes(), "category:string, price:float, stock:int, discontinued:bool");
    EXPECT_EQ(info->attributes_version(), 1);

    LearnedKernel::Embedding v(kN, kRank);
    for (int i = 0; i < kN; ++i) {
      const double scale = std::exp(uniform(rng) * 3 - 1.5);  // rows of different norms
      for (int c = 0; c < kRank; ++c) v(i, c) = scale * normal(rng);
    }
    kernel_ = *LearnedKernel::FromEmbedding(std::move(v));
    store::KernelRecord record;
    record.name = "k";
    record.dataset_id = dataset_id_;
    record.method = "test";
    ASSERT_TRUE(server_->store()->PutKernel(record, kernel_).ok());
  }

  std::string AttributesCsv() const {
    std::ostringstream csv;
    csv << "key,category,price,stock,discontinued\n";
    for (int i = 0; i < kN; ++i) {
      const Item& it = items_[i];
      csv << "sku-" << i << "," << it.category << ",";
      if (it.has_price) csv << it.price;
      csv << "," << it.stock << "," << (it.discontinued ? "true" : "false") << "\n";
    }
    return csv.str();
  }

  // The brute force: items passing `pass` (and not `skip`), by the metric, best first.
  std::vector<ScoredItem> Expected(int query, const std::function<bool(int)>& pass, int k, bool cosine,
                                   int skip = -1, int offset = 0) const {
    std::vector<ScoredItem> all;
    for (int j = 0; j < kN; ++j) {
      if (j == skip || !pass(j)) continue;
      double s = kernel_.value(query, j);
      if (cosine) s /= std::sqrt(kernel_.value(query, query) * kernel_.value(j, j));
      all.push_back({j, s});
    }
    std::sort(all.begin(), all.end(), [](const ScoredItem& a, const ScoredItem& b) {
      return a.score > b.score || (a.score == b.score && a.index < b.index);
    });
    std::vector<ScoredItem> out;
    for (size_t t = offset; t < all.size() && static_cast<int>(out.size()) < k; ++t) out.push_back(all[t]);
    return out;
  }

  static void ExpectSame(const google::protobuf::RepeatedPtrField<kls::v1::ScoredItem>& got,
                         const std::vector<ScoredItem>& want, const std::string& what) {
    ASSERT_EQ(got.size(), static_cast<int>(want.size())) << what;
    for (int t = 0; t < got.size(); ++t) {
      EXPECT_EQ(got[t].index(), want[t].index) << what << " position " << t;
      EXPECT_NEAR(got[t].score(), want[t].score, 1e-10 * std::max(1.0, std::abs(want[t].score))) << what;
      EXPECT_EQ(got[t].item_key(), "sku-" + std::to_string(want[t].index)) << what;
    }
  }

  kls::v1::TopKRequest TopK(int item, int k, const std::string& filter = "") const {
    kls::v1::TopKRequest request;
    *request.mutable_kernel() = Ref("k");
    request.set_item(item);
    request.set_k(k);
    request.set_exclude_self(true);
    request.mutable_select()->set_filter(filter);
    return request;
  }

  std::string dataset_id_;
  std::vector<Item> items_;
  LearnedKernel kernel_;
};

TEST_F(RankingQueriesTest, FiltersReturnExactlyTheBestPassingItems) {
  struct Case {
    std::string filter;
    std::function<bool(const Item&, int)> pass;
  };
  const std::vector<Case> cases = {
      {"category in [\"shoes\", \"bags\"] and price < 100 and not discontinued",
       [](const Item& it, int) { return (it.category == "shoes" || it.category == "bags") && it.has_price &&
                                        it.price < 100 && !it.discontinued; }},
      {"stock >= 45", [](const Item& it, int) { return it.stock >= 45; }},
      {"not (price < 100)", [](const Item& it, int) { return !(it.has_price && it.price < 100); }},
      {"category = 'hats' or index < 20", [](const Item& it, int i) { return it.category == "hats" || i < 20; }},
      {"key in [\"sku-3\", \"sku-7\", \"sku-400\"]", [](const Item&, int i) { return i == 3 || i == 7 || i == 400; }},
      {"price > 1000000", [](const Item&, int) { return false; }},
      {"discontinued", [](const Item& it, int) { return it.discontinued; }},
  };
  for (const Case& c : cases) {
    for (int item : {0, 123, 599}) {
      for (int k : {1, 10, 250}) {
        const auto response = client_->TopK(TopK(item, k, c.filter));
        ASSERT_TRUE(response.ok()) << c.filter << ": " << response.status();
        const auto pass = [&](int j) { return c.pass(items_[j], j); };
        ExpectSame(response->items(), Expected(item, pass, k, false, item), c.filter);
      }
    }
  }
}

TEST_F(RankingQueriesTest, ExcludeAndAllowListsByIndexAndKey) {
  kls::v1::TopKRequest request = TopK(5, 20, "stock < 40");
  request.mutable_select()->add_exclude(10);
  request.mutable_select()->add_exclude_keys("sku-11");
  for (int j = 0; j < 300; ++j) request.mutable_select()->add_allow(j);
  request.mutable_select()->add_allow_keys("sku-500");
  const auto response = client_->TopK(request);
  ASSERT_TRUE(response.ok()) << response.status();
  const auto pass = [&](int j) { return items_[j].stock < 40 && j != 10 && j != 11 && (j < 300 || j == 500); };
  ExpectSame(response->items(), Expected(5, pass, 20, false, 5), "exclude + allow");
}

TEST_F(RankingQueriesTest, BatchEqualsOneByOneWithSharedAndOwnSelections) {
  kls::v1::TopKRequest batch;
  *batch.mutable_kernel() = Ref("k");
  batch.set_k(15);
  batch.set_exclude_self(true);
  batch.set_metric(kls::v1::COSINE);
  batch.mutable_select()->set_filter("not discontinued");
  for (int t = 0; t < 60; ++t) {
    kls::v1::TopKQuery* q = batch.add_queries();
    if (t % 2) {
      q->set_item(t * 7);
    } else {
      q->set_item_key("sku-" + std::to_string(t * 9));
    }
    if (t % 3 == 1) q->mutable_select()->add_exclude(t);                   // own exclusions
    if (t % 5 == 2) q->mutable_select()->set_filter("category = 'coats'");  // own filter
  }
  const auto all = client_->TopK(batch);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->results_size(), 60);
  EXPECT_EQ(all->items_size(), 0);
  for (int t = 0; t < 60; ++t) {
    kls::v1::TopKRequest one = batch;
    one.clear_queries();
    const kls::v1::TopKQuery& q = batch.queries(t);
    if (q.has_item()) {
      one.set_item(q.item());
    } else {
      one.set_item_key(q.item_key());
    }
    *one.mutable_select()->mutable_exclude() = q.select().exclude();
    if (!q.select().filter().empty()) {
      one.mutable_select()->set_filter("not discontinued and " + q.select().filter());
    }
    const auto single = client_->TopK(one);
    ASSERT_TRUE(single.ok()) << single.status();
    ASSERT_EQ(single->items_size(), all->results(t).items_size()) << t;
    for (int r = 0; r < single->items_size(); ++r) {
      EXPECT_EQ(single->items(r).index(), all->results(t).items(r).index()) << t;
      EXPECT_EQ(single->items(r).score(), all->results(t).items(r).score()) << t;
    }
    // And against the brute force.
    const int item = q.has_item() ? q.item() : std::stoi(q.item_key().substr(4));
    const auto pass = [&](int j) {
      if (items_[j].discontinued) return false;
      if (!q.select().filter().empty() && items_[j].category != "coats") return false;
      return q.select().exclude_size() == 0 || j != q.select().exclude(0);
    };
    ExpectSame(all->results(t).items(), Expected(item, pass, 15, true, item), "batch query " + std::to_string(t));
  }
}

TEST_F(RankingQueriesTest, PagesFollowTheOrderOfOneLargeQuery) {
  kls::v1::TopKRequest big = TopK(77, 120, "price >= 20");
  big.set_metric(kls::v1::COSINE);
  const auto whole = client_->TopK(big);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->items_size(), 120);
  std::vector<int> paged;
  for (int offset = 0; offset < 120; offset += 25) {
    kls::v1::TopKRequest page = big;
    page.set_offset(offset);
    page.set_k(std::min(25, 120 - offset));
    const auto p = client_->TopK(page);
    ASSERT_TRUE(p.ok()) << p.status();
    for (const auto& s : p->items()) paged.push_back(s.index());
  }
  ASSERT_EQ(paged.size(), 120u);
  for (int t = 0; t < 120; ++t) EXPECT_EQ(paged[t], whole->items(t).index()) << t;
}

TEST_F(RankingQueriesTest, CosineRanksTheItemItselfFirstAndMinScoreCuts) {
  for (int item : {0, 42, 333}) {
    kls::v1::TopKRequest request = TopK(item, 5);
    request.set_exclude_self(false);
    request.set_metric(kls::v1::COSINE);
    const auto response = client_->TopK(request);
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_GE(response->items_size(), 1);
    EXPECT_EQ(response->items(0).index(), item);
    EXPECT_NEAR(response->items(0).score(), 1.0, 1e-12);
    request.set_k(kN);
    request.set_min_score(0.3);
    const auto cut = client_->TopK(request);
    ASSERT_TRUE(cut.ok()) << cut.status();
    ExpectSame(cut->items(), [&] {
      auto all = Expected(item, [](int) { return true; }, kN, true);
      all.erase(std::remove_if(all.begin(), all.end(), [](const ScoredItem& s) { return s.score < 0.3; }), all.end());
      return all;
    }(), "min_score");
  }
}

TEST_F(RankingQueriesTest, BadFiltersAndBatchesAreInvalidArgumentNamingTheColumnOrLimit) {
  const auto expect_invalid = [&](const kls::v1::TopKRequest& r, const std::string& text) {
    const auto response = client_->TopK(r);
    ASSERT_FALSE(response.ok()) << text;
    EXPECT_EQ(response.status().code(), StatusCode::kInvalidArgument) << response.status();
    EXPECT_THAT(response.status().message(), HasSubstr(text));
  };
  expect_invalid(TopK(1, 5, "prise < 100"), "select.filter: column 1");
  expect_invalid(TopK(1, 5, "price = \"x\""), "select.filter: column 9");
  expect_invalid(TopK(1, 5, "price < 100 and (stock > 3"), "select.filter: column");
  kls::v1::TopKRequest big;
  *big.mutable_kernel() = Ref("k");
  big.set_k(3);
  for (int t = 0; t < 1001; ++t) big.add_queries()->set_item(t % kN);
  expect_invalid(big, "at most 1000");
  kls::v1::TopKRequest both = TopK(1, 5);
  both.add_queries()->set_item(2);
  expect_invalid(both, "not both");
  kls::v1::TopKRequest out_of_range = TopK(1, 5);
  out_of_range.mutable_select()->add_exclude(kN);
  expect_invalid(out_of_range, "select.exclude[0] = 600");
  // A filter that matches nothing is an empty answer, not an error.
  const auto none = client_->TopK(TopK(1, 5, "stock > 1000"));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->items_size(), 0);
  // An unknown key in a list is NOT_FOUND naming it.
  kls::v1::TopKRequest unknown = TopK(1, 5);
  unknown.mutable_select()->add_exclude_keys("nope");
  const auto nf = client_->TopK(unknown);
  ASSERT_FALSE(nf.ok());
  EXPECT_EQ(nf.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(nf.status().message(), HasSubstr("select.exclude_keys[0] = 'nope'"));
}

TEST_F(RankingQueriesTest, ReplacedAttributesAnswerTheNextQueryWithoutRelearning) {
  // Every item in stock 0 except items 0..9: "stock > 0" passes exactly those.
  std::ostringstream csv;
  csv << "row,stock:int,region\n";
  for (int i = 0; i < kN; ++i) csv << i << "," << (i < 10 ? 5 : 0) << "," << (i % 2 ? "eu" : "us") << "\n";
  const auto info = client_->SetAttributes("catalog", csv.str());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->attributes(), "stock:int, region:string");
  EXPECT_EQ(info->attributes_version(), 2);
  const auto response = client_->TopK(TopK(100, 50, "stock > 0 and region = \"us\""));
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectSame(response->items(), Expected(100, [](int j) { return j < 10 && j % 2 == 0; }, 50, false, 100), "replaced");
  // The old columns are gone.
  const auto old = client_->TopK(TopK(100, 5, "discontinued"));
  EXPECT_EQ(old.status().code(), StatusCode::kInvalidArgument);
  // Listed with the data set; removed by an empty table.
  const auto listed = client_->GetDataset(dataset_id_);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->attributes(), "stock:int, region:string");
  const auto cleared = client_->SetAttributes(dataset_id_, "");
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(cleared->attributes(), "");
  EXPECT_EQ(client_->TopK(TopK(100, 5, "stock > 0")).status().code(), StatusCode::kInvalidArgument);
  // A bad table names the line and changes nothing.
  const auto bad = client_->SetAttributes(dataset_id_, "key,price\nsku-1,abc\nnot-a-key,3\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("line 3"));
}

TEST_F(RankingQueriesTest, AttributesSurviveARestart) {
  const std::string target_before = server_->target();
  server_->Stop();
  server_ = std::make_unique<KlsServer>(kls::testing::TestServerConfig(dir_));
  const Status started = server_->Start();
  ASSERT_TRUE(started.ok()) << started;
  client_ = kls::testing::ClientFor(*server_);
  const auto response = client_->TopK(TopK(9, 30, "category = 'bags' and stock < 25"));
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectSame(response->items(),
             Expected(9, [&](int j) { return items_[j].category == "bags" && items_[j].stock < 25; }, 30, false, 9),
             "after restart");
}

TEST_F(RankingQueriesTest, SimilarityByKeysAndReRankWithAFilter) {
  kls::v1::SimilarityRequest request;
  *request.mutable_kernel() = Ref("k");
  request.add_i_keys("sku-1");
  request.add_j_keys("sku-2");
  request.add_i_keys("sku-599");
  request.add_j_keys("sku-0");
  const auto values = client_->Similarity(request);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->values_size(), 2);
  EXPECT_EQ(values->values(0), kernel_.value(1, 2));
  EXPECT_EQ(values->values(1), kernel_.value(599, 0));

  kls::v1::ReRankRequest rerank;
  *rerank.mutable_kernel() = Ref("k");
  for (int j = 0; j < 80; ++j) rerank.add_candidates(j);
  rerank.mutable_select()->set_filter("not discontinued");
  const auto ranked = client_->ReRank(rerank);
  ASSERT_TRUE(ranked.ok()) << ranked.status();
  int passing = 0;
  for (int j = 0; j < 80; ++j) passing += !items_[j].discontinued;
  EXPECT_EQ(ranked->items_size(), passing);
  for (const auto& s : ranked->items()) EXPECT_FALSE(items_[s.index()].discontinued) << s.index();
}

}  // namespace
}  // namespace kls::server
