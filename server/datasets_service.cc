#include "server/datasets_service.h"

#include <spdlog/spdlog.h>

#include <string>

#include "server/status_mapping.h"

namespace kls::server {

void ToProto(const store::DatasetRecord& r, kls::v1::DatasetInfo* info) {
  info->set_id(r.id);
  info->set_name(r.name);
  info->set_num_points(r.num_points);
  info->set_dim(static_cast<int32_t>(r.dim));
  info->set_num_classes(static_cast<int32_t>(r.num_classes));
  info->set_num_constraints(r.num_constraints);
  info->set_created_unix_ms(r.created_unix_ms);
}

grpc::Status DatasetsService::Upload(grpc::ServerContext* context,
                                     grpc::ServerReader<kls::v1::UploadDatasetRequest>* reader,
                                     kls::v1::DatasetInfo* response) {
  UploadAssembler upload(limits_);
  kls::v1::UploadDatasetRequest message;
  while (reader->Read(&message)) {
    // Returning ends the call: the rest of the client's stream is discarded.
    if (const Status s = upload.Add(message); !s.ok()) return ToGrpcStatus(s);
  }
  if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "upload cancelled; nothing was stored");
  if (const Status s = upload.Finish(); !s.ok()) return ToGrpcStatus(s);

  const store::StoredDataset* data = &upload.data();
  StatusOr<store::StoredDataset> merged = InvalidArgumentError("unset");
  if (const std::string& base = upload.header().base_dataset_id(); !base.empty()) {
    StatusOr<store::StoredDataset> loaded = store_->LoadDataset(base);
    if (!loaded.ok()) {
      return ToGrpcStatus(Status(loaded.status().code(),
                                 "header.base_dataset_id = \"" + base + "\": " + loaded.status().message()));
    }
    merged = MergeAppend(upload.header(), *std::move(loaded), upload.data().constraints);
    if (!merged.ok()) return ToGrpcStatus(merged.status());
    data = &*merged;
  }
  const StatusOr<store::DatasetRecord> stored = store_->PutDataset(upload.header().name(), *data);
  if (!stored.ok()) return ToGrpcStatus(stored.status());
  spdlog::info("data set {} '{}' stored: {} points × {} features, {} constraints", stored->id, stored->name,
               stored->num_points, stored->dim, stored->num_constraints);
  ToProto(*stored, response);
  return grpc::Status::OK;
}

grpc::Status DatasetsService::Get(grpc::ServerContext*, const kls::v1::GetDatasetRequest* request,
                                  kls::v1::DatasetInfo* response) {
  if (request->id().empty()) return ToGrpcStatus(InvalidArgumentError("id must not be empty"));
  const StatusOr<store::DatasetRecord> record = store_->GetDatasetRecord(request->id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  ToProto(*record, response);
  return grpc::Status::OK;
}

grpc::Status DatasetsService::List(grpc::ServerContext*, const kls::v1::ListDatasetsRequest*,
                                   kls::v1::ListDatasetsResponse* response) {
  const StatusOr<std::vector<store::DatasetRecord>> records = store_->ListDatasets();
  if (!records.ok()) return ToGrpcStatus(records.status());
  for (const store::DatasetRecord& r : *records) ToProto(r, response->add_datasets());
  return grpc::Status::OK;
}

grpc::Status DatasetsService::Delete(grpc::ServerContext*, const kls::v1::DeleteDatasetRequest* request,
                                     kls::v1::DeleteDatasetResponse*) {
  if (request->id().empty()) return ToGrpcStatus(InvalidArgumentError("id must not be empty"));
  const Status deleted = store_->DeleteDataset(request->id());
  if (deleted.ok()) spdlog::info("data set {} deleted", request->id());
  return ToGrpcStatus(deleted);
}

}  // namespace kls::server
