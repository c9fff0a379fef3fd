#include "server/kls_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include <filesystem>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "server/admin_service.h"
#include "server/auth.h"
#include "server/data_dir.h"
#include "server/datasets_service.h"
#include "server/jobs/job_manager.h"
#include "server/jobs_service.h"
#include "server/kernel_cache.h"
#include "server/http/http_gateway.h"
#include "server/kernels_service.h"
#include "server/metrics.h"
#include "server/queries_service.h"
#include "server/rpc_observer.h"
#include "server/service_registry.h"

#ifndef KLS_VERSION
#define KLS_VERSION "unknown"
#endif

namespace kls::server {
namespace {

// Health service names this server reports on, besides "" (the whole server).
const char* const kServiceNames[] = {
    kls::v1::Admin::service_full_name(),   kls::v1::Datasets::service_full_name(),
    kls::v1::Jobs::service_full_name(),    kls::v1::Kernels::service_full_name(),
    kls::v1::Queries::service_full_name(),
};

std::string HostOf(const std::string& listen) { return listen.substr(0, listen.rfind(':')); }

// "a, b,c" → {"a", "b", "c"}.
std::vector<std::string> SplitOrigins(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

}  // namespace

const char* KlsVersion() { return KLS_VERSION; }

KlsServer::KlsServer(ServerConfig config) : config_(std::move(config)) {}

KlsServer::~KlsServer() { Stop(); }

Status KlsServer::Start() {
  if (server_) return FailedPreconditionError("server already started");
  KLS_RETURN_IF_ERROR(config_.Validate());

  // Tokens and certificates are read before anything else, so a bad file
  // fails the start without touching the data directory.
  std::shared_ptr<const TokenTable> tokens;
  if (!config_.tokens_file.empty()) {
    StatusOr<TokenTable> loaded = TokenTable::Load(config_.tokens_file);
    if (!loaded.ok()) return loaded.status().WithContext("loading tokens_file");
    tokens = std::make_shared<const TokenTable>(std::move(loaded).value());
    tokens_ = std::make_shared<LiveTokens>(tokens, config_.tokens_file);
  }
  const TransportSecurity security{config_.tls_cert_file, config_.tls_key_file, config_.tls_client_ca_file};
  if (!security.cert_file.empty()) {
    StatusOr<std::shared_ptr<LiveIdentity>> identity = LiveIdentity::Load(security);
    if (!identity.ok()) return identity.status().WithContext("setting up transport security");
    identity_ = std::move(identity).value();
  }
  StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(identity_, tokens_);
  if (!credentials.ok()) return credentials.status().WithContext("setting up transport security");

  if (!config_.metrics_listen.empty()) metrics_ = std::make_unique<Metrics>();

  const bool shared = !config_.store.empty();
  KLS_RETURN_IF_ERROR(OpenStore(shared));
  kernel_cache_ = std::make_unique<KernelCache>(store_.get(), config_.kernel_cache_bytes());

  // Job recovery and the worker pool, before any RPC can reach the queue.
  KLS_RETURN_IF_ERROR(StartJobManager(shared));
  CreateServices(shared);

  // The metrics endpoint, before the gRPC port: a bad metrics_listen fails
  // the start with nothing served.
  if (metrics_) {
    metrics_->SetScrapeSources(store_.get(), kernel_cache_.get());
    if (const Status s = metrics_->Serve(config_.metrics_listen); !s.ok()) {
      ReleaseState();
      return s;
    }
  }

  KLS_RETURN_IF_ERROR(StartGrpcServer(*credentials));
  KLS_RETURN_IF_ERROR(StartHttpGateway(security));

  if (data_dir_) {
    const Status recorded = data_dir_->RecordListenAddress(target());
    if (!recorded.ok()) {
      Stop(std::chrono::milliseconds(0));
      return recorded;
    }
  }

  SetServing(true);
  readiness_ = std::thread([this] { ReadinessLoop(); });
  LogServing(tokens.get(), shared);
  return OkStatus();
}

Status KlsServer::OpenStore(bool shared) {
  if (!shared) {
    KLS_ASSIGN_OR_RETURN(data_dir_, DataDir::Open(config_.data_dir));
    // The store, then its integrity: problems are logged and served as
    // DATA_LOSS by the affected calls, so one bad artifact does not take the
    // whole server down.
    StatusOr<std::unique_ptr<store::Store>> opened_store = store::OpenSqliteStore(data_dir_->path());
    if (!opened_store.ok()) {
      ReleaseState();
      return opened_store.status().WithContext("opening the store in " + config_.data_dir);
    }
    store_ = std::move(opened_store).value();
    if (metrics_) store_ = metrics_->Instrument(std::move(store_));
    const StatusOr<std::vector<std::string>> problems = store_->CheckIntegrity();
    if (!problems.ok()) {
      spdlog::error("store integrity check could not run: {}", problems.status().ToString());
    } else if (!problems->empty()) {
      spdlog::error("store integrity check found {} problem(s); affected items will answer DATA_LOSS",
                    problems->size());
      for (const std::string& p : *problems) spdlog::error("  {}", p);
    } else {
      spdlog::info("store integrity check passed");
    }
  } else {
    // Shared store: every replica is stateless; artifacts are verified as
    // they enter the local cache (a full scan at every replica start would
    // read the whole database).
    store::PostgresStoreOptions pg;
    pg.uri = config_.store;
    pg.cache_dir = config_.cache_dir;
    pg.cache_disk_bytes = int64_t{config_.cache_disk_mb} * 1024 * 1024;
    pg.pool_size = std::max(4, config_.ResolvedWorkers() + 4);
    pg.idle_in_transaction_seconds = config_.lease_seconds;
    StatusOr<std::unique_ptr<store::Store>> opened_store = store::OpenPostgresStore(pg);
    if (!opened_store.ok()) {
      ReleaseState();
      return opened_store.status().WithContext("opening the shared store");
    }
    store_ = std::move(opened_store).value();
    if (metrics_) store_ = metrics_->Instrument(std::move(store_));
  }
  return OkStatus();
}

Status KlsServer::StartJobManager(bool shared) {
  JobManagerOptions job_options;
  job_options.workers = config_.RunsWorkers() ? config_.ResolvedWorkers() : -1;
  job_options.lease_seconds = config_.lease_seconds;
  job_options.checkpoint_interval_seconds = config_.checkpoint_seconds;
  job_options.max_attempts = config_.max_attempts;
  job_options.max_lost_attempts = config_.max_lost_attempts;
  job_options.exclusive_store = !shared;
  // A crash signal in a solver thread is recorded here for the next start
  // (server/jobs/crash_marker.h): the data directory, or a shared-store
  // replica's cache directory when it has one.
  if (!shared) {
    job_options.crash_marker_path = data_dir_->path() + "/crash-marker";
  } else if (!config_.cache_dir.empty()) {
    job_options.crash_marker_path = config_.cache_dir + "/crash-marker";
  }
  job_options.metrics = metrics_.get();
  job_manager_ = std::make_unique<JobManager>(store_.get(), job_options);
  // Events (own writes; other replicas' through the shared store) wake
  // workers and watchers and drop cached resolutions of changed kernels.
  store_->SetListener([jobs = job_manager_.get(), cache = kernel_cache_.get()](const store::StoreEvent& e) {
    if (e.kind == store::StoreEvent::Kind::kKernelChanged) cache->OnKernelChanged(e.name);
    if (e.kind == store::StoreEvent::Kind::kDatasetChanged) cache->OnDatasetChanged(e.name);
    jobs->OnStoreEvent(e);
  });
  if (const Status s = job_manager_->Start(); !s.ok()) {
    ReleaseState();
    return s.WithContext("starting the job manager");
  }
  return OkStatus();
}

void KlsServer::CreateServices(bool shared) {
  ServerFacts facts;
  facts.version = KLS_VERSION;
  facts.data_dir = shared ? "(shared store)" : data_dir_->path();
  facts.worker_threads = config_.ResolvedWorkers();
  facts.max_message_bytes = config_.max_message_bytes();
  facts.shared_store = shared;
  if (!config_.backup_dir.empty()) facts.backup_dir = std::filesystem::absolute(config_.backup_dir).string();
  admin_service_ = std::make_unique<AdminService>(std::move(facts));
  datasets_service_ = std::make_unique<DatasetsService>(store_.get());
  jobs_service_ = std::make_unique<JobsService>(job_manager_.get(), store_.get());
  kernels_service_ = std::make_unique<KernelsService>(store_.get(), kernel_cache_.get());
  queries_service_ = std::make_unique<QueriesService>(kernel_cache_.get());
}

Status KlsServer::StartGrpcServer(const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  // Both are process-wide switches read when a ServerBuilder is created.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int selected_port = 0;
  // Plain TCP or TLS; with a tokens file, every call passes the token check
  // (server/auth.h) before it reaches a handler.
  builder.AddListeningPort(config_.listen, credentials, &selected_port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes()));
  builder.SetMaxSendMessageSize(static_cast<int>(config_.max_message_bytes()));
  // gRPC sets SO_REUSEPORT by default, which would let a second server share
  // a busy port silently; a busy port must be an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Request ids, the log context of each call, RPC metrics (server/rpc_observer.h).
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<RpcObserverFactory>(metrics_.get(), config_.access_log));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(admin_service_.get());
  if (config_.ServesApi()) {
    builder.RegisterService(datasets_service_.get());
    builder.RegisterService(jobs_service_.get());
  }
  if (config_.ServesQueries()) {
    builder.RegisterService(kernels_service_.get());
    builder.RegisterService(queries_service_.get());
    // Services that files outside server/ register (service_registry.h), over the same cache.
    ServiceRegistry::Global().AddTo(&builder, ServiceDeps{kernel_cache_.get()});
  }

