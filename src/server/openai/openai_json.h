#pragma once
// OpenAI wire format: parsing and validating /v1/chat/completions and /v1/completions bodies into a
// CompletionRequest (completion_request.h), and rendering responses, stream chunks and usage. Pure functions of
// their inputs (no engine, no sockets), so the table-driven tests in tests/server cover them without a model.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_types.h"
#include "server/api/api_error.h"
#include "server/api/completion_request.h"
#include "server/api/tool_calls.h"

namespace hearth::server {

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

// usage: prompt/completion/total tokens, prompt_tokens_details.cached_tokens (always present) and the `hearth`
// extension: reused_tokens, copied_tokens, computed_prompt_tokens, reuse_stopped_at, prefill_ms, ttft_ms,
// total_ms, preemptions, cache ("on"/"off"), reuse_stop_reason and reuse_stop (see reuse_stop_detail_json) and,
// with a pin request, pinned_tokens / pin_error.
// `answer_tokens_reused` is the server's own fact (ResponseMeta).
[[nodiscard]] nlohmann::json usage_json(const RequestUsage& usage, const CompletionRequest& request,
                                        int32_t answer_tokens_reused = 0);

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
// tool_calls_finish_chunk_json ends the choice with finish_reason "tool_calls" ("length" for a call cut short).
[[nodiscard]] std::vector<nlohmann::json> tool_call_chunks_json(const CompletionRequest& request,
                                                                const ResponseMeta& meta,
                                                                const std::vector<ToolCall>& calls, bool first,
                                                                int32_t index);
[[nodiscard]] nlohmann::json tool_calls_finish_chunk_json(const CompletionRequest& request, const ResponseMeta& meta,
                                                          int32_t index, bool cut_short = false);
// The final usage chunk of stream_options.include_usage: "choices": [] and the usage object.
[[nodiscard]] nlohmann::json usage_chunk_json(const CompletionRequest& request, const ResponseMeta& meta,
                                              const RequestUsage& usage);
[[nodiscard]] nlohmann::json usage_chunk_json(const CompletionRequest& request, const ResponseMeta& meta,
                                              nlohmann::json usage);

// SSE framing: "data: <json>\n\n" and the terminator "data: [DONE]\n\n".
[[nodiscard]] std::string sse_event(const nlohmann::json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace hearth::server
