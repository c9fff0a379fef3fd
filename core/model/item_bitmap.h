// ItemBitmap: a set of item indices in [0, n) as n bits, the pre-filter that
// filtered queries pass to TopKIndex (core/model/topk_index.h) and that
// ItemFilter (core/model/filter_expression.h) evaluates into.
//
// Bits past n in the last word are always zero, so Count() and the word-wise
// operations never see items that do not exist.
//
// Thread safety: const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <vector>

namespace kls {

class ItemBitmap {
 public:
  ItemBitmap() = default;
  /// n items, all clear (or all set when `value`).
  explicit ItemBitmap(int64_t n, bool value = false) : n_(n), words_(static_cast<size_t>((n + 63) / 64), 0) {
    if (value) SetAll();
  }

  int64_t size() const { return n_; }
  bool Test(int64_t i) const { return (words_[static_cast<size_t>(i >> 6)] >> (i & 63)) & 1u; }
  void Set(int64_t i) { words_[static_cast<size_t>(i >> 6)] |= uint64_t{1} << (i & 63); }
  void Clear(int64_t i) { words_[static_cast<size_t>(i >> 6)] &= ~(uint64_t{1} << (i & 63)); }
  void SetAll() {
    for (uint64_t& w : words_) w = ~uint64_t{0};
    TrimTail();
  }
  /// Number of set bits. O(n/64).
  int64_t Count() const {
    int64_t c = 0;
    for (uint64_t w : words_) c += __builtin_popcountll(w);
    return c;
  }
  /// this ∩= other, this ∪= other, complement (sizes must match).
  void And(const ItemBitmap& o) {
    for (size_t t = 0; t < words_.size(); ++t) words_[t] &= o.words_[t];
  }
  void Or(const ItemBitmap& o) {
    for (size_t t = 0; t < words_.size(); ++t) words_[t] |= o.words_[t];
  }
  void Flip() {
    for (uint64_t& w : words_) w = ~w;
    TrimTail();
  }
  /// The set indices, ascending.
  std::vector<int> Indices() const {
    std::vector<int> out;
    out.reserve(static_cast<size_t>(Count()));
    for (size_t t = 0; t < words_.size(); ++t) {
      uint64_t w = words_[t];
      while (w) {
        out.push_back(static_cast<int>(t * 64 + static_cast<size_t>(__builtin_ctzll(w))));
        w &= w - 1;
      }
    }
    return out;
  }
  const std::vector<uint64_t>& words() const { return words_; }
  bool operator==(const ItemBitmap& o) const { return n_ == o.n_ && words_ == o.words_; }

 private:
  void TrimTail() {
    if (n_ % 64 && !words_.empty()) words_.back() &= (uint64_t{1} << (n_ % 64)) - 1;
  }
  int64_t n_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace kls
