// kls.v1.Datasets: Upload (client stream), Get, List, Delete.
//
// Upload checks everything before the store sees it (datasets.proto):
//   - the first message is the header; its declared sizes are checked against
//     the limits below BEFORE anything is allocated (RESOURCE_EXHAUSTED naming
//     the field and value);
//   - feature rows arrive in order (FeatureChunk.first_row = rows so far),
//     dense (a multiple of dim values) or sparse (ascending indices < dim),
//     every value finite ("features[3][1] = nan is not finite"), one label /
//     key per row exactly when the header says so, keys unique and non-empty;
//   - constraint indices in range, kind ±1, at most num_constraints pairs;
//   - the stream ends with exactly num_points rows and num_constraints pairs.
// Any violation is INVALID_ARGUMENT (RESOURCE_EXHAUSTED for the size limits)
// and nothing is stored; the data set is written by Store::PutDataset only
// after the whole stream checked out.
//
// Memory: the dense n × d matrix is allocated when the first feature chunk
// arrives (at most 2^30 values = 8 GiB by the limits); allocation failure is
// RESOURCE_EXHAUSTED.
//
// Thread safety: handlers run concurrently; the service holds no mutable state.
#pragma once

#include <cstdint>

#include "kls/v1/datasets.grpc.pb.h"
#include "server/store/store.h"

namespace kls::server {

/// Upload limits on the header's declared sizes (datasets.proto).
struct UploadLimits {
  int64_t max_points = 10'000'000;          ///< header.num_points
  int64_t max_dim = 1'000'000;              ///< header.dim
  int64_t max_values = int64_t{1} << 30;    ///< header.num_points × header.dim
  int64_t max_constraints = 100'000'000;    ///< header.num_constraints
  int64_t max_name_bytes = 256;             ///< header.name
};

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

 private:
  store::Store* const store_;
  const UploadLimits limits_;
};

/// store::DatasetRecord → kls.v1.DatasetInfo.
void ToProto(const store::DatasetRecord& record, kls::v1::DatasetInfo* info);

}  // namespace kls::server
