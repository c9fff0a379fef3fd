#include "core/data/csv_reader.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <vector>

namespace kls {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r' || s[b] == '"')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '"')) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> SplitComma(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(Trim(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(Trim(cur));
  return out;
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

Status ReadOptions::Validate() const {
  if (max_points < 1) return InvalidArgumentError("max_points = " + std::to_string(max_points) + " must be >= 1");
  if (max_features < 1) return InvalidArgumentError("max_features = " + std::to_string(max_features) + " must be >= 1");
  return OkStatus();
}

StatusOr<Dataset> ParseCsv(std::istream& in, const std::string& source, const ReadOptions& options) {
  KLS_RETURN_IF_ERROR(options.Validate());
  std::string line;
  long line_no = 0;
  // Header.
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    ++line_no;
    if (!Trim(line).empty()) {
      header = SplitComma(line);
      break;
    }
  }
  if (header.empty()) return InvalidArgumentError(source + ": empty input (no header line)");
  const bool has_key = header.front() == "key";
  const bool has_label = header.back() == "label";
  if (options.require_labels && !has_label) {
    return InvalidArgumentError(source + ": missing labels: the last header column is \"" +
                                header.back() + "\", expected \"label\"");
  }
  const int first_feature = has_key ? 1 : 0;
  const int num_cols = static_cast<int>(header.size());
  const int d = num_cols - first_feature - (has_label ? 1 : 0);
  if (d <= 0) return InvalidArgumentError(source + ": the header has no feature columns");
  for (int c = 0; c < num_cols; ++c) {
    if (header[c].empty()) {
      return InvalidArgumentError(Where(source, line_no) + ": header column " + std::to_string(c + 1) +
                                  " is empty");
    }
  }

  std::vector<double> values;
  Dataset data;
  data.feature_names.assign(header.begin() + first_feature, header.begin() + first_feature + d);
  long long n = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (Trim(line).empty()) continue;
    const std::vector<std::string> cells = SplitComma(line);
    if (static_cast<int>(cells.size()) != num_cols) {
      return InvalidArgumentError(Where(source, line_no) + ": ragged row with " +
                                  std::to_string(cells.size()) + " columns, the header has " +
                                  std::to_string(num_cols));
    }
    if (n + 1 > options.max_points) KLS_RETURN_IF_ERROR(CheckDenseSize(n + 1, d, options, source));
    if (has_key) data.item_keys.push_back(cells[0]);
    for (int c = first_feature; c < first_feature + d; ++c) {
      double v;
      if (!ParseDouble(cells[c], &v)) {
        return InvalidArgumentError(Where(source, line_no) + ", column " + std::to_string(c + 1) +
                                    " (" + header[c] + "): \"" + cells[c] + "\" is not a number");
      }
      if (!std::isfinite(v)) {
        return InvalidArgumentError(Where(source, line_no) + ", column " + std::to_string(c + 1) +
                                    " (" + header[c] + "): value " + cells[c] + " is not finite");
      }
      values.push_back(v);
    }
    if (has_label) {
      long long lab;
      const std::string& cell = cells.back();
      if (cell.empty()) {
        return InvalidArgumentError(Where(source, line_no) + ": missing label");
      }
      if (!ParseInt(cell, &lab) || lab < 0 || lab > std::numeric_limits<int>::max()) {
        return InvalidArgumentError(Where(source, line_no) + ", column label: \"" + cell +
                                    "\" is not a non-negative integer class id");
      }
      data.labels.push_back(static_cast<int>(lab));
    }
    ++n;
  }
  if (n == 0) return InvalidArgumentError(source + ": empty data set (a header but no rows)");
  KLS_RETURN_IF_ERROR(CheckDenseSize(n, d, options, source));
  data.features.resize(n, d);
  for (long long i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) data.features(i, j) = values[i * d + j];
  KLS_RETURN_IF_ERROR(data.Validate().WithContext(source));
  return data;
}

StatusOr<Dataset> ReadCsvFile(const std::string& path, const ReadOptions& options) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot open CSV file \"" + path + "\"");
  return ParseCsv(in, path, options);
}

