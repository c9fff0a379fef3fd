// kls.v1.Datasets: Upload (client stream), Get, List, Delete.
//
// Upload feeds the stream to an UploadAssembler (server/upload_assembler.h),
// which checks every message as it arrives; any violation is INVALID_ARGUMENT
// (RESOURCE_EXHAUSTED for the size limits) and nothing is stored: the data set
// is written by Store::PutDataset only after the whole stream checked out.
//
// Thread safety: handlers run concurrently; the service holds no mutable state.
#pragma once

#include <cstdint>

#include "kls/v1/datasets.grpc.pb.h"
#include "server/store/store.h"
#include "server/upload_assembler.h"

namespace kls::server {

class DatasetsService final : public kls::v1::Datasets::Service {
 public:
  /// `store` must outlive the grpc::Server the service is registered on.
  explicit DatasetsService(store::Store* store, UploadLimits limits = {}) : store_(store), limits_(limits) {}

  grpc::Status Upload(grpc::ServerContext* context, grpc::ServerReader<kls::v1::UploadDatasetRequest>* reader,
                      kls::v1::DatasetInfo* response) override;
  grpc::Status Get(grpc::ServerContext* context, const kls::v1::GetDatasetRequest* request,
                   kls::v1::DatasetInfo* response) override;
  grpc::Status List(grpc::ServerContext* context, const kls::v1::ListDatasetsRequest* request,
                    kls::v1::ListDatasetsResponse* response) override;
  grpc::Status Delete(grpc::ServerContext* context, const kls::v1::DeleteDatasetRequest* request,
                      kls::v1::DeleteDatasetResponse* response) override;
  grpc::Status SetAttributes(grpc::ServerContext* context, grpc::ServerReader<kls::v1::SetAttributesRequest>* reader,
                             kls::v1::DatasetInfo* response) override;

 private:
  store::Store* const store_;
  const UploadLimits limits_;
};

/// store::DatasetRecord → kls.v1.DatasetInfo.
void ToProto(const store::DatasetRecord& record, kls::v1::DatasetInfo* info);

}  // namespace kls::server
