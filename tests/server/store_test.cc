// Both stores: round trips, versions, aliases, paging; the embedded store's corruption detection; artifacts.
#include "server/store/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <thread>

#include "server/store/artifact.h"
#include "server/store/listener_slot.h"
#include "store_backend.h"

namespace kls::store {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

StoredDataset Sample() {
  StoredDataset d;
  d.data.features = Eigen::MatrixXd::Random(6, 3);
  d.data.labels = {0, 1, 0, 1, 2, 2};
  d.data.item_keys = {"a", "b", "c", "d", "e", "f"};
  d.constraints.pairs = {{0, 2, PairKind::kMustLink}, {1, 4, PairKind::kCannotLink}};
  return d;
}

/// Backend-neutral cases: SQLite and PostgreSQL (store_backend.h).
class StoreTest : public StoreBackendTest {};

/// The embedded store's files (artifacts/ under the data directory).
class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kls-store-" + std::to_string(::getpid()) + "-" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto s = OpenSqliteStore(dir_.string());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  // A queued kl_admm job, created and claimed by replica "r"; nullopt (with
  // the failure recorded) if the store refuses either step.
  std::optional<JobRecord> CreateAndClaimJob() {
    JobRecord j;
    j.method = "kl_admm";
    j.dataset_id = "ds";
    j.state = JobState::kQueued;
    auto claimed = store_->CreateJob(j).ok() ? store_->ClaimJob("r", 60000)
                                             : StatusOr<std::optional<JobRecord>>(InternalError("CreateJob failed"));
    if (!claimed.ok() || !claimed->has_value()) {
      ADD_FAILURE() << "creating and claiming a job: " << claimed.status();
      return std::nullopt;
    }
    return **claimed;
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreTest, DatasetRoundTripAndReopen) {
  const StoredDataset d = Sample();
  auto rec = store_->PutDataset("toy", d);
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(rec->num_points, 6);
  EXPECT_EQ(rec->num_classes, 3);
  store_.reset();
  auto reopened = Open("cache-b");
  ASSERT_TRUE(reopened.ok());
  auto back = (*reopened)->LoadDataset(rec->id);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data.features, d.data.features);
  EXPECT_EQ(back->data.labels, d.data.labels);
  EXPECT_EQ(back->data.item_keys, d.data.item_keys);
  ASSERT_EQ(back->constraints.size(), 2);
  EXPECT_EQ(back->constraints.pairs[1].kind, PairKind::kCannotLink);
  EXPECT_EQ(back->constraints.pairs[1].j, 4);
  auto all = (*reopened)->ListDatasets();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
  EXPECT_TRUE((*reopened)->DeleteDataset(rec->id).ok());
  EXPECT_EQ((*reopened)->LoadDataset(rec->id).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, InvalidDatasetIsRejectedAndNothingIsWritten) {
  StoredDataset d = Sample();
  d.constraints.pairs.push_back({0, 99, PairKind::kMustLink});
  auto rec = store_->PutDataset("bad", d);
  ASSERT_FALSE(rec.ok());
  EXPECT_THAT(rec.status().message(), HasSubstr("j = 99 is out of range"));
  EXPECT_TRUE(store_->ListDatasets()->empty());
  EXPECT_THAT(*store_->CheckIntegrity(), ::testing::IsEmpty());
  if (!postgres()) {
    EXPECT_TRUE(fs::is_empty(fs::path(dir_.Sub("data")) / "artifacts"));
  }
}

TEST_P(StoreTest, KernelVersionsAliasesAndDelete) {
  auto k1 = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Random(5, 2));
  auto k2 = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Random(5, 3));
  ASSERT_TRUE(k1.ok() && k2.ok());
  KernelRecord r;
  r.name = "iris";
  r.method = "kl_admm";
  auto v1 = store_->PutKernel(r, *k1);
  auto v2 = store_->PutKernel(r, *k2);
  ASSERT_TRUE(v1.ok() && v2.ok());
  EXPECT_EQ(v1->version, 1);
  EXPECT_EQ(v2->version, 2);
  EXPECT_EQ(store_->GetKernelRecord("iris", 0)->version, 2);
  ASSERT_TRUE(store_->SetAlias("iris", "prod", 1).ok());
  EXPECT_EQ(store_->GetKernelRecord("iris", 0, "prod")->version, 1);
  auto loaded = store_->LoadKernel("iris", 1);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->embedding(), k1->embedding());
  EXPECT_EQ(store_->SetAlias("iris", "prod", 7).code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->DeleteKernel("iris", 1).ok());
  EXPECT_EQ(store_->GetKernelRecord("iris", 0, "prod").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListKernels("iris")->size(), 1u);
  EXPECT_THAT(store_->DeleteKernel("nope", 0).message(), HasSubstr("kernel \"nope\" does not exist"));
}

