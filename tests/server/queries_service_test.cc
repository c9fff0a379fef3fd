// kls.v1.Queries and kls.v1.Kernels in-process: a KlsServer on port 0 with a
// temporary data dir; kernels are put into its store directly, and every
// answer is compared with the same LearnedKernel called directly.
#include "server/queries_service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/ranking/kernel_extension.h"
#include "kls/v1/kernels.grpc.pb.h"
#include "kls/v1/queries.grpc.pb.h"
#include "server/kernel_cache.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "test_server.h"

namespace kls::server {
namespace {

using kls::testing::Ref;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

LearnedKernel RandomKernel(int n, int r, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  LearnedKernel::Embedding v(n, r);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < r; ++j) v(i, j) = normal(rng);
  }
  return *LearnedKernel::FromEmbedding(std::move(v));
}

class QueriesServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<KlsServer>(kls::testing::TestServerConfig(dir_));
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = kls::testing::ClientFor(*server_);

    // A keyed data set for the kernels to point at (keys resolve item_key queries).
    store::StoredDataset d;
    d.data.features = Eigen::MatrixXd::Random(kN, 2);
    features_ = d.data.features;
    for (int i = 0; i < kN; ++i) d.data.item_keys.push_back("item-" + std::to_string(i));
    auto ds = server_->store()->PutDataset("keyed", d);
    ASSERT_TRUE(ds.ok()) << ds.status();
    dataset_id_ = ds->id;
    kernel_ = RandomKernel(kN, kRank, 5);
    ASSERT_TRUE(Put("k", kernel_).ok());
  }

  StatusOr<store::KernelRecord> Put(const std::string& name, const LearnedKernel& k) {
    store::KernelRecord record;
    record.name = name;
    record.dataset_id = dataset_id_;
    record.method = "test";
    return server_->store()->PutKernel(record, k);
  }

  static constexpr int kN = 150;
  static constexpr int kRank = 6;
  kls::testing::TempDir dir_;
  std::unique_ptr<KlsServer> server_;
  std::unique_ptr<Client> client_;
  std::string dataset_id_;
  Eigen::MatrixXd features_;
  LearnedKernel kernel_;
};

TEST_F(QueriesServiceTest, SimilarityEqualsTheKernelCalledDirectly) {
  std::vector<std::pair<int, int>> pairs = {{0, 0}, {0, 1}, {149, 3}, {77, 77}, {10, 140}};
  const auto values = client_->Similarity(Ref("k"), pairs);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), pairs.size());
  for (size_t t = 0; t < pairs.size(); ++t) {
    EXPECT_EQ((*values)[t], kernel_.value(pairs[t].first, pairs[t].second)) << t;
  }
  const auto by_version = client_->Similarity(Ref("k", 1), pairs);
  ASSERT_TRUE(by_version.ok());
  EXPECT_EQ(*by_version, *values);
  EXPECT_TRUE(client_->Similarity(Ref("k"), {}).ok());  // an empty batch is fine
}

TEST_F(QueriesServiceTest, TopKEqualsTheKernelCalledDirectly) {
  for (bool exclude_self : {false, true}) {
    kls::v1::TopKRequest request;
    *request.mutable_kernel() = Ref("k");
    request.set_item(42);
    request.set_k(7);
    request.set_exclude_self(exclude_self);
    const auto response = client_->TopK(request);
    ASSERT_TRUE(response.ok()) << response.status();
    const std::vector<ScoredItem> expected = kernel_.TopK(42, 7, exclude_self);
    ASSERT_EQ(response->items_size(), static_cast<int>(expected.size()));
    for (int t = 0; t < response->items_size(); ++t) {
      EXPECT_EQ(response->items(t).index(), expected[t].index);
      EXPECT_EQ(response->items(t).score(), expected[t].score);
      EXPECT_EQ(response->items(t).item_key(), "item-" + std::to_string(expected[t].index));
    }
  }
  // By key: the same answer as by the key's index.
  kls::v1::TopKRequest by_key;
  *by_key.mutable_kernel() = Ref("k");
  by_key.set_item_key("item-42");
  by_key.set_k(7);
  by_key.set_exclude_self(true);
  const auto keyed = client_->TopK(by_key);
  ASSERT_TRUE(keyed.ok()) << keyed.status();
  const std::vector<ScoredItem> expected = kernel_.TopK(42, 7, true);
  ASSERT_EQ(keyed->items_size(), 7);
  for (int t = 0; t < 7; ++t) EXPECT_EQ(keyed->items(t).index(), expected[t].index);

  // By vector.
  kls::v1::TopKRequest by_vector;
  *by_vector.mutable_kernel() = Ref("k");
  Eigen::VectorXd q(kRank);
  for (int j = 0; j < kRank; ++j) {
    q(j) = 0.5 - j;
    by_vector.mutable_vector()->add_values(q(j));
  }
  by_vector.set_k(kN + 10);  // more than n: all n items
  const auto vec = client_->TopK(by_vector);
  ASSERT_TRUE(vec.ok()) << vec.status();
  const std::vector<ScoredItem> expected_vec = kernel_.TopKByVector(q, kN + 10);
  ASSERT_EQ(vec->items_size(), kN);
  for (int t = 0; t < kN; ++t) {
    EXPECT_EQ(vec->items(t).index(), expected_vec[t].index);
    EXPECT_EQ(vec->items(t).score(), expected_vec[t].score);
  }
}

