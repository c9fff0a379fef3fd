// kls.v1.Kernels.Import in-process: a KlsServer on port 0 with a temporary
// data dir. Imported kernels are compared bit for bit with what was sent
// (Export, store) and their query answers with the same LearnedKernel called
// directly; malformed streams are sent through a raw stub and must fail with
// a message naming the field and value, storing nothing.
#include "server/kernels_service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/client.h"
#include "kls/v1/kernels.grpc.pb.h"
#include "server/kls_server.h"
#include "temp_dir.h"
#include "test_server.h"

namespace kls::server {
namespace {

using kls::testing::Ref;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

LearnedKernel::Embedding RandomEmbedding(int n, int r, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  LearnedKernel::Embedding v(n, r);
  for (Eigen::Index t = 0; t < v.size(); ++t) v.data()[t] = normal(rng);
  return v;
}

class KernelsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<KlsServer>(kls::testing::TestServerConfig(dir_));
    const Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = kls::testing::ClientFor(*server_);
    stub_ = kls::v1::Kernels::NewStub(grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  // Sends `messages` as one Import stream through the raw stub.
  grpc::Status RawImport(const std::vector<kls::v1::ImportKernelChunk>& messages, kls::v1::KernelInfo* info) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto writer = stub_->Import(&context, info);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static kls::v1::ImportKernelChunk Header(const std::string& name, int64_t n, int dim, bool keys = false) {
    kls::v1::ImportKernelChunk m;
    m.mutable_header()->set_name(name);
    m.mutable_header()->set_num_points(n);
    m.mutable_header()->set_dim(dim);
    m.mutable_header()->set_has_item_keys(keys);
    return m;
  }
  static kls::v1::ImportKernelChunk Rows(int64_t first, const std::vector<double>& values,
                                         const std::vector<std::string>& keys = {}) {
    kls::v1::ImportKernelChunk m;
    m.mutable_rows()->set_first_row(first);
    for (double v : values) m.mutable_rows()->add_values(v);
    for (const auto& k : keys) m.mutable_rows()->add_item_keys(k);
    return m;
  }

  // Nothing may be stored by a failed import: no kernel, no data set, no
  // artifact file, and the store checks out.
  void ExpectNothingStored() {
    auto kernels = server_->store()->ListKernels();
    ASSERT_TRUE(kernels.ok());
    EXPECT_TRUE(kernels->empty());
    auto datasets = server_->store()->ListDatasets();
    ASSERT_TRUE(datasets.ok());
    EXPECT_TRUE(datasets->empty());
    if (kls::testing::TestOnPostgres()) {
      EXPECT_TRUE(kls::testing::PsqlOn(
          dir_, "DO $$ BEGIN IF EXISTS (SELECT 1 FROM artifacts) THEN RAISE EXCEPTION 'artifact rows left'; END IF; END $$;"))
          << "a failed import left artifact rows";
    } else {
      EXPECT_TRUE(fs::is_empty(fs::path(dir_.Sub("data")) / "artifacts"));
    }
  }

  kls::testing::TempDir dir_;
  std::unique_ptr<KlsServer> server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<kls::v1::Kernels::Stub> stub_;
};

TEST_F(KernelsServiceTest, ImportRoundTripsBitForBitAndAnswersLikeTheCoreKernel) {
  const LearnedKernel::Embedding v = RandomEmbedding(300, 7, 11);
  // 1000-byte chunks: 17 rows each, so the stream has 18 row messages.
  auto info = client_->ImportKernel("emb", v, {}, 1000);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name(), "emb");
  EXPECT_EQ(info->version(), 1);
  EXPECT_EQ(info->method(), "import");
  EXPECT_EQ(info->num_points(), 300);
  EXPECT_EQ(info->rank(), 7);
  EXPECT_TRUE(info->dataset_id().empty());
  EXPECT_THAT(info->summary_json(), HasSubstr("\"source\":\"import\""));

  auto exported = client_->ExportKernel(Ref("emb", 1));
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->embedding.rows(), 300);
  EXPECT_EQ(std::memcmp(exported->embedding.data(), v.data(), sizeof(double) * v.size()), 0);

  // Stored through the store's kernel path: a checksummed artifact the
  // integrity check verifies, loadable as the same matrix.
  auto loaded = server_->store()->LoadKernel("emb", 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->embedding() == v);
  auto problems = server_->store()->CheckIntegrity();
  ASSERT_TRUE(problems.ok());
  EXPECT_TRUE(problems->empty()) << (*problems)[0];

  // Queries answer exactly as the core kernel does.
  const LearnedKernel direct = *LearnedKernel::FromEmbedding(v);
  auto sims = client_->Similarity(Ref("emb", 1), {{0, 1}, {299, 5}, {17, 17}});
  ASSERT_TRUE(sims.ok()) << sims.status();
  EXPECT_EQ((*sims)[0], direct.value(0, 1));
  EXPECT_EQ((*sims)[1], direct.value(299, 5));
  EXPECT_EQ((*sims)[2], direct.value(17, 17));
  kls::v1::TopKRequest topk;
  *topk.mutable_kernel() = Ref("emb");
  topk.set_item(42);
  topk.set_k(9);
  topk.set_exclude_self(true);
  auto top = client_->TopK(topk);
  ASSERT_TRUE(top.ok()) << top.status();
  const auto expected = direct.TopK(42, 9, true);
  ASSERT_EQ(top->items_size(), 9);
  for (int t = 0; t < 9; ++t) {
    EXPECT_EQ(top->items(t).index(), expected[t].index);
    EXPECT_EQ(top->items(t).score(), expected[t].score);
  }

