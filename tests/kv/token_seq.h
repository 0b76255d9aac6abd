#pragma once
// Token sequences for the kv tests: runs of consecutive ids, and their concatenation.

#include <initializer_list>
#include <vector>

#include "util/ids.h"

namespace hearth::testing {

// first, first + 1, ..., first + n - 1
inline std::vector<TokenId> seq(int32_t first, int32_t n) {
  std::vector<TokenId> out;
  for (int32_t i = 0; i < n; ++i) out.push_back(TokenId{first + i});
  return out;
}

inline std::vector<TokenId> concat(std::initializer_list<std::vector<TokenId>> parts) {
  std::vector<TokenId> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace hearth::testing
