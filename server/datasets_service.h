// kls.v1.Datasets: Upload (client stream), Get, List, Delete, SetAttributes (client stream).
//
// Upload feeds the stream to an UploadAssembler (server/upload_assembler.h),
// which checks every message as it arrives; any violation is INVALID_ARGUMENT
// (RESOURCE_EXHAUSTED for the size limits) and nothing is stored: the data set
// is written by Store::PutDataset only after the whole stream checked out.
//
// DatasetInfo's class_sizes, must_link and cannot_link need the data set
// itself (the store's record has no place for them): Upload counts them from
// the data it just stored, Get from the loaded data set, remembered per id
// (data sets are immutable and ids never reused, so a remembered count never
// goes stale); List leaves them out and stays a metadata read.
//
// Thread safety: handlers run concurrently; the counts memo is guarded by a
// mutex, held only for map updates.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kls/v1/datasets.grpc.pb.h"
#include "server/store/store.h"
#include "server/upload_assembler.h"

namespace kls::server {

/// What DatasetInfo reports beyond the store's record: points per class and
/// stored pairs by kind.
struct DatasetCounts {
  /// Points per class id 0..num_classes−1; empty when unlabeled, or when the
  /// labels are ids beyond kMaxClassSizes classes.
  std::vector<int64_t> class_sizes;
  int64_t must_link = 0, cannot_link = 0;
  /// Above this many classes (1 + the largest label) class_sizes stays empty.
  static constexpr int64_t kMaxClassSizes = 10000;
};

/// Counts `data`'s labels by class and its pairs by kind. O(n + m).
DatasetCounts CountDataset(const store::StoredDataset& data);

class DatasetsService final : public kls::v1::Datasets::Service {
 public:
  /// Data sets whose counts Get remembers (oldest forgotten first).
  static constexpr size_t kCountsMemo = 4096;

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
  /// The counts of data set `id`: remembered, or loaded and counted.
  StatusOr<std::shared_ptr<const DatasetCounts>> Counts(const std::string& id);
  void Remember(const std::string& id, std::shared_ptr<const DatasetCounts> counts);

  store::Store* const store_;
  const UploadLimits limits_;
  std::mutex counts_mu_;
  std::unordered_map<std::string, std::shared_ptr<const DatasetCounts>> counts_;  ///< guarded by counts_mu_
  std::deque<std::string> counts_order_;                                        ///< insertion order, oldest first
};

/// store::DatasetRecord → kls.v1.DatasetInfo.
void ToProto(const store::DatasetRecord& record, kls::v1::DatasetInfo* info);
/// DatasetCounts → DatasetInfo's class_sizes, must_link, cannot_link.
void ToProto(const DatasetCounts& counts, kls::v1::DatasetInfo* info);

}  // namespace kls::server
