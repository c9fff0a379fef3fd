// kls.v1.Kernels: Get, List, Delete, SetAlias, Export (server stream),
// Import (client stream), Inspect.
//
// Export reads the kernel through the KernelCache (so a corrupted artifact is
// DATA_LOSS, never streamed) and sends V row-major in chunks of at most
// kExportChunkBytes of values; the first chunk also carries the KernelInfo.
// Delete invalidates the cache so that a later kernel reusing the name and
// version number is never answered from a stale entry.
//
// Import checks the header against ImportLimits before allocating anything
// (RESOURCE_EXHAUSTED naming the field and value), then every row as it
// arrives (order, width, finiteness, one unique key per row when declared);
// the kernel is written by Store::PutKernel — the path solver results take —
// only after the whole stream checked out, so a bad or truncated stream
// stores nothing. Keys go to a data set written first (Store::PutDataset);
// a crash between the two writes leaves that data set unreferenced, never a
// kernel without its keys.
//
// Inspect resolves the kernel through the KernelCache and hands its factor to
// core (InspectKernel, core/serving/kernel_inspection.h) with the labels and
// item keys of its data set, which the cache loads once per cached kernel: a
// kernel whose data set was deleted, an imported kernel without keys, or a
// kernel over other items than the data set's rows (social strength: users)
// is inspected without them.
//
// Thread safety: handlers run concurrently; the service holds no mutable state
// of its own (the cache is thread-safe).
#pragma once

#include <cstdint>

#include "kls/v1/kernels.grpc.pb.h"
#include "server/import_assembler.h"
#include "server/kernel_cache.h"
#include "server/store/store.h"

namespace kls::server {

class KernelsService final : public kls::v1::Kernels::Service {
 public:
  /// Upper bound on one Export chunk's values, in bytes (1 MiB).
  static constexpr int64_t kExportChunkBytes = int64_t{1} << 20;
  /// Inspect's defaults (a request's 0) and limits: scatter sample and heat map items.
  static constexpr int kInspectSampleDefault = 1000, kInspectSampleMax = 5000;
  static constexpr int kInspectHeatmapDefault = 200, kInspectHeatmapMax = 500;
  static constexpr int kInspectSpectrumDefault = 64;

  /// `store` and `cache` must outlive the grpc::Server the service is registered on.
  KernelsService(store::Store* store, KernelCache* cache, ImportLimits limits = {})
      : store_(store), cache_(cache), limits_(limits) {}

  grpc::Status Get(grpc::ServerContext* context, const kls::v1::GetKernelRequest* request,
                   kls::v1::KernelInfo* response) override;
  grpc::Status List(grpc::ServerContext* context, const kls::v1::ListKernelsRequest* request,
                    kls::v1::ListKernelsResponse* response) override;
  grpc::Status Delete(grpc::ServerContext* context, const kls::v1::DeleteKernelRequest* request,
                      kls::v1::DeleteKernelResponse* response) override;
  grpc::Status SetAlias(grpc::ServerContext* context, const kls::v1::SetAliasRequest* request,
                        kls::v1::KernelInfo* response) override;
  grpc::Status Export(grpc::ServerContext* context, const kls::v1::ExportKernelRequest* request,
                      grpc::ServerWriter<kls::v1::ExportKernelChunk>* writer) override;
  grpc::Status Import(grpc::ServerContext* context, grpc::ServerReader<kls::v1::ImportKernelChunk>* reader,
                      kls::v1::KernelInfo* response) override;
  grpc::Status Inspect(grpc::ServerContext* context, const kls::v1::InspectKernelRequest* request,
                       kls::v1::KernelInspection* response) override;

 private:
  store::Store* const store_;
  KernelCache* const cache_;
  const ImportLimits limits_;
};

/// kls.v1.KernelRef → KernelKey (no validation; see ValidateKernelKey).
KernelKey FromProto(const kls::v1::KernelRef& ref);
/// store::KernelRecord → kls.v1.KernelInfo.
void ToProto(const store::KernelRecord& record, kls::v1::KernelInfo* info);

}  // namespace kls::server
