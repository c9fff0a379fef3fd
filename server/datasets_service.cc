#include "server/datasets_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>

#include "server/status_mapping.h"

namespace kls::server {
namespace {

std::string Num(double v) {
  std::ostringstream out;
  out << v;  // "nan", "inf", "-inf" for the non-finite values we report
  return out.str();
}

// Assembles one upload from its stream of messages, checking as it goes so
// that an error names the first bad row, column or constraint.
class UploadAssembler {
 public:
  explicit UploadAssembler(const UploadLimits& limits) : limits_(limits) {}

  Status Header(const kls::v1::DatasetHeader& h) {
    if (static_cast<int64_t>(h.name().size()) > limits_.max_name_bytes) {
      return InvalidArgumentError("header.name is " + std::to_string(h.name().size()) + " bytes; at most " +
                                  std::to_string(limits_.max_name_bytes) + " are allowed");
    }
    if (h.num_points() < 1) {
      return InvalidArgumentError("header.num_points = " + std::to_string(h.num_points()) + " must be >= 1");
    }
    if (h.dim() < 1) return InvalidArgumentError("header.dim = " + std::to_string(h.dim()) + " must be >= 1");
    if (h.num_constraints() < 0) {
      return InvalidArgumentError("header.num_constraints = " + std::to_string(h.num_constraints()) +
                                  " must be >= 0");
    }
    if (h.num_points() > limits_.max_points) {
      return ResourceExhaustedError("header.num_points = " + std::to_string(h.num_points()) +
                                    " exceeds the limit of " + std::to_string(limits_.max_points));
    }
    if (h.dim() > limits_.max_dim) {
      return ResourceExhaustedError("header.dim = " + std::to_string(h.dim()) + " exceeds the limit of " +
                                    std::to_string(limits_.max_dim));
    }
    // Both factors are bounded above, so the product cannot overflow int64.
    if (h.num_points() * h.dim() > limits_.max_values) {
      return ResourceExhaustedError("header.num_points × header.dim = " + std::to_string(h.num_points()) + " × " +
                                    std::to_string(h.dim()) + " = " + std::to_string(h.num_points() * h.dim()) +
                                    " values exceeds the limit of " + std::to_string(limits_.max_values));
    }
    if (h.num_constraints() > limits_.max_constraints) {
      return ResourceExhaustedError("header.num_constraints = " + std::to_string(h.num_constraints()) +
                                    " exceeds the limit of " + std::to_string(limits_.max_constraints));
    }
    header_ = h;
    n_ = static_cast<int>(h.num_points());
    dim_ = h.dim();
    return OkStatus();
  }

  Status Features(const kls::v1::FeatureChunk& c) {
    if (c.first_row() != rows_) {
      return InvalidArgumentError("features.first_row = " + std::to_string(c.first_row()) + " but " +
                                  std::to_string(rows_) + " rows were received so far (rows must arrive in order)");
    }
    const bool dense = c.values_size() > 0;
    if (dense && c.sparse_rows_size() > 0) {
      return InvalidArgumentError("features chunk at first_row " + std::to_string(c.first_row()) +
                                  " has both dense values and sparse_rows; use one encoding per chunk");
    }
    if (dense && c.values_size() % dim_ != 0) {
      return InvalidArgumentError("features chunk at first_row " + std::to_string(c.first_row()) + " has " +
                                  std::to_string(c.values_size()) + " values, not a multiple of dim = " +
                                  std::to_string(dim_) + " (ragged rows)");
    }
    const int64_t rows = dense ? c.values_size() / dim_ : c.sparse_rows_size();
    if (rows_ + rows > n_) {
      return InvalidArgumentError("features chunk at first_row " + std::to_string(c.first_row()) + " carries " +
                                  std::to_string(rows) + " rows, beyond header.num_points = " + std::to_string(n_));
    }
    if (header_.has_labels() ? c.labels_size() != rows : c.labels_size() != 0) {
      return InvalidArgumentError(
          "features chunk at first_row " + std::to_string(c.first_row()) + " has " + std::to_string(c.labels_size()) +
          " labels for " + std::to_string(rows) + " rows" +
          (header_.has_labels() ? " (one per row is required)" : " but header.has_labels is false"));
    }
    if (header_.has_item_keys() ? c.item_keys_size() != rows : c.item_keys_size() != 0) {
      return InvalidArgumentError(
          "features chunk at first_row " + std::to_string(c.first_row()) + " has " +
          std::to_string(c.item_keys_size()) + " item_keys for " + std::to_string(rows) + " rows" +
          (header_.has_item_keys() ? " (one per row is required)" : " but header.has_item_keys is false"));
    }
    if (rows == 0) return OkStatus();
    KLS_RETURN_IF_ERROR(Allocate());
    KLS_RETURN_IF_ERROR(GrowFeatureRows(rows_ + rows));

    for (int64_t r = 0; r < rows; ++r) {
      const int row = static_cast<int>(rows_ + r);
      if (dense) {
        for (int col = 0; col < dim_; ++col) {
          const double v = c.values(static_cast<int>(r * dim_ + col));
          if (!std::isfinite(v)) return NotFinite(row, col, v);
          data_.data.features(row, col) = v;
        }
      } else {
        KLS_RETURN_IF_ERROR(SparseRow(c.sparse_rows(static_cast<int>(r)), row));
      }
    }
    for (int64_t r = 0; r < c.labels_size(); ++r) {
      const int row = static_cast<int>(rows_ + r);
      if (c.labels(static_cast<int>(r)) < 0) {
        return InvalidArgumentError("labels[" + std::to_string(row) + "] = " +
                                    std::to_string(c.labels(static_cast<int>(r))) + " must be >= 0");
      }
      data_.data.labels.push_back(c.labels(static_cast<int>(r)));
    }
    for (int64_t r = 0; r < c.item_keys_size(); ++r) {
      const int row = static_cast<int>(rows_ + r);
      const std::string& key = c.item_keys(static_cast<int>(r));
      if (key.empty()) return InvalidArgumentError("item_keys[" + std::to_string(row) + "] is empty");
      if (!seen_keys_.insert(key).second) {
        return InvalidArgumentError("item_keys[" + std::to_string(row) + "] = '" + key +
                                    "' repeats an earlier key (keys must be unique)");
      }
      data_.data.item_keys.push_back(key);
    }
    rows_ += rows;
    return OkStatus();
  }

