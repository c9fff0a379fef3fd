// ItemAttributes: typed attribute columns over a data set's items (string,
// int, float, bool; a value may be missing), what ranking filters
// (core/model/filter_expression.h) refer to by name, e.g.
//   category in ["shoes", "bags"] and price < 100 and not discontinued
//
// They come from an attributes CSV (ParseAttributesCsv) and are stored next
// to the data set in a versioned binary encoding (Serialize / Deserialize).
//
// Thread safety: an ItemAttributes is immutable once made; const methods are
// safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/common/status.h"

namespace kls {

enum class AttributeType { kString, kInt, kFloat, kBool };

/// "string", "int", "float", "bool".
const char* AttributeTypeName(AttributeType t);

/// At most this many attribute columns per data set.
inline constexpr int kMaxAttributeColumns = 256;
/// Attribute names are 1 to this many characters: [A-Za-z_][A-Za-z0-9_]{0,63}.
inline constexpr int kMaxAttributeNameLength = 64;

/// Whether `name` is a valid attribute name: it matches [A-Za-z_][A-Za-z0-9_]{0,63}
/// and is not a reserved word of the filter language (and, or, not, in, true,
/// false, index, key — compared case-insensitively, since the keywords are).
bool IsValidAttributeName(std::string_view name);

/// One typed column over all n items. Exactly the vector of its type has n
/// entries; the others are empty. `present[i]` = 0 when item i has no value (a
/// CSV that does not list the item, or an empty cell); the value stored for a
/// missing item is ignored (ParseAttributesCsv stores "", 0, 0.0 or false).
struct AttributeColumn {
  std::string name;                             ///< see IsValidAttributeName
  AttributeType type = AttributeType::kString;  ///< which of the value vectors is used
  std::vector<std::string> strings;             ///< kString: n values (arbitrary bytes)
  std::vector<int64_t> ints;                    ///< kInt: n values
  std::vector<double> floats;                   ///< kFloat: n values, all finite
  std::vector<uint8_t> bools;                   ///< kBool: n values, 0/1
  std::vector<uint8_t> present;                 ///< n entries, 0/1

  bool operator==(const AttributeColumn& o) const {
    return name == o.name && type == o.type && strings == o.strings && ints == o.ints && floats == o.floats &&
           bools == o.bools && present == o.present;
  }
};

class ItemAttributes {
 public:
  /// No columns, 0 items.
  ItemAttributes() = default;

  /// Validates: 0 <= num_items <= 2^31 − 1; every column has exactly
  /// num_items values of its type (the other value vectors empty) and
  /// num_items `present` flags, all 0/1 (bools too); names are valid
  /// (IsValidAttributeName) and unique; floats finite; at most
  /// kMaxAttributeColumns columns. INVALID_ARGUMENT naming the column by its
  /// 0-based position and name, e.g.
  ///   attribute column 3 "price": value 17 is not finite
  static StatusOr<ItemAttributes> Make(int64_t num_items, std::vector<AttributeColumn> columns);

  int64_t num_items() const { return num_items_; }
  const std::vector<AttributeColumn>& columns() const { return columns_; }
  /// The column called `name` (case-sensitive), nullptr when absent. O(columns).
  const AttributeColumn* Find(std::string_view name) const;
  /// "category:string, price:float, discontinued:bool" (empty string when no columns).
  std::string Summary() const;

  /// Versioned, self-describing binary encoding: magic "KLSA", format
  /// version, item and column counts, then per column its name, type,
  /// presence flags and values, and last a 64-bit FNV-1a checksum of all the
  /// bytes before it (so any one damaged byte is detected); numbers
  /// little-endian (the build refuses big-endian hosts). O(size).
  std::string Serialize() const;
  /// The inverse. Never crashes and never allocates more than the input
  /// justifies, on any bytes: DATA_LOSS describing the problem (truncation,
  /// bad magic, unsupported version, trailing bytes, or contents that Make rejects).
  static StatusOr<ItemAttributes> Deserialize(std::string_view bytes);

  /// Approximate heap bytes held (for cache budgets).
  int64_t memory_bytes() const;

  bool operator==(const ItemAttributes& o) const { return num_items_ == o.num_items_ && columns_ == o.columns_; }

 private:
  int64_t num_items_ = 0;
  std::vector<AttributeColumn> columns_;
};

/// Parses an attributes CSV.
///
/// The first line is a header. Its first cell is `key` (the rows' first
/// cells are item keys, looked up in `key_index`) or `row` (0-based item
/// indices, < num_items). The remaining header cells are attribute names,
/// optionally typed as `name:type` (type one of string, int, float, bool).
/// An untyped column gets a type inferred from all its non-empty cells: bool
/// if every cell is true/false (case-insensitive), else int if every cell
/// parses fully as an int64, else float if every cell parses fully as a
/// finite double, else string; a column with no non-empty cell is a string
/// column. Explicitly typed cells must parse the same way (bool: true/false,
/// case-insensitive).
///
/// Cells follow RFC 4180: a cell in double quotes may hold commas, line
/// breaks and "" (one quote). Spaces and tabs around an unquoted cell (or
/// around the quotes of a quoted one) are dropped; quoted contents are kept
/// as they are. An empty cell means "no value", as does an item the file does
/// not list. Blank lines are skipped; lines may end in \n or \r\n; a leading
/// UTF-8 byte order mark is ignored. Every row has as many cells as the header.
///
/// Errors are INVALID_ARGUMENT naming `source` and the 1-based line, e.g.
///   attrs.csv line 7: column "price": "abc" is not a float
/// (an unknown key, a row index out of range, an item listed twice, a bad
/// header, a ragged row, an unterminated quote), except that a `key` column
/// when `key_index` is null is FAILED_PRECONDITION (the data set has no item keys).
StatusOr<ItemAttributes> ParseAttributesCsv(std::string_view text, int64_t num_items,
                                            const std::unordered_map<std::string, int>* key_index,
                                            const std::string& source);

}  // namespace kls