  server_ = builder.BuildAndStart();
  if (!server_ || selected_port == 0) {
    server_.reset();
    ReleaseState();
    return Status(StatusCode::kUnavailable,
                  "cannot listen on " + config_.listen + " (address in use, or not an address of this machine)");
  }
  port_ = selected_port;
  SetServing(false);  // the default health service starts "" as SERVING
  return OkStatus();
}

Status KlsServer::StartHttpGateway(const TransportSecurity& security) {
  if (config_.http_listen.empty()) return OkStatus();
  http::HttpGatewayOptions http_options;
  http_options.listen = config_.http_listen;
  http_options.security = security;
  http_options.identity = identity_;
  http_options.tokens = tokens_;
  http_options.cors_origins = SplitOrigins(config_.http_cors_origins);
  http_options.max_body_bytes = config_.max_message_bytes();
  http_options.threads = config_.http_threads;
  http_options.access_log = config_.access_log;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes()));
  args.SetMaxSendMessageSize(static_cast<int>(config_.max_message_bytes()));
  StatusOr<std::unique_ptr<http::HttpGateway>> gateway =
      http::HttpGateway::Start(std::move(http_options), server_->InProcessChannel(args));
  if (!gateway.ok()) {
    Stop(std::chrono::milliseconds(0));
    return gateway.status();
  }
  http_ = std::move(gateway).value();
  return OkStatus();
}