  Status Constraints(const kls::v1::ConstraintChunk& c) {
    if (c.i_size() != c.j_size() || c.i_size() != c.kind_size()) {
      return InvalidArgumentError("constraints chunk has " + std::to_string(c.i_size()) + " i, " +
                                  std::to_string(c.j_size()) + " j and " + std::to_string(c.kind_size()) +
                                  " kind values; the three arrays must have equal length");
    }
    if (constraints_ + c.i_size() > header_.num_constraints()) {
      return InvalidArgumentError("constraints chunk brings the total to " +
                                  std::to_string(constraints_ + c.i_size()) +
                                  ", beyond header.num_constraints = " + std::to_string(header_.num_constraints()));
    }
    for (int t = 0; t < c.i_size(); ++t) {
      const std::string at = "constraints[" + std::to_string(constraints_ + t) + "]";
      for (const auto& [field, value] : {std::pair{"i", c.i(t)}, std::pair{"j", c.j(t)}}) {
        if (value < 0 || value >= n_) {
          return InvalidArgumentError(at + ": " + field + " = " + std::to_string(value) + " is out of range for " +
                                      std::to_string(n_) + " points");
        }
      }
      if (c.kind(t) != 1 && c.kind(t) != -1) {
        return InvalidArgumentError(at + ": kind = " + std::to_string(c.kind(t)) +
                                    " is neither must-link (+1) nor cannot-link (-1)");
      }
      data_.constraints.pairs.push_back(
          Pair{c.i(t), c.j(t), c.kind(t) == 1 ? PairKind::kMustLink : PairKind::kCannotLink});
    }
    constraints_ += c.i_size();
    return OkStatus();
  }

  // The stream ended: everything declared must have arrived.
  Status Finish() {
    if (rows_ != n_) {
      return InvalidArgumentError("the stream ended after " + std::to_string(rows_) + " of header.num_points = " +
                                  std::to_string(n_) + " rows (truncated upload); nothing was stored");
    }
    if (constraints_ != header_.num_constraints()) {
      return InvalidArgumentError("the stream ended after " + std::to_string(constraints_) +
                                  " of header.num_constraints = " + std::to_string(header_.num_constraints()) +
                                  " constraints (truncated upload); nothing was stored");
    }
    return OkStatus();
  }

  const kls::v1::DatasetHeader& header() const { return header_; }
  const store::StoredDataset& data() const { return data_; }

