#include "core/data/row_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <utility>

namespace kls {
namespace {

bool IsTrimmed(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '"'; }

bool IsBlank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), IsTrimmed);
}

// Splits on commas into `out` (reusing its strings), each cell trimmed.
void SplitComma(const std::string& line, std::vector<std::string>* out) {
  size_t count = 0;
  size_t begin = 0;
  while (true) {
    size_t end = line.find(',', begin);
    if (end == std::string::npos) end = line.size();
    size_t b = begin, e = end;
    while (b < e && IsTrimmed(line[b])) ++b;
    while (e > b && IsTrimmed(line[e - 1])) --e;
    if (count == out->size()) out->emplace_back();
    (*out)[count++].assign(line, b, e - b);
    if (end == line.size()) break;
    begin = end + 1;
  }
  out->resize(count);
}

// strtod accepts "nan"/"inf"; we parse them so the error can say "not finite"
// rather than "not a number".
bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE;
}

bool ParseInt(const std::string& s, long long* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;
  auto r = std::from_chars(b, e, *out);
  if (r.ec == std::errc() && r.ptr == e) return true;
  // Accept integral floats such as "1.0" for labels.
  double d;
  if (ParseDouble(s, &d) && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) {
    *out = static_cast<long long>(d);
    return true;
  }
  return false;
}

std::string Where(const std::string& source, long line) {
  return source + " line " + std::to_string(line);
}

Status CheckDenseSize(long long n, long long d, const ReadOptions& o, const std::string& source) {
  if (n > o.max_points) {
    return ResourceExhaustedError(source + ": " + std::to_string(n) + " points exceed the limit of " +
                                  std::to_string(o.max_points));
  }
  if (d > o.max_features) {
    return ResourceExhaustedError(source + ": " + std::to_string(d) +
                                  " features exceed the limit of " + std::to_string(o.max_features));
  }
  const long double bytes = static_cast<long double>(n) * d * sizeof(double);
  if (bytes > static_cast<long double>(o.max_dense_bytes)) {
    return ResourceExhaustedError(source + ": a dense " + std::to_string(n) + " x " +
                                  std::to_string(d) + " matrix needs " +
                                  std::to_string(static_cast<long long>(bytes)) +
                                  " bytes, over the limit of " + std::to_string(o.max_dense_bytes));
  }
  return OkStatus();
}

}  // namespace

const char* DataFormatName(DataFormat format) { return format == DataFormat::kCsv ? "csv" : "libsvm"; }

DataFormat GuessDataFormat(const std::string& path) {
  const std::string ext = path.size() >= 4 ? path.substr(path.size() - 4) : "";
  return ext == ".csv" || ext == ".CSV" ? DataFormat::kCsv : DataFormat::kLibsvm;
}

StatusOr<RowReader> RowReader::Csv(std::istream& in, std::string source, const ReadOptions& options) {
  KLS_RETURN_IF_ERROR(options.Validate());
  RowReader r;
  r.in_ = &in;
  r.source_ = std::move(source);
  r.format_ = DataFormat::kCsv;
  r.options_ = options;
  // Header.
  while (r.ReadLine()) {
    if (!IsBlank(r.line_)) {
      SplitComma(r.line_, &r.header_);
      break;
    }
  }
  const std::string& src = r.source_;
  const std::vector<std::string>& header = r.header_;
  if (header.empty()) return InvalidArgumentError(src + ": empty input (no header line)");
  r.has_key_ = header.front() == "key";
  r.has_label_ = header.back() == "label";
  if (options.require_labels && !r.has_label_) {
    return InvalidArgumentError(src + ": missing labels: the last header column is \"" + header.back() +
                                "\", expected \"label\"");
  }
  r.first_feature_ = r.has_key_ ? 1 : 0;
  r.num_cols_ = static_cast<int>(header.size());
  r.d_ = r.num_cols_ - r.first_feature_ - (r.has_label_ ? 1 : 0);
  if (r.d_ <= 0) return InvalidArgumentError(src + ": the header has no feature columns");
  for (int c = 0; c < r.num_cols_; ++c) {
    if (header[c].empty()) {
      return InvalidArgumentError(Where(src, r.line_no_) + ": header column " + std::to_string(c + 1) +
                                  " is empty");
    }
  }
  r.feature_names_.assign(header.begin() + r.first_feature_, header.begin() + r.first_feature_ + r.d_);
  return r;
}

