#include "server/datasets_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "core/model/item_attributes.h"
#include "server/grpc_macros.h"
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
  info->set_attributes(r.attributes_summary);
  info->set_attributes_version(r.attributes_version);
}

void ToProto(const DatasetCounts& counts, kls::v1::DatasetInfo* info) {
  info->mutable_class_sizes()->Assign(counts.class_sizes.begin(), counts.class_sizes.end());
  info->set_must_link(counts.must_link);
  info->set_cannot_link(counts.cannot_link);
}

DatasetCounts CountDataset(const store::StoredDataset& data) {
  DatasetCounts counts;
  const std::vector<int>& labels = data.data.labels;
  if (!labels.empty()) {
    const int64_t classes = int64_t{*std::max_element(labels.begin(), labels.end())} + 1;
    if (classes <= DatasetCounts::kMaxClassSizes) {
      counts.class_sizes.assign(static_cast<size_t>(classes), 0);
      for (int label : labels) ++counts.class_sizes[static_cast<size_t>(label)];
    }
  }
  for (const Pair& p : data.constraints.pairs) {
    if (p.kind == PairKind::kMustLink) {
      ++counts.must_link;
    } else {
      ++counts.cannot_link;
    }
  }
  return counts;
}

void DatasetsService::Remember(const std::string& id, std::shared_ptr<const DatasetCounts> counts) {
  std::lock_guard<std::mutex> lock(counts_mu_);
  if (!counts_.emplace(id, std::move(counts)).second) return;
  counts_order_.push_back(id);
  while (counts_order_.size() > kCountsMemo) {
    counts_.erase(counts_order_.front());
    counts_order_.pop_front();
  }
}

StatusOr<std::shared_ptr<const DatasetCounts>> DatasetsService::Counts(const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(counts_mu_);
    if (auto it = counts_.find(id); it != counts_.end()) return it->second;
  }
  KLS_ASSIGN_OR_RETURN(store::StoredDataset data, store_->LoadDataset(id));
  auto counts = std::make_shared<const DatasetCounts>(CountDataset(data));
  Remember(id, counts);
  return std::shared_ptr<const DatasetCounts>(counts);
}

namespace {

// Parses an attribute CSV against a data set's items (keys when it has them).
StatusOr<ItemAttributes> ParseAttributes(const std::string& csv, const Dataset& data) {
  std::unordered_map<std::string, int> index;
  index.reserve(data.item_keys.size());
  for (size_t i = 0; i < data.item_keys.size(); ++i) index.emplace(data.item_keys[i], static_cast<int>(i));
  return ParseAttributesCsv(csv, data.num_points(), data.item_keys.empty() ? nullptr : &index, "attributes");
}


}  // namespace

grpc::Status DatasetsService::Upload(grpc::ServerContext* context,
                                     grpc::ServerReader<kls::v1::UploadDatasetRequest>* reader,
                                     kls::v1::DatasetInfo* response) {
  UploadAssembler upload(limits_);
  kls::v1::UploadDatasetRequest message;
  while (reader->Read(&message)) {
    // Returning ends the call: the rest of the client's stream is discarded.
    KLS_GRPC_RETURN_IF_ERROR(upload.Add(message));
  }
  if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "upload cancelled; nothing was stored");
  KLS_GRPC_RETURN_IF_ERROR(upload.Finish());
  kls::v1::GeneratedConstraints generated;
  KLS_GRPC_RETURN_IF_ERROR(upload.GenerateProtocolPairs(&generated));

  const store::StoredDataset* data = &upload.data();
  StatusOr<store::StoredDataset> merged = InvalidArgumentError("unset");
  if (const std::string& base = upload.header().base_dataset_id(); !base.empty()) {
    StatusOr<store::StoredDataset> loaded = store_->LoadDataset(base);
    if (!loaded.ok()) {
      return ToGrpcStatus(Status(loaded.status().code(),
                                 "header.base_dataset_id = \"" + base + "\": " + loaded.status().message()));
    }
    PairwiseConstraints appended = upload.data().constraints;
    if (upload.header().has_protocol()) {
      StatusOr<PairwiseConstraints> drawn = AppendProtocolPairs(upload.header(), *loaded, &generated);
      KLS_GRPC_RETURN_IF_ERROR(drawn.status());
      appended = std::move(drawn).value();
    }
    merged = MergeAppend(upload.header(), *std::move(loaded), appended);
    KLS_GRPC_RETURN_IF_ERROR(merged.status());
    data = &*merged;
  }
  // Attributes: parsed before anything is stored, so a bad table stores nothing.
  std::string attributes_bytes, attributes_summary;
  if (!upload.attributes_csv().empty()) {
    StatusOr<ItemAttributes> attributes = ParseAttributes(upload.attributes_csv(), data->data);
    KLS_GRPC_RETURN_IF_ERROR(attributes.status());
    attributes_bytes = attributes->Serialize();
    attributes_summary = attributes->Summary();
  } else if (const std::string& base = upload.header().base_dataset_id(); !base.empty()) {
    // An append upload keeps the base's attributes.
    StatusOr<std::optional<store::StoredAttributes>> inherited = store_->GetDatasetAttributes(base);
    KLS_GRPC_RETURN_IF_ERROR(inherited.status());
    if (*inherited) {
      attributes_bytes = std::move((*inherited)->bytes);
      attributes_summary = std::move((*inherited)->summary);
    }
  }
  StatusOr<store::DatasetRecord> stored = store_->PutDataset(upload.header().name(), *data);
  KLS_GRPC_RETURN_IF_ERROR(stored.status());
  if (!attributes_bytes.empty()) {
    const StatusOr<int64_t> version = store_->PutDatasetAttributes(stored->id, attributes_summary, attributes_bytes);
    KLS_GRPC_RETURN_IF_ERROR(version.status());
    stored->attributes_version = *version;
    stored->attributes_summary = attributes_summary;
  }
  spdlog::info("data set {} '{}' stored: {} points × {} features, {} constraints", stored->id, stored->name,
               stored->num_points, stored->dim, stored->num_constraints);
  ToProto(*stored, response);
  auto counts = std::make_shared<const DatasetCounts>(CountDataset(*data));
  ToProto(*counts, response);
  Remember(stored->id, std::move(counts));
  if (upload.header().has_protocol()) *response->mutable_generated() = generated;
  return grpc::Status::OK;
}

