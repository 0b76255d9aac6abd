#pragma once
// Internal to the tokenizer: read-only open-addressing hash tables (linear probing, power-of-two capacity, at most
// half full). They are built once per vocabulary and never change, so they need no per-entry allocation: a
// 150k-piece vocabulary with 280k merges indexes quickly, and a lookup touches one or two cache lines.

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace hearth {

inline size_t table_capacity_for(size_t n) {
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  return capacity;
}

// Vocabulary text -> token id. The texts stay in the caller's list; the table stores ids only.
class TokenTextIndex {
 public:
  static constexpr int32_t kNone = -1;

  // Indexes texts[0..n) (`text_of(i)` gives text i). For duplicate texts the last id wins, as in llama.cpp.
  template <class TextOf>
  void build(size_t n, const TextOf& text_of) {
    slots_.assign(table_capacity_for(n), Slot{});
    mask_ = slots_.size() - 1;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view text = text_of(i);
      const size_t hash = std::hash<std::string_view>{}(text);
      for (size_t s = hash & mask_;; s = (s + 1) & mask_) {
        Slot& slot = slots_[s];
        if (slot.id == kNone || (slot.hash == hash && text_of(slot.id) == text)) {
          slot = Slot{hash, static_cast<int32_t>(i)};
          break;
        }
      }
    }
  }

  // The id whose text is `text`, or kNone. `text_of` must be the one given to build().
  template <class TextOf>
  int32_t find(std::string_view text, const TextOf& text_of) const {
    if (slots_.empty()) return kNone;
    const size_t hash = std::hash<std::string_view>{}(text);
    for (size_t s = hash & mask_;; s = (s + 1) & mask_) {
      const Slot& slot = slots_[s];
      if (slot.id == kNone) return kNone;
      if (slot.hash == hash && text_of(slot.id) == text) return slot.id;
    }
  }

 private:
  struct Slot {
    size_t hash = 0;
    int32_t id = kNone;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// BPE merges: (left token, right token) -> (rank, merged token).
class MergeTable {
 public:
  struct Merge {
    int32_t rank = -1;
    int32_t merged = -1;
  };

  void reserve(size_t n) {
    slots_.assign(table_capacity_for(n), Slot{});
    mask_ = slots_.size() - 1;
  }

  // Adds a merge unless the pair already has one (the first, lowest-ranked merge wins). Requires reserve(n) with n
  // at least the number of inserts, and ids >= 0.
  void insert(int32_t left, int32_t right, Merge merge) {
    const uint64_t key = pack(left, right);
    for (size_t s = mix(key) & mask_;; s = (s + 1) & mask_) {
      if (slots_[s].key == key) return;
      if (slots_[s].key == kEmpty) {
        slots_[s] = Slot{key, merge};
        return;
      }
    }
  }

  // The merge of `left` then `right`, or nullptr.
  const Merge* find(int32_t left, int32_t right) const {
    if (slots_.empty() || left < 0 || right < 0) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t s = mix(key) & mask_;; s = (s + 1) & mask_) {
      if (slots_[s].key == key) return &slots_[s].merge;
      if (slots_[s].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  // splitmix64 finalizer: spreads consecutive ids over the table.
  static size_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return static_cast<size_t>(x ^ (x >> 31));
  }

  struct Slot {
    uint64_t key = kEmpty;
    Merge merge;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// A set of (character, character) pairs, keyed by code point: which two characters ever sit side by side inside
// a vocabulary piece. Built once from a sorted list without duplicates.
class CodepointPairSet {
 public:
  static uint64_t pack(char32_t left, char32_t right) { return (static_cast<uint64_t>(left) << 32) | right; }

  // `keys`: pack()ed pairs, sorted and unique.
  void build(const std::vector<uint64_t>& keys) {
    slots_.assign(table_capacity_for(keys.size()), kEmpty);
    mask_ = slots_.size() - 1;
    for (const uint64_t key : keys) {
      size_t s = mix(key) & mask_;
      while (slots_[s] != kEmpty) s = (s + 1) & mask_;
      slots_[s] = key;
    }
  }

  bool contains(char32_t left, char32_t right) const {
    if (slots_.empty()) return false;
    const uint64_t key = pack(left, right);
    for (size_t s = mix(key) & mask_;; s = (s + 1) & mask_) {
      if (slots_[s] == key) return true;
      if (slots_[s] == kEmpty) return false;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // never a key: code points are at most 21 bits
  static size_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return static_cast<size_t>(x ^ (x >> 31));
  }
  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
};

}  // namespace hearth