void KlsServer::LogServing(const TokenTable* tokens, bool shared) const {
  const bool loopback = IsLoopbackHost(HostOf(config_.listen));
  if (!tokens && !loopback) {
    spdlog::warn("authorization is OFF (no tokens_file) while listening on {}: anyone who can reach this "
                 "address can read, upload and delete; set tokens_file (README, 'Security')",
                 config_.listen);
  }
  if (tokens && config_.tls_cert_file.empty() && !loopback) {
    spdlog::warn("bearer tokens travel in clear text: listening on {} without TLS (set tls_cert_file and "
                 "tls_key_file, or terminate TLS in a proxy)",
                 config_.listen);
  }
  spdlog::info("security: {}, {}",
               config_.tls_cert_file.empty() ? "plain TCP"
               : config_.tls_client_ca_file.empty() ? "TLS"
                                                    : "mutual TLS (client certificates required)",
               tokens ? "bearer tokens required (" + std::to_string(tokens->size()) + " configured)"
                      : std::string("authorization off"));
  spdlog::info("kls-server {} serving on {}:{} (role {}, {}, {} workers, max message {} MiB, kernel cache {} MiB)",
               KLS_VERSION, HostOf(config_.listen), port_, config_.role,
               shared ? "shared PostgreSQL store" : "data dir " + data_dir_->path(), job_manager_->worker_count(),
               config_.max_message_mb, config_.kernel_cache_mb);
  if (metrics_) {
    spdlog::info("metrics: http://{}:{}/metrics", HostOf(config_.metrics_listen), metrics_->port());
  }
  if (http_) {
    spdlog::info("http: {}://{}:{}/ (API under /v1/, /openapi.json, web console at /)",
                 config_.tls_cert_file.empty() ? "http" : "https", HostOf(config_.http_listen), http_->port());
  }
}

