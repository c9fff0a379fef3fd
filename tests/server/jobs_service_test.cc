// kls.v1.Jobs in-process: a grpc::Server on 127.0.0.1:0 with the Jobs service
// (plus the callback-API Admin service, as kls-server registers both), a real
// SQLite store in a temp dir and a running JobManager.
#include "server/jobs_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "kls/v1/service.grpc.pb.h"
#include "server/admin_service.h"
#include "server/jobs/proto_convert.h"
#include "iris_subset.h"
#include "temp_dir.h"
#include "test_store.h"

namespace kls::server {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class JobsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = kls::testing::OpenTestStore(dir_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
    auto small = store_->PutDataset("iris60", testing::IrisWithPairs(60));
    ASSERT_TRUE(small.ok()) << small.status();
    small_id_ = small->id;
    auto large = store_->PutDataset("iris150", testing::IrisWithPairs(150));
    ASSERT_TRUE(large.ok()) << large.status();
    large_id_ = large->id;

    JobManagerOptions o;
    o.workers = 1;
    manager_ = std::make_unique<JobManager>(store_.get(), o);
    ASSERT_TRUE(manager_->Start().ok());
    service_ = std::make_unique<JobsService>(manager_.get(), store_.get());
    admin_ = std::make_unique<AdminService>(ServerFacts{});

    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    builder.RegisterService(admin_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
    stub_ = kls::v1::Jobs::NewStub(channel_);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    manager_->Shutdown();
  }

  kls::v1::SubmitJobRequest KlAdmm(const std::string& dataset, int max_iterations, double tolerance = 1e-4) {
    kls::v1::SubmitJobRequest r;
    r.set_dataset_id(dataset);
    r.set_kernel_name("svc");
    r.mutable_kl_admm()->set_max_iterations(max_iterations);
    r.mutable_kl_admm()->set_tolerance(tolerance);
    return r;
  }

  grpc::Status Submit(const kls::v1::SubmitJobRequest& r, kls::v1::Job* job) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->Submit(&ctx, r, job);
  }

  grpc::Status Get(const std::string& id, kls::v1::Job* job) {
    grpc::ClientContext ctx;
    kls::v1::GetJobRequest r;
    r.set_id(id);
    return stub_->Get(&ctx, r, job);
  }

  grpc::Status Cancel(const std::string& id, kls::v1::Job* job) {
    grpc::ClientContext ctx;
    kls::v1::CancelJobRequest r;
    r.set_id(id);
    return stub_->Cancel(&ctx, r, job);
  }

  /// Watches until the stream ends; returns every event.
  std::vector<kls::v1::Job> WatchAll(const std::string& id, grpc::Status* status) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    kls::v1::WatchJobRequest r;
    r.set_id(id);
    auto reader = stub_->Watch(&ctx, r);
    std::vector<kls::v1::Job> events;
    kls::v1::JobEvent e;
    while (reader->Read(&e)) events.push_back(e.job());
    *status = reader->Finish();
    return events;
  }

  kls::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::string small_id_, large_id_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<JobsService> service_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<kls::v1::Jobs::Stub> stub_;
};

TEST_F(JobsServiceTest, SubmitWatchGetUntilSucceeded) {
  kls::v1::Job job;
  ASSERT_TRUE(Submit(KlAdmm(small_id_, 100), &job).ok());
  EXPECT_EQ(job.state(), kls::v1::QUEUED);
  EXPECT_EQ(job.method(), "kl_admm");
  ASSERT_FALSE(job.id().empty());

  grpc::Status st;
  const std::vector<kls::v1::Job> events = WatchAll(job.id(), &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().state(), kls::v1::SUCCEEDED);
  EXPECT_GT(events.back().progress().iteration(), 0);
  EXPECT_FALSE(events.back().termination().empty());

  kls::v1::Job got;
  ASSERT_TRUE(Get(job.id(), &got).ok());
  EXPECT_EQ(got.state(), kls::v1::SUCCEEDED);
  EXPECT_EQ(got.kernel_name(), "svc");
  EXPECT_EQ(got.kernel_version(), 1);
  EXPECT_EQ(got.attempts(), 1);
  EXPECT_TRUE(store_->LoadKernel("svc", 1).ok());

  // Watching a finished job returns its final state at once.
  const std::vector<kls::v1::Job> again = WatchAll(job.id(), &st);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].state(), kls::v1::SUCCEEDED);
}

