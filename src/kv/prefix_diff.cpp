#include "kv/prefix_diff.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace hearth {
namespace {

constexpr int32_t kGram = 4;  // candidates are found by their first kGram tokens

uint64_t gram_hash(std::span<const TokenId> s, int32_t at, int32_t n) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t k = 0; k < n; ++k) h = (h ^ static_cast<uint32_t>(s[at + k].value)) * 1099511628211ull;
  return h;
}

int32_t equal_run(std::span<const TokenId> a, std::span<const TokenId> b, int32_t i, int32_t j) {
  const auto n = static_cast<int32_t>(std::min(a.size() - i, b.size() - j));
  int32_t k = 0;
  while (k < n && a[i + k] == b[j + k]) ++k;
  return k;
}

}  // namespace

int32_t common_prefix_length(std::span<const TokenId> a, std::span<const TokenId> b) {
  return static_cast<int32_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

std::optional<Realignment> find_realignment(std::span<const TokenId> a, std::span<const TokenId> b, int32_t from,
                                            int32_t max_window, int32_t min_run) {
  const auto na = static_cast<int32_t>(a.size());
  const auto nb = static_cast<int32_t>(b.size());
  const int32_t gram = std::min(kGram, min_run);
  const int32_t a_last = std::min(from + max_window, na - min_run);
  const int32_t b_last = std::min(from + max_window, nb - min_run);
  if (from < 0 || a_last < from || b_last < from) return std::nullopt;
  std::unordered_map<uint64_t, std::vector<int32_t>> starts;  // b's candidate starts by their first tokens
  for (int32_t j = from; j <= b_last; ++j) starts[gram_hash(b, j, gram)].push_back(j);
  for (int32_t i = from; i <= a_last; ++i) {
    auto it = starts.find(gram_hash(a, i, gram));
    if (it == starts.end()) continue;
    for (int32_t j : it->second) {
      const int32_t run = equal_run(a, b, i, j);
      if (run >= min_run) return Realignment{i, j, run};
    }
  }
  return std::nullopt;
}

}  // namespace hearth