TEST_P(StoreTest, JobsUpdateFilterAndPage) {
  for (int t = 0; t < 5; ++t) {
    JobRecord j;
    j.method = "kl_admm";
    j.dataset_id = t % 2 ? "ds-odd" : "ds-even";
    ASSERT_TRUE(store_->CreateJob(j).ok());
  }
  std::string token;
  JobFilter f;
  f.page_size = 2;
  auto p1 = store_->ListJobs(f, &token);
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(p1->size(), 2u);
  EXPECT_FALSE(token.empty());
  f.page_token = token;
  auto p2 = store_->ListJobs(f, &token);
  f.page_token = token;
  auto p3 = store_->ListJobs(f, &token);
  ASSERT_TRUE(p2.ok() && p3.ok());
  EXPECT_EQ(p2->size(), 2u);
  EXPECT_EQ(p3->size(), 1u);
  EXPECT_TRUE(token.empty());
  JobRecord j = (*p1)[0];
  j.state = JobState::kRunning;
  j.attempts = 1;
  ASSERT_TRUE(store_->UpdateJob(j).ok());
  JobFilter running;
  running.state = JobState::kRunning;
  auto r = store_->ListJobs(running, &token);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, j.id);
  JobFilter odd;
  odd.dataset_id = "ds-odd";
  EXPECT_EQ(store_->ListJobs(odd, &token)->size(), 2u);
  JobFilter bad;
  bad.page_token = "xyz";
  EXPECT_THAT(store_->ListJobs(bad, &token).status().message(), HasSubstr("page_token"));
  EXPECT_EQ(store_->GetJob("job-missing").status().code(), StatusCode::kNotFound);
}

// The embedded store has one SQLite connection for all threads. A write that
// runs while another thread's transaction is open on it (CommitJobKernel's
// BEGIN … COMMIT) becomes part of that transaction: it is undone when the
// transaction rolls back (its fence fails inside), and on a crash before the
// COMMIT it is lost although its caller was already told OK. Every write must
// wait for the open transaction instead. Here one thread sets aliases while
// another commits job kernels whose jobs a third thread cancels while the
// kernel's artifact is written, so that many commits roll back.
TEST_F(SqliteStoreTest, AWriteIsNeverTakenIntoAnotherThreadsTransaction) {
  KernelRecord target;  // the kernel the aliases name
  target.name = "a";
  auto small = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Random(5, 2));
  ASSERT_TRUE(small.ok() && store_->PutKernel(target, *small).ok());
  auto large = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Random(4000, 32));  // a slow artifact write
  ASSERT_TRUE(large.ok());

  std::atomic<bool> stop{false};
  std::vector<std::string> acknowledged;
  std::thread aliaser([&] {
    for (int i = 0; !stop && i < 1000000; ++i) {
      const std::string alias = "x" + std::to_string(i);
      if (store_->SetAlias("a", alias, 1).ok()) acknowledged.push_back(alias);
    }
  });
  std::mt19937 rng(7);
  int commits = 0, aborted = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < end) {
    const std::optional<JobRecord> claimed = CreateAndClaimJob();
    if (!claimed) break;  // no ASSERT (the failure is recorded): the aliaser must be joined
    const JobRecord job = *claimed;
    JobFence fence;
    fence.attempt = job.attempts;
    fence.owner = "r";
    const int delay_us = std::uniform_int_distribution<int>(0, 3000)(rng);
    std::thread canceller([&, job, fence, delay_us] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      JobRecord c = job;
      c.state = JobState::kCancelled;
      (void)store_->UpdateJobFenced(c, fence);
    });
    KernelRecord k;
    k.name = "job-kernel";
    k.job_id = job.id;
    auto r = store_->CommitJobKernel(job, fence, k, *large);
    canceller.join();
    ++commits;
    aborted += r.status().code() == StatusCode::kAborted;
  }
  stop = true;
  aliaser.join();
  auto aliases = store_->ListAliases();
  ASSERT_TRUE(aliases.ok());
  std::set<std::string> present;
  for (const auto& x : *aliases) present.insert(x.alias);
  int missing = 0;
  for (const std::string& alias : acknowledged) missing += present.count(alias) == 0;
  EXPECT_EQ(missing, 0) << "of " << acknowledged.size() << " acknowledged aliases (" << commits << " commits, "
                        << aborted << " aborted by the cancel)";
  EXPECT_GT(aborted, 0);
  std::printf("%zu aliases, %d commits, %d aborted, %d aliases missing\n", acknowledged.size(), commits, aborted,
              missing);
}