// Every pairwise job scores its kernel against the plain linear and RBF
// kernels on held-out pairs (core/npkl/baseline_guard.h): without
// cross-validation on a fifth of the pairs after one more learn, with it on
// the cross-validation's folds; the summary says which did better.
TEST_F(JobsServiceTest, PairwiseJobsReportTheBaselineGuardInTheirSummary) {
  auto summary_of = [&](const kls::v1::SubmitJobRequest& request) -> std::string {
    kls::v1::Job job;
    EXPECT_TRUE(Submit(request, &job).ok());
    grpc::Status st;
    const std::vector<kls::v1::Job> events = WatchAll(job.id(), &st);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (events.empty() || events.back().state() != kls::v1::SUCCEEDED) return "job did not succeed";
    auto record = store_->GetKernelRecord(events.back().kernel_name(), events.back().kernel_version());
    EXPECT_TRUE(record.ok()) << record.status();
    return record.ok() ? record->summary_json : "";
  };
  const std::string plain = summary_of(KlAdmm(small_id_, 200));
  EXPECT_THAT(plain, HasSubstr("\"baseline_guard\":{\"score\":\"threshold\",\"folds\":5,\"evaluated\":[0],"
                               "\"candidates\":[{\"name\":\"learned\""));
  EXPECT_THAT(plain, HasSubstr("{\"name\":\"linear\""));
  EXPECT_THAT(plain, HasSubstr("{\"name\":\"rbf\",\"widths\":["));
  EXPECT_THAT(plain, HasSubstr("\"baseline_better\":false"));
  EXPECT_THAT(plain, HasSubstr("\"baseline_guard_note\":\"the learned kernel predicts held-out pairs at least as well"));

  kls::v1::SubmitJobRequest cv = KlAdmm(small_id_, 200);
  cv.mutable_cross_validation()->set_folds(3);
  const std::string with_cv = summary_of(cv);
  EXPECT_THAT(with_cv, HasSubstr("\"baseline_guard\":{\"score\":\"threshold\",\"folds\":3,\"evaluated\":[0,1,2],"));

  // A kernel stopped after one iteration has learned little: the RBF kernel
  // wins on the held-out pairs, and the summary says so in words.
  const std::string poor = summary_of(KlAdmm(large_id_, 1, 0.0));
  EXPECT_THAT(poor, HasSubstr("\"best_baseline\":\"rbf\",\"held_out_pairs\":36,\"margin\":0.166667,"
                              "\"baseline_better\":true"));
  EXPECT_THAT(poor, HasSubstr("\"baseline_guard_note\":\"the plain RBF kernel (width "));
  EXPECT_THAT(poor, HasSubstr("predicts held-out pairs better than the learned kernel"));

  kls::v1::SubmitJobRequest off = KlAdmm(small_id_, 200);
  off.set_baseline_guard(false);
  EXPECT_THAT(summary_of(off), ::testing::Not(HasSubstr("baseline_guard")));
  kls::v1::SubmitJobRequest embedding;
  embedding.set_dataset_id(small_id_);
  embedding.mutable_embedding()->set_method(kls::v1::EmbeddingOptions::KPCA);
  embedding.set_baseline_guard(true);
  kls::v1::Job job;
  const grpc::Status refused = Submit(embedding, &job);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("baseline_guard = true but method = embedding"));
}