StatusOr<Dataset> ParseLibsvm(std::istream& in, const std::string& source, int num_features,
                              const ReadOptions& options) {
  KLS_RETURN_IF_ERROR(options.Validate());
  if (num_features < 0) {
    return InvalidArgumentError("num_features = " + std::to_string(num_features) + " must be >= 0");
  }
  struct Entry { long long row; int col; double value; };
  std::vector<Entry> entries;
  std::vector<long long> raw_labels;
  std::string line;
  long line_no = 0;
  int max_index = 0;
  long long n = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream tokens(line);
    std::string tok;
    if (!(tokens >> tok)) continue;
    long long lab;
    if (!ParseInt(tok, &lab)) {
      return InvalidArgumentError(Where(source, line_no) + ": label \"" + tok + "\" is not an integer");
    }
    raw_labels.push_back(lab);
    int prev = 0;
    while (tokens >> tok) {
      const size_t colon = tok.find(':');
      if (colon == std::string::npos) {
        return InvalidArgumentError(Where(source, line_no) + ": token \"" + tok +
                                    "\" is not index:value");
      }
      long long idx;
      double v;
      if (!ParseInt(tok.substr(0, colon), &idx) || idx < 1 || idx > options.max_features) {
        return InvalidArgumentError(Where(source, line_no) + ": feature index \"" +
                                    tok.substr(0, colon) + "\" must be an integer in [1, " +
                                    std::to_string(num_features > 0 ? num_features : options.max_features) + "]");
      }
      if (num_features > 0 && idx > num_features) {
        return InvalidArgumentError(Where(source, line_no) + ": feature index " + std::to_string(idx) +
                                    " exceeds num_features = " + std::to_string(num_features));
      }
      if (idx <= prev) {
        return InvalidArgumentError(Where(source, line_no) + ": feature index " + std::to_string(idx) +
                                    " is not greater than the previous index " + std::to_string(prev));
      }
      if (!ParseDouble(tok.substr(colon + 1), &v) || !std::isfinite(v)) {
        return InvalidArgumentError(Where(source, line_no) + ": value \"" + tok.substr(colon + 1) +
                                    "\" of feature " + std::to_string(idx) + " is not a finite number");
      }
      prev = static_cast<int>(idx);
      max_index = std::max(max_index, prev);
      entries.push_back({n, prev - 1, v});
    }
    ++n;
    if (n > options.max_points) KLS_RETURN_IF_ERROR(CheckDenseSize(n, 1, options, source));
  }
  if (n == 0) return InvalidArgumentError(source + ": empty data set (no rows)");
  const int d = num_features > 0 ? num_features : max_index;
  if (d == 0) return InvalidArgumentError(source + ": no feature has a non-zero value");
  KLS_RETURN_IF_ERROR(CheckDenseSize(n, d, options, source));
  Dataset data;
  data.features = Eigen::MatrixXd::Zero(n, d);
  for (const Entry& e : entries) data.features(e.row, e.col) = e.value;
  // {-1, +1} → {0, 1}; otherwise labels must already be non-negative ids.
  bool plus_minus = true;
  for (long long l : raw_labels) plus_minus = plus_minus && (l == -1 || l == 1);
  data.labels.reserve(n);
  for (long long i = 0; i < n; ++i) {
    const long long l = raw_labels[i];
    if (plus_minus) {
      data.labels.push_back(l == 1 ? 1 : 0);
    } else if (l < 0 || l > std::numeric_limits<int>::max()) {
      return InvalidArgumentError(source + ": label " + std::to_string(l) + " of row " +
                                  std::to_string(i + 1) +
                                  " is negative (only -1/+1 or non-negative class ids are accepted)");
    } else {
      data.labels.push_back(static_cast<int>(l));
    }
  }
  KLS_RETURN_IF_ERROR(data.Validate().WithContext(source));
  return data;
}

StatusOr<Dataset> ReadLibsvmFile(const std::string& path, int num_features, const ReadOptions& options) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot open LIBSVM file \"" + path + "\"");
  return ParseLibsvm(in, path, num_features, options);
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