StatusOr<RowReader> RowReader::Libsvm(std::istream& in, std::string source, int num_features,
                                      const ReadOptions& options) {
  KLS_RETURN_IF_ERROR(options.Validate());
  if (num_features < 0) {
    return InvalidArgumentError("num_features = " + std::to_string(num_features) + " must be >= 0");
  }
  RowReader r;
  r.in_ = &in;
  r.source_ = std::move(source);
  r.format_ = DataFormat::kLibsvm;
  r.options_ = options;
  r.num_features_ = num_features;
  r.has_label_ = true;
  return r;
}

StatusOr<RowReader> RowReader::OpenFile(const std::string& path, DataFormat format, int num_features,
                                        const ReadOptions& options) {
  auto file = std::make_unique<std::ifstream>(path);
  if (!*file) {
    return NotFoundError(std::string("cannot open ") + (format == DataFormat::kCsv ? "CSV" : "LIBSVM") +
                         " file \"" + path + "\"");
  }
  StatusOr<RowReader> reader = format == DataFormat::kCsv ? Csv(*file, path, options)
                                                          : Libsvm(*file, path, num_features, options);
  if (reader.ok()) reader->owned_ = std::move(file);
  return reader;
}

int RowReader::dim() const {
  if (format_ == DataFormat::kCsv) return d_;
  return num_features_ > 0 ? num_features_ : max_index_;
}

int RowReader::ClassId(long long label) const {
  if (format_ == DataFormat::kLibsvm && plus_minus_) return label == 1 ? 1 : 0;
  return static_cast<int>(label);
}

bool RowReader::ReadLine() {
  if (!std::getline(*in_, line_)) return false;
  ++line_no_;
  bytes_ += static_cast<int64_t>(line_.size()) + 1;
  return true;
}

StatusOr<bool> RowReader::Next(DataRow* row) {
  if (done_) return false;
  return format_ == DataFormat::kCsv ? NextCsv(row) : NextLibsvm(row);
}

StatusOr<bool> RowReader::NextCsv(DataRow* row) {
  while (ReadLine()) {
    if (IsBlank(line_)) continue;
    SplitComma(line_, &cells_);
    const std::vector<std::string>& cells = cells_;
    if (static_cast<int>(cells.size()) != num_cols_) {
      return InvalidArgumentError(Where(source_, line_no_) + ": ragged row with " + std::to_string(cells.size()) +
                                  " columns, the header has " + std::to_string(num_cols_));
    }
    if (n_ + 1 > options_.max_points) KLS_RETURN_IF_ERROR(CheckDenseSize(n_ + 1, d_, options_, source_));
    row->line = line_no_;
    row->index = n_;
    row->columns.clear();
    row->values.clear();
    row->label = 0;
    if (has_key_) row->key = cells[0]; else row->key.clear();
    for (int c = first_feature_; c < first_feature_ + d_; ++c) {
      double v;
      if (!ParseDouble(cells[c], &v)) {
        return InvalidArgumentError(Where(source_, line_no_) + ", column " + std::to_string(c + 1) + " (" +
                                    header_[c] + "): \"" + cells[c] + "\" is not a number");
      }
      if (!std::isfinite(v)) {
        return InvalidArgumentError(Where(source_, line_no_) + ", column " + std::to_string(c + 1) + " (" +
                                    header_[c] + "): value " + cells[c] + " is not finite");
      }
      row->values.push_back(v);
    }
    if (has_label_) {
      long long lab;
      const std::string& cell = cells.back();
      if (cell.empty()) return InvalidArgumentError(Where(source_, line_no_) + ": missing label");
      if (!ParseInt(cell, &lab) || lab < 0 || lab > std::numeric_limits<int>::max()) {
        return InvalidArgumentError(Where(source_, line_no_) + ", column label: \"" + cell +
                                    "\" is not a non-negative integer class id");
      }
      row->label = lab;
    }
    ++n_;
    return true;
  }
  KLS_RETURN_IF_ERROR(AtEnd());
  return false;
}