 private:
  Status Allocate() {
    if (allocated_) return OkStatus();
    try {
      // Features grow with the rows that arrive (GrowFeatureRows), not with
      // the header's promise: a header declaring 10^7 × 100 values followed
      // by one row must not make the server zero 8 GB.
      if (header_.has_labels()) data_.data.labels.reserve(n_);
      if (header_.has_item_keys()) data_.data.item_keys.reserve(n_);
      data_.constraints.pairs.reserve(static_cast<size_t>(header_.num_constraints()));
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError("not enough memory for the labels, keys and constraints of header.num_points = " +
                                    std::to_string(n_) + " rows");
    }
    allocated_ = true;
    return OkStatus();
  }

  // Makes room for `rows_needed` ≤ n_ feature rows, zeroed (sparse rows fill
  // only their entries). Capacity doubles, so the copies cost O(n·d) in total.
  Status GrowFeatureRows(int64_t rows_needed) {
    Eigen::MatrixXd& f = data_.data.features;
    const int64_t old_rows = f.rows();
    if (rows_needed <= old_rows) return OkStatus();
    const int64_t new_rows = std::min<int64_t>(n_, std::max<int64_t>({rows_needed, 2 * old_rows, 1024}));
    try {
      f.conservativeResize(new_rows, dim_);
      f.bottomRows(new_rows - old_rows).setZero();
    } catch (const std::bad_alloc&) {
      return ResourceExhaustedError("not enough memory for " + std::to_string(new_rows) + " × " +
                                    std::to_string(dim_) + " features");
    }
    return OkStatus();
  }

  Status SparseRow(const kls::v1::SparseRow& s, int row) {
    if (s.indices_size() != s.values_size()) {
      return InvalidArgumentError("features[" + std::to_string(row) + "] (sparse) has " +
                                  std::to_string(s.indices_size()) + " indices but " +
                                  std::to_string(s.values_size()) + " values");
    }
    int previous = -1;
    for (int k = 0; k < s.indices_size(); ++k) {
      const int col = s.indices(k);
      if (col < 0 || col >= dim_) {
        return InvalidArgumentError("features[" + std::to_string(row) + "] (sparse): index " + std::to_string(col) +
                                    " is out of range for dim = " + std::to_string(dim_));
      }
      if (col <= previous) {
        return InvalidArgumentError("features[" + std::to_string(row) + "] (sparse): index " + std::to_string(col) +
                                    " follows " + std::to_string(previous) + " (indices must be strictly ascending)");
      }
      previous = col;
      if (!std::isfinite(s.values(k))) return NotFinite(row, col, s.values(k));
      data_.data.features(row, col) = s.values(k);
    }
    return OkStatus();
  }

  static Status NotFinite(int row, int col, double v) {
    return InvalidArgumentError("features[" + std::to_string(row) + "][" + std::to_string(col) + "] = " + Num(v) +
                                " is not finite");
  }

  const UploadLimits& limits_;
  kls::v1::DatasetHeader header_;
  int n_ = 0;
  int dim_ = 0;
  int64_t rows_ = 0;
  int64_t constraints_ = 0;
  bool allocated_ = false;
  std::unordered_set<std::string> seen_keys_;
  store::StoredDataset data_;
};

}  // namespace

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
  bool have_header = false;
  int64_t index = 0;
  while (reader->Read(&message)) {
    Status s;
    switch (message.part_case()) {
      case kls::v1::UploadDatasetRequest::kHeader:
        s = have_header ? InvalidArgumentError("message " + std::to_string(index) + " is a second header")
                        : upload.Header(message.header());
        have_header = true;
        break;
      case kls::v1::UploadDatasetRequest::kFeatures:
      case kls::v1::UploadDatasetRequest::kConstraints:
        if (!have_header) {
          s = InvalidArgumentError("message " + std::to_string(index) +
                                   " is not a header; an upload must start with a DatasetHeader");
        } else if (message.part_case() == kls::v1::UploadDatasetRequest::kFeatures) {
          s = upload.Features(message.features());
        } else {
          s = upload.Constraints(message.constraints());
        }
        break;
      case kls::v1::UploadDatasetRequest::PART_NOT_SET:
        s = InvalidArgumentError("message " + std::to_string(index) + " is empty (no header, features or constraints)");
        break;
    }
    // Returning ends the call: the rest of the client's stream is discarded.
    if (!s.ok()) return ToGrpcStatus(s);
    ++index;
  }
  if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "upload cancelled; nothing was stored");
  if (!have_header) return ToGrpcStatus(InvalidArgumentError("empty upload: no DatasetHeader was sent"));
  if (const Status s = upload.Finish(); !s.ok()) return ToGrpcStatus(s);

  const StatusOr<store::DatasetRecord> stored = store_->PutDataset(upload.header().name(), upload.data());
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
