// Reading data sets from CSV and LIBSVM text.
//
// CSV: a header line, then one row per point; every column is a number; the
// last column is the integer class label when its header is `label`
// (the layout of the sets in tests/data). An optional first column named `key`
// holds string item keys.
//
// LIBSVM: "label idx:val idx:val ..." with 1-based ascending indices; read into
// a dense matrix (the solvers' kernels are dense in the point index anyway).
#pragma once

#include <istream>
#include <string>

#include "core/common/status.h"
#include "core/data/dataset.h"

namespace kls {

struct ReadOptions {
  /// Refuse inputs with more points than this (guards absurd sizes).
  int max_points = 10'000'000;
  /// Refuse inputs with more features than this.
  int max_features = 1'000'000;
  /// Refuse dense matrices larger than this many bytes.
  std::size_t max_dense_bytes = std::size_t{8} << 30;
  /// Require a label column (CSV) — error "missing labels" otherwise.
  bool require_labels = false;
  Status Validate() const;
};

/// Parses CSV text; `source` names the input in error messages
/// ("iris.csv line 12, column 3: ...").
StatusOr<Dataset> ParseCsv(std::istream& in, const std::string& source,
                           const ReadOptions& options = {});
StatusOr<Dataset> ReadCsvFile(const std::string& path, const ReadOptions& options = {});

/// Parses LIBSVM sparse text. `num_features` > 0 fixes d (indices beyond it
/// are an error); 0 means d = the largest index seen. Labels: {-1,+1} map to
/// {0,1}; other integer labels must be non-negative and are kept.
StatusOr<Dataset> ParseLibsvm(std::istream& in, const std::string& source, int num_features = 0,
                              const ReadOptions& options = {});
StatusOr<Dataset> ReadLibsvmFile(const std::string& path, int num_features = 0,
                                 const ReadOptions& options = {});

/// Writes `data` as CSV in the layout ParseCsv reads (round-trip exact to 17
/// significant digits).
Status WriteCsvFile(const Dataset& data, const std::string& path);

}  // namespace kls