// A read on the store's one SQLite connection must not run inside another
// thread's open CommitJobKernel transaction: it would see the job SUCCEEDED
// (and its kernel) before the COMMIT made them durable. A second, independent
// connection to kls.db sees only committed data, so whenever the store says
// SUCCEEDED, that connection must say so too. Without the transaction lock on
// reads (sqlite_store.cc, tx_mu_) the store's read lands inside the window
// between the job update and the end of COMMIT (its WAL fsync).
TEST_F(SqliteStoreTest, AReadNeverSeesAnotherThreadsUncommittedTransaction) {
  auto kernel = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Random(200, 4));
  ASSERT_TRUE(kernel.ok());
  sqlite3* observer = nullptr;
  ASSERT_EQ(sqlite3_open_v2((dir_ / "kls.db").string().c_str(), &observer, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  auto committed_state = [&](const std::string& id) {
    sqlite3_stmt* st = nullptr;
    std::string state = "?";
    if (sqlite3_prepare_v2(observer, "SELECT state FROM jobs WHERE id = ?", -1, &st, nullptr) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, id.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) == SQLITE_ROW) state = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return state;
  };
  std::mutex mu;
  std::string current;  // the job being committed
  std::atomic<bool> stop{false};
  int reads = 0, succeeded_seen = 0, dirty = 0;
  std::thread reader([&] {
    std::string id, checked;
    while (!stop) {
      {
        std::lock_guard<std::mutex> l(mu);
        id = current;
      }
      if (id.empty() || id == checked) continue;
      auto job = store_->GetJob(id);
      ++reads;
      if (!job.ok() || job->state != JobState::kSucceeded) continue;
      checked = id;
      ++succeeded_seen;
      if (committed_state(id) != JobStateName(JobState::kSucceeded)) ++dirty;
    }
  });
  int commits = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < end) {
    const std::optional<JobRecord> claimed = CreateAndClaimJob();
    if (!claimed) break;  // no ASSERT (the failure is recorded): the reader must be joined
    const JobRecord job = *claimed;
    {
      std::lock_guard<std::mutex> l(mu);
      current = job.id;
    }
    JobFence fence;
    fence.attempt = job.attempts;
    fence.owner = "r";
    KernelRecord k;
    k.name = "job-kernel";
    k.job_id = job.id;
    if (!store_->CommitJobKernel(job, fence, k, *kernel).ok()) {
      ADD_FAILURE() << "commit of job " << job.id;
      break;
    }
    ++commits;
  }
  stop = true;
  reader.join();
  sqlite3_close(observer);
  std::printf("%d commits, %d reads, %d saw SUCCEEDED, %d before the COMMIT\n", commits, reads, succeeded_seen, dirty);
  EXPECT_EQ(dirty, 0) << "of " << succeeded_seen << " reads that saw SUCCEEDED";
  EXPECT_GT(succeeded_seen, 10);
}