StatusOr<bool> RowReader::NextLibsvm(DataRow* row) {
  while (ReadLine()) {
    const size_t hash = line_.find('#');
    if (hash != std::string::npos) line_.resize(hash);
    tokens_.clear();
    tokens_.str(line_);
    std::string& tok = token_;
    if (!(tokens_ >> tok)) continue;
    long long lab;
    if (!ParseInt(tok, &lab)) {
      return InvalidArgumentError(Where(source_, line_no_) + ": label \"" + tok + "\" is not an integer");
    }
    row->line = line_no_;
    row->index = n_;
    row->columns.clear();
    row->values.clear();
    row->key.clear();
    row->label = lab;
    plus_minus_ = plus_minus_ && (lab == -1 || lab == 1);
    if (first_bad_row_ < 0 && (lab < 0 || lab > std::numeric_limits<int>::max())) {
      first_bad_row_ = n_;
      first_bad_label_ = lab;
    }
    int prev = 0;
    while (tokens_ >> tok) {
      const size_t colon = tok.find(':');
      if (colon == std::string::npos) {
        return InvalidArgumentError(Where(source_, line_no_) + ": token \"" + tok + "\" is not index:value");
      }
      long long idx;
      double v;
      if (!ParseInt(tok.substr(0, colon), &idx) || idx < 1 || idx > options_.max_features) {
        return InvalidArgumentError(Where(source_, line_no_) + ": feature index \"" + tok.substr(0, colon) +
                                    "\" must be an integer in [1, " +
                                    std::to_string(num_features_ > 0 ? num_features_ : options_.max_features) +
                                    "]");
      }
      if (num_features_ > 0 && idx > num_features_) {
        return InvalidArgumentError(Where(source_, line_no_) + ": feature index " + std::to_string(idx) +
                                    " exceeds num_features = " + std::to_string(num_features_));
      }
      if (idx <= prev) {
        return InvalidArgumentError(Where(source_, line_no_) + ": feature index " + std::to_string(idx) +
                                    " is not greater than the previous index " + std::to_string(prev));
      }
      if (!ParseDouble(tok.substr(colon + 1), &v) || !std::isfinite(v)) {
        return InvalidArgumentError(Where(source_, line_no_) + ": value \"" + tok.substr(colon + 1) +
                                    "\" of feature " + std::to_string(idx) + " is not a finite number");
      }
      prev = static_cast<int>(idx);
      max_index_ = std::max(max_index_, prev);
      row->columns.push_back(prev - 1);
      row->values.push_back(v);
    }
    ++n_;
    if (n_ > options_.max_points) KLS_RETURN_IF_ERROR(CheckDenseSize(n_, 1, options_, source_));
    return true;
  }
  KLS_RETURN_IF_ERROR(AtEnd());
  return false;
}

Status RowReader::AtEnd() {
  if (in_->bad()) return DataLossError(source_ + ": read error after line " + std::to_string(line_no_));
  if (format_ == DataFormat::kCsv) {
    if (n_ == 0) return InvalidArgumentError(source_ + ": empty data set (a header but no rows)");
    KLS_RETURN_IF_ERROR(CheckDenseSize(n_, d_, options_, source_));
  } else {
    if (n_ == 0) return InvalidArgumentError(source_ + ": empty data set (no rows)");
    const int d = dim();
    if (d == 0) return InvalidArgumentError(source_ + ": no feature has a non-zero value");
    KLS_RETURN_IF_ERROR(CheckDenseSize(n_, d, options_, source_));
    // {-1, +1} → {0, 1}; otherwise labels must already be non-negative ids.
    if (!plus_minus_ && first_bad_row_ >= 0) {
      return InvalidArgumentError(source_ + ": label " + std::to_string(first_bad_label_) + " of row " +
                                  std::to_string(first_bad_row_ + 1) +
                                  " is negative (only -1/+1 or non-negative class ids are accepted)");
    }
  }
  done_ = true;
  return OkStatus();
}

// ---- ScanDataFile -------------------------------------------------------------

