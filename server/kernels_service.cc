#include "server/kernels_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>
#include <utility>

#include "core/common/names.h"
#include "core/common/solve_control.h"
#include "server/status_mapping.h"

namespace kls::server {
namespace {

// Assembles one Import stream, checking each message as it arrives so that an
// error names the first bad field, row or value.
class ImportAssembler {
 public:
  explicit ImportAssembler(const ImportLimits& limits) : limits_(limits) {}

  Status Header(const kls::v1::ImportKernelHeader& h) {
    if (h.name().empty()) return InvalidArgumentError("header.name must not be empty");
    if (static_cast<int64_t>(h.name().size()) > limits_.max_name_bytes) {
      return InvalidArgumentError("header.name is " + std::to_string(h.name().size()) + " bytes; at most " +
                                  std::to_string(limits_.max_name_bytes) + " are allowed");
    }
    KLS_RETURN_IF_ERROR(ValidateName("header.name", h.name()));
    if (h.num_points() < 1) {
      return InvalidArgumentError("header.num_points = " + std::to_string(h.num_points()) + " must be >= 1");
    }
    if (h.dim() < 1) return InvalidArgumentError("header.dim = " + std::to_string(h.dim()) + " must be >= 1");
    if (h.num_points() > limits_.max_points) {
      return ResourceExhaustedError("header.num_points = " + std::to_string(h.num_points()) +
                                    " exceeds the limit of " + std::to_string(limits_.max_points));
    }
    if (h.dim() > limits_.max_dim) {
      return ResourceExhaustedError("header.dim = " + std::to_string(h.dim()) + " exceeds the limit of " +
                                    std::to_string(limits_.max_dim));
    }
    // Both factors are bounded above, so the product cannot overflow int64.
    const int64_t values = h.num_points() * int64_t{h.dim()};
    if (values > limits_.max_values) {
      return ResourceExhaustedError("header.num_points × header.dim = " + std::to_string(h.num_points()) + " × " +
                                    std::to_string(h.dim()) + " = " + std::to_string(values) +
                                    " values exceeds the limit of " + std::to_string(limits_.max_values));
    }
    header_ = h;
    have_header_ = true;
    return OkStatus();
  }

  Status Rows(const kls::v1::ImportKernelRows& c) {
    const int64_t dim = header_.dim();
    if (c.first_row() != rows_) {
      return InvalidArgumentError("rows.first_row = " + std::to_string(c.first_row()) + " but " +
                                  std::to_string(rows_) + " rows were received so far (rows must arrive in order)");
    }
    if (c.values_size() % dim != 0) {
      return InvalidArgumentError("rows chunk at first_row " + std::to_string(c.first_row()) + " has " +
                                  std::to_string(c.values_size()) + " values, not a multiple of header.dim = " +
                                  std::to_string(dim));
    }
    const int64_t rows = c.values_size() / dim;
    if (rows_ + rows > header_.num_points()) {
      return InvalidArgumentError("rows chunk at first_row " + std::to_string(c.first_row()) + " carries " +
                                  std::to_string(rows) + " rows, beyond header.num_points = " +
                                  std::to_string(header_.num_points()));
    }
    if (header_.has_item_keys() ? c.item_keys_size() != rows : c.item_keys_size() != 0) {
      return InvalidArgumentError(
          "rows chunk at first_row " + std::to_string(c.first_row()) + " has " + std::to_string(c.item_keys_size()) +
          " item_keys for " + std::to_string(rows) + " rows" +
          (header_.has_item_keys() ? " (one per row is required)" : " but header.has_item_keys is false"));
    }
    if (rows == 0) return OkStatus();
    if (embedding_.size() == 0) {
      // Allocated on the first rows, after the header passed the limits.
      KLS_RETURN_IF_ERROR(GuardExceptions("import", [&]() -> Status {
        embedding_.resize(header_.num_points(), dim);
        return OkStatus();
      }));
    }
    const double* in = c.values().data();
    double* out = embedding_.data() + rows_ * dim;
    for (int64_t t = 0; t < rows * dim; ++t) {
      if (!std::isfinite(in[t])) {
        return InvalidArgumentError("rows[" + std::to_string(rows_ + t / dim) + "][" + std::to_string(t % dim) +
                                    "] = " + FormatNumber(in[t]) + " is not finite");
      }
      out[t] = in[t];
    }
    for (int64_t r = 0; r < c.item_keys_size(); ++r) {
      const std::string& key = c.item_keys(static_cast<int>(r));
      const std::string where = "item_keys[" + std::to_string(rows_ + r) + "]";
      if (key.empty()) return InvalidArgumentError(where + " is empty");
      if (!seen_keys_.insert(key).second) {
        return InvalidArgumentError(where + " = '" + key + "' repeats an earlier key (keys must be unique)");
      }
      keys_.push_back(key);
    }
    rows_ += rows;
    return OkStatus();
  }

