// Fuzz target: the ranking filter language (core/model/filter_expression.h)
// and the item attribute decoders (core/model/item_attributes.h), all fed
// bytes from outside. The first byte picks the decoder (% 3): 0 ('0') a
// filter expression compiled against a fixed table with a column of every
// type and item keys, then evaluated; 1 ('1') an attributes CSV; 2 ('2') the
// binary encoding. Whatever decodes must keep its invariants (bitmap size,
// error message shape, encode/decode round trip); a violation traps.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model/filter_expression.h"
#include "core/model/item_attributes.h"

namespace {

constexpr int64_t kItems = 70;  // more than one bitmap word, not a multiple of 64

struct Table {
  Table() {
    kls::AttributeColumn category{"category", kls::AttributeType::kString, {}, {}, {}, {}, {}};
    kls::AttributeColumn count{"count", kls::AttributeType::kInt, {}, {}, {}, {}, {}};
    kls::AttributeColumn price{"price", kls::AttributeType::kFloat, {}, {}, {}, {}, {}};
    kls::AttributeColumn discontinued{"discontinued", kls::AttributeType::kBool, {}, {}, {}, {}, {}};
    const char* words[] = {"shoes", "bags", "", "a\"b", "\xc3\xbc"};
    for (int64_t i = 0; i < kItems; ++i) {
      category.strings.push_back(words[i % 5]);
      count.ints.push_back(i % 7 == 0 ? INT64_MIN + i : i * i - 40);
      price.floats.push_back(static_cast<double>(i) / 3.0);
      discontinued.bools.push_back(i % 3 == 0);
      for (auto* c : {&category, &count, &price, &discontinued}) c->present.push_back(i % 11 != 5);
      keys.push_back("k" + std::to_string(i));
      key_index[keys.back()] = static_cast<int>(i);
    }
    attributes = std::move(kls::ItemAttributes::Make(kItems, {category, count, price, discontinued})).value();
  }
  kls::ItemAttributes attributes;
  std::vector<std::string> keys;
  std::unordered_map<std::string, int> key_index;
};

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void RoundTrip(const kls::ItemAttributes& a) {
  auto back = kls::ItemAttributes::Deserialize(a.Serialize());
  Check(back.ok() && *back == a);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Table* table = new Table();
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      const kls::FilterContext context{kItems, &table->attributes, &table->keys};
      auto filter = kls::ItemFilter::Compile(bytes, context);
      if (!filter.ok()) {
        Check(filter.status().code() == kls::StatusCode::kInvalidArgument &&
              filter.status().message().rfind("filter: column ", 0) == 0);
        break;
      }
      const kls::ItemBitmap passing = filter->Evaluate();
      Check(passing.size() == kItems && passing.Count() <= kItems);
      break;
    }
    case 1: {
      auto a = kls::ParseAttributesCsv(bytes, kItems, &table->key_index, "fuzz.csv");
      if (a.ok()) RoundTrip(*a);
      break;
    }
    case 2: {
      auto a = kls::ItemAttributes::Deserialize(bytes);
      if (a.ok()) {
        RoundTrip(*a);
      } else {
        Check(a.status().code() == kls::StatusCode::kDataLoss);
      }
      break;
    }
  }
  return 0;
}
