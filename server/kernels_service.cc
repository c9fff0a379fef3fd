#include "server/kernels_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>

#include "core/common/names.h"
#include "core/common/solve_control.h"
#include "core/serving/kernel_inspection.h"
#include "server/grpc_macros.h"
#include "server/jobs/convergence_history.h"
#include "server/jobs/proto_convert.h"
#include "server/status_mapping.h"

namespace kls::server {
KernelKey FromProto(const kls::v1::KernelRef& ref) { return KernelKey{ref.name(), ref.version(), ref.alias()}; }

void ToProto(const store::KernelRecord& r, kls::v1::KernelInfo* info) {
  info->set_name(r.name);
  info->set_version(r.version);
  info->set_job_id(r.job_id);
  info->set_dataset_id(r.dataset_id);
  info->set_method(r.method);
  info->set_num_points(r.num_points);
  info->set_rank(static_cast<int32_t>(r.rank));
  info->set_summary_json(WithoutConvergence(r.summary_json));  // Jobs.History serves the convergence
  if (auto c = CertificateFromSummary(info->summary_json())) *info->mutable_certificate() = *c;
  info->set_created_unix_ms(r.created_unix_ms);
}

namespace {

// A request count whose 0 means `fallback`: INVALID_ARGUMENT naming `field`
// outside [0, max].
StatusOr<int> CountOrDefault(int32_t value, const char* field, int fallback, int max) {
  if (value < 0 || value > max) {
    return InvalidArgumentError(std::string(field) + " = " + std::to_string(value) + " must be in [0, " +
                                std::to_string(max) + "] (0 = " + std::to_string(fallback) + ")");
  }
  return value == 0 ? fallback : value;
}

}  // namespace

grpc::Status KernelsService::Get(grpc::ServerContext*, const kls::v1::GetKernelRequest* request,
                                 kls::v1::KernelInfo* response) {
  const KernelKey key = FromProto(request->kernel());
  KLS_GRPC_RETURN_IF_ERROR(ValidateKernelKey(key, "kernel"));
  const StatusOr<store::KernelRecord> record = store_->GetKernelRecord(key.name, key.version, key.alias);
  KLS_GRPC_RETURN_IF_ERROR(record.status());
  ToProto(*record, response);
  return grpc::Status::OK;
}

grpc::Status KernelsService::List(grpc::ServerContext*, const kls::v1::ListKernelsRequest* request,
                                  kls::v1::ListKernelsResponse* response) {
  const StatusOr<std::vector<store::KernelRecord>> records = store_->ListKernels(request->name());
  KLS_GRPC_RETURN_IF_ERROR(records.status());
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
  KLS_GRPC_RETURN_IF_ERROR(ValidateName("alias", request->alias()));
  if (request->version() < 1) {
    return ToGrpcStatus(InvalidArgumentError("version = " + std::to_string(request->version()) +
                                             " must be >= 1 (an alias names one version)"));
  }
  KLS_GRPC_RETURN_IF_ERROR(store_->SetAlias(request->name(), request->alias(), request->version()));
  const StatusOr<store::KernelRecord> record = store_->GetKernelRecord(request->name(), 0, request->alias());
  KLS_GRPC_RETURN_IF_ERROR(record.status());
  ToProto(*record, response);
  return grpc::Status::OK;
}

grpc::Status KernelsService::Export(grpc::ServerContext* context, const kls::v1::ExportKernelRequest* request,
                                    grpc::ServerWriter<kls::v1::ExportKernelChunk>* writer) {
  const StatusOr<KernelCache::Handle> handle = cache_->Get(FromProto(request->kernel()));
  KLS_GRPC_RETURN_IF_ERROR(handle.status());
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
  while (reader->Read(&chunk)) {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "import cancelled");
    KLS_GRPC_RETURN_IF_ERROR(assembler.Add(chunk));
  }
  KLS_GRPC_RETURN_IF_ERROR(assembler.Finish());

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
  KLS_GRPC_RETURN_IF_ERROR(stored.status());
  spdlog::info("kernel {} v{} imported ({} x {}{})", stored->name, stored->version, stored->num_points,
               stored->rank, stored->dataset_id.empty() ? "" : ", keys in data set " + stored->dataset_id);
  ToProto(*stored, response);
  return grpc::Status::OK;
}

