#pragma once
// OpenAI wire format: parsing and validating /v1/chat/completions and /v1/completions bodies, and rendering
// responses, stream chunks, usage and error objects. Pure functions of their inputs (no engine, no sockets), so
// the table-driven tests in tests/server cover them without a model.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/engine_types.h"
#include "grammar/grammar.h"
#include "server/tool_calls.h"

namespace hearth::server {

// An OpenAI error object with its HTTP status: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty renders as null
  std::string code;   // empty renders as null
};

[[nodiscard]] ApiError invalid_request(std::string message, std::string param = {}, std::string code = {});
// A 400 naming `param` when a stop string is longer than kMaxStopBytes (both dialects).
[[nodiscard]] std::optional<ApiError> check_stop_lengths(const std::vector<std::string>& stops, const char* param);
[[nodiscard]] nlohmann::json error_json(const ApiError& error);
// The OpenAI error type for a status without a more specific one (401 authentication_error, 404 not_found_error,
// 429 rate_limit_error, 5xx server_error, else invalid_request_error).
[[nodiscard]] const char* error_type_for_status(int status);

template <class T>
using ApiResult = std::variant<T, ApiError>;

enum class Endpoint { kChat, kCompletion };

// The error object for a request the engine refused: 400 naming the field at fault (the prompt or messages, or
// max_tokens, with code context_length_exceeded for the context), 429 when overloaded, 503 when shutting down.
[[nodiscard]] ApiError api_error(const SubmitError& error, Endpoint endpoint);
// The error object for a request the engine ended while it ran: 500 for non-finite logits, 503 when shutting down.
[[nodiscard]] ApiError api_error(const RuntimeError& error);

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
};

// Parses (parse_json_body: nesting depth limited while parsing) and validates a request body. Errors are 400s
// naming the offending field in `param`.
[[nodiscard]] ApiResult<CompletionRequest> parse_completion_request(std::string_view body, Endpoint endpoint);
// The same for a body already parsed by parse_json_body (so nested no deeper than kMaxJsonBodyDepth).
[[nodiscard]] ApiResult<CompletionRequest> validate_completion_request(const nlohmann::json& body, Endpoint endpoint);

// What the server knows when it renders a response.
struct ResponseMeta {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
  int32_t answer_tokens_reused = 0;  // prompt ids taken from a remembered answer (answer_memory.h)
  std::string system_fingerprint;    // EngineInfo::system_fingerprint; empty renders as null
};

// "stop", "length", or "abort" (server shutdown or cancellation).
[[nodiscard]] const char* finish_reason_text(FinishReason reason);

// usage: prompt/completion/total tokens, prompt_tokens_details.cached_tokens (always present) and the `hearth`
// extension: reused_tokens, copied_tokens, computed_prompt_tokens, reuse_stopped_at, prefill_ms, ttft_ms,
// total_ms, preemptions, cache ("on"/"off"), reuse_stop_reason and reuse_stop (see reuse_stop_detail_json) and,
// with a pin request, pinned_tokens / pin_error.
// `answer_tokens_reused` is the server's own fact (ResponseMeta).
[[nodiscard]] nlohmann::json usage_json(const RequestUsage& usage, const CompletionRequest& request,
                                        int32_t answer_tokens_reused = 0);

// The most choices one request may ask for ("n").
inline constexpr int32_t kMaxChoices = 16;

// usage for n choices (one RequestUsage each, choice 0 first): the prompt is counted once (prompt_tokens and
// cached_tokens are choice 0's), completion_tokens is the sum, and `hearth` is choice 0's except
// computed_prompt_tokens (the prompt tokens all choices computed: the prefill that really ran) and
// hearth.choices [{index, reused_tokens, computed_prompt_tokens, completion_tokens}]. One choice: usage_json.
[[nodiscard]] nlohmann::json usage_json(std::span<const RequestUsage> choices, const CompletionRequest& request,
                                        int32_t answer_tokens_reused = 0);

