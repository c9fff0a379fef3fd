#include "core/model/item_attributes.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <utility>

#include "core/common/byte_io.h"
#include "core/common/names.h"

// The binary encoding copies numbers in host byte order (as ByteWriter does);
// the format is little-endian, so refuse to build where that would differ.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "item attribute encoding assumes a little-endian host");

namespace kls {
namespace {

constexpr int64_t kMaxItems = std::numeric_limits<int32_t>::max();  // items are indexed by int downstream
constexpr uint32_t kMagic = 0x41534c4b;                              // "KLSA" in file order
constexpr uint32_t kVersion = 1;
constexpr const char* kReservedWords[] = {"and", "or", "not", "in", "true", "false", "index", "key"};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string ColumnWhere(size_t c, const std::string& name) {
  return "attribute column " + std::to_string(c) + " " + QuoteForMessage(name) + ": ";
}

Status ValidateColumn(size_t c, const AttributeColumn& col, int64_t n) {
  const std::string where = ColumnWhere(c, col.name);
  if (!IsValidAttributeName(col.name)) {
    return InvalidArgumentError(where +
                                "not a valid attribute name (names match [A-Za-z_][A-Za-z0-9_]{0,63} and are not "
                                "one of the reserved words and, or, not, in, true, false, index, key)");
  }
  const int t = static_cast<int>(col.type);
  if (t < 0 || t > static_cast<int>(AttributeType::kBool)) {
    return InvalidArgumentError(where + "unknown attribute type " + std::to_string(t));
  }
  const char* type = AttributeTypeName(col.type);
  // Exactly the vector of the column's type has n entries.
  const std::pair<AttributeType, size_t> sizes[] = {{AttributeType::kString, col.strings.size()},
                                                    {AttributeType::kInt, col.ints.size()},
                                                    {AttributeType::kFloat, col.floats.size()},
                                                    {AttributeType::kBool, col.bools.size()}};
  for (const auto& [vt, size] : sizes) {
    if (vt == col.type && static_cast<int64_t>(size) != n) {
      return InvalidArgumentError(where + std::to_string(size) + " " + type + " values for " + std::to_string(n) +
                                  " items");
    }
    if (vt != col.type && size != 0) {
      return InvalidArgumentError(where + (col.type == AttributeType::kInt ? "an " : "a ") + type + " column has " +
                                  std::to_string(size) + " " + AttributeTypeName(vt) + " values (expected none)");
    }
  }
  if (static_cast<int64_t>(col.present.size()) != n) {
    return InvalidArgumentError(where + std::to_string(col.present.size()) + " presence flags for " +
                                std::to_string(n) + " items");
  }
  for (size_t i = 0; i < col.present.size(); ++i) {
    if (col.present[i] > 1) {
      return InvalidArgumentError(where + "presence flag " + std::to_string(i) + " is " +
                                  std::to_string(col.present[i]) + " (expected 0 or 1)");
    }
  }
  for (size_t i = 0; i < col.bools.size(); ++i) {
    if (col.bools[i] > 1) {
      return InvalidArgumentError(where + "value " + std::to_string(i) + " is " + std::to_string(col.bools[i]) +
                                  " (expected 0 or 1)");
    }
  }
  for (size_t i = 0; i < col.floats.size(); ++i) {
    if (!std::isfinite(col.floats[i])) {
      return InvalidArgumentError(where + "value " + std::to_string(i) + " is not finite");
    }
  }
  return OkStatus();
}

// 64-bit FNV-1a. Each step is a bijection of the running state for a fixed
// byte and of the byte for a fixed state, so any one damaged byte (in
// particular any single flipped bit) always changes the result.
uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

template <typename T>
void PutBlob(ByteWriter* w, const std::vector<T>& v) {
  w->PutString(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

// A length-prefixed blob of exactly n values of T (bounded by the input, so
// damaged counts cannot make it allocate more than the bytes it was given).
template <typename T>
Status GetBlob(ByteReader* r, int64_t n, const char* what, std::vector<T>* v) {
  std::string blob;
  KLS_RETURN_IF_ERROR(r->GetString(&blob));
  if (blob.size() != static_cast<uint64_t>(n) * sizeof(T)) {
    return DataLossError(r->what() + ": " + what + " holds " + std::to_string(blob.size()) + " bytes, expected " +
                         std::to_string(static_cast<uint64_t>(n) * sizeof(T)));
  }
  v->resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(v->data(), blob.data(), blob.size());
  return OkStatus();
}

// ---- CSV ----------------------------------------------------------------

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && (IsBlank(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Reads RFC-4180 records one at a time, counting lines for error messages.
class CsvRecords {
 public:
  CsvRecords(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  /// The next non-blank record into `cells`; false at the end of the text.
  /// `line` receives the 1-based line it starts on.
  StatusOr<bool> Next(std::vector<std::string>* cells, int64_t* line) {
    cells->clear();
    SkipBlankLines();
    if (pos_ >= text_.size()) return false;
    *line = line_;
    while (true) {
      std::string cell;
      KLS_ASSIGN_OR_RETURN(const char end, ReadCell(&cell));
      cells->push_back(std::move(cell));
      if (end != ',') return true;
    }
  }

  std::string Where(int64_t line) const { return source_ + " line " + std::to_string(line) + ": "; }

 private:
  void SkipBlankLines() {
    while (pos_ < text_.size()) {
      size_t p = pos_;
      while (p < text_.size() && (IsBlank(text_[p]) || text_[p] == '\r')) ++p;
      if (p < text_.size() && text_[p] != '\n') return;
      pos_ = p < text_.size() ? p + 1 : p;
      if (p < text_.size()) ++line_;
    }
  }

  // One cell; returns what ended it: ',' or '\n' (also for the end of the text).
  StatusOr<char> ReadCell(std::string* cell) {
    while (pos_ < text_.size() && IsBlank(text_[pos_])) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '"') {
      const int64_t opened = line_;
      ++pos_;
      while (true) {
        if (pos_ >= text_.size()) {
          return InvalidArgumentError(Where(opened) + "unterminated quoted cell (its opening quote is never closed)");
        }
        const char c = text_[pos_++];
        if (c == '"') {
          if (pos_ < text_.size() && text_[pos_] == '"') {
            cell->push_back('"');
            ++pos_;
            continue;
          }
          break;
        }
        if (c == '\n') ++line_;
        cell->push_back(c);
      }
      while (pos_ < text_.size() && (IsBlank(text_[pos_]) || text_[pos_] == '\r')) ++pos_;
      if (pos_ >= text_.size()) return '\n';
      const char c = text_[pos_++];
      if (c == ',') return ',';
      if (c == '\n') {
        ++line_;
        return '\n';
      }
      return InvalidArgumentError(Where(line_) + "unexpected " + QuoteForMessage(std::string_view(&c, 1)) +
                                  " after a closing quote (expected ',' or the end of the line)");
    }
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n') {
      if (text_[pos_] == '"') {
        return InvalidArgumentError(Where(line_) +
                                    "a quote inside an unquoted cell (quote the whole cell and write \"\" for a "
                                    "quote inside it)");
      }
      ++pos_;
    }
    *cell = std::string(Trim(text_.substr(start, pos_ - start)));
    if (pos_ >= text_.size()) return '\n';
    const char c = text_[pos_++];
    if (c == '\n') ++line_;
    return c;
  }

  std::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

bool ParseBoolCell(std::string_view s, uint8_t* v) {
  if (EqualsIgnoreCase(s, "true")) {
    *v = 1;
    return true;
  }
  if (EqualsIgnoreCase(s, "false")) {
    *v = 0;
    return true;
  }
  return false;
}

// from_chars takes no '+'; accept one before a digit or '.'.
std::string_view DropPlus(std::string_view s) {
  if (s.size() >= 2 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  return s;
}

bool ParseIntCell(std::string_view s, int64_t* v) {
  s = DropPlus(s);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v, 10);
  return ec == std::errc() && end == s.data() + s.size();
}

bool ParseFloatCell(std::string_view s, double* v) {
  s = DropPlus(s);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v, std::chars_format::general);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(*v);
}

bool ParseTypeName(std::string_view s, AttributeType* t) {
  for (AttributeType c : {AttributeType::kString, AttributeType::kInt, AttributeType::kFloat, AttributeType::kBool}) {
    if (EqualsIgnoreCase(s, AttributeTypeName(c))) {
      *t = c;
      return true;
    }
  }
  return false;
}

// The narrowest type that every non-empty cell of column c parses as.
AttributeType InferType(const std::vector<std::vector<std::string>>& rows, size_t c) {
  bool any = false, all_bool = true, all_int = true, all_float = true;
  for (const auto& row : rows) {
    const std::string& s = row[c];
    if (s.empty()) continue;
    any = true;
    uint8_t b;
    int64_t i;
    double f;
    if (all_bool && !ParseBoolCell(s, &b)) all_bool = false;
    if (all_int && !ParseIntCell(s, &i)) all_int = false;
    if (all_float && !ParseFloatCell(s, &f)) all_float = false;
    if (!all_bool && !all_int && !all_float) break;
  }
  if (!any) return AttributeType::kString;
  if (all_bool) return AttributeType::kBool;
  if (all_int) return AttributeType::kInt;
  if (all_float) return AttributeType::kFloat;
  return AttributeType::kString;
}

StatusOr<ItemAttributes> ParseCsvImpl(std::string_view text, int64_t num_items,
                                      const std::unordered_map<std::string, int>* key_index,
                                      const std::string& source) {
  if (num_items < 0 || num_items > kMaxItems) {
    return InvalidArgumentError(source + ": num_items = " + std::to_string(num_items) + " must be in [0, " +
                                std::to_string(kMaxItems) + "]");
  }
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark, as spreadsheets write
  CsvRecords records(text, source);
  std::vector<std::string> header;
  int64_t header_line = 1;
  KLS_ASSIGN_OR_RETURN(const bool has_header, records.Next(&header, &header_line));
  if (!has_header) return InvalidArgumentError(source + ": empty file; expected a header line such as key,price");
  const std::string hwhere = records.Where(header_line);
  const bool by_key = header[0] == "key";
  if (!by_key && header[0] != "row") {
    return InvalidArgumentError(hwhere + "the first column must be \"key\" (item keys) or \"row\" (0-based item "
                                         "indices), found " + QuoteForMessage(header[0]));
  }
  if (by_key && key_index == nullptr) {
    return FailedPreconditionError(hwhere + "the data set has no item keys; name items by a \"row\" column "
                                            "(0-based item indices) instead of \"key\"");
  }
  const size_t num_columns = header.size() - 1;
  if (num_columns > static_cast<size_t>(kMaxAttributeColumns)) {
    return InvalidArgumentError(hwhere + std::to_string(num_columns) + " attribute columns; at most " +
                                std::to_string(kMaxAttributeColumns) + " are allowed");
  }
  std::vector<AttributeColumn> columns(num_columns);
  std::vector<bool> typed(num_columns, false);
  std::unordered_set<std::string> names;
  for (size_t c = 0; c < num_columns; ++c) {
    const std::string& cell = header[c + 1];
    const size_t colon = cell.find(':');
    std::string name(Trim(std::string_view(cell).substr(0, colon)));
    if (colon != std::string::npos) {
      const std::string_view type = Trim(std::string_view(cell).substr(colon + 1));
      if (!ParseTypeName(type, &columns[c].type)) {
        return InvalidArgumentError(hwhere + "column " + QuoteForMessage(name) + ": unknown type " +
                                    QuoteForMessage(type) + " (expected string, int, float or bool)");
      }
      typed[c] = true;
    }
    if (!IsValidAttributeName(name)) {
      return InvalidArgumentError(hwhere + QuoteForMessage(name) +
                                  " is not a valid attribute name (names match [A-Za-z_][A-Za-z0-9_]{0,63} and are "
                                  "not one of the reserved words and, or, not, in, true, false, index, key)");
    }
    if (!names.insert(name).second) {
      return InvalidArgumentError(hwhere + "attribute " + QuoteForMessage(name) + " appears twice");
    }
    columns[c].name = std::move(name);
  }

  // Rows: item index, line and the attribute cells.
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> row_items, row_lines;
  std::vector<int64_t> listed_on(static_cast<size_t>(num_items), 0);
  std::vector<std::string> cells;
  int64_t line = 0;
  while (true) {
    KLS_ASSIGN_OR_RETURN(const bool more, records.Next(&cells, &line));
    if (!more) break;
    const std::string where = records.Where(line);
    if (cells.size() != header.size()) {
      return InvalidArgumentError(where + std::to_string(cells.size()) + " cells, expected " +
                                  std::to_string(header.size()) + " as in the header");
    }
    int64_t item = -1;
    if (by_key) {
      const auto it = key_index->find(cells[0]);
      if (it == key_index->end()) return InvalidArgumentError(where + "unknown item key " + QuoteForMessage(cells[0]));
      item = it->second;
      if (item < 0 || item >= num_items) {
        return InvalidArgumentError(where + "key " + QuoteForMessage(cells[0]) + " names item " +
                                    std::to_string(item) + ", outside [0, " + std::to_string(num_items) + ")");
      }
    } else if (!ParseIntCell(cells[0], &item) || item < 0 || item >= num_items) {
      return InvalidArgumentError(where + "row " + QuoteForMessage(cells[0]) + " is not an item index in [0, " +
                                  std::to_string(num_items) + ")");
    }
    if (listed_on[item] != 0) {
      return InvalidArgumentError(where + "item " + std::to_string(item) + " (" + QuoteForMessage(cells[0]) +
                                  ") is listed twice (first on line " + std::to_string(listed_on[item]) + ")");
    }
    listed_on[item] = line;
    cells.erase(cells.begin());
    rows.push_back(std::move(cells));
    cells = {};
    row_items.push_back(item);
    row_lines.push_back(line);
  }

  const size_t n = static_cast<size_t>(num_items);
  for (size_t c = 0; c < num_columns; ++c) {
    AttributeColumn& col = columns[c];
    if (!typed[c]) col.type = InferType(rows, c);
    col.present.assign(n, 0);
    switch (col.type) {
      case AttributeType::kString: col.strings.assign(n, std::string()); break;
      case AttributeType::kInt: col.ints.assign(n, 0); break;
      case AttributeType::kFloat: col.floats.assign(n, 0.0); break;
      case AttributeType::kBool: col.bools.assign(n, 0); break;
    }
  }
  // Row-major, so that the first error reported is on the earliest line.
  for (size_t r = 0; r < rows.size(); ++r) {
    const size_t item = static_cast<size_t>(row_items[r]);
    for (size_t c = 0; c < num_columns; ++c) {
      std::string& s = rows[r][c];
      if (s.empty()) continue;
      AttributeColumn& col = columns[c];
      bool ok = true;
      switch (col.type) {
        case AttributeType::kString: col.strings[item] = std::move(s); break;
        case AttributeType::kInt: ok = ParseIntCell(s, &col.ints[item]); break;
        case AttributeType::kFloat: ok = ParseFloatCell(s, &col.floats[item]); break;
        case AttributeType::kBool: ok = ParseBoolCell(s, &col.bools[item]); break;
      }
      if (!ok) {
        return InvalidArgumentError(records.Where(row_lines[r]) + "column " + QuoteForMessage(col.name) + ": " +
                                    QuoteForMessage(s) + " is not " +
                                    (col.type == AttributeType::kInt ? "an int" : "a ") +
                                    (col.type == AttributeType::kInt ? "" : AttributeTypeName(col.type)));
      }
      col.present[item] = 1;
    }
  }
  auto made = ItemAttributes::Make(num_items, std::move(columns));
  if (!made.ok()) return made.status().WithContext(source);
  return made;
}

}  // namespace

const char* AttributeTypeName(AttributeType t) {
  switch (t) {
    case AttributeType::kString: return "string";
    case AttributeType::kInt: return "int";
    case AttributeType::kFloat: return "float";
    case AttributeType::kBool: return "bool";
  }
  return "unknown";
}

bool IsValidAttributeName(std::string_view name) {
  if (name.empty() || name.size() > static_cast<size_t>(kMaxAttributeNameLength)) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    if (!letter && (i == 0 || c < '0' || c > '9')) return false;
  }
  for (const char* word : kReservedWords) {
    if (EqualsIgnoreCase(name, word)) return false;
  }
  return true;
}

StatusOr<ItemAttributes> ItemAttributes::Make(int64_t num_items, std::vector<AttributeColumn> columns) {
  if (num_items < 0 || num_items > kMaxItems) {
    return InvalidArgumentError("item attributes: num_items = " + std::to_string(num_items) + " must be in [0, " +
                                std::to_string(kMaxItems) + "]");
  }
  if (columns.size() > static_cast<size_t>(kMaxAttributeColumns)) {
    return InvalidArgumentError("item attributes: " + std::to_string(columns.size()) + " columns; at most " +
                                std::to_string(kMaxAttributeColumns) + " are allowed");
  }
  for (size_t c = 0; c < columns.size(); ++c) {
    KLS_RETURN_IF_ERROR(ValidateColumn(c, columns[c], num_items));
    for (size_t d = 0; d < c; ++d) {
      if (columns[d].name == columns[c].name) {
        return InvalidArgumentError(ColumnWhere(c, columns[c].name) + "the name is also used by column " +
                                    std::to_string(d));
      }
    }
  }
  ItemAttributes out;
  out.num_items_ = num_items;
  out.columns_ = std::move(columns);
  return out;
}

const AttributeColumn* ItemAttributes::Find(std::string_view name) const {
  for (const AttributeColumn& c : columns_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string ItemAttributes::Summary() const {
  std::string out;
  for (const AttributeColumn& c : columns_) {
    if (!out.empty()) out += ", ";
    out += c.name + ":" + AttributeTypeName(c.type);
  }
  return out;
}

std::string ItemAttributes::Serialize() const {
  ByteWriter w;
  w.PutHeader(kMagic, kVersion);
  w.Put<int64_t>(num_items_);
  w.Put<uint32_t>(static_cast<uint32_t>(columns_.size()));
  for (const AttributeColumn& c : columns_) {
    w.PutString(c.name);
    w.Put<uint8_t>(static_cast<uint8_t>(c.type));
    PutBlob(&w, c.present);
    switch (c.type) {
      case AttributeType::kString:
        for (const std::string& s : c.strings) w.PutString(s);
        break;
      case AttributeType::kInt: PutBlob(&w, c.ints); break;
      case AttributeType::kFloat: PutBlob(&w, c.floats); break;
      case AttributeType::kBool: PutBlob(&w, c.bools); break;
    }
  }
  std::string out = w.Take();
  const uint64_t sum = Fnv1a64(out);
  out.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  return out;
}

StatusOr<ItemAttributes> ItemAttributes::Deserialize(std::string_view bytes) {
  return GuardExceptions("item attributes", [&]() -> StatusOr<ItemAttributes> {
    const std::string head(bytes.substr(0, 8));
    ByteReader header(head, "item attributes");
    KLS_RETURN_IF_ERROR(header.ReadHeader(kMagic, kVersion));
    if (bytes.size() < 8 + 8 + 4 + 8) {
      return DataLossError("item attributes: truncated (" + std::to_string(bytes.size()) + " bytes)");
    }
    const std::string_view sealed = bytes.substr(0, bytes.size() - 8);
    uint64_t sum = 0;
    std::memcpy(&sum, bytes.data() + sealed.size(), sizeof(sum));
    if (sum != Fnv1a64(sealed)) return DataLossError("item attributes: checksum mismatch (damaged or truncated bytes)");
    const std::string body(sealed);  // ByteReader reads a std::string
    ByteReader r(body, "item attributes");
    KLS_RETURN_IF_ERROR(r.ReadHeader(kMagic, kVersion));
    int64_t n = 0;
    uint32_t num_columns = 0;
    KLS_RETURN_IF_ERROR(r.Get(&n));
    KLS_RETURN_IF_ERROR(r.Get(&num_columns));
    if (n < 0 || n > kMaxItems) return DataLossError("item attributes: " + std::to_string(n) + " items");
    if (num_columns > static_cast<uint32_t>(kMaxAttributeColumns)) {
      return DataLossError("item attributes: " + std::to_string(num_columns) + " columns");
    }
    std::vector<AttributeColumn> columns(num_columns);
    for (uint32_t c = 0; c < num_columns; ++c) {
      AttributeColumn& col = columns[c];
      KLS_RETURN_IF_ERROR(r.GetString(&col.name));
      uint8_t type = 0;
      KLS_RETURN_IF_ERROR(r.Get(&type));
      if (type > static_cast<uint8_t>(AttributeType::kBool)) {
        return DataLossError("item attributes: column " + std::to_string(c) + " has unknown type " +
                             std::to_string(type));
      }
      col.type = static_cast<AttributeType>(type);
      KLS_RETURN_IF_ERROR(GetBlob(&r, n, "presence flags", &col.present));
      switch (col.type) {
        case AttributeType::kString:
          // No reserve: the vector grows only as far as the bytes go.
          for (int64_t i = 0; i < n; ++i) {
            std::string s;
            KLS_RETURN_IF_ERROR(r.GetString(&s));
            col.strings.push_back(std::move(s));
          }
          break;
        case AttributeType::kInt: KLS_RETURN_IF_ERROR(GetBlob(&r, n, "int values", &col.ints)); break;
        case AttributeType::kFloat: KLS_RETURN_IF_ERROR(GetBlob(&r, n, "float values", &col.floats)); break;
        case AttributeType::kBool: KLS_RETURN_IF_ERROR(GetBlob(&r, n, "bool values", &col.bools)); break;
      }
    }
    KLS_RETURN_IF_ERROR(r.ExpectEnd());
    auto made = Make(n, std::move(columns));
    if (!made.ok()) return DataLossError("item attributes: " + made.status().message());
    return made;
  });
}

int64_t ItemAttributes::memory_bytes() const {
  constexpr size_t kInlineString = 15;  // libstdc++ keeps up to 15 bytes inside the string object
  size_t bytes = sizeof(*this) + columns_.capacity() * sizeof(AttributeColumn);
  for (const AttributeColumn& c : columns_) {
    if (c.name.capacity() > kInlineString) bytes += c.name.capacity() + 1;
    bytes += c.strings.capacity() * sizeof(std::string);
    for (const std::string& s : c.strings) {
      if (s.capacity() > kInlineString) bytes += s.capacity() + 1;
    }
    bytes += c.ints.capacity() * sizeof(int64_t) + c.floats.capacity() * sizeof(double) + c.bools.capacity() +
             c.present.capacity();
  }
  return static_cast<int64_t>(bytes);
}

StatusOr<ItemAttributes> ParseAttributesCsv(std::string_view text, int64_t num_items,
                                            const std::unordered_map<std::string, int>* key_index,
                                            const std::string& source) {
  return GuardExceptions("parsing item attributes", [&]() -> StatusOr<ItemAttributes> {
    return ParseCsvImpl(text, num_items, key_index, source);
  });
}

}  // namespace kls