TEST_F(JobsServiceTest, SyncJobsServiceCoexistsWithCallbackServices) {
  auto admin = kls::v1::Admin::NewStub(channel_);
  grpc::ClientContext ctx;
  kls::v1::EchoRequest req;
  req.set_payload("ping");
  kls::v1::EchoResponse resp;
  ASSERT_TRUE(admin->Echo(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.payload(), "ping");
}

TEST_F(JobsServiceTest, UnknownIdsAreNotFound) {
  kls::v1::Job job;
  EXPECT_EQ(Get("job-nope", &job).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Cancel("job-nope", &job).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status st;
  WatchAll("job-nope", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Submit(KlAdmm("ds-nope", 5), &job).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Get("", &job).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobsServiceTest, BadOptionsAreInvalidArgumentNamingTheField) {
  kls::v1::Job job;
  kls::v1::SubmitJobRequest r = KlAdmm(small_id_, 5);
  r.mutable_kl_admm()->set_gamma(-1);
  grpc::Status st = Submit(r, &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("kl_admm.gamma = -1 must be positive"));

  kls::v1::SubmitJobRequest none;
  none.set_dataset_id(small_id_);
  st = Submit(none, &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "solver: one of kl_admm, bcd_npkl, simple_npkl, qsdp, embedding, onk, mkl, npk_ranking, social_strength is required");

  kls::v1::SubmitJobRequest k = KlAdmm(small_id_, 5);
  k.mutable_graph()->set_k(500);
  st = Submit(k, &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("graph.k = 500"));
}

TEST_F(JobsServiceTest, CancelRunningThenFinishedIsFailedPrecondition) {
  kls::v1::Job job;
  ASSERT_TRUE(Submit(KlAdmm(large_id_, 100'000'000, 0.0), &job).ok());
  // Wait for it to run.
  const auto end = Clock::now() + std::chrono::seconds(10);
  kls::v1::Job got;
  while (Clock::now() < end) {
    ASSERT_TRUE(Get(job.id(), &got).ok());
    if (got.state() == kls::v1::RUNNING && got.progress().iteration() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(got.state(), kls::v1::RUNNING);

  kls::v1::Job c;
  const auto t0 = Clock::now();
  ASSERT_TRUE(Cancel(job.id(), &c).ok());
  grpc::Status st;
  const auto events = WatchAll(job.id(), &st);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().state(), kls::v1::CANCELLED);
  EXPECT_EQ(events.back().termination(), "cancelled");
  EXPECT_LT(ms, 500.0);

  st = Cancel(job.id(), &c);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr("already cancelled"));
}

TEST_F(JobsServiceTest, ListPagesOldestFirstWithFilters) {
  // Stop the workers so every job stays queued and the listing is stable.
  manager_->Shutdown();
  auto m = std::make_unique<JobManager>(store_.get(), JobManagerOptions{});  // never started
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto rec = JobRecordFromSubmit(KlAdmm(i < 3 ? small_id_ : large_id_, 5));
    ASSERT_TRUE(rec.ok());
    auto j = m->Submit(*rec);
    ASSERT_TRUE(j.ok()) << j.status();
    ids.push_back(j->id);
  }
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    grpc::ClientContext ctx;
    kls::v1::ListJobsRequest r;
    r.set_page_size(2);
    r.set_page_token(token);
    kls::v1::ListJobsResponse resp;
    ASSERT_TRUE(stub_->List(&ctx, r, &resp).ok());
    EXPECT_LE(resp.jobs_size(), 2);
    for (const auto& j : resp.jobs()) seen.push_back(j.id());
    token = resp.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(seen, ids);
  EXPECT_EQ(pages, 3);

  grpc::ClientContext ctx;
  kls::v1::ListJobsRequest by_ds;
  by_ds.set_dataset_id(large_id_);
  by_ds.set_state(kls::v1::QUEUED);
  kls::v1::ListJobsResponse resp;
  ASSERT_TRUE(stub_->List(&ctx, by_ds, &resp).ok());
  ASSERT_EQ(resp.jobs_size(), 2);
  EXPECT_EQ(resp.jobs(0).id(), ids[3]);
  EXPECT_TRUE(resp.next_page_token().empty());

  grpc::ClientContext ctx2;
  kls::v1::ListJobsRequest bad;
  bad.set_page_size(-1);
  EXPECT_EQ(stub_->List(&ctx2, bad, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobsServiceTest, WatchEndsPromptlyWhenTheClientCancels) {
  kls::v1::Job job;
  ASSERT_TRUE(Submit(KlAdmm(large_id_, 100'000'000, 0.0), &job).ok());
  grpc::ClientContext ctx;
  kls::v1::WatchJobRequest r;
  r.set_id(job.id());
  auto reader = stub_->Watch(&ctx, r);
  kls::v1::JobEvent e;
  ASSERT_TRUE(reader->Read(&e));
  ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  kls::v1::Job c;
  ASSERT_TRUE(Cancel(job.id(), &c).ok());
  // TearDown's server Shutdown must not hang on the abandoned Watch handler.
  const auto t0 = Clock::now();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.5);
  server_.reset();
}

}  // namespace
}  // namespace kls::server
