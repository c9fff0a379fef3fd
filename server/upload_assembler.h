// UploadAssembler: turns the message stream of one kls.v1.Datasets/Upload
// call into a store::StoredDataset, checking every message as it arrives so
// that an error names the first bad field, row, column or constraint
// (datasets.proto):
//   - the first message is the header; its declared sizes are checked against
//     UploadLimits BEFORE anything is allocated (RESOURCE_EXHAUSTED naming the
//     field and value);
//   - feature rows arrive in order (FeatureChunk.first_row = rows so far),
//     dense (a multiple of dim values) or sparse (ascending indices < dim),
//     every value finite ("features[3][1] = nan is not finite"), one label /
//     key per row exactly when the header says so, keys unique and non-empty;
//   - constraint indices in range, kind ±1, at most num_constraints pairs;
//   - social chunks (photos in order, every id in range) only when the header
//     declares a social data set;
//   - Finish: the stream ended with exactly num_points rows and
//     num_constraints pairs.
// Any violation is INVALID_ARGUMENT (RESOURCE_EXHAUSTED for the size limits).
//
// Memory: feature rows grow with the rows that arrive (capacity doubling), not
// with the header's promise, until a 16th of the promised rows has arrived;
// then the matrix takes its full size at once (peak 1.125 × the matrix rather
// than up to 2 × for doubling to the end). Allocation failure is
// RESOURCE_EXHAUSTED.
//
// No gRPC: the handler feeds messages; tests and the fuzz target
// (tests/fuzz/fuzz_upload.cc) feed arbitrary ones. Not thread-safe: one
// assembler per call.
#pragma once

#include <Eigen/SparseCore>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/common/status.h"
#include "core/data/constraint_generators.h"
#include "kls/v1/datasets.pb.h"
#include "server/store/store.h"

namespace kls::server {

/// Upload limits on the header's declared sizes (datasets.proto).
struct UploadLimits {
  int64_t max_points = 10'000'000;          ///< header.num_points
  int64_t max_dim = 1'000'000;              ///< header.dim
  int64_t max_values = int64_t{1} << 30;    ///< header.num_points × header.dim
  int64_t max_constraints = 100'000'000;    ///< header.num_constraints
  int64_t max_name_bytes = 256;             ///< header.name
};

/// A stream header's declared num_points × dim against the limits, before
/// anything is allocated: INVALID_ARGUMENT for a size below 1,
/// RESOURCE_EXHAUSTED naming the field, the value and the limit otherwise.
/// Shared by the upload and the import assemblers.
Status CheckDeclaredShape(int64_t num_points, int64_t dim, int64_t max_points, int64_t max_dim, int64_t max_values);

class UploadAssembler {
 public:
  /// `limits` must outlive the assembler.
  explicit UploadAssembler(const UploadLimits& limits) : limits_(limits) {}

  /// The next message of the stream: a header first, then feature,
  /// constraint and social chunks in any order. After an error every later
  /// call returns that error (the stream is dead).
  Status Add(const kls::v1::UploadDatasetRequest& message);

  /// The stream ended: a header was sent and everything it declared arrived.
  Status Finish();

  const kls::v1::DatasetHeader& header() const { return header_; }
  const store::StoredDataset& data() const { return data_; }
  /// After Finish: when the header asked for a protocol, draws its pairs from
  /// the labels into data().constraints and says what it drew in `report`.
  Status GenerateProtocolPairs(kls::v1::GeneratedConstraints* report);
  /// The attribute CSV the stream carried (AttributesChunk pieces, concatenated); empty = none.
  const std::string& attributes_csv() const { return attributes_csv_; }

 private:
  Status Next(const kls::v1::UploadDatasetRequest& message, int64_t index);
  Status Header(const kls::v1::DatasetHeader& h);
  Status SocialHeader(const kls::v1::SocialHeader& s);
  Status Social(const kls::v1::SocialChunk& c);
  Status FinishSocial();
  Status Features(const kls::v1::FeatureChunk& c);
  Status Constraints(const kls::v1::ConstraintChunk& c);
  Status Allocate();
  // Makes room for `rows_needed` ≤ n_ feature rows, zeroed (sparse rows fill
  // only their entries). Capacity doubles, so the copies cost O(n·d) in total.
  Status GrowFeatureRows(int64_t rows_needed);
  Status SparseRow(const kls::v1::SparseRow& s, int row);
  static Status NotFinite(int row, int col, double v);

  const UploadLimits& limits_;
  kls::v1::DatasetHeader header_;
  bool have_header_ = false;
  int64_t messages_ = 0;
  Status error_;  ///< the first error; sticky
  int n_ = 0;
  int dim_ = 0;
  int64_t rows_ = 0;
  int64_t constraints_ = 0;
  bool allocated_ = false;
  std::unordered_set<std::string> seen_keys_;
  std::vector<Eigen::Triplet<double>> tags_;  ///< social (photo, tag) entries until Finish
  store::StoredDataset data_;
  std::string attributes_csv_;
};

/// DatasetHeader.protocol in core terms (seed 0 = 1).
ConstraintProtocol ProtocolFromProto(const kls::v1::ConstraintProtocol& p);

/// Largest attribute CSV an upload or SetAttributes accepts.
inline constexpr int64_t kMaxAttributesCsvBytes = int64_t{256} << 20;

/// Appends one AttributesChunk to `csv`; RESOURCE_EXHAUSTED past kMaxAttributesCsvBytes.
Status AppendAttributesCsv(const kls::v1::AttributesChunk& chunk, std::string* csv);

/// An append upload (header.base_dataset_id: constraints only, no feature
/// chunk, labels, keys or social header; Finish then expects no rows) on
/// `base`: the base's features, labels and item keys with its constraints
/// followed by `appended`'s. INVALID_ARGUMENT naming the field when
/// header.num_points / dim differ from the base's, the base is a social data
/// set, or a pair repeats (either order) or contradicts a base pair.
/// The pairs a protocol draws for an append (header.protocol with
/// header.base_dataset_id): from the base's labels, without the pairs the base
/// already has; `report` says what was added. INVALID_ARGUMENT when the base
/// has no labels.
StatusOr<PairwiseConstraints> AppendProtocolPairs(const kls::v1::DatasetHeader& header,
                                                  const store::StoredDataset& base,
                                                  kls::v1::GeneratedConstraints* report);

StatusOr<store::StoredDataset> MergeAppend(const kls::v1::DatasetHeader& header, store::StoredDataset base,
                                           const PairwiseConstraints& appended);

}  // namespace kls::server
