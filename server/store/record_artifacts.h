// The artifact image of a data set and of a kernel: which sections a
// StoredDataset / LearnedKernel (+ attachments) becomes, and back. Shared by
// the backends so that both write and read exactly the same KLSART01 bytes
// (a file under the SQLite store, chunked bytea rows under PostgreSQL).
//
// Data set sections: "features" (n × d float64, column-major as Eigen keeps
// it), "labels" (n × 1 int32, when labelled), "item_keys" (NUL-separated
// bytes), "constraints" (m × 3 int32: i, j, kind), "social" (bytes, social
// data sets). Kernel sections: "embedding" (n × r float64, row-major) and one
// "model:<name>" bytes section per attachment.
//
// Thread safety: free functions without shared state.
#pragma once

#include <string>
#include <vector>

#include "core/common/status.h"
#include "server/store/artifact.h"
#include "server/store/store.h"

namespace kls::store {

/// Section name prefix of kernel attachments: "model:" + Attachment::name.
inline constexpr const char* kAttachmentSectionPrefix = "model:";

/// Validates the data set (features, constraints) and encodes its artifact image.
StatusOr<std::string> EncodeDatasetArtifact(const StoredDataset& d);
/// The same artifact written atomically to `path` (WriteArtifact): streamed
/// from the data set's memory to the file, without an image in memory.
Status WriteDatasetArtifact(const std::string& path, const StoredDataset& d);

/// Checks attachment names (1 to 40 bytes) and encodes the kernel's artifact image.
StatusOr<std::string> EncodeKernelArtifact(const LearnedKernel& kernel, const std::vector<Attachment>& attachments);
/// The same artifact written atomically to `path`, streamed (WriteArtifact).
Status WriteKernelArtifact(const std::string& path, const LearnedKernel& kernel,
                           const std::vector<Attachment>& attachments);

/// The data set in a verified artifact; DATA_LOSS when a section is missing
/// or does not match `record`'s shape.
StatusOr<StoredDataset> DecodeDatasetArtifact(const MappedArtifact& a, const DatasetRecord& record);

/// The kernel and attachments in a verified artifact; DATA_LOSS when the
/// embedding is missing or does not match `record`'s shape.
StatusOr<StoredModel> DecodeKernelArtifact(const MappedArtifact& a, const KernelRecord& record);

}  // namespace kls::store