TEST_F(QueriesServiceTest, EmbedReturnsRowsOfV) {
  kls::v1::EmbedRequest request;
  *request.mutable_kernel() = Ref("k");
  for (int row : {3, 0, 149, 3}) request.add_rows(row);
  const auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->rank(), kRank);
  ASSERT_EQ(response->values_size(), 4 * kRank);
  for (int t = 0; t < 4; ++t) {
    for (int c = 0; c < kRank; ++c) {
      EXPECT_EQ(response->values(t * kRank + c), kernel_.embedding()(request.rows(t), c));
    }
  }
}

// Items the kernel was not trained on (thesis §6.3.3): Embed by features and TopK by features equal
// HarmonicExtension + TopKByVector called directly; a training item's own features give its own row.
TEST_F(QueriesServiceTest, UnseenItemsByFeaturesMatchTheHarmonicExtension) {
  Eigen::MatrixXd x(3, 2);
  x << 0.1, -0.2, 0.9, 0.95, features_(17, 0), features_(17, 1);
  kls::v1::EmbedRequest embed;
  *embed.mutable_kernel() = Ref("k");
  embed.set_dim(2);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) embed.add_features(x(i, j));
  embed.set_neighbors(7);
  const auto rows = client_->Embed(embed);
  ASSERT_TRUE(rows.ok()) << rows.status();
  HarmonicExtensionOptions o;
  o.neighbors = 7;
  const auto want = HarmonicExtension(kernel_, features_, x, o);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(rows->values_size(), 3 * kRank);
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < kRank; ++c) EXPECT_EQ(rows->values(i * kRank + c), (*want)(i, c)) << i << "," << c;
  for (int c = 0; c < kRank; ++c) EXPECT_EQ(rows->values(2 * kRank + c), kernel_.embedding()(17, c));

  kls::v1::TopKRequest topk;
  *topk.mutable_kernel() = Ref("k");
  topk.set_k(5);
  topk.mutable_features()->add_values(x(0, 0));
  topk.mutable_features()->add_values(x(0, 1));
  topk.mutable_features()->set_neighbors(7);
  const auto top = client_->TopK(topk);
  ASSERT_TRUE(top.ok()) << top.status();
  const auto expected = kernel_.TopKByVector(want->row(0).transpose(), 5);
  ASSERT_EQ(top->items_size(), 5);
  for (int t = 0; t < 5; ++t) {
    EXPECT_EQ(top->items(t).index(), expected[t].index);
    EXPECT_NEAR(top->items(t).score(), expected[t].score, 1e-12 * (1 + std::abs(expected[t].score)));
    EXPECT_EQ(top->items(t).item_key(), "item-" + std::to_string(expected[t].index));
  }

  // Bad input names the field: wrong width, a NaN, rows and features together, neighbors 0, too many rows.
  topk.mutable_features()->add_values(1.0);
  auto bad = client_->TopK(topk);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("3 features per row but data set"));
  kls::v1::EmbedRequest nan = embed;
  nan.set_features(3, std::nan(""));
  EXPECT_THAT(client_->Embed(nan).status().message(), HasSubstr("features[1][1] = nan is not finite"));
  kls::v1::EmbedRequest both = embed;
  both.add_rows(0);
  EXPECT_EQ(client_->Embed(both).status().code(), StatusCode::kInvalidArgument);
  kls::v1::EmbedRequest zero = embed;
  zero.set_neighbors(0);
  EXPECT_THAT(client_->Embed(zero).status().message(), HasSubstr("neighbors = 0 must be >= 1"));
  kls::v1::EmbedRequest many;
  *many.mutable_kernel() = Ref("k");
  many.set_dim(2);
  for (int i = 0; i < 2 * 1001; ++i) many.add_features(0.5);
  EXPECT_THAT(client_->Embed(many).status().message(), HasSubstr("1001 rows; at most 1000"));
  // A kernel whose items are not the data set's rows cannot be extended.
  ASSERT_TRUE(Put("other", RandomKernel(40, 3, 9)).ok());
  *embed.mutable_kernel() = Ref("other");
  EXPECT_EQ(client_->Embed(embed).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(QueriesServiceTest, BadRequestsNameTheFieldAndValue) {
  auto code_and_message = [](const Status& s) { return s.ToString(); };
  const auto out_of_range = client_->Similarity(Ref("k"), {{0, 1}, {1, 2}, {2, 3}, {999, 4}});
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("i[3] = 999 is out of range for a kernel over 150 points"));
  const auto negative_j = client_->Similarity(Ref("k"), {{0, -2}});
  EXPECT_THAT(code_and_message(negative_j.status()), HasSubstr("INVALID_ARGUMENT: j[0] = -2 is out of range"));

  kls::v1::SimilarityRequest uneven;
  *uneven.mutable_kernel() = Ref("k");
  uneven.add_i(0);
  auto stub = kls::v1::Queries::NewStub(grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    kls::v1::SimilarityResponse response;
    const grpc::Status s = stub->Similarity(&context, uneven, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("i has 1 entries but j has 0"));
  }
  std::vector<std::pair<int, int>> too_many(QueriesService::kMaxBatch + 1, {0, 0});
  const auto big = client_->Similarity(Ref("k"), too_many);
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(), HasSubstr("100001"));

  kls::v1::TopKRequest topk;
  *topk.mutable_kernel() = Ref("k");
  topk.set_item(1);
  for (int k : {0, -3, 10001}) {
    topk.set_k(k);
    const auto r = client_->TopK(topk);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << k;
    EXPECT_THAT(r.status().message(), HasSubstr("k = " + std::to_string(k) + " must be in [1, 10000]"));
  }
  topk.set_k(5);
  topk.set_item(150);
  EXPECT_THAT(client_->TopK(topk).status().message(), HasSubstr("item = 150 is out of range"));
  topk.clear_item();
  EXPECT_THAT(client_->TopK(topk).status().message(), HasSubstr("set one of item, item_key, vector or features"));
  topk.mutable_vector()->add_values(1.0);
  EXPECT_THAT(client_->TopK(topk).status().message(), HasSubstr("vector has 1 values but the kernel has rank 6"));

  kls::v1::EmbedRequest embed;
  *embed.mutable_kernel() = Ref("k");
  embed.add_rows(0);
  embed.add_rows(150);
  EXPECT_THAT(client_->Embed(embed).status().message(), HasSubstr("rows[1] = 150 is out of range"));

  const auto bad_ref = client_->Similarity(Ref("k", -1), {{0, 0}});
  EXPECT_EQ(bad_ref.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Similarity(Ref(""), {{0, 0}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Similarity(Ref("k", 1, "prod"), {{0, 0}}).status().code(), StatusCode::kInvalidArgument);

  // The server is still up and answering.
  EXPECT_TRUE(client_->Similarity(Ref("k"), {{0, 1}}).ok());
}

TEST_F(QueriesServiceTest, UnknownKernelVersionAliasOrKeyIsNotFound) {
  EXPECT_EQ(client_->Similarity(Ref("nope"), {{0, 0}}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Similarity(Ref("k", 9), {{0, 0}}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Similarity(Ref("k", 0, "prod"), {{0, 0}}).status().code(), StatusCode::kNotFound);
  kls::v1::EmbedRequest embed;
  *embed.mutable_kernel() = Ref("nope");
  EXPECT_EQ(client_->Embed(embed).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->GetKernel(Ref("nope")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->ExportKernel(Ref("nope")).status().code(), StatusCode::kNotFound);
  kls::v1::TopKRequest topk;
  *topk.mutable_kernel() = Ref("k");
  topk.set_item_key("no-such-key");
  topk.set_k(3);
  const auto r = client_->TopK(topk);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("item_key = 'no-such-key'"));
}

TEST_F(QueriesServiceTest, VersionsAliasesAndDeleteAreNeverServedStale) {
  const LearnedKernel v2 = RandomKernel(kN, kRank, 99);
  ASSERT_EQ(Put("k", v2)->version, 2);
  // Latest moves to v2; an alias pins v1.
  EXPECT_EQ((*client_->Similarity(Ref("k"), {{0, 1}}))[0], v2.value(0, 1));
  const auto aliased = client_->SetAlias("k", "prod", 1);
  ASSERT_TRUE(aliased.ok()) << aliased.status();
  EXPECT_EQ(aliased->version(), 1);
  EXPECT_EQ((*client_->Similarity(Ref("k", 0, "prod"), {{0, 1}}))[0], kernel_.value(0, 1));
  ASSERT_TRUE(client_->SetAlias("k", "prod", 2).ok());
  EXPECT_EQ((*client_->Similarity(Ref("k", 0, "prod"), {{0, 1}}))[0], v2.value(0, 1));
  EXPECT_EQ(client_->SetAlias("k", "prod", 7).status().code(), StatusCode::kNotFound);

  const auto info = client_->GetKernel(Ref("k", 1));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->num_points(), kN);
  EXPECT_EQ(info->rank(), kRank);
  EXPECT_EQ(info->dataset_id(), dataset_id_);
  EXPECT_EQ(client_->ListKernels()->size(), 2u);
  EXPECT_EQ(client_->ListKernels("other")->size(), 0u);

  // Delete every version, then learn "k" again: the new kernel gets a number
  // never given before (3), the deleted ones stay gone, and "latest" is fresh.
  ASSERT_TRUE(client_->DeleteKernel("k", 0).ok());
  EXPECT_EQ(client_->Similarity(Ref("k", 1), {{0, 1}}).status().code(), StatusCode::kNotFound);
  const LearnedKernel fresh = RandomKernel(kN, 3, 1234);
  ASSERT_EQ(Put("k", fresh)->version, 3);
  EXPECT_EQ(client_->Similarity(Ref("k", 1), {{0, 1}}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*client_->Similarity(Ref("k"), {{0, 1}}))[0], fresh.value(0, 1));
  EXPECT_EQ((*client_->Similarity(Ref("k", 3), {{0, 1}}))[0], fresh.value(0, 1));
}

TEST_F(QueriesServiceTest, ExportStreamsTheEmbeddingInChunksOfAtMostOneMiB) {
  const LearnedKernel big = RandomKernel(3000, 100, 8);  // 2.4 MB of values → 3 chunks
  ASSERT_TRUE(Put("big", big).ok());
  const auto exported = client_->ExportKernel(Ref("big"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->info.name(), "big");
  EXPECT_EQ(exported->info.version(), 1);
  EXPECT_EQ(exported->embedding, big.embedding());

  auto stub = kls::v1::Kernels::NewStub(grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  kls::v1::ExportKernelRequest request;
  *request.mutable_kernel() = Ref("big");
  auto reader = stub->Export(&context, request);
  kls::v1::ExportKernelChunk chunk;
  int chunks = 0;
  while (reader->Read(&chunk)) {
    EXPECT_LE(chunk.values_size() * 8, 1 << 20);
    EXPECT_EQ(chunk.has_info(), chunks == 0);
    ++chunks;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(chunks, 3);
}

TEST_F(QueriesServiceTest, CorruptedArtifactIsDataLossAndNeverServed) {
  ASSERT_TRUE(Put("bad", RandomKernel(50, 4, 3)).ok());
  // Flip bytes in the middle of every kernel artifact not yet loaded ("k" is
  // not queried in this test, so neither is in the cache).
  // On PostgreSQL: in the stored chunks, and in the replica's local cache
  // (so neither copy verifies).
  const fs::path files = kls::testing::TestOnPostgres() ? fs::path(dir_.Sub("cache"))
                                                        : fs::path(server_->data_dir()) / "artifacts";
  if (kls::testing::TestOnPostgres()) {
    ASSERT_TRUE(kls::testing::PsqlOn(dir_,
                                     "UPDATE artifact_chunks SET bytes = overlay(bytes placing '\\xdeadbeef'::bytea "
                                     "from (length(bytes) / 2)::int) WHERE artifact_id IN (SELECT artifact FROM kernels);"));
  }
  for (const auto& entry : fs::recursive_directory_iterator(files)) {
    // Kernel artifacts are "k-*" in a data directory; every cached file on PostgreSQL.
    if (!entry.is_regular_file()) continue;
    if (!kls::testing::TestOnPostgres() && entry.path().filename().string().rfind("k-", 0) != 0) continue;
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(fs::file_size(entry.path()) / 2));
    file.write("\xde\xad\xbe\xef", 4);
  }
  const auto sim = client_->Similarity(Ref("bad"), {{0, 1}});
  EXPECT_EQ(sim.status().code(), StatusCode::kDataLoss) << sim.status();
  kls::v1::TopKRequest topk;
  *topk.mutable_kernel() = Ref("bad");
  topk.set_item(0);
  topk.set_k(3);
  EXPECT_EQ(client_->TopK(topk).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(client_->ExportKernel(Ref("bad")).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(server_->kernel_cache()->entry_count(), 0);
  EXPECT_EQ(*client_->CheckHealth(""), ServingStatus::kServing);
}

TEST_F(QueriesServiceTest, ConcurrentQueriesAgreeWithTheKernel) {
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int q = 0; q < 50; ++q) {
        const int i = (t * 37 + q * 11) % kN, j = (q * 7) % kN;
        const auto v = client_->Similarity(Ref("k", q % 2), {{i, j}});
        if (!v.ok()) {
          ++failures;
        } else if ((*v)[0] != kernel_.value(i, j)) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

// KernelCache on its own: LRU within the budget, hits answered without reloading.
TEST_F(QueriesServiceTest, KernelCacheEvictsLeastRecentlyUsedBeyondItsBudget) {
  ASSERT_TRUE(Put("a", RandomKernel(100, 10, 1)).ok());  // 8000 bytes of values each
  ASSERT_TRUE(Put("b", RandomKernel(100, 10, 2)).ok());
  // Each entry: 8,000 bytes of values plus its top-k index (codes, bounds, 1/‖v_i‖): one fits, two do not.
  KernelCache cache(server_->store(), /*budget_bytes=*/16000);
  auto a = cache.Get({"a", 1, ""});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(cache.entry_count(), 1);
  auto b = cache.Get({"b", 0, ""});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(cache.entry_count(), 1);  // a was evicted
  EXPECT_LE(cache.charged_bytes(), cache.budget_bytes());
  EXPECT_EQ(b->record.version, 1);
  // The evicted handle stays usable.
  EXPECT_EQ(a->kernel->num_points(), 100);
  auto b_again = cache.Get({"b", 1, ""});
  ASSERT_TRUE(b_again.ok());
  EXPECT_EQ(b_again->kernel.get(), b->kernel.get());  // a hit: the same object
  cache.Invalidate("b", 0);
  EXPECT_EQ(cache.entry_count(), 0);
  EXPECT_EQ(cache.charged_bytes(), 0);
  EXPECT_EQ(cache.Get({"zzz", 0, ""}).status().code(), StatusCode::kNotFound);
}

// GetCached (Similarity's callback fast path) answers only what Get would
// answer from memory: never a cold kernel, an unresolved "latest", a name with
// a pending change notification or a malformed reference.
TEST_F(QueriesServiceTest, KernelCacheGetCachedNeverNeedsTheStore) {
  ASSERT_TRUE(Put("a", RandomKernel(50, 4, 1)).ok());
  KernelCache cache(server_->store(), /*budget_bytes=*/1 << 20);
  EXPECT_FALSE(cache.GetCached({"a", 1, ""}));  // cold
  EXPECT_FALSE(cache.GetCached({"", 1, ""}));
  EXPECT_FALSE(cache.GetCached({"a", -1, ""}));
  auto loaded = cache.Get({"a", 1, ""});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto hit = cache.GetCached({"a", 1, ""});
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->kernel.get(), loaded->kernel.get());
  EXPECT_FALSE(cache.GetCached({"a", 0, ""}));  // "latest" not resolved yet
  ASSERT_TRUE(cache.Get({"a", 0, ""}).ok());
  ASSERT_TRUE(cache.GetCached({"a", 0, ""}));
  EXPECT_EQ(cache.GetCached({"a", 0, ""})->record.version, 1);
  // A new version: the notification makes the name go through Get again.
  ASSERT_TRUE(Put("a", RandomKernel(50, 4, 2)).ok());
  cache.OnKernelChanged("a");
  EXPECT_FALSE(cache.GetCached({"a", 0, ""}));
  EXPECT_FALSE(cache.GetCached({"a", 1, ""}));
  auto latest = cache.Get({"a", 0, ""});
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->record.version, 2);
  ASSERT_TRUE(cache.GetCached({"a", 0, ""}));
  EXPECT_EQ(cache.GetCached({"a", 0, ""})->record.version, 2);
}

}  // namespace
}  // namespace kls::server
