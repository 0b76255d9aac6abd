#pragma once
// RecentKeys: a bounded set of block keys in insertion order; when full, the oldest key is forgotten. The pool
// keeps one of recently evicted keys so that a miss can be explained as "that block was cached, then evicted".

#include <cstddef>
#include <deque>
#include <unordered_set>

#include "kv/block_hash.h"

namespace hearth {

class RecentKeys {
 public:
  explicit RecentKeys(size_t capacity) : capacity_(capacity) {}

  // Remembers `key` (a key already present keeps its place), forgetting the oldest beyond capacity.
  void insert(const BlockHash& key) {
    if (capacity_ == 0 || !set_.insert(key).second) return;
    order_.push_back(key);
    if (order_.size() > capacity_) {
      set_.erase(order_.front());
      order_.pop_front();
    }
  }
  bool contains(const BlockHash& key) const { return set_.contains(key); }
  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::deque<BlockHash> order_;
  std::unordered_set<BlockHash> set_;
};

}  // namespace hearth
