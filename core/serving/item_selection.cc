#include "core/serving/item_selection.h"

#include <algorithm>

namespace kls {
namespace {

Status CheckItems(const std::vector<int>& items, int64_t n, const std::string& field) {
  for (size_t t = 0; t < items.size(); ++t) {
    if (items[t] < 0 || items[t] >= n) {
      return InvalidArgumentError(field + "[" + std::to_string(t) + "] = " + std::to_string(items[t]) +
                                  " is out of range [0, " + std::to_string(n) + ")");
    }
  }
  return OkStatus();
}

void SortUnique(std::vector<int>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

bool SelectedItems::Passes(int i) const {
  if (allowed && !allowed->Test(i)) return false;
  return !std::binary_search(exclude.begin(), exclude.end(), i);
}

StatusOr<SelectedItems> SelectItems(const ItemSelection& selection, const FilterContext& context,
                                    const std::string& field) {
  const int64_t n = context.num_items;
  KLS_RETURN_IF_ERROR(CheckItems(selection.exclude, n, field + ".exclude"));
  KLS_RETURN_IF_ERROR(CheckItems(selection.allow, n, field + ".allow"));
  SelectedItems out;
  if (!selection.filter.empty()) {
    StatusOr<ItemFilter> filter = ItemFilter::Compile(selection.filter, context);
    if (!filter.ok()) return Status(filter.status().code(), field + "." + filter.status().message());
    out.allowed = filter->Evaluate();
  }
  if (selection.has_allow) {
    ItemBitmap allow(n);
    for (int i : selection.allow) allow.Set(i);
    if (out.allowed) {
      out.allowed->And(allow);
    } else {
      out.allowed = std::move(allow);
    }
  }
  out.exclude = selection.exclude;
  SortUnique(&out.exclude);
  return out;
}

SelectedItems Intersect(const SelectedItems& base, SelectedItems more) {
  if (base.allowed) {
    if (more.allowed) {
      more.allowed->And(*base.allowed);
    } else {
      more.allowed = base.allowed;
    }
  }
  more.exclude.insert(more.exclude.end(), base.exclude.begin(), base.exclude.end());
  SortUnique(&more.exclude);
  return more;
}

}  // namespace kls