  Status Finish() const {
    if (!have_header_) return InvalidArgumentError("the import stream is empty; the first message must be the header");
    if (rows_ != header_.num_points()) {
      return InvalidArgumentError("the import stream ended after " + std::to_string(rows_) + " of header.num_points = " +
                                  std::to_string(header_.num_points()) + " rows");
    }
    return OkStatus();
  }

  bool have_header() const { return have_header_; }
  const kls::v1::ImportKernelHeader& header() const { return header_; }
  LearnedKernel::Embedding TakeEmbedding() { return std::move(embedding_); }
  std::vector<std::string> TakeKeys() { return std::move(keys_); }

 private:
  const ImportLimits& limits_;
  kls::v1::ImportKernelHeader header_;
  bool have_header_ = false;
  int64_t rows_ = 0;
  LearnedKernel::Embedding embedding_;
  std::vector<std::string> keys_;
  std::unordered_set<std::string> seen_keys_;
};

}  // namespace

KernelKey FromProto(const kls::v1::KernelRef& ref) { return KernelKey{ref.name(), ref.version(), ref.alias()}; }

void ToProto(const store::KernelRecord& r, kls::v1::KernelInfo* info) {
  info->set_name(r.name);
  info->set_version(r.version);
  info->set_job_id(r.job_id);
  info->set_dataset_id(r.dataset_id);
  info->set_method(r.method);
  info->set_num_points(r.num_points);
  info->set_rank(static_cast<int32_t>(r.rank));
  info->set_summary_json(r.summary_json);
  info->set_created_unix_ms(r.created_unix_ms);
}

grpc::Status KernelsService::Get(grpc::ServerContext*, const kls::v1::GetKernelRequest* request,
                                 kls::v1::KernelInfo* response) {
  const KernelKey key = FromProto(request->kernel());
  if (const Status s = ValidateKernelKey(key, "kernel"); !s.ok()) return ToGrpcStatus(s);
  const StatusOr<store::KernelRecord> record = store_->GetKernelRecord(key.name, key.version, key.alias);
  if (!record.ok()) return ToGrpcStatus(record.status());
  ToProto(*record, response);
  return grpc::Status::OK;
}

grpc::Status KernelsService::List(grpc::ServerContext*, const kls::v1::ListKernelsRequest* request,
                                  kls::v1::ListKernelsResponse* response) {
  const StatusOr<std::vector<store::KernelRecord>> records = store_->ListKernels(request->name());
  if (!records.ok()) return ToGrpcStatus(records.status());
  for (const store::KernelRecord& r : *records) ToProto(r, response->add_kernels());
  return grpc::Status::OK;
}

grpc::Status KernelsService::Delete(grpc::ServerContext*, const kls::v1::DeleteKernelRequest* request,
                                    kls::v1::DeleteKernelResponse*) {
  if (request->name().empty()) return ToGrpcStatus(InvalidArgumentError("name must not be empty"));
  if (request->version() < 0) {
    return ToGrpcStatus(InvalidArgumentError("version = " + std::to_string(request->version()) +
                                             " must be >= 0 (0 = every version)"));
  }
  const Status deleted = store_->DeleteKernel(request->name(), request->version());
  // Invalidate even on error: a partial delete must not leave stale entries.
  cache_->Invalidate(request->name(), request->version());
  if (deleted.ok()) spdlog::info("kernel {} {} deleted", request->name(),
                                 request->version() == 0 ? std::string("(all versions)")
                                                         : "v" + std::to_string(request->version()));
  return ToGrpcStatus(deleted);
}

grpc::Status KernelsService::SetAlias(grpc::ServerContext*, const kls::v1::SetAliasRequest* request,
                                      kls::v1::KernelInfo* response) {
  if (request->name().empty()) return ToGrpcStatus(InvalidArgumentError("name must not be empty"));
  if (request->alias().empty()) return ToGrpcStatus(InvalidArgumentError("alias must not be empty"));
  // The alias is a new name (checked); the kernel name refers to a stored
  // kernel, which may predate the naming rule.
  if (const Status s = ValidateName("alias", request->alias()); !s.ok()) return ToGrpcStatus(s);
  if (request->version() < 1) {
    return ToGrpcStatus(InvalidArgumentError("version = " + std::to_string(request->version()) +
                                             " must be >= 1 (an alias names one version)"));
  }
  if (const Status s = store_->SetAlias(request->name(), request->alias(), request->version()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  const StatusOr<store::KernelRecord> record = store_->GetKernelRecord(request->name(), 0, request->alias());
  if (!record.ok()) return ToGrpcStatus(record.status());
  ToProto(*record, response);
  return grpc::Status::OK;
}

grpc::Status KernelsService::Export(grpc::ServerContext* context, const kls::v1::ExportKernelRequest* request,
                                    grpc::ServerWriter<kls::v1::ExportKernelChunk>* writer) {
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  const LearnedKernel& kernel = *handle->kernel;
  const int n = kernel.num_points();
  const int r = kernel.rank();
  const int64_t row_bytes = int64_t{r} * static_cast<int64_t>(sizeof(double));
  const int rows_per_chunk = static_cast<int>(std::max<int64_t>(1, kExportChunkBytes / std::max<int64_t>(1, row_bytes)));
  const double* data = kernel.embedding().data();  // row-major n × r

  for (int first = 0; first < n; first += rows_per_chunk) {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "export cancelled");
    const int rows = std::min(rows_per_chunk, n - first);
    kls::v1::ExportKernelChunk chunk;
    if (first == 0) ToProto(handle->record, chunk.mutable_info());
    chunk.set_first_row(first);
    chunk.mutable_values()->Add(data + int64_t{first} * r, data + (int64_t{first} + rows) * r);
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "export: the client went away");
  }
  return grpc::Status::OK;
}

grpc::Status KernelsService::Import(grpc::ServerContext* context,
                                    grpc::ServerReader<kls::v1::ImportKernelChunk>* reader,
                                    kls::v1::KernelInfo* response) {
  const Stopwatch watch;
  ImportAssembler assembler(limits_);
  kls::v1::ImportKernelChunk chunk;
  int64_t message = 0;
  while (reader->Read(&chunk)) {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "import cancelled");
    Status s;
    if (message == 0) {
      s = chunk.has_header() ? assembler.Header(chunk.header())
                             : InvalidArgumentError("message 0 of the import stream must be the header");
    } else if (chunk.has_header()) {
      s = InvalidArgumentError("message " + std::to_string(message) + " repeats the header (send it once, first)");
    } else if (chunk.has_rows()) {
      s = assembler.Rows(chunk.rows());
    } else {
      s = InvalidArgumentError("message " + std::to_string(message) + " of the import stream is empty");
    }
    if (!s.ok()) return ToGrpcStatus(s);
    ++message;
  }
  if (const Status s = assembler.Finish(); !s.ok()) return ToGrpcStatus(s);

