#include "server/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <mutex>
#include <utility>
#include <vector>

#include "server/kernel_cache.h"
#include "server/kls_server.h"

#ifndef KLS_GIT_COMMIT
#define KLS_GIT_COMMIT "unknown"
#endif

namespace kls::server {
namespace {

using prometheus::ClientMetric;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Histogram;
using prometheus::MetricFamily;
using prometheus::MetricType;

// RPC latency: 1 ms .. 60 s (queries are milliseconds; uploads and exports
// of large data sets take seconds; Watch streams last as long as a job).
const Histogram::BucketBoundaries kRpcBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                 0.25,  0.5,    1,     2.5,  5,     10,   30, 60};
// Solve and queue wait: 10 ms .. 4 h.
const Histogram::BucketBoundaries kJobBuckets = {0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400};

/// Store answers about the request (unknown id, lost fence, bad argument),
/// not failures of the store.
bool IsStoreFault(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted:
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange:
    case StatusCode::kCancelled:
    case StatusCode::kUnimplemented:
      return false;
    default:
      return true;
  }
}

const char* OutcomeName(store::JobState state) { return store::JobStateName(state); }

ClientMetric Sample(double value, std::vector<ClientMetric::Label> labels = {}, bool counter = false) {
  ClientMetric m;
  m.label = std::move(labels);
  if (counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return m;
}

MetricFamily MakeFamily(const std::string& name, const std::string& help, MetricType type,
                        std::vector<ClientMetric> samples) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  f.metric = std::move(samples);
  return f;
}

/// The standard process_* series of Prometheus client libraries, read from
/// /proc at scrape time (Linux); a file that cannot be read leaves its
/// series out.
void AppendProcessFamilies(std::vector<MetricFamily>* out) {
  // /proc/self/stat: fields after the command name "(...)", which may hold
  // spaces and parentheses; so split after the last ')'. Field 3 is the
  // state; utime 14, stime 15 (clock ticks), starttime 22 (ticks after
  // boot), vsize 23 (bytes), rss 24 (pages).
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  std::vector<std::string> fields;
  if (paren != std::string::npos) {
    std::istringstream rest(stat.substr(paren + 1));
    for (std::string f; rest >> f;) fields.push_back(f);
  }
  const auto field = [&](int n) { return std::strtod(fields[static_cast<size_t>(n - 3)].c_str(), nullptr); };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (fields.size() >= 22 && ticks > 0) {
    out->push_back(MakeFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                              MetricType::Counter, {Sample((field(14) + field(15)) / ticks, {}, true)}));
    out->push_back(MakeFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
                              {Sample(field(23))}));
    out->push_back(MakeFamily("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
                              {Sample(field(24) * page)}));
    // Boot time (btime of /proc/stat, seconds since the epoch) + starttime.
    std::ifstream proc_stat("/proc/stat");
    for (std::string line; std::getline(proc_stat, line);) {
      if (line.rfind("btime ", 0) != 0) continue;
      const double boot = std::strtod(line.c_str() + 6, nullptr);
      out->push_back(MakeFamily("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
                                {Sample(boot + field(22) / ticks)}));
      break;
    }
  }
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  if (!ec) {
    // (The directory iterator's own descriptor is counted too, as other
    // client libraries count it.)
    out->push_back(MakeFamily("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
                              {Sample(fds)}));
  }
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {  // unlimited: left out
    out->push_back(MakeFamily("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
                              {Sample(static_cast<double>(files.rlim_cur))}));
  }
}

/// Metrics read at scrape time: the process (/proc), the job counts of the (possibly shared)
/// store, the kernel cache, the build.
class ScrapeTimeCollector final : public prometheus::Collectable {
 public:
  void SetSources(store::Store* store, const KernelCache* cache) {
    std::lock_guard<std::mutex> lock(mu_);
    store_ = store;
    cache_ = cache;
  }

