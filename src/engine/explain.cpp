#include "engine/explain.h"

#include <algorithm>

namespace hearth {

std::string token_excerpt(const Tokenizer& tokenizer, std::span<const TokenId> tokens, int64_t begin, int64_t end) {
  const auto n = static_cast<int64_t>(tokens.size());
  begin = std::clamp<int64_t>(begin, 0, n);
  end = std::clamp<int64_t>(end, begin, n);
  DecodeOptions options;
  options.render_special = true;
  return tokenizer.decode(tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin)), options);
}

ReuseExplanation describe_reuse(const Tokenizer& tokenizer, const PrefixExplanation& e, std::span<const TokenId> prompt,
                                int32_t block_size) {
  ReuseExplanation out;
  out.reason = e.reason;
  out.stopped_at = e.reuse_stopped_at;
  out.block_size = block_size;
  out.stopped_block = block_size > 0 ? e.reuse_stopped_at / block_size : 0;
  out.evicted_block = e.evicted_block;
  out.other_salt_tokens = e.other_namespace_tokens;
  out.kv_matched_tokens = e.kv_matched_tokens;
  switch (e.reason) {
    case ReuseStop::kDiverged:
      out.cached_text = token_excerpt(tokenizer, e.cached_continuation, 0, kExcerptTokens);
      [[fallthrough]];
    case ReuseStop::kEvicted:
    case ReuseStop::kWindowEvicted:
    case ReuseStop::kNoCheckpoint:
    case ReuseStop::kDifferentSalt:
    case ReuseStop::kEndOfCachedPrefix:
      out.context_text = token_excerpt(tokenizer, prompt, e.reuse_stopped_at - kExcerptTokens, e.reuse_stopped_at);
      out.prompt_text = token_excerpt(tokenizer, prompt, e.reuse_stopped_at, e.reuse_stopped_at + kExcerptTokens);
      break;
    case ReuseStop::kEndOfPrompt:
    case ReuseStop::kNoCachedPrefix:
    case ReuseStop::kCacheDisabled:
      break;
  }
  return out;
}

PromptComparison compare_prompts(const Tokenizer& tokenizer, std::span<const TokenId> a, std::span<const TokenId> b,
                                 int32_t block_size) {
  PromptComparison c;
  c.a_tokens = static_cast<int32_t>(a.size());
  c.b_tokens = static_cast<int32_t>(b.size());
  c.block_size = block_size;
  c.divergence = common_prefix_length(a, b);
  c.identical = c.a_tokens == c.b_tokens && c.divergence == c.a_tokens;
  c.divergence_block = c.divergence / block_size;
  c.reusable_tokens = std::min(c.divergence, std::max(0, c.b_tokens - 1));
  c.shared_full_blocks = c.reusable_tokens / block_size;
  c.shared_partial_tokens = c.reusable_tokens % block_size;
  c.context_text = token_excerpt(tokenizer, b, c.divergence - kExcerptTokens, c.divergence);
  c.a_text = token_excerpt(tokenizer, a, c.divergence, c.divergence + kExcerptTokens);
  c.b_text = token_excerpt(tokenizer, b, c.divergence, c.divergence + kExcerptTokens);
  if (c.divergence < std::min(c.a_tokens, c.b_tokens)) {
    c.realignment = find_realignment(b, a, c.divergence, kRealignWindow, kRealignMinRun);
  }
  return c;
}

}  // namespace hearth
