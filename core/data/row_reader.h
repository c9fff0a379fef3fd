// Reading CSV and LIBSVM data sets one row at a time.
//
// RowReader is THE parser of both formats: ParseCsv / ParseLibsvm
// (csv_reader.h) collect its rows into a Dataset, and `kls upload` streams
// them to the server without holding the feature matrix. The rules and error
// messages ("iris.csv line 12, column 3 (petal_cm): ...") are the ones
// documented in csv_reader.h.
//
// ScanDataFile is the first pass of a bounded-memory upload: it reads a file
// through once and keeps what the upload header and constraint generation
// need (sizes, flags, labels, non-zero count) but no features; it refuses
// exactly the files ReadCsvFile / ReadLibsvmFile refuse, with the same message.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/data/csv_reader.h"

namespace kls {

enum class DataFormat { kCsv, kLibsvm };

/// "csv" / "libsvm".
const char* DataFormatName(DataFormat format);

/// The `kls upload --format auto` rule: CSV when the name ends in .csv or .CSV,
/// LIBSVM otherwise.
DataFormat GuessDataFormat(const std::string& path);

/// One parsed row.
struct DataRow {
  long line = 0;              ///< 1-based line of the row in the source
  long long index = 0;        ///< 0-based row number
  /// LIBSVM: the 0-based, strictly ascending columns of `values` (explicit
  /// zeros included as written). CSV: empty; `values` holds all d features.
  std::vector<int> columns;
  std::vector<double> values;
  /// CSV: the class id (only when the header has a label column). LIBSVM: the
  /// label as written; RowReader::ClassId maps it once the input is read.
  long long label = 0;
  std::string key;            ///< CSV `key` column; empty otherwise
};

class RowReader {
 public:
  /// Reads the CSV header; `source` names the input in error messages.
  static StatusOr<RowReader> Csv(std::istream& in, std::string source, const ReadOptions& options = {});
  /// `num_features` > 0 fixes d; 0 means the largest index seen.
  static StatusOr<RowReader> Libsvm(std::istream& in, std::string source, int num_features = 0,
                                    const ReadOptions& options = {});
  /// Opens `path` (NOT_FOUND "cannot open CSV file \"path\"" / "... LIBSVM ...").
  static StatusOr<RowReader> OpenFile(const std::string& path, DataFormat format, int num_features = 0,
                                      const ReadOptions& options = {});

  RowReader(RowReader&&) = default;
  RowReader& operator=(RowReader&&) = default;

  /// The next row into `*row`: true; false at the end of the input, once the
  /// whole-input checks passed (not empty, dense size within the limits,
  /// LIBSVM label set). An error names the source, line and field.
  StatusOr<bool> Next(DataRow* row);

  DataFormat format() const { return format_; }
  const std::string& source() const { return source_; }
  /// CSV: the header ends in `label`. LIBSVM: always.
  bool has_labels() const { return has_label_; }
  /// CSV: the header starts with `key`. LIBSVM: never.
  bool has_item_keys() const { return has_key_; }
  /// CSV header names of the feature columns (empty for LIBSVM).
  const std::vector<std::string>& feature_names() const { return feature_names_; }
  /// CSV: the header's feature columns. LIBSVM: num_features if given, else
  /// the largest index so far (final once Next returned false).
  int dim() const;
  /// Rows returned so far.
  long long rows() const { return n_; }
  /// Bytes consumed so far (lines and their newlines).
  int64_t bytes_read() const { return bytes_; }
  /// The class id of a row's `label`: CSV labels as they are; LIBSVM labels
  /// -1/+1 → 0/1 when every label of the input is -1 or +1 (known once Next
  /// returned false), others as they are.
  int ClassId(long long label) const;

 private:
  RowReader() = default;
  bool ReadLine();
  StatusOr<bool> NextCsv(DataRow* row);
  StatusOr<bool> NextLibsvm(DataRow* row);
  Status AtEnd();

  std::unique_ptr<std::istream> owned_;  // OpenFile's stream
  std::istream* in_ = nullptr;
  std::string source_;
  DataFormat format_ = DataFormat::kCsv;
  ReadOptions options_;
  int num_features_ = 0;        // LIBSVM: fixed d, or 0
  int max_index_ = 0;           // LIBSVM: largest index seen
  bool has_label_ = false, has_key_ = false;
  int num_cols_ = 0, first_feature_ = 0, d_ = 0;  // CSV layout
  std::vector<std::string> header_, feature_names_, cells_;
  std::string line_, token_;
  std::istringstream tokens_;
  long line_no_ = 0;
  long long n_ = 0;
  int64_t bytes_ = 0;
  bool done_ = false;
  // LIBSVM labels: all ±1 so far; the first (row, label) that is not a valid class id.
  bool plus_minus_ = true;
  long long first_bad_row_ = -1, first_bad_label_ = 0;
};

/// What a bounded-memory upload needs to know about a data file before
/// sending it (the first pass), plus how to read it again (the second).
struct DataFileScan {
  std::string path;
  DataFormat format = DataFormat::kCsv;
  int num_features = 0;  ///< as given to ScanDataFile
  ReadOptions options;
  int64_t num_points = 0;
  int dim = 0;
  bool has_labels = false;
  bool has_item_keys = false;
  std::vector<int> labels;  ///< class ids as ReadCsvFile / ReadLibsvmFile give them; empty without labels
  int64_t nonzeros = 0;     ///< feature values != 0 (for the sparse / dense choice)
  int64_t file_bytes = 0;
};

/// Reads `path` once without keeping features. Fails exactly when
/// ReadCsvFile / ReadLibsvmFile fail, with the same status (item-key checks
/// included: "path: item_keys[7] = \"x\" is a duplicate"). `on_progress`, if
/// set, is called every few thousand rows with (bytes read, file size).
StatusOr<DataFileScan> ScanDataFile(const std::string& path, DataFormat format, int num_features = 0,
                                    const ReadOptions& options = {},
                                    const std::function<void(int64_t, int64_t)>& on_progress = nullptr);

}  // namespace kls
