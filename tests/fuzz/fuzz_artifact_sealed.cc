// Fuzz target: artifacts whose checksum is right but whose contents are not —
// what a store written by a buggy version, or a hostile replica sharing the
// database, could hold. fuzz_artifact's mutations almost never get past the
// CRC-32; here the target re-seals every input (body length and CRC in the
// header recomputed) so the mutations reach the section table checks, the
// mapped reader (server/store/artifact.h) and the data-set and kernel decoders
// (server/store/record_artifacts.h, which call the attachment decoders). The
// records are made to match the artifact's own shapes, as the store's would.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "server/store/artifact.h"
#include "server/store/record_artifacts.h"

namespace {

void Put(std::string& bytes, size_t at, const void* value, size_t size) { std::memcpy(&bytes[at], value, size); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHeader = 32;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() < kHeader) return 0;
  std::memcpy(&bytes[0], "KLSART01", 8);
  const uint64_t body = bytes.size() - kHeader;
  Put(bytes, 16, &body, 8);
  const uint32_t crc = static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data() + kHeader), static_cast<uInt>(body)));
  Put(bytes, 24, &crc, 4);
  if (!kls::store::VerifyArtifactBytes(bytes, "fuzz artifact").ok()) return 0;

  static const std::string path = "/tmp/kls-fuzz-artifact-" + std::to_string(getpid()) + ".art";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  } else {
    return 0;
  }
  const auto artifact = kls::store::MappedArtifact::Open(path);
  std::remove(path.c_str());
  if (!artifact.ok()) return 0;
  const kls::store::MappedArtifact& a = **artifact;
  if (const auto* f = a.Find("features")) {
    kls::store::DatasetRecord record;
    record.id = "fuzz";
    record.num_points = static_cast<int64_t>(f->rows);
    record.dim = static_cast<int64_t>(f->cols);
    (void)kls::store::DecodeDatasetArtifact(a, record);
  }
  if (const auto* e = a.Find("embedding")) {
    kls::store::KernelRecord record;
    record.name = "fuzz";
    record.version = 1;
    record.num_points = static_cast<int64_t>(e->rows);
    record.rank = static_cast<int64_t>(e->cols);
    (void)kls::store::DecodeKernelArtifact(a, record);
  }
  return 0;
}
