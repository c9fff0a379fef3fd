// End to end (test builds only, KLS_TEST_FAMILIES): the toy query
// kls.testing.ToyQueries/Diagonal (tests/families/queries, registered with
// server/service_registry.h) served by the real kls-server binary, over the
// kernel of a job of the toy family fixed_rank; its answers equal
// Similarity(i, i), an unknown key is NOT_FOUND naming it, Scale returns the
// job's scale option from the toy family's own attachment kind
// ("fixed_rank_scale", registered by tests/families/fixed_rank_family.cc),
// and the access log has the calls like any other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/data/csv_reader.h"
#include "kls/testing/fixed_rank.pb.h"
#include "kls/testing/toy_queries.grpc.pb.h"
#include "tests/e2e/process.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using kls::e2e::ReadFile;
using kls::e2e::Spawn;
using kls::e2e::WaitFor;
using Clock = std::chrono::steady_clock;

class ToyQueryE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kls-toy-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    scratch_ = pattern;
  }
  void TearDown() override {
    if (pid_ > 0 && WaitFor(pid_, std::chrono::milliseconds(0)) == -1) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    fs::remove_all(scratch_, ignored);
  }

  fs::path scratch_;
  pid_t pid_ = -1;
};

TEST_F(ToyQueryE2eTest, TheRealServerAnswersTheToyQueryOverAToyFamilyKernel) {
  const fs::path data = scratch_ / "data", log = scratch_ / "server.log";
  pid_ = Spawn({KLS_SERVER_BINARY, "--listen", "127.0.0.1:0", "--data-dir", data.string(), "--workers", "1"},
               scratch_ / "server.out", log);
  ASSERT_GT(pid_, 0);
  std::string target;  // from the lock file
  for (const auto deadline = Clock::now() + std::chrono::seconds(30); target.empty() && Clock::now() < deadline;) {
    ASSERT_EQ(WaitFor(pid_, std::chrono::milliseconds(0)), -1) << "kls-server exited early:\n" << ReadFile(log);
    std::istringstream lock(ReadFile(data / "kls-server.lock"));
    for (std::string line; std::getline(lock, line);) {
      if (line.rfind("listen=", 0) == 0) target = line.substr(7);
    }
    if (target.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(target.empty()) << ReadFile(log);

  // Twenty iris rows with item keys, and a fixed_rank kernel over them.
  auto iris = kls::ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  ASSERT_TRUE(iris.ok()) << iris.status();
  kls::Dataset d;
  d.features = iris->features.topRows(20);
  for (int i = 0; i < 20; ++i) d.item_keys.push_back("iris-" + std::to_string(i));
  kls::ClientOptions options;
  options.target = target;
  auto client = std::make_unique<kls::Client>(options);
  kls::UploadOptions upload;
  upload.name = "iris20";
  auto dataset = client->UploadDataset(d, {}, upload);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  kls::v1::SubmitJobRequest submit;
  submit.set_dataset_id(dataset->id());
  submit.set_kernel_name("toy");
  kls::testing::FixedRankOptions rank;
  rank.set_rank(3);
  rank.set_scale(0.75);
  submit.mutable_family_options()->PackFrom(rank);
  auto job = client->SubmitJob(submit);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = client->WatchJob(job->id(), [](const kls::v1::Job&) {}, 60);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), kls::v1::SUCCEEDED) << done->error();

  kls::v1::KernelRef ref;
  ref.set_name("toy");
  auto similarity = client->Similarity(ref, {{3, 3}, {17, 17}});
  ASSERT_TRUE(similarity.ok()) << similarity.status();

  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto toy = kls::testing::ToyQueries::NewStub(channel);
  kls::testing::DiagonalRequest request;
  *request.mutable_kernel() = ref;
  request.add_keys("iris-3");
  request.add_keys("iris-17");
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    kls::testing::DiagonalResponse response;
    const grpc::Status s = toy->Diagonal(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(response.values_size(), 2);
    EXPECT_NEAR(response.values(0), (*similarity)[0], 1e-12 * (1.0 + (*similarity)[0]));
    EXPECT_NEAR(response.values(1), (*similarity)[1], 1e-12 * (1.0 + (*similarity)[1]));
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    request.add_keys("iris-99");
    kls::testing::DiagonalResponse response;
    const grpc::Status s = toy->Diagonal(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("keys[2] = 'iris-99' is not a key of data set " + dataset->id()));
  }

  {
    // The job's scale, stored by the family as an attachment of its own kind.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    kls::testing::ScaleRequest scale_request;
    *scale_request.mutable_kernel() = ref;
    kls::testing::ScaleResponse response;
    const grpc::Status s = toy->Scale(&ctx, scale_request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.scale(), 0.75);
  }

  // Idle connections slow gRPC's shutdown down: close them first.
  client.reset();
  toy.reset();
  channel.reset();
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(WaitFor(pid_, std::chrono::seconds(20)), 0);
  pid_ = -1;
  EXPECT_THAT(ReadFile(log), HasSubstr("/kls.testing.ToyQueries/Diagonal"));
  EXPECT_THAT(ReadFile(log), HasSubstr("/kls.testing.ToyQueries/Scale"));
}

}  // namespace
