#include "server/jobs_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

#include <string>
#include <vector>

#include "server/grpc_macros.h"
#include "server/jobs/proto_convert.h"
#include "server/status_mapping.h"

namespace kls::server {
namespace {

grpc::Status MissingId() { return ToGrpcStatus(InvalidArgumentError("id is required")); }

// proto3 keeps fields it does not know (e.g. an option or a solver added in a
// newer client) as unknown fields and would otherwise run the job without
// them. Refuse instead, naming where the field sits: "graph: unknown field 99".
Status RejectUnknownFields(const google::protobuf::Message& message, const std::string& path) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = reflection->GetUnknownFields(message);
  if (!unknown.empty()) {
    return InvalidArgumentError((path.empty() ? std::string("the request") : path) + ": unknown field " +
                                std::to_string(unknown.field(0).number()) +
                                " (an option or solver this server does not know; is the client newer?)");
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated()) continue;
    const std::string child = path.empty() ? field->name() : path + "." + field->name();
    KLS_RETURN_IF_ERROR(RejectUnknownFields(reflection->GetMessage(message, field), child));
  }
  return OkStatus();
}

}  // namespace

grpc::Status JobsService::Submit(grpc::ServerContext* /*context*/, const kls::v1::SubmitJobRequest* request,
                                 kls::v1::Job* response) {
  KLS_GRPC_RETURN_IF_ERROR(RejectUnknownFields(*request, ""));
  StatusOr<store::JobRecord> record = JobRecordFromSubmit(*request);  // the request's own checks first
  KLS_GRPC_RETURN_IF_ERROR(record.status());
  // dataset_id: an id or a name (the newest data set of that name), as everywhere.
  if (!request->dataset_id().empty()) {
    const StatusOr<store::DatasetRecord> dataset = store::ResolveDataset(store_, request->dataset_id(), "dataset_id");
    if (!dataset.ok() && dataset.status().code() != StatusCode::kNotFound) return ToGrpcStatus(dataset.status());
    if (dataset.ok()) record->dataset_id = dataset->id;  // NOT_FOUND: the manager says so, as before
  }
  StatusOr<store::JobRecord> queued = manager_->Submit(std::move(record).value());
  KLS_GRPC_RETURN_IF_ERROR(queued.status());
  *response = ToProtoJob(*queued);
  return grpc::Status::OK;
}

grpc::Status JobsService::Get(grpc::ServerContext* /*context*/, const kls::v1::GetJobRequest* request,
                              kls::v1::Job* response) {
  if (request->id().empty()) return MissingId();
  StatusOr<store::JobRecord> job = manager_->Get(request->id());
  KLS_GRPC_RETURN_IF_ERROR(job.status());
  *response = ToProtoJob(*job);
  return grpc::Status::OK;
}

grpc::Status JobsService::History(grpc::ServerContext* /*context*/, const kls::v1::GetJobRequest* request,
                                  kls::v1::JobHistory* response) {
  if (request->id().empty()) return MissingId();
  StatusOr<JobConvergence> history = manager_->History(request->id());
  KLS_GRPC_RETURN_IF_ERROR(history.status());
  response->set_id(request->id());
  for (const ProgressEvent& e : history->points) ToProto(e, response->add_points());
  response->set_complete(history->complete);
  return grpc::Status::OK;
}

grpc::Status JobsService::List(grpc::ServerContext* /*context*/, const kls::v1::ListJobsRequest* request,
                               kls::v1::ListJobsResponse* response) {
  StatusOr<store::JobFilter> filter = ToJobFilter(*request);
  KLS_GRPC_RETURN_IF_ERROR(filter.status());
  std::string next;
  StatusOr<std::vector<store::JobRecord>> jobs = store_->ListJobs(*filter, &next);
  KLS_GRPC_RETURN_IF_ERROR(jobs.status());
  for (const store::JobRecord& job : *jobs) *response->add_jobs() = ToProtoJob(job);
  response->set_next_page_token(next);
  return grpc::Status::OK;
}

grpc::Status JobsService::Cancel(grpc::ServerContext* /*context*/, const kls::v1::CancelJobRequest* request,
                                 kls::v1::Job* response) {
  if (request->id().empty()) return MissingId();
  StatusOr<store::JobRecord> job = manager_->Cancel(request->id());
  KLS_GRPC_RETURN_IF_ERROR(job.status());
  *response = ToProtoJob(*job);
  return grpc::Status::OK;
}

grpc::Status JobsService::Watch(grpc::ServerContext* context, const kls::v1::WatchJobRequest* request,
                                grpc::ServerWriter<kls::v1::JobEvent>* writer) {
  if (request->id().empty()) return MissingId();
  uint64_t version = 0;
  while (!context->IsCancelled()) {
    const uint64_t seen = version;
    StatusOr<store::JobRecord> job = manager_->WaitForChange(request->id(), &version, kWatchPollInterval);
    KLS_GRPC_RETURN_IF_ERROR(job.status());
    if (version != seen) {
      kls::v1::JobEvent event;
      *event.mutable_job() = ToProtoJob(*job);
      if (!writer->Write(event)) return grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away");
    }
    if (store::IsTerminal(job->state)) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
}

}  // namespace kls::server