  std::vector<MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<MetricFamily> out;
    AppendProcessFamilies(&out);
    out.push_back(MakeFamily("kls_build_info", "Build of this kls-server (value 1)", MetricType::Gauge,
                             {Sample(1, {{"commit", KLS_GIT_COMMIT}, {"version", KlsVersion()}})}));
    if (store_ != nullptr) {
      std::vector<ClientMetric> jobs;
      for (store::JobState s : {store::JobState::kQueued, store::JobState::kRunning, store::JobState::kSucceeded,
                                store::JobState::kFailed, store::JobState::kCancelled}) {
        const StatusOr<int64_t> n = store_->CountJobs(s);
        if (n.ok()) jobs.push_back(Sample(static_cast<double>(*n), {{"state", store::JobStateName(s)}}));
      }
      // An unreachable store leaves the family out (kls_store_errors_total tells why).
      if (!jobs.empty()) {
        out.push_back(MakeFamily("kls_jobs", "Jobs in the store by state (the whole shared queue)",
                                 MetricType::Gauge, std::move(jobs)));
      }
    }
    if (cache_ != nullptr) {
      const KernelCache::Counters c = cache_->counters();
      out.push_back(MakeFamily("kls_kernel_cache_bytes", "Bytes charged to the loaded-kernel cache",
                               MetricType::Gauge, {Sample(static_cast<double>(cache_->charged_bytes()))}));
      out.push_back(MakeFamily("kls_kernel_cache_budget_bytes", "Memory budget of the loaded-kernel cache",
                               MetricType::Gauge, {Sample(static_cast<double>(cache_->budget_bytes()))}));
      out.push_back(MakeFamily("kls_kernel_cache_entries", "Kernels held by the loaded-kernel cache",
                               MetricType::Gauge, {Sample(cache_->entry_count())}));
      out.push_back(MakeFamily("kls_kernel_cache_hits_total", "Kernel lookups answered from the cache",
                               MetricType::Counter, {Sample(static_cast<double>(c.hits), {}, true)}));
      out.push_back(MakeFamily("kls_kernel_cache_misses_total", "Kernel lookups that loaded from the store",
                               MetricType::Counter, {Sample(static_cast<double>(c.misses), {}, true)}));
      out.push_back(MakeFamily("kls_kernel_cache_evictions_total", "Kernels evicted for the memory budget",
                               MetricType::Counter, {Sample(static_cast<double>(c.evictions), {}, true)}));
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  store::Store* store_ = nullptr;
  const KernelCache* cache_ = nullptr;
};

int64_t DatasetBytes(const store::StoredDataset& d) {
  int64_t bytes = static_cast<int64_t>(d.data.features.size()) * 8 + static_cast<int64_t>(d.data.labels.size()) * 4 +
                  static_cast<int64_t>(d.constraints.pairs.size()) * 12;
  for (const std::string& k : d.data.item_keys) bytes += static_cast<int64_t>(k.size());
  return bytes;
}

int64_t KernelBytes(const LearnedKernel& kernel, const std::vector<store::Attachment>& attachments) {
  int64_t bytes = static_cast<int64_t>(kernel.embedding().size()) * 8;
  for (const store::Attachment& a : attachments) bytes += static_cast<int64_t>(a.bytes.size());
  return bytes;
}

/// Forwards every call to the wrapped store, counting store faults by
/// operation and the payload bytes of successful writes.
class InstrumentedStore final : public store::Store {
 public:
  InstrumentedStore(std::unique_ptr<store::Store> inner, Metrics* metrics)
      : inner_(std::move(inner)), metrics_(metrics) {}

  StatusOr<store::DatasetRecord> PutDataset(const std::string& name, const store::StoredDataset& d) override {
    return Wrote("dataset", DatasetBytes(d), Seen("put_dataset", inner_->PutDataset(name, d)));
  }
  StatusOr<store::DatasetRecord> GetDatasetRecord(const std::string& id) override {
    return Seen("get_dataset_record", inner_->GetDatasetRecord(id));
  }
  StatusOr<store::StoredDataset> LoadDataset(const std::string& id) override {
    return Seen("load_dataset", inner_->LoadDataset(id));
  }
  StatusOr<std::vector<store::DatasetRecord>> ListDatasets() override {
    return Seen("list_datasets", inner_->ListDatasets());
  }
  Status DeleteDataset(const std::string& id) override { return Seen("delete_dataset", inner_->DeleteDataset(id)); }
  StatusOr<int64_t> PutDatasetAttributes(const std::string& dataset_id, const std::string& summary,
                                         const std::string& bytes) override {
    return Wrote("dataset", static_cast<int64_t>(bytes.size()),
                 Seen("put_dataset_attributes", inner_->PutDatasetAttributes(dataset_id, summary, bytes)));
  }
  StatusOr<std::optional<store::StoredAttributes>> GetDatasetAttributes(const std::string& dataset_id) override {
    return Seen("get_dataset_attributes", inner_->GetDatasetAttributes(dataset_id));
  }