// One finished choice of a whole response.
struct ChoiceResult {
  std::string text;
  FinishReason reason = FinishReason::kNone;
  nlohmann::json logprobs;  // null when not asked
  // Chat: the answer's tool calls (parse_tool_calls); when any, `text` is the content outside them (null when
  // empty), message.tool_calls lists them and finish_reason is "tool_calls".
  std::vector<ToolCall> tool_calls;
  // Chat: the answer's reasoning (harmony's analysis channel), message.reasoning_content when not empty.
  std::string reasoning;
};

// The answer of a chat choice with tools: its calls (with fresh ids) and content when it holds any, else the text.
[[nodiscard]] ChoiceResult choice_with_tool_calls(const CompletionRequest& request, ToolCallFormat format,
                                                  std::string text, FinishReason reason, nlohmann::json logprobs);

// The `reuse_stop` object: the block where reuse stopped and, by reason, the text around it (context_text before,
// prompt_text from it, cached_text of the nearest cached prefix from it), evicted_block, other_salt_tokens.
[[nodiscard]] nlohmann::json reuse_stop_detail_json(const ReuseExplanation& reuse);

// The body of POST /v1/cache/explain: prompt_tokens, cached_tokens, reusable_tokens, tiers {ram}, reuse_stopped_at,
// reuse_stop_reason and reuse_stop.
[[nodiscard]] nlohmann::json cache_report_json(const CacheReport& report, const std::string& model);

// A whole non-streaming response. `logprobs` is the choice's logprobs object (logprobs_json.h), null when not asked.
[[nodiscard]] nlohmann::json response_json(const CompletionRequest& request, const ResponseMeta& meta,
                                           const std::string& text, FinishReason reason, const RequestUsage& usage,
                                           const nlohmann::json& logprobs = nullptr);
// A whole response of several choices (index = position); `usage` as usage_json renders it.
[[nodiscard]] nlohmann::json response_json(const CompletionRequest& request, const ResponseMeta& meta,
                                           std::span<const ChoiceResult> choices, nlohmann::json usage);

// One streamed chunk carrying `text` (chat: delta.content; the first chat chunk also carries role). With a
// finish reason, the chunk that ends the choice. With include_usage, every chunk has "usage": null.
// `logprobs`: the logprobs object of the tokens this chunk carries (null when not asked).
[[nodiscard]] nlohmann::json chunk_json(const CompletionRequest& request, const ResponseMeta& meta,
                                        const std::string& text, bool first, FinishReason reason,
                                        const nlohmann::json& logprobs = nullptr, int32_t index = 0);
// The streamed form of a choice's tool calls, as OpenAI sends them: per call one chunk with
// delta.tool_calls [{index, id, type "function", function {name, arguments ""}}], then one with its arguments
// ({index, function {arguments}}); the first chunk of the choice also carries role. Then
// tool_calls_finish_chunk_json ends the choice with finish_reason "tool_calls".
[[nodiscard]] std::vector<nlohmann::json> tool_call_chunks_json(const CompletionRequest& request,
                                                                const ResponseMeta& meta,
                                                                const std::vector<ToolCall>& calls, bool first,
                                                                int32_t index);
[[nodiscard]] nlohmann::json tool_calls_finish_chunk_json(const CompletionRequest& request, const ResponseMeta& meta,
                                                          int32_t index);
// The final usage chunk of stream_options.include_usage: "choices": [] and the usage object.
[[nodiscard]] nlohmann::json usage_chunk_json(const CompletionRequest& request, const ResponseMeta& meta,
                                              const RequestUsage& usage);
[[nodiscard]] nlohmann::json usage_chunk_json(const CompletionRequest& request, const ResponseMeta& meta,
                                              nlohmann::json usage);

// SSE framing: "data: <json>\n\n" and the terminator "data: [DONE]\n\n".
[[nodiscard]] std::string sse_event(const nlohmann::json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace hearth::server