  const kls::v1::ImportKernelHeader& header = assembler.header();
  const StatusOr<store::KernelRecord> stored = GuardExceptions("import", [&]() -> StatusOr<store::KernelRecord> {
    store::KernelRecord record;
    record.name = header.name();
    record.method = "import";
    std::vector<std::string> keys = assembler.TakeKeys();
    LearnedKernel::Embedding v = assembler.TakeEmbedding();
    if (!keys.empty()) {
      // The keys live in a data set (the store's one home for item keys); its
      // features are the imported rows themselves.
      store::StoredDataset keyed;
      keyed.data.features = v;  // row-major → column-major copy
      keyed.data.item_keys = std::move(keys);
      KLS_ASSIGN_OR_RETURN(store::DatasetRecord dataset,
                           store_->PutDataset("keys of imported kernel " + header.name(), keyed));
      record.dataset_id = dataset.id;
    }
    KLS_ASSIGN_OR_RETURN(LearnedKernel kernel, LearnedKernel::FromEmbedding(std::move(v)));
    record.summary_json = "{\"source\":\"import\",\"seconds\":" + FormatNumber(watch.Seconds()) + "}";
    return store_->PutKernel(record, kernel);
  });
  if (!stored.ok()) return ToGrpcStatus(stored.status());
  spdlog::info("kernel {} v{} imported ({} x {}{})", stored->name, stored->version, stored->num_points,
               stored->rank, stored->dataset_id.empty() ? "" : ", keys in data set " + stored->dataset_id);
  ToProto(*stored, response);
  return grpc::Status::OK;
}

}  // namespace kls::server
