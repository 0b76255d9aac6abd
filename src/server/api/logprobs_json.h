#pragma once
// Rendering the engine's per-token logprobs (TokenLogprobs, from the raw logits) in OpenAI's two formats. A
// token's text is its bytes as the tokenizer decodes it alone (control tokens as their text, e.g. "</s>"); bytes
// that are not whole UTF-8 (a byte-fallback token holding part of a character) render as U+FFFD in "token", while
// "bytes" (chat) holds the exact bytes, as OpenAI does.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>

#include "engine/engine_types.h"
#include "tokenizer/tokenizer.h"

namespace hearth::server {

// The most alternatives /v1/completions may ask for ("logprobs": 0..5); chat allows kMaxTopLogprobs.
inline constexpr int32_t kMaxCompletionLogprobs = 5;

// `text` with every byte that is not part of a well-formed UTF-8 character replaced by U+FFFD.
[[nodiscard]] std::string valid_utf8(std::string_view text);

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}],
// "refusal": null}.
[[nodiscard]] nlohmann::json chat_logprobs_json(std::span<const TokenLogprobs> logprobs, const Tokenizer& tokenizer);

// Completions: {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}], "text_offset"}. Each top_logprobs
// object holds the chosen token and its alternatives (as vLLM; equal texts keep the likelier). text_offset is each
// token's byte offset in the choice's text; `text_offset` is where this span starts and is advanced past it.
[[nodiscard]] nlohmann::json completion_logprobs_json(std::span<const TokenLogprobs> logprobs,
                                                      const Tokenizer& tokenizer, int64_t& text_offset);

}  // namespace hearth::server
