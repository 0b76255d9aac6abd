#pragma once
// Benchmark workloads in exact token counts: normal (non-control, non-byte) vocabulary ids drawn with a fixed
// seed. Synthetic weights are random anyway, so the text does not matter, only the lengths.

#include <random>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace hearth {

inline std::vector<TokenId> random_normal_tokens(const Tokenizer& tok, int32_t n, std::mt19937& rng) {
  std::vector<TokenId> out;
  std::uniform_int_distribution<int32_t> dist(0, tok.vocab_size() - 1);
  while (static_cast<int32_t>(out.size()) < n) {
    const TokenId t{dist(rng)};
    if (tok.token_type(t) == TokenType::kNormal) out.push_back(t);
  }
  return out;
}

}  // namespace hearth
