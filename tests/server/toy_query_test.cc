// The toy query of tests/families/queries (built with KLS_TEST_FAMILIES): a
// proto method (kls.testing.ToyQueries/Diagonal), a servable method
// (tests/families/queries/diagonal.h) and a handler registered with
// server/service_registry.h are all it takes for a query to be served by a
// real server — here over the kernel of the toy family fixed_rank
// (family_registry_test.cc), checked against Similarity(i, i) and the
// exported embedding. Scale reads the toy family's own attachment kind
// ("fixed_rank_scale", tests/families/fixed_rank_scale.h), which the family
// file registers with core/serving/attachment_kinds.h: the job's scale option
// reaches the query without a line of core/ or server/ naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/serving/attachment_kinds.h"
#include "kls/testing/fixed_rank.pb.h"
#include "kls/testing/toy_queries.grpc.pb.h"
#include "server/jobs/solver_family.h"
#include "server/service_registry.h"
#include "test_server.h"
#include "tests/families/fixed_rank_scale.h"
#include "tests/families/queries/diagonal.h"

namespace kls::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// The first n rows of iris, with item keys "iris-<i>".
Dataset KeyedIris(int n) {
  Dataset d;
  d.features = TestCsv("iris.csv").features.topRows(n);
  for (int i = 0; i < n; ++i) d.item_keys.push_back("iris-" + std::to_string(i));
  return d;
}

kls::v1::SubmitJobRequest FixedRank(const std::string& dataset_id, int rank, double scale) {
  kls::v1::SubmitJobRequest r;
  r.set_dataset_id(dataset_id);
  kls::testing::FixedRankOptions o;
  o.set_rank(rank);
  o.set_scale(scale);
  r.mutable_family_options()->PackFrom(o);
  return r;
}

kls::testing::DiagonalRequest DiagonalOf(const kls::v1::KernelRef& kernel, const std::vector<std::string>& keys) {
  kls::testing::DiagonalRequest r;
  *r.mutable_kernel() = kernel;
  for (const std::string& k : keys) r.add_keys(k);
  return r;
}

TEST(ToyQueryRegistryTest, TheToyServiceIsRegistered) {
  EXPECT_THAT(server::ServiceRegistry::Global().Names(), Contains(std::string("kls.testing.ToyQueries")));
}

TEST(ToyQueryCoreTest, DiagonalIsTheRowNormsAndStopsOnTheControl) {
  LearnedKernel::Embedding v(3, 2);
  v << 1, 2, 0, -3, 0.5, 0.5;
  auto kernel = LearnedKernel::FromEmbedding(v);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const KernelServable servable(std::make_shared<const LearnedKernel>(std::move(kernel).value()), nullptr, nullptr);
  auto d = toy::Diagonal(servable, {2, 0, 1, 0}, SolveControl());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (std::vector<double>{0.5, 5.0, 9.0, 5.0}));
  EXPECT_THAT(toy::Diagonal(servable, {0, 3}, SolveControl()).status().message(),
              HasSubstr("items[1] = 3 is out of range for a kernel over 3 points"));

  SolveControl cancelled;
  cancelled.cancel.Cancel();
  EXPECT_EQ(toy::Diagonal(servable, {0}, cancelled).status().code(), StatusCode::kCancelled);
  SolveControl expired;
  expired.deadline = SolveControl::Clock::now() - std::chrono::seconds(1);
  EXPECT_EQ(toy::Diagonal(servable, {}, expired).status().code(), StatusCode::kDeadlineExceeded);
}

TEST(ToyQueryCoreTest, TheFamilyFileRegistersItsAttachmentKindForServing) {
  ASSERT_NE(AttachmentKinds::Global().Find(toy::kFixedRankScaleAttachment), nullptr);
  const server::SolverFamily* family = server::FamilyRegistry::Global().Find("fixed_rank");
  ASSERT_NE(family, nullptr);
  EXPECT_THAT(family->traits().attachments, Contains(std::string(toy::kFixedRankScaleAttachment)));

  auto kernel = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Ones(2, 1));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string stored = toy::SerializeFixedRankScale(0.25);
  EXPECT_EQ(stored.size(), 8u);
  auto parsed = ParseAttachments(*kernel, {{toy::kFixedRankScaleAttachment, &stored}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto* scale = parsed->Extra<toy::FixedRankScale>(toy::kFixedRankScaleAttachment);
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->scale, 0.25);

  const std::string truncated = stored.substr(0, 3), negative = toy::SerializeFixedRankScale(-1);
  auto s = ParseAttachments(*kernel, {{toy::kFixedRankScaleAttachment, &truncated}}).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "fixed_rank_scale: 3 bytes; expected 8");
  s = ParseAttachments(*kernel, {{toy::kFixedRankScaleAttachment, &negative}}).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "fixed_rank_scale: scale = -1 must be finite and > 0");
}

