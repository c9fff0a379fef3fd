// ItemFilter: a filter expression over item attributes, parsed and
// type-checked once per request and evaluated into an ItemBitmap of the
// items that pass (the pre-filter of a ranking query), e.g.
//   category in ["shoes", "bags"] and price < 100 and not discontinued
//
// Language (keywords and, or, not, in, true, false are case-insensitive):
//   expr       := or_expr
//   or_expr    := and_expr ( "or" and_expr )*
//   and_expr   := unary ( "and" unary )*
//   unary      := "not" unary | primary
//   primary    := "(" expr ")" | comparison | membership | NAME | "true" | "false"
//   comparison := NAME op literal              op: = == != < <= > >=
//   membership := NAME ["not"] "in" "[" [ literal ( "," literal )* ] "]"
//   literal    := STRING | NUMBER | true | false
//   STRING     := "..." or '...' with escapes \" \' \\ \n \t
//   NUMBER     := optional sign, digits with an optional fraction and exponent
//                 (an integer without '.'/exponent must fit an int64; others a finite double)
//   NAME       := [A-Za-z_][A-Za-z0-9_]*: an attribute column, or the built-ins
//                 `index` (int: the item's index) and `key` (string: the item's key,
//                 only when the data set has keys)
//
// Types: string names compare with strings (bytewise lexicographic order);
// int and float names with any number, compared exactly by value (an int64
// beyond 2^53 against an integer literal, an int column against 2.5); bool
// names with true/false by = and != only, or alone as a condition.
// Missing values: a comparison or membership (`in` and `not in`) on an item
// without a value is false; `not` negates, so `not price < 100` holds for an
// item without a price. `x in []` matches nothing.
//
// Thread safety: an ItemFilter is immutable; Evaluate is const and safe to
// call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "core/model/item_attributes.h"
#include "core/model/item_bitmap.h"

namespace kls {

/// Limits of Compile, each an INVALID_ARGUMENT naming it when exceeded.
inline constexpr size_t kMaxFilterExpressionBytes = 64 * 1024;
inline constexpr int kMaxFilterDepth = 100;          ///< nested '(' and 'not' together
inline constexpr size_t kMaxFilterListLiterals = 100000;  ///< literals in one `in` list

/// What a filter can refer to. All pointers may be null: attributes null = no
/// attribute columns; keys null or empty = the data set has no keys (then
/// `key` is an unknown name). Non-null attributes must have num_items items,
/// non-empty keys num_items keys.
struct FilterContext {
  int64_t num_items = 0;                            ///< items 0..num_items−1
  const ItemAttributes* attributes = nullptr;       ///< attribute columns, or none
  const std::vector<std::string>* keys = nullptr;   ///< item keys by index, or none
};

/// A parsed and type-checked filter expression. Immutable; movable.
class ItemFilter {
 public:
  /// Parses `expression` (a recursive-descent parser over a tokenizer) and
  /// checks names and types against `context`, which must outlive the
  /// ItemFilter (it is referred to, not copied). O(expression length).
  ///
  /// Errors: INVALID_ARGUMENT whose message starts with "filter: column C: "
  /// (C = 1-based character column of the offending token; the end of the
  /// input is one past the last character) and says what is wrong and what
  /// was expected, e.g.
  ///   filter: column 14: unknown attribute "prise" (attributes: category, price, discontinued, index, key)
  ///   filter: column 9: price is a float attribute; it cannot be compared with the string "x"
  ///   filter: column 22: expected ')' to close the '(' at column 1, found end of input
  /// A type mismatch is reported at the literal, '<' and the like on a bool
  /// at the operator. Limits: kMaxFilterExpressionBytes, kMaxFilterDepth,
  /// kMaxFilterListLiterals (never a stack overflow). A context whose sizes
  /// disagree is INVALID_ARGUMENT "filter: ..." without a column.
  static StatusOr<ItemFilter> Compile(std::string_view expression, const FilterContext& context);

  /// The items that pass, as a bitmap of context.num_items bits.
  /// O(num_items · leaves) in 64-item words; `in` lists add a log(list) factor.
  ItemBitmap Evaluate() const;

  /// The expression as given to Compile.
  const std::string& expression() const { return expression_; }

  ItemFilter(ItemFilter&&) noexcept;
  ItemFilter& operator=(ItemFilter&&) noexcept;
  ~ItemFilter();

  struct Node;  // the compiled tree, defined in filter_expression.cc

 private:
  ItemFilter() = default;

  std::string expression_;
  int64_t num_items_ = 0;
  std::vector<Node> nodes_;  // children before parents; the root is last
};

}  // namespace kls