// SetListener(nullptr) returns only after every running delivery has
// returned, so what the old listener captured may then be destroyed (a
// PostgreSQL listen thread used to call into a freed JobManager at shutdown).
// `alive` stands for the captured object: it is "destroyed" right after each
// Set(nullptr), and a delivery that still runs then sees it false.
TEST(ListenerSlotTest, SetWaitsForRunningDeliveries) {
  ListenerSlot slot;
  std::atomic<bool> alive{true}, stop{false};
  std::atomic<int> deliveries{0}, late{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < 2; ++t) {
    senders.emplace_back([&] {
      while (!stop) slot.Deliver(StoreEvent{StoreEvent::Kind::kJobQueued, ""});
    });
  }
  for (int round = 0; round < 200; ++round) {
    alive = true;
    slot.Set([&](const StoreEvent&) {
      ++deliveries;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (!alive) ++late;
    });
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    slot.Set(nullptr);
    alive = false;
  }
  stop = true;
  for (auto& t : senders) t.join();
  EXPECT_GT(deliveries.load(), 200);
  EXPECT_EQ(late.load(), 0) << "deliveries that ran after Set(nullptr) returned";
}

TEST_F(SqliteStoreTest, CorruptedArtifactIsDetectedNotServed) {
  auto k = LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Random(50, 4));
  KernelRecord r;
  r.name = "victim";
  ASSERT_TRUE(store_->PutKernel(r, *k).ok());
  // Flip one byte of the payload.
  fs::path file;
  for (auto& e : fs::directory_iterator(dir_ / "artifacts")) file = e.path();
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-9, std::ios::end);
    char c;
    f.read(&c, 1);
    f.seekp(-9, std::ios::end);
    c ^= 0x5a;
    f.write(&c, 1);
  }
  auto loaded = store_->LoadKernel("victim", 1);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(loaded.status().message(), HasSubstr("checksum mismatch"));
  auto problems = store_->CheckIntegrity();
  ASSERT_TRUE(problems.ok());
  ASSERT_EQ(problems->size(), 1u);
  // Truncation too.
  fs::resize_file(file, 20);
  EXPECT_THAT(store_->LoadKernel("victim", 1).status().message(), HasSubstr("truncated"));
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);

TEST(Artifact, WriteIsAtomicAndSectionsRoundTrip) {
  const std::string path = ::testing::TempDir() + "/a.art";
  std::vector<double> v = {1, 2, 3, 4, 5, 6};
  std::vector<int32_t> w = {7, 8};
  ASSERT_TRUE(WriteArtifact(path, {{"v", DType::kFloat64, 2, 3, v.data(), 48}, {"w", DType::kInt32, 2, 1, w.data(), 8}}).ok());
  auto a = MappedArtifact::Open(path);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_NE((*a)->Find("w"), nullptr);
  EXPECT_EQ(reinterpret_cast<const int32_t*>((*a)->Find("w")->data)[1], 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*a)->Find("v")->data) % 64, 0u);
  EXPECT_EQ((*a)->Find("missing"), nullptr);
  EXPECT_THAT(WriteArtifact(path, {{"v", DType::kFloat64, 2, 3, v.data(), 40}}).message(), HasSubstr("do not match"));
  EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));
}

// WriteArtifact streams the sections to the file; the file is byte for byte
// the image EncodeArtifact builds in memory (the one a networked store keeps).
TEST(Artifact, StreamedFileEqualsTheEncodedImage) {
  const std::string path = ::testing::TempDir() + "/streamed.art";
  std::vector<double> big(10'000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = 0.5 * static_cast<double>(i) - 7.0;
  std::vector<int32_t> odd = {1, 2, 3};  // 12 bytes: padded to the next 64
  const std::string bytes("a\0bc\0", 5);
  const std::vector<std::vector<SectionView>> cases = {
      {},
      {{"odd", DType::kInt32, 3, 1, odd.data(), 12}},
      {{"big", DType::kFloat64, 100, 100, big.data(), 80'000},
       {"keys", DType::kBytes, 2, 1, bytes.data(), bytes.size()},
       {"odd", DType::kInt32, 1, 3, odd.data(), 12},
       {"empty", DType::kFloat64, 0, 4, nullptr, 0}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    ASSERT_TRUE(WriteArtifact(path, cases[c]).ok()) << c;
    auto image = EncodeArtifact(cases[c]);
    ASSERT_TRUE(image.ok()) << image.status();
    std::ifstream in(path, std::ios::binary);
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(file.size(), image->size()) << c;
    EXPECT_TRUE(file == *image) << "case " << c;
    auto a = MappedArtifact::Open(path);  // the CRC the stream computed verifies
    ASSERT_TRUE(a.ok()) << a.status();
  }
}

}  // namespace
}  // namespace kls::store
