#pragma once
// ByteDfa: a deterministic automaton over bytes, the grammar's kDfa node (a string with `pattern` or `format`, an
// integer with bounds or `multipleOf`). Built from a regular expression (regex.cpp) or as the product of two others.
// Every ByteDfa is trimmed: each state reaches an accepting state, so a prefix the automaton accepts can always be
// finished (a mask is never empty inside one), and dist[s] is the fewest bytes from s to an accepting state (the
// grammar's quick completion follows it).
//
// Size is bounded: at most kMaxDfaStates states per automaton and kMaxRegexNfaStates states while compiling one
// regex, so a hostile pattern (a{1000}{1000}, or one whose subset construction explodes) is refused by count.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace hearth {

inline constexpr int32_t kMaxDfaStates = 4096;
inline constexpr int32_t kMaxRegexNfaStates = 20000;

struct ByteDfa {
  std::array<uint8_t, 256> byte_class{};  // bytes with the same transitions everywhere share a class
  int32_t num_classes = 0;
  std::vector<int16_t> next;    // [num_states, num_classes]: the next state, -1 none
  std::vector<uint8_t> accept;  // [num_states]
  std::vector<int32_t> dist;    // [num_states]: fewest bytes to an accepting state
  std::vector<uint8_t> final;   // [num_states]: accepting, and no byte leads on (a closed string)
  // State 0 is the start.

  int32_t num_states() const { return static_cast<int32_t>(accept.size()); }
  int32_t step(int32_t state, uint8_t byte) const { return next[state * num_classes + byte_class[byte]]; }
};

// A regular expression (the subset docs/serving.md lists: literals, classes, \d \w \s and their negations, `.`,
// groups, alternation, ? * + {m} {m,} {m,n}, ^ and $ only at the ends) compiled to the JSON text of the strings it
// matches whole, quotes included (anchors are implied: a string matching whole also contains a match, so this is a
// subset of JSON Schema's search semantics). Characters JSON would have to escape (", \, control characters) are
// never produced. Fails naming the construct it does not support, or when the automaton grows past the limits.
// `quote`: what opens and closes the string: '"' for JSON, <|"|> for Gemma 4's call syntax (whose closer can never
// appear inside, since '"' is never produced there).
[[nodiscard]] Result<ByteDfa> compile_string_pattern(std::string_view pattern, std::string_view quote = "\"");
// The same regex over raw bytes with no quotes (integer ranges are built through it).
[[nodiscard]] Result<ByteDfa> compile_raw_pattern(std::string_view pattern);

// The strings both accept (`negate_b`: that `a` accepts and `b` does not). Fails past kMaxDfaStates or when
// nothing is left.
[[nodiscard]] Result<ByteDfa> dfa_intersect(const ByteDfa& a, const ByteDfa& b, bool negate_b = false);

// The regex (compile_raw_pattern) of the JSON integers in [lo, hi] (compact: no leading zeros, no "-0").
// Requires lo <= hi, both within +-(10^15 - 1).
[[nodiscard]] std::string integer_range_regex(int64_t lo, int64_t hi);
// A ByteDfa of the JSON integers (-?digits, as integer_range_regex writes them) divisible by `divisor` (1..1000).
[[nodiscard]] ByteDfa integer_multiple_dfa(int32_t divisor);

// The regex of a `format` the grammar enforces (date, time, date-time, uuid, email, ipv4), or empty when it is not
// one of them. What each produces is a subset of what the format allows (docs/serving.md says where).
[[nodiscard]] std::string_view format_regex(std::string_view format);

}  // namespace hearth