  StatusOr<store::JobRecord> CreateJob(store::JobRecord job) override {
    return Seen("create_job", inner_->CreateJob(std::move(job)));
  }
  StatusOr<store::JobRecord> GetJob(const std::string& id) override { return Seen("get_job", inner_->GetJob(id)); }
  Status UpdateJob(const store::JobRecord& job) override { return Seen("update_job", inner_->UpdateJob(job)); }
  StatusOr<std::vector<store::JobRecord>> ListJobs(const store::JobFilter& f, std::string* next_token) override {
    return Seen("list_jobs", inner_->ListJobs(f, next_token));
  }
  StatusOr<int64_t> CountJobs(store::JobState state) override {
    return Seen("count_jobs", inner_->CountJobs(state));
  }
  StatusOr<std::optional<store::JobRecord>> ClaimJob(const std::string& replica_id, int64_t lease_ms) override {
    return Seen("claim_job", inner_->ClaimJob(replica_id, lease_ms));
  }
  StatusOr<std::vector<std::string>> RenewLeases(const std::string& replica_id, int64_t lease_ms) override {
    return Seen("renew_leases", inner_->RenewLeases(replica_id, lease_ms));
  }
  Status UpdateJobFenced(const store::JobRecord& job, const store::JobFence& fence) override {
    return Seen("update_job_fenced", inner_->UpdateJobFenced(job, fence));
  }
  StatusOr<store::KernelRecord> CommitJobKernel(store::JobRecord job, const store::JobFence& fence,
                                                store::KernelRecord record, const LearnedKernel& kernel,
                                                const std::vector<store::Attachment>& attachments) override {
    return Wrote("kernel", KernelBytes(kernel, attachments),
                 Seen("commit_job_kernel", inner_->CommitJobKernel(std::move(job), fence, std::move(record), kernel,
                                                                   attachments)));
  }
  StatusOr<std::vector<store::JobRecord>> ListExpiredLeases() override {
    return Seen("list_expired_leases", inner_->ListExpiredLeases());
  }
  Status RegisterReplica(const std::string& replica_id) override {
    return Seen("register_replica", inner_->RegisterReplica(replica_id));
  }
  Status PutCheckpoint(const store::CheckpointRecord& checkpoint, const store::JobFence& fence) override {
    return Wrote("checkpoint", static_cast<int64_t>(checkpoint.bytes.size()),
                 Seen("put_checkpoint", inner_->PutCheckpoint(checkpoint, fence)));
  }
  StatusOr<std::optional<store::CheckpointRecord>> GetCheckpoint(const std::string& job_id) override {
    return Seen("get_checkpoint", inner_->GetCheckpoint(job_id));
  }
  void SetListener(std::function<void(const store::StoreEvent&)> listener) override {
    inner_->SetListener(std::move(listener));
  }
  Status Ping() override { return Seen("ping", inner_->Ping()); }