grpc::Status DatasetsService::SetAttributes(grpc::ServerContext* context,
                                            grpc::ServerReader<kls::v1::SetAttributesRequest>* reader,
                                            kls::v1::DatasetInfo* response) {
  kls::v1::SetAttributesRequest message;
  std::string dataset_ref, csv;
  for (int64_t index = 0; reader->Read(&message); ++index) {
    if (!message.dataset_id().empty()) {
      if (index > 0) {
        return ToGrpcStatus(InvalidArgumentError("message " + std::to_string(index) +
                                                 " names a data set again; only the first message names it"));
      }
      dataset_ref = message.dataset_id();
    }
    KLS_GRPC_RETURN_IF_ERROR(AppendAttributesCsv(message.attributes(), &csv));
  }
  if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled; nothing was changed");
  const StatusOr<store::DatasetRecord> record = store::ResolveDataset(store_, dataset_ref, "dataset_id");
  KLS_GRPC_RETURN_IF_ERROR(record.status());
  std::string bytes, summary;
  if (!csv.empty()) {
    StatusOr<store::StoredDataset> data = store_->LoadDataset(record->id);
    KLS_GRPC_RETURN_IF_ERROR(data.status());
    StatusOr<ItemAttributes> attributes = ParseAttributes(csv, data->data);
    KLS_GRPC_RETURN_IF_ERROR(attributes.status());
    bytes = attributes->Serialize();
    summary = attributes->Summary();
  }
  const StatusOr<int64_t> version = store_->PutDatasetAttributes(record->id, summary, bytes);
  KLS_GRPC_RETURN_IF_ERROR(version.status());
  spdlog::info("data set {}: attributes version {} ({})", record->id, *version, summary.empty() ? "none" : summary);
  store::DatasetRecord out = *record;
  out.attributes_version = *version;
  out.attributes_summary = summary;
  ToProto(out, response);
  return grpc::Status::OK;
}

grpc::Status DatasetsService::Get(grpc::ServerContext*, const kls::v1::GetDatasetRequest* request,
                                  kls::v1::DatasetInfo* response) {
  if (request->id().empty()) return ToGrpcStatus(InvalidArgumentError("id must not be empty"));
  // An id, or a name (the newest data set of that name).
  const StatusOr<store::DatasetRecord> record = store::ResolveDataset(store_, request->id(), "id");
  KLS_GRPC_RETURN_IF_ERROR(record.status());
  ToProto(*record, response);
  const StatusOr<std::shared_ptr<const DatasetCounts>> counts = Counts(record->id);
  if (counts.ok()) {
    ToProto(**counts, response);
  } else if (counts.status().code() == StatusCode::kNotFound) {
    return ToGrpcStatus(counts.status());  // deleted meanwhile
  } else {
    // The record is still worth answering (a damaged artifact is reported by
    // the queries and `kls-server --check`); the counts stay empty.
    spdlog::warn("data set {}: counting classes and pairs: {}", record->id, counts.status().ToString());
  }
  return grpc::Status::OK;
}

grpc::Status DatasetsService::List(grpc::ServerContext*, const kls::v1::ListDatasetsRequest*,
                                   kls::v1::ListDatasetsResponse* response) {
  const StatusOr<std::vector<store::DatasetRecord>> records = store_->ListDatasets();
  KLS_GRPC_RETURN_IF_ERROR(records.status());
  for (const store::DatasetRecord& r : *records) ToProto(r, response->add_datasets());
  return grpc::Status::OK;
}

grpc::Status DatasetsService::Delete(grpc::ServerContext*, const kls::v1::DeleteDatasetRequest* request,
                                     kls::v1::DeleteDatasetResponse*) {
  if (request->id().empty()) return ToGrpcStatus(InvalidArgumentError("id must not be empty"));
  const Status deleted = store_->DeleteDataset(request->id());
  if (deleted.ok()) spdlog::info("data set {} deleted", request->id());
  {
    std::lock_guard<std::mutex> lock(counts_mu_);
    counts_.erase(request->id());  // its id stays in counts_order_ until it ages out
  }
  return ToGrpcStatus(deleted);
}

}  // namespace kls::server
