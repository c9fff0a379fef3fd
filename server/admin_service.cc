#include "server/admin_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "server/status_mapping.h"
#include "server/store/backup.h"

namespace kls::server {
namespace {

// "kls-backup-20261128T041500.123Z" (UTC).
std::string DefaultBackupName() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&t, &utc);
  std::ostringstream out;
  out << "kls-backup-" << std::put_time(&utc, "%Y%m%dT%H%M%S") << '.' << std::setw(3) << std::setfill('0') << ms
      << 'Z';
  return out.str();
}

Status CheckBackupName(const std::string& name) {
  const auto allowed = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  };
  if (name.size() > 100 || name.front() == '.' || !std::all_of(name.begin(), name.end(), allowed)) {
    return InvalidArgumentError("name = '" + name +
                                "' is not a snapshot name: 1..100 characters of A-Z a-z 0-9 . _ -, not starting "
                                "with '.'");
  }
  return OkStatus();
}

}  // namespace

AdminService::~AdminService() {
  if (backup_thread_.joinable()) backup_thread_.join();
}

grpc::ServerUnaryReactor* AdminService::Echo(grpc::CallbackServerContext* context,
                                             const kls::v1::EchoRequest* request,
                                             kls::v1::EchoResponse* response) {
  response->set_payload(request->payload());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::GetServerInfo(grpc::CallbackServerContext* context,
                                                      const kls::v1::GetServerInfoRequest* /*request*/,
                                                      kls::v1::ServerInfo* response) {
  const std::chrono::duration<double> uptime = std::chrono::steady_clock::now() - facts_.started_at;
  response->set_version(facts_.version);
  response->set_data_dir(facts_.data_dir);
  response->set_uptime_seconds(uptime.count());
  response->set_worker_threads(facts_.worker_threads);
  response->set_max_message_bytes(facts_.max_message_bytes);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::Backup(grpc::CallbackServerContext* context,
                                               const kls::v1::BackupRequest* request,
                                               kls::v1::BackupResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const auto refuse = [reactor](const Status& status) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  };
  if (facts_.shared_store) {
    return refuse(FailedPreconditionError(
        "Backup snapshots the embedded store; this server uses the PostgreSQL store: back it up with pg_dump "
        "(docs/OPERATIONS.md, Backup and restore)"));
  }
  if (facts_.backup_dir.empty()) {
    return refuse(FailedPreconditionError(
        "backup_dir is not set on this server (config key backup_dir or flag --backup-dir): it has nowhere to "
        "write the snapshot"));
  }
  const std::string name = request->name().empty() ? DefaultBackupName() : request->name();
  if (const Status bad = CheckBackupName(name); !bad.ok()) return refuse(bad);
  namespace fs = std::filesystem;
  const fs::path target = fs::path(facts_.backup_dir) / name;
  std::error_code ec;
  if (fs::exists(target, ec) && !fs::is_empty(target, ec)) {
    return refuse(Status(StatusCode::kAlreadyExists,
                         "the snapshot directory '" + target.string() + "' exists and is not empty; give another name"));
  }
  std::lock_guard<std::mutex> lock(backup_mu_);
  if (backup_running_) {
    return refuse(FailedPreconditionError("a backup is already running (into '" + backup_running_path_ +
                                          "'); one backup at a time, try again when it has finished"));
  }
  fs::create_directories(facts_.backup_dir, ec);
  if (ec) {
    return refuse(FailedPreconditionError("cannot create backup_dir '" + facts_.backup_dir + "': " + ec.message()));
  }
  if (backup_thread_.joinable()) backup_thread_.join();  // the previous backup, finished
  backup_running_ = true;
  backup_running_path_ = target.string();
  spdlog::info("backup of {} into {} started", facts_.data_dir, target.string());
  backup_thread_ = std::thread([this, reactor, response, target] {
    const auto start = std::chrono::steady_clock::now();
    const StatusOr<store::BackupReport> r =
        store::BackupDataDirectory(facts_.data_dir, target.string(), facts_.version);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    grpc::Status status = grpc::Status::OK;
    if (r.ok()) {
      response->set_path(target.string());
      response->set_datasets(r->datasets);
      response->set_kernels(r->kernels);
      response->set_jobs(r->jobs);
      response->set_files(r->files);
      response->set_bytes(r->bytes);
      response->set_linked(r->linked);
      response->set_schema_version(r->schema_version);
      response->set_attempts(r->attempts);
      response->set_seconds(seconds);
      response->set_kls_version(facts_.version);
      spdlog::info("backup into {} done in {:.2f} s: {} data sets, {} kernels, {} jobs; {} files, {} bytes ({} "
                   "hard-linked), schema {}",
                   target.string(), seconds, r->datasets, r->kernels, r->jobs, r->files, r->bytes, r->linked,
                   r->schema_version);
    } else {
      spdlog::error("backup into {} failed after {:.2f} s: {}", target.string(), seconds, r.status().ToString());
      status = ToGrpcStatus(r.status().WithContext("backup into '" + target.string() + "'"));
    }
    {
      std::lock_guard<std::mutex> done(backup_mu_);
      backup_running_ = false;
    }
    reactor->Finish(status);
  });
  return reactor;
}

}  // namespace kls::server