  StatusOr<store::KernelRecord> PutKernel(store::KernelRecord record, const LearnedKernel& kernel,
                                          const std::vector<store::Attachment>& attachments) override {
    return Wrote("kernel", KernelBytes(kernel, attachments),
                 Seen("put_kernel", inner_->PutKernel(std::move(record), kernel, attachments)));
  }
  StatusOr<store::KernelRecord> GetKernelRecord(const std::string& name, int64_t version,
                                                const std::string& alias) override {
    return Seen("get_kernel_record", inner_->GetKernelRecord(name, version, alias));
  }
  StatusOr<LearnedKernel> LoadKernel(const std::string& name, int64_t version) override {
    return Seen("load_kernel", inner_->LoadKernel(name, version));
  }
  StatusOr<store::StoredModel> LoadModel(const std::string& name, int64_t version) override {
    return Seen("load_model", inner_->LoadModel(name, version));
  }
  StatusOr<std::vector<store::KernelRecord>> ListKernels(const std::string& name) override {
    return Seen("list_kernels", inner_->ListKernels(name));
  }
  Status DeleteKernel(const std::string& name, int64_t version) override {
    return Seen("delete_kernel", inner_->DeleteKernel(name, version));
  }
  Status SetAlias(const std::string& name, const std::string& alias, int64_t version) override {
    return Seen("set_alias", inner_->SetAlias(name, alias, version));
  }
  StatusOr<std::vector<AliasRecord>> ListAliases() override { return Seen("list_aliases", inner_->ListAliases()); }
  Status ImportDataset(const store::DatasetRecord& record, const store::StoredDataset& data) override {
    return Wrote("dataset", DatasetBytes(data), Seen("import_dataset", inner_->ImportDataset(record, data)));
  }
  Status ImportKernel(const store::KernelRecord& record, const store::StoredModel& model) override {
    return Wrote("kernel", KernelBytes(model.kernel, model.attachments),
                 Seen("import_kernel", inner_->ImportKernel(record, model)));
  }
  Status ImportJob(const store::JobRecord& job) override { return Seen("import_job", inner_->ImportJob(job)); }
  StatusOr<std::vector<std::string>> CheckIntegrity() override {
    return Seen("check_integrity", inner_->CheckIntegrity());
  }

 private:
  static const Status& StatusOf(const Status& s) { return s; }
  template <typename T>
  static const Status& StatusOf(const StatusOr<T>& s) {
    return s.status();
  }
  template <typename R>
  R Seen(const char* operation, R result) {
    const Status& s = StatusOf(result);
    if (IsStoreFault(s.code())) metrics_->StoreFailed(operation, s.code());
    return result;
  }
  template <typename R>
  R Wrote(const char* kind, int64_t bytes, R result) {
    if (StatusOf(result).ok()) metrics_->StoreWrote(kind, bytes);
    return result;
  }

  std::unique_ptr<store::Store> inner_;
  Metrics* metrics_;
};

}  // namespace

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<ScrapeTimeCollector> scrape = std::make_shared<ScrapeTimeCollector>();
  std::unique_ptr<prometheus::Exposer> exposer;
  int port = 0;

  Family<Counter>& rpc_requests = prometheus::BuildCounter()
                                      .Name("kls_rpc_requests_total")
                                      .Help("Finished RPCs by gRPC method and status code")
                                      .Register(*registry);
  Family<Histogram>& rpc_duration = prometheus::BuildHistogram()
                                        .Name("kls_rpc_duration_seconds")
                                        .Help("RPC latency (call start to status sent) by method and status code")
                                        .Register(*registry);
  Family<Counter>& jobs_finished = prometheus::BuildCounter()
                                       .Name("kls_jobs_finished_total")
                                       .Help("Jobs this replica finished, by method and outcome")
                                       .Register(*registry);
  Family<Histogram>& solve_seconds = prometheus::BuildHistogram()
                                         .Name("kls_job_solve_seconds")
                                         .Help("Solver run time of each job attempt, by method")
                                         .Register(*registry);
  Family<Histogram>& queue_wait = prometheus::BuildHistogram()
                                      .Name("kls_job_queue_wait_seconds")
                                      .Help("Time from submit to the first claim of a job, by method")
                                      .Register(*registry);
  Family<Counter>& attempts = prometheus::BuildCounter()
                                  .Name("kls_job_attempts_total")
                                  .Help("Job attempts started on this replica, by method")
                                  .Register(*registry);
  Family<Counter>& resumes = prometheus::BuildCounter()
                                 .Name("kls_job_resumes_total")
                                 .Help("Job attempts that resumed from a checkpoint, by method")
                                 .Register(*registry);
  Family<Counter>& store_errors = prometheus::BuildCounter()
                                      .Name("kls_store_errors_total")
                                      .Help("Store calls that failed (store unreachable, data loss, internal "
                                            "errors), by operation and status code")
                                      .Register(*registry);
  Family<Counter>& store_written = prometheus::BuildCounter()
                                       .Name("kls_store_written_bytes_total")
                                       .Help("Payload bytes of successful store writes (matrices, keys, "
                                             "attachments, checkpoints), by kind")
                                       .Register(*registry);

  // (method, code) → its counter and histogram, so that a finished call does
  // one map lookup (Family::Add would build and drop a histogram every time).
  std::mutex rpc_mu;
  std::map<std::pair<std::string, int>, std::pair<Counter*, Histogram*>> rpc;
  std::mutex job_mu;
  std::map<std::string, Histogram*> solve_by_method, wait_by_method;
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}

