#include "core/data/csv_reader.h"

#include <fstream>
#include <iomanip>
#include <vector>

#include "core/data/row_reader.h"

namespace kls {

Status ReadOptions::Validate() const {
  if (max_points < 1) return InvalidArgumentError("max_points = " + std::to_string(max_points) + " must be >= 1");
  if (max_features < 1) return InvalidArgumentError("max_features = " + std::to_string(max_features) + " must be >= 1");
  return OkStatus();
}

namespace {

// Collects every row of `reader` into a Dataset (the rows and the checks are
// RowReader's; Dataset::Validate adds the item-key checks).
StatusOr<Dataset> ReadAll(RowReader reader) {
  Dataset data;
  data.feature_names = reader.feature_names();
  std::vector<double> values;  // CSV: row-major n × d
  struct Entry { long long row; int col; double value; };
  std::vector<Entry> entries;  // LIBSVM: the listed values
  std::vector<long long> labels;
  DataRow row;
  while (true) {
    KLS_ASSIGN_OR_RETURN(const bool more, reader.Next(&row));
    if (!more) break;
    if (reader.has_item_keys()) data.item_keys.push_back(row.key);
    if (reader.format() == DataFormat::kCsv) {
      values.insert(values.end(), row.values.begin(), row.values.end());
    } else {
      for (size_t t = 0; t < row.columns.size(); ++t) entries.push_back({row.index, row.columns[t], row.values[t]});
    }
    if (reader.has_labels()) labels.push_back(row.label);
  }
  const long long n = reader.rows();
  const int d = reader.dim();
  if (reader.format() == DataFormat::kCsv) {
    data.features.resize(n, d);
    for (long long i = 0; i < n; ++i)
      for (int j = 0; j < d; ++j) data.features(i, j) = values[i * d + j];
  } else {
    data.features = Eigen::MatrixXd::Zero(n, d);
    for (const Entry& e : entries) data.features(e.row, e.col) = e.value;
  }
  data.labels.reserve(labels.size());
  for (long long l : labels) data.labels.push_back(reader.ClassId(l));
  KLS_RETURN_IF_ERROR(data.Validate().WithContext(reader.source()));
  return data;
}

}  // namespace

StatusOr<Dataset> ParseCsv(std::istream& in, const std::string& source, const ReadOptions& options) {
  KLS_ASSIGN_OR_RETURN(RowReader reader, RowReader::Csv(in, source, options));
  return ReadAll(std::move(reader));
}

StatusOr<Dataset> ReadCsvFile(const std::string& path, const ReadOptions& options) {
  KLS_ASSIGN_OR_RETURN(RowReader reader, RowReader::OpenFile(path, DataFormat::kCsv, 0, options));
  return ReadAll(std::move(reader));
}

StatusOr<Dataset> ParseLibsvm(std::istream& in, const std::string& source, int num_features,
                              const ReadOptions& options) {
  KLS_ASSIGN_OR_RETURN(RowReader reader, RowReader::Libsvm(in, source, num_features, options));
  return ReadAll(std::move(reader));
}

StatusOr<Dataset> ReadLibsvmFile(const std::string& path, int num_features, const ReadOptions& options) {
  KLS_ASSIGN_OR_RETURN(RowReader reader, RowReader::OpenFile(path, DataFormat::kLibsvm, num_features, options));
  return ReadAll(std::move(reader));
}

Status WriteCsvFile(const Dataset& data, const std::string& path) {
  KLS_RETURN_IF_ERROR(data.Validate());
  std::ofstream out(path);
  if (!out) return NotFoundError("cannot write CSV file \"" + path + "\"");
  out << std::setprecision(17);
  const bool keys = !data.item_keys.empty();
  if (keys) out << "key,";
  for (int j = 0; j < data.dim(); ++j) {
    if (j) out << ',';
    if (!data.feature_names.empty()) out << data.feature_names[j]; else out << 'x' << j;
  }
  if (data.has_labels()) out << ",label";
  out << '\n';
  for (int i = 0; i < data.num_points(); ++i) {
    if (keys) out << data.item_keys[i] << ',';
    for (int j = 0; j < data.dim(); ++j) {
      if (j) out << ',';
      out << data.features(i, j);
    }
    if (data.has_labels()) out << ',' << data.labels[i];
    out << '\n';
  }
  if (!out) return InternalError("writing CSV file \"" + path + "\" failed");
  return OkStatus();
}

}  // namespace kls
