#pragma once
// CompletionRequest: a validated request as every generating route runs it, whichever dialect's body it came from
// (openai_json.h parses OpenAI's, anthropic_json.h maps Anthropic's onto it), with the limits both dialects share.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_types.h"
#include "grammar/grammar.h"
#include "server/api/api_error.h"

namespace hearth::server {

// A validated request body. Unset optionals take the server's defaults.
struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletion;
  std::string model;  // empty when the client sent none
  // chat: messages normalized to {role, content: string, ...}; tools as sent (null when absent)
  // Assistant tool_calls arrive with their arguments parsed into objects when they parse (templates print them with
  // tojson); every tools entry is {"type": "function", "function": {"name": ..., ...}}.
  nlohmann::json messages;
  nlohmann::json tools;
  // tool_choice: "auto" (default), "none" (no call is parsed), "required" or a named function (kFunction,
  // tool_choice_name): one call is forced by a grammar in the template's format.
  enum class ToolChoice { kAuto, kNone, kRequired, kFunction };
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;
  // parallel_tool_calls (OpenAI) / !tool_choice.disable_parallel_tool_use (Anthropic): false keeps only the first
  // call of an answer that holds several (a forced call is always one).
  bool parallel_tool_calls = true;
  // response_format: json_object or json_schema compile to this grammar (null for text).
  std::shared_ptr<const Grammar> grammar;
  bool tools_active() const { return tools.is_array() && !tools.empty() && tool_choice != ToolChoice::kNone; }
  bool tool_call_forced() const {
    return tools_active() && (tool_choice == ToolChoice::kRequired || tool_choice == ToolChoice::kFunction);
  }
  // chat: extra variables for the model's chat template (e.g. Qwen 3's enable_thinking); null when absent
  nlohmann::json chat_template_kwargs;
  // chat: the final assistant message is continued, not answered (an Anthropic or Ollama chat that ends with the
  // assistant's text; OpenAI's continue_final_message extension). The answer is the continuation alone.
  bool continue_final_message = false;
  // Set by the route from the rendered prompt (ContinuedChat::primer): what a channel parser reads before the answer.
  std::string answer_primer;
  // completions: either text or token ids
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;

  int32_t n = 1;  // choices, each its own engine request sharing the prompt's KV (1..kMaxChoices)
  bool stream = false;
  bool include_usage = false;
  std::optional<int32_t> max_tokens;  // max_tokens or max_completion_tokens
  float temperature = 1.0f;           // OpenAI's default
  float top_p = 1.0f;
  int32_t top_k = 0;  // extension; 0 disables
  std::optional<uint64_t> seed;
  float frequency_penalty = 0.0f;                     // [-2, 2]
  float presence_penalty = 0.0f;                      // [-2, 2]
  float min_p = 0.0f;                                 // extension (llama.cpp's): [0, 1], 0 disables
  float repeat_penalty = 1.0f;                        // extension (llama.cpp's): (0, 10], 1 disables
  int32_t repeat_last_n = 64;                         // extension: the repeat penalty's window, -1 the context
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id (checked by the engine), bias in [-100, 100]
  std::vector<std::string> stop;
  bool echo = false;  // completions: prepend the prompt text
  // Logprobs asked for, with this many alternatives per token: chat "logprobs": true with "top_logprobs" 0..20
  // (default 0); completions "logprobs" 0..5. Unset: none (the engine computes nothing).
  std::optional<int32_t> top_logprobs;

  // Cache controls (Hearth extensions; also accepted inside a top-level "hearth" object).
  std::string cache_salt;
  bool pin_prefix = false;
  bool use_cache = true;  // false with "cache_prompt": false (llama.cpp's name)
  // "cache_retention" (retention_json.h), or the Anthropic route's cache_control breakpoints: one span each.
  std::vector<RetentionSpan> retention;
  bool ignore_eos = false;
  // "speculative" (Hearth extension, top level or inside "hearth"): "off", "prompt_lookup", "auto", or
  // {"mode": one of those (default prompt_lookup), "max_draft": 1..32}. Unset: the server's --speculative.
  std::optional<SpeculativeParams> speculative;
  // OpenAI's "prediction" ({"type": "content", "content": ...}; at most kMaxPredictionBytes): the text the answer
  // is expected to repeat mostly, drafted from (engine RequestSpec::prediction). Usage then reports
  // completion_tokens_details.accepted_prediction_tokens / rejected_prediction_tokens.
  bool has_prediction = false;
  std::string prediction_text;
};

inline constexpr size_t kMaxPredictionBytes = 256 * 1024;

// The most choices one request may ask for ("n").
inline constexpr int32_t kMaxChoices = 16;

// A 400 naming `param` when a stop string is longer than kMaxStopBytes (both dialects).
[[nodiscard]] std::optional<ApiError> check_stop_lengths(const std::vector<std::string>& stops, const char* param);

// "stop", "length", or "abort" (server shutdown or cancellation).
[[nodiscard]] const char* finish_reason_text(FinishReason reason);

}  // namespace hearth::server
