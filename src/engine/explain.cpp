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
  out.reason = reuse_stop_name(e.reason);
  out.stopped_at = e.reuse_stopped_at;
  out.block_size = block_size;
  out.stopped_block = block_size > 0 ? e.reuse_stopped_at / block_size : 0;
  out.evicted_block = e.evicted_block;
  out.other_salt_tokens = e.other_namespace_tokens;
  switch (e.reason) {
    case ReuseStop::kDiverged:
      out.cached_text = token_excerpt(tokenizer, e.cached_continuation, 0, kExcerptTokens);
      [[fallthrough]];
    case ReuseStop::kEvicted:
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

}  // namespace hearth
