#pragma once
// Comparing two token sequences the way the prefix cache sees them: where they stop sharing a prefix, and whether
// they line up again after a short differing region (a timestamp, a request id, a shuffled list), which is the
// signature of a volatile prefix: everything after the region is shared text the cache cannot reuse.
//
//   a:  [ common ........ | x x x x | same again ................ ]
//   b:  [ common ........ | y y y y y y | same again ................ ]
//                        d           a_begin / b_begin, for run tokens

#include <cstdint>
#include <optional>
#include <span>

#include "util/ids.h"

namespace hearth {

// Length of the common prefix of a and b (the index of the first differing token).
int32_t common_prefix_length(std::span<const TokenId> a, std::span<const TokenId> b);

struct Realignment {
  int32_t a_begin = 0;  // a[a_begin, a_begin + run) == b[b_begin, b_begin + run)
  int32_t b_begin = 0;
  int32_t run = 0;  // the whole equal stretch from there (at least min_run)
};

// After a and b differ at `from`, the first place (smallest a_begin, then b_begin, both within
// [from, from + max_window]) where they agree again for at least min_run tokens. Requires min_run >= 1.
std::optional<Realignment> find_realignment(std::span<const TokenId> a, std::span<const TokenId> b, int32_t from,
                                            int32_t max_window, int32_t min_run);

}  // namespace hearth
