#pragma once
// Cache-miss explanations as people read them: the kv layer's PrefixExplanation (token indexes and ids) plus the
// text around the point where reuse stopped, detokenized and truncated.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_types.h"
#include "kv/prefix_diff.h"
#include "kv/prefix_explain.h"
#include "tokenizer/tokenizer.h"

namespace hearth {

inline constexpr int32_t kExcerptTokens = 16;  // tokens of text shown on each side of a divergence

// Text of tokens[begin, end) clamped to the sequence, with control tokens rendered (chat markers stay visible).
[[nodiscard]] std::string token_excerpt(const Tokenizer& tokenizer, std::span<const TokenId> tokens, int64_t begin,
                                        int64_t end);

// Fills the text of `e` for `prompt` (the tokens it explains).
[[nodiscard]] ReuseExplanation describe_reuse(const Tokenizer& tokenizer, const PrefixExplanation& e,
                                              std::span<const TokenId> prompt, int32_t block_size);

// Two prompts as the prefix cache sees them (hearth explain): where they diverge, in tokens and blocks, how much of
// B a request reuses after A was cached (whole blocks plus the slots copied from a partially matching block; B's
// last token is always computed), the text there, and whether they line up again after a short region.
struct PromptComparison {
  int32_t a_tokens = 0;
  int32_t b_tokens = 0;
  int32_t block_size = 0;
  int32_t divergence = 0;  // first differing token; min(a_tokens, b_tokens) when one is a prefix of the other
  bool identical = false;
  int32_t divergence_block = 0;       // divergence / block_size
  int32_t shared_full_blocks = 0;     // blocks B shares whole
  int32_t shared_partial_tokens = 0;  // leading slots of the next block B reuses by copy
  int32_t reusable_tokens = 0;        // min(divergence, b_tokens - 1)
  std::string context_text;           // up to kExcerptTokens tokens before the divergence
  std::string a_text;                 // each prompt's text from the divergence, truncated
  std::string b_text;
  // After a short differing region the prompts agree again (a volatile prefix): those tokens are recomputed.
  std::optional<Realignment> realignment;  // a = B, b = A
};

inline constexpr int32_t kRealignWindow = 256;  // longest differing region looked through
inline constexpr int32_t kRealignMinRun = 64;   // shared tokens after it, at least

[[nodiscard]] PromptComparison compare_prompts(const Tokenizer& tokenizer, std::span<const TokenId> a,
                                               std::span<const TokenId> b, int32_t block_size);

}  // namespace hearth
