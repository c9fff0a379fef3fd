// ItemSelection: which items a query may return — a filter expression over
// the data set's attributes (core/model/filter_expression.h), an allow list
// and an exclude list — turned into what TopKIndex::Search takes: an allowed
// bitmap (shared by the queries that use the same selection) and a short
// exclude list per query.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/model/filter_expression.h"
#include "core/model/item_bitmap.h"

namespace kls {

/// A restriction in core terms (item keys already resolved to indices).
struct ItemSelection {
  std::string filter;        ///< expression; empty = every item
  std::vector<int> exclude;  ///< items never returned
  std::vector<int> allow;    ///< when has_allow: only these
  bool has_allow = false;
  bool empty() const { return filter.empty() && exclude.empty() && !has_allow; }
};

/// The evaluated restriction.
struct SelectedItems {
  std::optional<ItemBitmap> allowed;  ///< nullopt: every item passes
  std::vector<int> exclude;           ///< sorted, unique
  /// Whether item i may be returned.
  bool Passes(int i) const;
};

/// Compiles and evaluates `selection` over `context` (its num_items items).
/// Errors are INVALID_ARGUMENT prefixed with `field`: "select.filter: column
/// 14: unknown attribute ...", "select.exclude[2] = 99 is out of range [0, 50)".
StatusOr<SelectedItems> SelectItems(const ItemSelection& selection, const FilterContext& context,
                                    const std::string& field);

/// `more` restricted further by `base` (both must hold): bitmaps intersected,
/// exclude lists merged.
SelectedItems Intersect(const SelectedItems& base, SelectedItems more);

}  // namespace kls