grpc::Status KernelsService::Inspect(grpc::ServerContext* context, const kls::v1::InspectKernelRequest* request,
                                     kls::v1::KernelInspection* response) {
  const KernelKey key = FromProto(request->kernel());
  KLS_GRPC_RETURN_IF_ERROR(ValidateKernelKey(key, "kernel"));
  InspectionOptions options;
  const StatusOr<int> sample = CountOrDefault(request->sample(), "sample", kInspectSampleDefault, kInspectSampleMax);
  KLS_GRPC_RETURN_IF_ERROR(sample.status());
  const StatusOr<int> heatmap =
      CountOrDefault(request->heatmap(), "heatmap", kInspectHeatmapDefault, kInspectHeatmapMax);
  KLS_GRPC_RETURN_IF_ERROR(heatmap.status());
  if (request->spectrum() < 0) {
    return ToGrpcStatus(InvalidArgumentError("spectrum = " + std::to_string(request->spectrum()) +
                                             " must be >= 0 (0 = " + std::to_string(kInspectSpectrumDefault) + ")"));
  }
  options.sample = *sample;
  options.heatmap = *heatmap;
  options.spectrum = request->spectrum() == 0 ? kInspectSpectrumDefault : request->spectrum();
  options.seed = request->seed() == 0 ? 1 : request->seed();

  const StatusOr<KernelCache::Handle> handle = cache_->Get(key);
  KLS_GRPC_RETURN_IF_ERROR(handle.status());
  const LearnedKernel& kernel = *handle->kernel;
  // Labels and keys of the data set, when it is still there and its rows are
  // the kernel's items.
  std::shared_ptr<const ItemKeys> items;
  if (!handle->record.dataset_id.empty()) {
    StatusOr<std::shared_ptr<const ItemKeys>> loaded = cache_->GetItemKeys(handle->record);
    if (loaded.ok()) {
      items = *std::move(loaded);
    } else if (loaded.status().code() != StatusCode::kNotFound) {
      return ToGrpcStatus(loaded.status());
    }
  }
  const size_t n = static_cast<size_t>(kernel.num_points());
  static const std::vector<int> kNone;
  const std::vector<int>& labels = items && items->labels.size() == n ? items->labels : kNone;
  const bool has_keys = items && items->keys.size() == n;

  const StatusOr<KernelInspection> inspected = GuardExceptions("inspect", [&]() -> StatusOr<KernelInspection> {
    return InspectKernel(kernel.embedding(), labels, options, CallControl(context));
  });
  KLS_GRPC_RETURN_IF_ERROR(inspected.status());

  ToProto(handle->record, response->mutable_info());
  response->mutable_eigenvalues()->Add(inspected->eigenvalues.begin(), inspected->eigenvalues.end());
  response->set_trace(inspected->trace);
  response->set_has_labels(!labels.empty());
  for (int i : inspected->items) {
    response->add_items(i);
    if (has_keys) response->add_keys(items->keys[static_cast<size_t>(i)]);
    if (!labels.empty()) response->add_labels(labels[static_cast<size_t>(i)]);
  }
  response->mutable_x()->Add(inspected->x.begin(), inspected->x.end());
  response->mutable_y()->Add(inspected->y.begin(), inspected->y.end());
  for (int i : inspected->heatmap_items) {
    response->add_heatmap_items(i);
    if (!labels.empty()) response->add_heatmap_labels(labels[static_cast<size_t>(i)]);
  }
  const Eigen::MatrixXd& heat = inspected->heatmap;
  response->mutable_heatmap()->Reserve(static_cast<int>(heat.size()));
  for (Eigen::Index a = 0; a < heat.rows(); ++a)
    for (Eigen::Index b = 0; b < heat.cols(); ++b) response->add_heatmap(heat(a, b));
  return grpc::Status::OK;
}

}  // namespace kls::server