KlsServer::ReloadReport KlsServer::ReloadSecurity() {
  std::lock_guard<std::mutex> lock(reload_mu_);  // one reload at a time
  ReloadReport report;
  if (tokens_) {
    const StatusOr<size_t> n = tokens_->Reload();
    if (n.ok()) {
      spdlog::info("reloaded tokens_file {}: {} tokens", tokens_->path(), *n);
    } else {
      report.tokens = n.status();
      spdlog::error("reloading tokens_file {} failed, keeping the {} tokens loaded before: {}", tokens_->path(),
                    tokens_->Get()->size(), n.status().ToString());
    }
  }
  if (identity_) {
    const StatusOr<std::string> summary = identity_->Reload();
    if (summary.ok()) {
      spdlog::info("reloaded the TLS certificate {} and key {}{}: {}; new connections use it",
                   identity_->files().cert_file, identity_->files().key_file,
                   identity_->files().client_ca_file.empty() ? "" : " and client CA " + identity_->files().client_ca_file,
                   *summary);
    } else {
      report.certificate = summary.status();
      spdlog::error("reloading the TLS certificate failed, keeping the one loaded before ({}): {}",
                    identity_->Summary(), summary.status().ToString());
    }
  }
  if (!tokens_ && !identity_) spdlog::info("reload: no tokens_file and no TLS certificate to reload");
  return report;
}

void KlsServer::Stop(std::chrono::milliseconds grace) {
  if (!server_) return;
  {
    std::lock_guard<std::mutex> lock(readiness_mu_);
    stopping_ = true;
  }
  readiness_cv_.notify_all();
  if (readiness_.joinable()) readiness_.join();
  SetServing(false);
  if (http_) http_->Stop();  // its open streams end before the calls they wrap
  // Stop taking jobs and stop the solvers first (running jobs return to the
  // queue for the next start), then let in-flight calls finish within `grace`.
  job_manager_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
  ReleaseState();
  spdlog::info("kls-server stopped");
}

void KlsServer::ReleaseState() {
  // The store's listener captures the job manager and the kernel cache: no
  // event may reach them once they are destroyed below (a shared store
  // delivers on its own thread).
  http_.reset();  // before the services its requests call
  if (store_) store_->SetListener(nullptr);
  if (metrics_) {
    metrics_->StopServing();
    metrics_->SetScrapeSources(nullptr, nullptr);
  }
  queries_service_.reset();
  kernels_service_.reset();
  jobs_service_.reset();
  datasets_service_.reset();
  admin_service_.reset();
  if (job_manager_) job_manager_->Shutdown();
  job_manager_.reset();
  kernel_cache_.reset();
  store_.reset();
  data_dir_.reset();  // releases the lock only after no call can touch the directory
  metrics_.reset();   // after the store and the manager, which report to it
}

void KlsServer::SetServing(bool serving) {
  if (!server_) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus("", serving);
  for (const char* name : kServiceNames) health->SetServingStatus(name, serving);
}

void KlsServer::ReadinessLoop() {
  // Liveness ("") stays SERVING while the process runs; readiness of the
  // KLS services follows the store: a database outage makes the replica
  // not-ready (the orchestrator stops routing to it) but never restarts it;
  // cached kernels keep answering meanwhile.
  bool ready = true;
  std::unique_lock<std::mutex> lock(readiness_mu_);
  while (!stopping_) {
    lock.unlock();
    const Status ping = store_->Ping();
    if (ping.ok() != ready) {
      ready = ping.ok();
      if (ready) {
        spdlog::info("store reachable again; ready");
      } else {
        spdlog::warn("store unreachable ({}); not ready", ping.ToString());
      }
      if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
        for (const char* name : kServiceNames) health->SetServingStatus(name, ready);
      }
    }
    lock.lock();
    readiness_cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stopping_; });
  }
}

std::string KlsServer::target() const {
  std::string host = HostOf(config_.listen);
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "[::]") host = "[::1]";
  return host + ":" + std::to_string(port_);
}

int KlsServer::http_port() const { return http_ ? http_->port() : 0; }

int KlsServer::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

std::string KlsServer::data_dir() const { return data_dir_ ? data_dir_->path() : std::string(); }

}  // namespace kls::server
