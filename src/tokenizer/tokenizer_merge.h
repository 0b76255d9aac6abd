#pragma once
// The merge loop the SentencePiece and byte-level BPE encoders share. Symbols form a doubly linked list over one
// word or fragment; candidate adjacent pairs sit in a heap, best first (highest priority, then the leftmost pair).
// A merge absorbs the right symbol into the left one and proposes the two new pairs it creates, so an encode is
// O(n log n). Each candidate records the two symbols' total length when pushed: symbols only grow or vanish, so an
// unchanged total at pop time means both are still there and adjacent, and a changed one marks a stale entry.

#include <cstddef>
#include <cstdint>
#include <queue>
#include <vector>

namespace hearth {

struct MergeSymbol {
  int32_t prev = -1;
  int32_t next = -1;
  int32_t token = -1;  // the vocabulary piece it spells, or -1 (SentencePiece: not looked up yet)
  size_t offset = 0;   // into the text (SentencePiece)
  size_t length = 0;   // bytes; 0 once absorbed into its left neighbour
};

class SymbolMerger {
 public:
  std::vector<MergeSymbol>& symbols() { return symbols_; }
  const std::vector<MergeSymbol>& symbols() const { return symbols_; }

  // Appends a symbol after the last one.
  void append(int32_t token, size_t offset, size_t length) {
    const auto index = static_cast<int32_t>(symbols_.size());
    symbols_.push_back(MergeSymbol{index - 1, -1, token, offset, length});
    if (index > 0) symbols_[index - 1].next = index;
  }
  void clear() {
    symbols_.clear();
    queue_ = {};
  }

  // A candidate: merging `left` and its right neighbour `right` into the piece `merged`. Higher priority first
  // (SentencePiece: the piece's score; BPE: minus the merge's rank).
  void push(double priority, int32_t left, int32_t right, int32_t merged) {
    queue_.push(Candidate{priority, left, right, merged, symbols_[left].length + symbols_[right].length});
  }

  // Proposes every adjacent pair, then merges best first until no candidate is left. `propose(left, right)` pushes
  // the pair if it can merge; it is called again for the pairs each merge creates.
  template <class Propose>
  void merge_all(Propose&& propose) {
    for (size_t i = 1; i < symbols_.size(); ++i) propose(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      MergeSymbol& left = symbols_[c.left];
      MergeSymbol& right = symbols_[c.right];
      if (left.length == 0 || right.length == 0 || left.length + right.length != c.length) continue;  // stale
      left.token = c.merged;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = c.left;
      if (left.prev >= 0) propose(left.prev, c.left);
      if (left.next >= 0) propose(c.left, left.next);
    }
  }

  // Calls `fn(symbol)` for each surviving symbol, in order.
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (int32_t i = symbols_.empty() ? -1 : 0; i >= 0; i = symbols_[i].next) fn(symbols_[i]);
  }

 private:
  struct Candidate {
    double priority = 0;
    int32_t left = 0;
    int32_t right = 0;
    int32_t merged = -1;
    size_t length = 0;
  };
  struct Order {  // a max-heap: higher priority first, then the leftmost pair
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };

  std::vector<MergeSymbol> symbols_;
  std::priority_queue<Candidate, std::vector<Candidate>, Order> queue_;
};

}  // namespace hearth
