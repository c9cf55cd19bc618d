// flat_map.hpp — small open-addressing tables keyed by pointers, for the reverse transform.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <utility>

#include "../values/error.hpp"

namespace vlad {

// A table keyed by pointers (never null) with plain values, open addressing in a power-of-two
// array from an arena: the reverse transform's tables, looked up several times a binding, cost a
// sixth of W4's first call as node-based hash tables (a division per probe, a node per entry).
// A moved-from table is empty. No iteration: nothing may depend on an order.
template <class K, class V>
class FlatMap {
 public:
  struct Slot {
    K first;
    V second;
  };
  using iterator = Slot*;
  explicit FlatMap(std::pmr::memory_resource* r) : mr_(r) {}
  FlatMap(FlatMap&& o) noexcept : mr_(o.mr_), slots_(o.slots_), mask_(o.mask_), size_(o.size_) { o.forget(); }
  FlatMap& operator=(FlatMap&& o) noexcept {
    if (this != &o) {
      slots_ = o.slots_;  // (the old array stays in the arena until the transform ends)
      mask_ = o.mask_;
      size_ = o.size_;
      o.forget();
    }
    return *this;
  }
  FlatMap(const FlatMap&) = delete;
  FlatMap& operator=(const FlatMap&) = delete;

  iterator end() const { return nullptr; }
  iterator find(K k) const {
    if (!slots_) return nullptr;
    for (size_t i = home(k);; i = (i + 1) & mask_) {
      if (slots_[i].first == k) return &slots_[i];
      if (!slots_[i].first) return nullptr;
    }
  }
  size_t count(K k) const { return find(k) ? 1 : 0; }
  size_t size() const { return size_; }
  V& at(K k) const {
    iterator it = find(k);
    if (!it) throw Error("internal error: transform table has no entry");
    return it->second;
  }
  V& operator[](K k) { return *emplace(k).first; }
  // The value of k, made (value-initialized) if absent; and whether it was made.
  std::pair<V*, bool> emplace(K k) {
    if (2 * (size_ + 1) > capacity()) grow(2 * (size_ + 1));
    for (size_t i = home(k);; i = (i + 1) & mask_) {
      if (slots_[i].first == k) return {&slots_[i].second, false};
      if (!slots_[i].first) {
        slots_[i].first = k;
        slots_[i].second = V{};
        size_++;
        return {&slots_[i].second, true};
      }
    }
  }
  // As std::unordered_map::emplace: v stored only when k is absent.
  std::pair<V*, bool> emplace(K k, const V& v) {
    std::pair<V*, bool> r = emplace(k);
    if (r.second) *r.first = v;
    return r;
  }
  void erase(K k) {
    iterator it = find(k);
    if (!it) return;
    // backward-shift deletion: no tombstones
    size_t i = (size_t)(it - slots_);
    for (size_t j = (i + 1) & mask_; slots_[j].first; j = (j + 1) & mask_) {
      size_t h = home(slots_[j].first);
      // slot j's entry may move to i when its home is not cyclically within (i, j]
      if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].first = nullptr;
    size_--;
  }
  void clear() {
    if (slots_ && size_)
      for (size_t i = 0; i <= mask_; i++) slots_[i].first = nullptr;
    size_ = 0;
  }
  void reserve(size_t n) {
    if (2 * n > capacity()) grow(2 * n);
  }

 private:
  size_t capacity() const { return slots_ ? mask_ + 1 : 0; }
  size_t home(K k) const { return (size_t)(((uintptr_t)k * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }
  void forget() {
    slots_ = nullptr;
    mask_ = 0;
    size_ = 0;
  }
  void grow(size_t want) {
    size_t cap = 16;
    while (cap < want) cap *= 2;
    Slot* old = slots_;
    size_t old_cap = capacity();
    slots_ = static_cast<Slot*>(mr_->allocate(cap * sizeof(Slot), alignof(Slot)));
    for (size_t i = 0; i < cap; i++) slots_[i].first = nullptr;
    mask_ = cap - 1;
    size_ = 0;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i].first) *emplace(old[i].first).first = old[i].second;
  }
  std::pmr::memory_resource* mr_;
  Slot* slots_ = nullptr;
  size_t mask_ = 0, size_ = 0;
};

// A set of pointers, as FlatMap.
template <class K>
class FlatSet {
 public:
  explicit FlatSet(std::pmr::memory_resource* r) : m_(r) {}
  size_t count(K k) const { return m_.count(k); }
  bool insert(K k) { return m_.emplace(k).second; }
  void erase(K k) { m_.erase(k); }
  void clear() { m_.clear(); }
  void reserve(size_t n) { m_.reserve(n); }

 private:
  FlatMap<K, char> m_;
};
}  // namespace vlad
