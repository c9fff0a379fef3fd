// Artifact files: the durable home of large matrices (embeddings, features,
// labels, constraints). One file holds named sections; it is written to a
// temporary file, fsync'ed, renamed into place and the directory fsync'ed, so
// a crash leaves either the old state or the complete new file, never a torn
// one. Readers memory-map the file and verify a CRC-32 of every byte after the
// header before serving anything from it; a corrupted artifact is reported as
// DATA_LOSS and never served.
//
// Layout (little endian):
//   header  : magic "KLSART01" (8) | section count u32 | reserved u32 |
//             body bytes u64 | crc32 of body u32 | reserved u32        (32 bytes)
//   body    : section table, count × { name[48] | dtype u32 | pad u32 |
//             rows u64 | cols u64 | offset u64 | bytes u64 }          (88 bytes each)
//             then the payloads, each 64-byte aligned (offsets from file start)
//
// Thread safety: a MappedArtifact is immutable after Open; concurrent reads are safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace kls::store {

enum class DType : uint32_t { kFloat64 = 1, kInt32 = 2, kBytes = 3 };

/// One named array to write. `data` must stay valid until Write returns.
struct SectionView {
  std::string name;  ///< at most 47 bytes
  DType dtype = DType::kFloat64;
  uint64_t rows = 0;
  uint64_t cols = 0;
  const void* data = nullptr;
  uint64_t bytes = 0;  ///< rows·cols·sizeof(element) for numeric types
};

/// The complete artifact image of `sections` (header, table, 64-byte aligned
/// payloads, CRC-32 of the body): the bytes WriteArtifact puts in a file and
/// a networked store keeps in its database. INVALID_ARGUMENT for a bad name
/// or a size that does not match the shape.
StatusOr<std::string> EncodeArtifact(const std::vector<SectionView>& sections);

/// Free space a file write leaves on its file system for the metadata
/// writes that follow (a job's FAILED state, a delete, the SQLite WAL): a
/// write that would leave less is refused as a full disk before it starts.
inline constexpr uint64_t kMetadataHeadroomBytes = 1u << 20;

/// Writes `bytes` atomically to `path`: a temporary `path.tmp.<pid>`,
/// fsync, rename into place, fsync of the directory. A crash leaves the old
/// file (or none) and at most the temporary, never a torn `path`.
/// RESOURCE_EXHAUSTED (DiskFull) when the file system has no room for it plus
/// kMetadataHeadroomBytes.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

/// RESOURCE_EXHAUSTED for a full file system (ENOSPC, EDQUOT, SQLITE_FULL):
/// names the directory `dir` whose file system is full and what failed. The
/// write that hit it changed nothing; the server keeps serving and writes
/// again once space is freed.
Status DiskFull(const std::string& dir, const std::string& what);

/// `what` on `path` failed with errno `err`: DiskFull (naming the file's
/// directory) for ENOSPC / EDQUOT, else INTERNAL.
Status FileError(const std::string& what, const std::string& path, int err);

/// Writes `sections` atomically to `path`: the bytes of EncodeArtifact,
/// streamed from the sections' memory to the file (the CRC computed on the
/// way, the header written last), so no image is held in memory.
Status WriteArtifact(const std::string& path, const std::vector<SectionView>& sections);

/// A read-only, checksum-verified, memory-mapped artifact.
class MappedArtifact {
 public:
  struct Section {
    std::string name;
    DType dtype;
    uint64_t rows, cols, bytes;
    const uint8_t* data;  ///< points into the mapping
  };

  /// Maps `path` and verifies its header, section table and checksum.
  /// NOT_FOUND when missing; DATA_LOSS when truncated or corrupted.
  static StatusOr<std::shared_ptr<MappedArtifact>> Open(const std::string& path);
  ~MappedArtifact();
  MappedArtifact(const MappedArtifact&) = delete;
  MappedArtifact& operator=(const MappedArtifact&) = delete;

  /// The section called `name`, or nullptr.
  const Section* Find(const std::string& name) const;
  const std::vector<Section>& sections() const { return sections_; }
  uint64_t file_bytes() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedArtifact() = default;
  std::string path_;
  void* base_ = nullptr;
  uint64_t size_ = 0;
  std::vector<Section> sections_;
};

/// Verifies an artifact without keeping it mapped (integrity checks).
Status VerifyArtifact(const std::string& path);

/// Verifies an artifact image held in memory (header, table, CRC-32);
/// DATA_LOSS "<what> is truncated / is corrupted: ..." otherwise.
Status VerifyArtifactBytes(const std::string& bytes, const std::string& what);

}  // namespace kls::store