namespace {

// Dataset::Validate's item-key checks without keeping the keys: 64-bit hashes
// find the candidates, a second read of just those rows confirms them. The
// first duplicate in row order wins, as in Validate.
// Sets *row to the first row whose key repeats an earlier one (-1: none).
Status FindDuplicateKey(const std::string& path, DataFormat format, int num_features, const ReadOptions& options,
                        std::vector<std::pair<uint64_t, int64_t>> hashes, int64_t* row_out, std::string* key_out) {
  *row_out = -1;
  std::sort(hashes.begin(), hashes.end());
  std::vector<int64_t> suspects;  // rows sharing a hash with another row
  for (size_t a = 0; a < hashes.size();) {
    size_t b = a + 1;
    while (b < hashes.size() && hashes[b].first == hashes[a].first) ++b;
    if (b - a > 1) {
      for (size_t t = a; t < b; ++t) suspects.push_back(hashes[t].second);
    }
    a = b;
  }
  if (suspects.empty()) return OkStatus();
  std::sort(suspects.begin(), suspects.end());
  KLS_ASSIGN_OR_RETURN(RowReader reader, RowReader::OpenFile(path, format, num_features, options));
  std::vector<std::pair<std::string, int64_t>> keys;  // (key, row) of the suspects
  DataRow row;
  size_t next = 0;
  while (next < suspects.size()) {
    KLS_ASSIGN_OR_RETURN(const bool more, reader.Next(&row));
    if (!more) break;
    if (row.index == suspects[next]) {
      keys.emplace_back(row.key, row.index);
      ++next;
    }
  }
  if (next < suspects.size()) return DataLossError(path + ": the file changed while it was read");
  std::sort(keys.begin(), keys.end());
  int64_t first_duplicate = -1;
  for (size_t t = 1; t < keys.size(); ++t) {
    if (keys[t].first == keys[t - 1].first && (first_duplicate < 0 || keys[t].second < first_duplicate)) {
      first_duplicate = keys[t].second;  // the later row of an equal pair (the sort puts rows in order)
    }
  }
  if (first_duplicate < 0) return OkStatus();
  const auto it = std::find_if(keys.begin(), keys.end(), [&](const auto& k) { return k.second == first_duplicate; });
  *row_out = first_duplicate;
  *key_out = it->first;
  return OkStatus();
}

}  // namespace

StatusOr<DataFileScan> ScanDataFile(const std::string& path, DataFormat format, int num_features,
                                    const ReadOptions& options,
                                    const std::function<void(int64_t, int64_t)>& on_progress) {
  KLS_ASSIGN_OR_RETURN(RowReader reader, RowReader::OpenFile(path, format, num_features, options));
  std::error_code size_error;
  const auto file_size = std::filesystem::file_size(path, size_error);
  const int64_t total_bytes = size_error ? 0 : static_cast<int64_t>(file_size);
  DataFileScan scan;
  scan.path = path;
  scan.format = format;
  scan.num_features = num_features;
  scan.options = options;
  scan.has_labels = reader.has_labels();
  scan.has_item_keys = reader.has_item_keys();
  std::vector<std::pair<uint64_t, int64_t>> key_hashes;
  int64_t first_empty_key = -1;  // Validate reports the first bad key in row order, empty or duplicate
  const std::hash<std::string> hash;
  DataRow row;
  while (true) {
    KLS_ASSIGN_OR_RETURN(const bool more, reader.Next(&row));
    if (!more) break;
    if (on_progress && row.index % 4096 == 4095) on_progress(reader.bytes_read(), total_bytes);
    for (double v : row.values) scan.nonzeros += v != 0.0;
    if (scan.has_labels) {
      // Out-of-range labels fail at the end of the input (Next), so the
      // clamp never reaches a caller.
      scan.labels.push_back(static_cast<int>(std::clamp<long long>(row.label, std::numeric_limits<int>::min(),
                                                                   std::numeric_limits<int>::max())));
    }
    if (scan.has_item_keys) {
      if (row.key.empty() && first_empty_key < 0) first_empty_key = row.index;
      key_hashes.emplace_back(hash(row.key), row.index);
    }
  }
  scan.num_points = reader.rows();
  scan.dim = reader.dim();
  scan.file_bytes = reader.bytes_read();
  for (int& label : scan.labels) label = reader.ClassId(label);
  if (scan.has_item_keys) {
    int64_t duplicate = -1;
    std::string key;
    KLS_RETURN_IF_ERROR(FindDuplicateKey(path, format, num_features, options, std::move(key_hashes), &duplicate, &key));
    if (first_empty_key >= 0 && (duplicate < 0 || first_empty_key < duplicate)) {
      return InvalidArgumentError("item_keys[" + std::to_string(first_empty_key) + "] is empty").WithContext(path);
    }
    if (duplicate >= 0) {
      return InvalidArgumentError("item_keys[" + std::to_string(duplicate) + "] = \"" + key + "\" is a duplicate")
          .WithContext(path);
    }
  }
  if (total_bytes > 0) scan.file_bytes = total_bytes;
  return scan;
}

}  // namespace kls