Metrics::~Metrics() { StopServing(); }

Status Metrics::Serve(const std::string& listen) {
  StopServing();
  try {
    // civetweb takes "HOST:PORT" (IPv4) or "[V6]:PORT"; it cannot be told
    // to keep SO_REUSEADDR off, but a busy port still fails to bind.
    auto exposer = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/2);
    exposer->RegisterCollectable(impl_->registry);
    exposer->RegisterCollectable(impl_->scrape);
    const std::vector<int> ports = exposer->GetListeningPorts();
    impl_->port = ports.empty() ? 0 : ports.front();
    impl_->exposer = std::move(exposer);
  } catch (const std::exception& e) {
    return Status(StatusCode::kUnavailable, "metrics_listen = '" + listen + "': cannot serve metrics there (" +
                                                e.what() + "; address in use, or not an address of this machine)");
  }
  return OkStatus();
}

void Metrics::StopServing() {
  impl_->exposer.reset();  // joins the HTTP threads: no scrape runs after this
  impl_->port = 0;
}

int Metrics::port() const { return impl_->port; }

void Metrics::SetScrapeSources(store::Store* store, const KernelCache* cache) {
  impl_->scrape->SetSources(store, cache);
}

std::string Metrics::Render() const {
  std::vector<MetricFamily> families = impl_->registry->Collect();
  for (MetricFamily& f : impl_->scrape->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

void Metrics::ObserveRpc(const std::string& method, int grpc_code, double seconds) {
  std::pair<Counter*, Histogram*> series;
  {
    std::lock_guard<std::mutex> lock(impl_->rpc_mu);
    auto [it, inserted] = impl_->rpc.try_emplace({method, grpc_code});
    if (inserted) {
      const prometheus::Labels labels{{"method", method},
                                      {"code", StatusCodeName(static_cast<StatusCode>(grpc_code))}};
      it->second = {&impl_->rpc_requests.Add(labels), &impl_->rpc_duration.Add(labels, kRpcBuckets)};
    }
    series = it->second;
  }
  series.first->Increment();
  series.second->Observe(seconds);
}

void Metrics::AttemptStarted(const std::string& method, double queue_wait_seconds, bool resumed) {
  impl_->attempts.Add({{"method", method}}).Increment();
  if (resumed) impl_->resumes.Add({{"method", method}}).Increment();
  if (queue_wait_seconds >= 0) {
    Histogram* h;
    {
      std::lock_guard<std::mutex> lock(impl_->job_mu);
      Histogram*& slot = impl_->wait_by_method[method];
      if (slot == nullptr) slot = &impl_->queue_wait.Add({{"method", method}}, kJobBuckets);
      h = slot;
    }
    h->Observe(queue_wait_seconds);
  }
}

void Metrics::SolveEnded(const std::string& method, double seconds) {
  Histogram* h;
  {
    std::lock_guard<std::mutex> lock(impl_->job_mu);
    Histogram*& slot = impl_->solve_by_method[method];
    if (slot == nullptr) slot = &impl_->solve_seconds.Add({{"method", method}}, kJobBuckets);
    h = slot;
  }
  h->Observe(seconds);
}

void Metrics::JobFinished(const std::string& method, store::JobState state) {
  impl_->jobs_finished.Add({{"method", method}, {"outcome", OutcomeName(state)}}).Increment();
}

void Metrics::StoreFailed(const char* operation, StatusCode code) {
  impl_->store_errors.Add({{"operation", operation}, {"code", StatusCodeName(code)}}).Increment();
}

void Metrics::StoreWrote(const char* kind, int64_t bytes) {
  impl_->store_written.Add({{"kind", kind}}).Increment(static_cast<double>(bytes));
}

std::unique_ptr<store::Store> Metrics::Instrument(std::unique_ptr<store::Store> store) {
  return std::make_unique<InstrumentedStore>(std::move(store), this);
}

}  // namespace kls::server
