// ImportAssembler: turns the message stream of one kls.v1.Kernels/Import
// call into an embedding V (n × r, row-major) and optional item keys, checking
// each message as it arrives so that an error names the first bad field, row
// or value: the header first, against ImportLimits before anything is
// allocated (RESOURCE_EXHAUSTED naming the field and value); then rows in
// order, a multiple of header.dim values each chunk, every value finite, one
// unique non-empty key per row when header.has_item_keys; Finish checks that
// exactly header.num_points rows arrived.
//
// No gRPC: the handler feeds messages; tests and the fuzz target
// (tests/fuzz/fuzz_import.cc) feed arbitrary ones. One assembler per call.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/common/status.h"
#include "core/model/learned_kernel.h"
#include "kls/v1/kernels.pb.h"

namespace kls::server {

/// Limits on an Import header's declared sizes (kernels.proto).
struct ImportLimits {
  int64_t max_points = 10'000'000;        ///< header.num_points
  int64_t max_dim = 65'536;               ///< header.dim
  int64_t max_values = int64_t{1} << 28;  ///< header.num_points × header.dim (2 GiB of float64)
  int64_t max_name_bytes = 256;           ///< header.name
};

class ImportAssembler {
 public:
  /// `limits` must outlive the assembler.
  explicit ImportAssembler(const ImportLimits& limits) : limits_(limits) {}

  /// The next message: the header first (exactly once), then rows. After an
  /// error every later call returns that error (the stream is dead).
  Status Add(const kls::v1::ImportKernelChunk& chunk);

  /// The stream ended: a header was sent and all its rows arrived.
  Status Finish() const;

  const kls::v1::ImportKernelHeader& header() const { return header_; }
  LearnedKernel::Embedding TakeEmbedding() { return std::move(embedding_); }
  std::vector<std::string> TakeKeys() { return std::move(keys_); }

 private:
  Status Next(const kls::v1::ImportKernelChunk& chunk, int64_t message);
  Status Header(const kls::v1::ImportKernelHeader& h);
  Status Rows(const kls::v1::ImportKernelRows& c);

  const ImportLimits& limits_;
  kls::v1::ImportKernelHeader header_;
  bool have_header_ = false;
  int64_t messages_ = 0;
  Status error_;  ///< the first error; sticky
  int64_t rows_ = 0;
  LearnedKernel::Embedding embedding_;
  std::vector<std::string> keys_;
  std::unordered_set<std::string> seen_keys_;
};

}  // namespace kls::server