class ToyQueryTest : public ServerJobTest {
 protected:
  void SetUp() override {
    ServerJobTest::SetUp();
    if (HasFatalFailure()) return;
    toy_ = kls::testing::ToyQueries::NewStub(grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Call(const kls::testing::DiagonalRequest& request, kls::testing::DiagonalResponse* response,
                    std::chrono::system_clock::time_point deadline = std::chrono::system_clock::now() +
                                                                     std::chrono::seconds(30)) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    return toy_->Diagonal(&context, request, response);
  }

  grpc::Status Scale(const kls::v1::KernelRef& kernel, kls::testing::ScaleResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    kls::testing::ScaleRequest request;
    *request.mutable_kernel() = kernel;
    return toy_->Scale(&context, request, response);
  }

  std::unique_ptr<kls::testing::ToyQueries::Stub> toy_;
};

TEST_F(ToyQueryTest, DiagonalOfAToyFamilyKernelEqualsSimilarityOfEachItemWithItself) {
  const std::string id = Upload(KeyedIris(30));
  Run(FixedRank(id, 3, 0.5), "toy");
  const std::vector<int> items = {0, 7, 29, 7, 12};
  std::vector<std::string> keys;
  std::vector<std::pair<int, int>> pairs;
  for (const int i : items) {
    keys.push_back("iris-" + std::to_string(i));
    pairs.emplace_back(i, i);
  }
  auto similarity = client_->Similarity(Ref("toy"), pairs);
  ASSERT_TRUE(similarity.ok()) << similarity.status();
  auto exported = client_->ExportKernel(Ref("toy"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->info.rank(), 3);

  for (const kls::v1::KernelRef& ref : {Ref("toy"), Ref("toy", 1)}) {
    kls::testing::DiagonalResponse response;
    const grpc::Status s = Call(DiagonalOf(ref, keys), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(response.values_size(), static_cast<int>(items.size()));
    for (size_t t = 0; t < items.size(); ++t) {
      const double k_ii = exported->embedding.row(items[t]).squaredNorm();
      EXPECT_NEAR(response.values(t), (*similarity)[t], 1e-12 * (1.0 + k_ii)) << keys[t];
      EXPECT_NEAR(response.values(t), k_ii, 1e-12 * (1.0 + k_ii)) << keys[t];
    }
  }
  kls::testing::DiagonalResponse none;
  EXPECT_TRUE(Call(DiagonalOf(Ref("toy"), {}), &none).ok());
  EXPECT_EQ(none.values_size(), 0);
}

TEST_F(ToyQueryTest, TheJobsScaleReachesTheQueryThroughTheFamilysOwnAttachmentKind) {
  const std::string id = Upload(KeyedIris(30));
  Run(FixedRank(id, 3, 0.5), "toy");   // v1
  Run(FixedRank(id, 3, 2.0), "toy");   // v2
  Run(FixedRank(id, 3, 1.0), "unit");  // the same kernel unscaled
  for (const auto& [ref, expected] : std::vector<std::pair<kls::v1::KernelRef, double>>{
           {Ref("toy", 1), 0.5}, {Ref("toy"), 2.0}, {Ref("toy", 2), 2.0}, {Ref("unit"), 1.0}}) {
    kls::testing::ScaleResponse response;
    const grpc::Status s = Scale(ref, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.scale(), expected) << ref.name() << " v" << ref.version();
  }
  // The stored scale is the one the kernel was learned with: K = scale · K_unit.
  kls::testing::DiagonalResponse scaled, unit;
  ASSERT_TRUE(Call(DiagonalOf(Ref("toy", 1), {"iris-4", "iris-21"}), &scaled).ok());
  ASSERT_TRUE(Call(DiagonalOf(Ref("unit"), {"iris-4", "iris-21"}), &unit).ok());
  ASSERT_EQ(scaled.values_size(), 2);
  ASSERT_EQ(unit.values_size(), 2);
  for (int t = 0; t < 2; ++t) EXPECT_NEAR(scaled.values(t), 0.5 * unit.values(t), 1e-9 * (1.0 + unit.values(t)));

  // A kernel without the attachment (imported): FAILED_PRECONDITION naming the family that stores it.
  ASSERT_TRUE(client_->ImportKernel("imported", LearnedKernel::Embedding::Ones(4, 2)).ok());
  kls::testing::ScaleResponse response;
  grpc::Status s = Scale(Ref("imported"), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("Scale: kernel imported v1 (method import) has no fixed_rank scale; it "
                                           "needs a kernel learned by a job of fixed_rank"));
  s = Scale(Ref("nope"), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ToyQueryTest, BadRequestsAreNamedAndTheCallsDeadlineReachesTheServable) {
  const std::string id = Upload(KeyedIris(20));
  Run(FixedRank(id, 2, 1.0), "toy");
  kls::testing::DiagonalResponse response;

  // An unknown key, through the shared key lookup: NOT_FOUND naming the field, position and key.
  grpc::Status s = Call(DiagonalOf(Ref("toy"), {"iris-1", "no-such-iris"}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("keys[1] = 'no-such-iris' is not a key of data set " + id));

  // The request's shape is checked before the kernel is loaded.
  kls::testing::DiagonalRequest too_many = DiagonalOf(Ref("nope"), {});
  for (int t = 0; t <= 100'000; ++t) too_many.add_keys("k");
  s = Call(too_many, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("keys has 100001 entries; at most 100000"));

  // An unknown kernel or version.
  s = Call(DiagonalOf(Ref("nope"), {"iris-1"}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  s = Call(DiagonalOf(Ref("toy", 9), {"iris-1"}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);

  // A call whose deadline has passed.
  s = Call(DiagonalOf(Ref("toy"), {"iris-1"}), &response, std::chrono::system_clock::now() - std::chrono::seconds(1));
  EXPECT_TRUE(s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || s.error_code() == grpc::StatusCode::CANCELLED)
      << s.error_code() << " " << s.error_message();
}

}  // namespace
}  // namespace kls::testing