  // A second import of the same name is the next version.
  auto again = client_->ImportKernel("emb", RandomEmbedding(10, 3, 12));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->version(), 2);
  EXPECT_EQ(again->rank(), 3);
}

TEST_F(KernelsServiceTest, ImportWithItemKeysAnswersTopKByKey) {
  const LearnedKernel::Embedding v = RandomEmbedding(120, 4, 21);
  std::vector<std::string> keys;
  for (int i = 0; i < 120; ++i) keys.push_back("doc-" + std::to_string(i));
  auto info = client_->ImportKernel("keyed", v, keys, 512);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_FALSE(info->dataset_id().empty());
  auto dataset = client_->GetDataset(info->dataset_id());
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->num_points(), 120);
  EXPECT_EQ(dataset->num_constraints(), 0);

  const LearnedKernel direct = *LearnedKernel::FromEmbedding(v);
  kls::v1::TopKRequest topk;
  *topk.mutable_kernel() = Ref("keyed", 1);
  topk.set_item_key("doc-77");
  topk.set_k(5);
  topk.set_exclude_self(true);
  auto top = client_->TopK(topk);
  ASSERT_TRUE(top.ok()) << top.status();
  const auto expected = direct.TopK(77, 5, true);
  ASSERT_EQ(top->items_size(), 5);
  for (int t = 0; t < 5; ++t) {
    EXPECT_EQ(top->items(t).index(), expected[t].index);
    EXPECT_EQ(top->items(t).item_key(), keys[expected[t].index]);
  }
  auto problems = server_->store()->CheckIntegrity();
  ASSERT_TRUE(problems.ok());
  EXPECT_TRUE(problems->empty());
}

TEST_F(KernelsServiceTest, ImportRejectsBadHeadersNamingFieldAndValue) {
  struct Case {
    kls::v1::ImportKernelChunk header;
    grpc::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Header("", 3, 2), grpc::StatusCode::INVALID_ARGUMENT, "header.name must not be empty"},
      {Header(std::string(257, 'x'), 3, 2), grpc::StatusCode::INVALID_ARGUMENT, "header.name is 257 bytes"},
      {Header("k", 0, 2), grpc::StatusCode::INVALID_ARGUMENT, "header.num_points = 0 must be >= 1"},
      {Header("k", 3, -4), grpc::StatusCode::INVALID_ARGUMENT, "header.dim = -4 must be >= 1"},
      {Header("k", 20'000'000, 1), grpc::StatusCode::RESOURCE_EXHAUSTED,
       "header.num_points = 20000000 exceeds the limit of 10000000"},
      {Header("k", 3, 100'000), grpc::StatusCode::RESOURCE_EXHAUSTED, "header.dim = 100000 exceeds the limit of 65536"},
      {Header("k", 10'000'000, 1000), grpc::StatusCode::RESOURCE_EXHAUSTED,
       "header.num_points × header.dim = 10000000 × 1000 = 10000000000 values exceeds the limit of 268435456"},
  };
  for (const Case& c : cases) {
    kls::v1::KernelInfo info;
    const grpc::Status s = RawImport({c.header, Rows(0, {1, 2})}, &info);
    EXPECT_EQ(s.error_code(), c.code) << c.message;
    EXPECT_THAT(s.error_message(), HasSubstr(c.message));
  }
  ExpectNothingStored();
}

TEST_F(KernelsServiceTest, ImportRejectsBadStreamsAndStoresNothing) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::vector<kls::v1::ImportKernelChunk> messages;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "the import stream is empty"},
      {{Rows(0, {1, 2})}, "message 0 of the import stream must be the header"},
      {{Header("k", 3, 2), Rows(0, {1, 2, 3, 4}), Rows(2, {5, nan})}, "rows[2][1] = nan is not finite"},
      {{Header("k", 3, 2), Rows(0, {1, -inf})}, "rows[0][1] = -inf is not finite"},
      {{Header("k", 3, 2), Rows(0, {1, 2, 3})}, "has 3 values, not a multiple of header.dim = 2"},
      {{Header("k", 3, 2), Rows(1, {1, 2})}, "rows.first_row = 1 but 0 rows were received so far"},
      {{Header("k", 3, 2), Rows(0, {1, 2, 3, 4, 5, 6, 7, 8})}, "carries 4 rows, beyond header.num_points = 3"},
      {{Header("k", 3, 2), Rows(0, {1, 2, 3, 4})}, "the import stream ended after 2 of header.num_points = 3 rows"},
      {{Header("k", 3, 2), Header("k", 3, 2)}, "message 1 repeats the header"},
      {{Header("k", 2, 1, true), Rows(0, {1, 2}, {"a"})}, "has 1 item_keys for 2 rows (one per row is required)"},
      {{Header("k", 2, 1), Rows(0, {1, 2}, {"a", "b"})}, "but header.has_item_keys is false"},
      {{Header("k", 2, 1, true), Rows(0, {1, 2}, {"a", "a"})}, "item_keys[1] = 'a' repeats an earlier key"},
      {{Header("k", 2, 1, true), Rows(0, {1, 2}, {"a", ""})}, "item_keys[1] is empty"},
  };
  for (const Case& c : cases) {
    kls::v1::KernelInfo info;
    const grpc::Status s = RawImport(c.messages, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_THAT(s.error_message(), HasSubstr(c.message));
  }
  ExpectNothingStored();

  // The client checks the key count before sending anything.
  auto local = client_->ImportKernel("k", RandomEmbedding(3, 2, 1), {"only-one"});
  EXPECT_EQ(local.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(local.status().message(), HasSubstr("item_keys has 1 keys for 3 rows"));
  ExpectNothingStored();
}

}  // namespace
}  // namespace kls::server
