// kls.v1.Jobs: Submit, Get, List, Cancel, Watch, History over a JobManager.
//
// Synchronous gRPC API: every handler is short (validate → manager/store →
// status_mapping) except Watch, which holds its RPC thread while it streams;
// it waits on JobManager::WaitForChange in slices of kWatchPollInterval so a
// cancelled call (client gone, deadline, server shutdown) ends within one
// slice.
//
// Thread safety: handlers run concurrently; the service itself is stateless.
// `manager` and `store` must outlive the grpc::Server the service is
// registered on.
#pragma once

#include <chrono>

#include "kls/v1/jobs.grpc.pb.h"
#include "server/jobs/job_manager.h"
#include "server/store/store.h"

namespace kls::server {

class JobsService final : public kls::v1::Jobs::Service {
 public:
  /// How long Watch waits for a change before re-checking its call.
  static constexpr std::chrono::milliseconds kWatchPollInterval{100};

  JobsService(JobManager* manager, store::Store* store) : manager_(manager), store_(store) {}

  grpc::Status Submit(grpc::ServerContext* context, const kls::v1::SubmitJobRequest* request,
                      kls::v1::Job* response) override;
  grpc::Status Get(grpc::ServerContext* context, const kls::v1::GetJobRequest* request,
                   kls::v1::Job* response) override;
  grpc::Status List(grpc::ServerContext* context, const kls::v1::ListJobsRequest* request,
                    kls::v1::ListJobsResponse* response) override;
  grpc::Status Cancel(grpc::ServerContext* context, const kls::v1::CancelJobRequest* request,
                      kls::v1::Job* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const kls::v1::WatchJobRequest* request,
                     grpc::ServerWriter<kls::v1::JobEvent>* writer) override;
  grpc::Status History(grpc::ServerContext* context, const kls::v1::GetJobRequest* request,
                       kls::v1::JobHistory* response) override;

 private:
  JobManager* manager_;
  store::Store* store_;
};

}  // namespace kls::server
