#pragma once
// What regex.cpp hands byte_dfa.cpp: a Thompson NFA over bytes, and the subset construction that makes a ByteDfa
// of it. Internal to the grammar library.

#include <bitset>
#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/byte_dfa.h"

namespace hearth {

using ByteSet = std::bitset<256>;

struct ByteNfa {
  struct State {
    std::vector<int32_t> eps;
    std::vector<std::pair<ByteSet, int32_t>> edges;
  };
  std::vector<State> states;

  int32_t size() const { return static_cast<int32_t>(states.size()); }
  int32_t add_state() {
    states.emplace_back();
    return size() - 1;
  }
  void add_eps(int32_t from, int32_t to) { states[from].eps.push_back(to); }
  void add_edge(int32_t from, const ByteSet& bytes, int32_t to) { states[from].edges.emplace_back(bytes, to); }
};

// The trimmed DFA of the strings that lead `nfa` from `start` to `accept`. Fails past kMaxDfaStates or when none.
[[nodiscard]] Result<ByteDfa> nfa_to_dfa(const ByteNfa& nfa, int32_t start, int32_t accept);

}  // namespace hearth
