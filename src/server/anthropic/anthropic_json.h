#pragma once
// Anthropic Messages wire format (POST /v1/messages): parsing and validating a body into the chat request the
// OpenAI route runs, plus its cache_control breakpoints; rendering the message object, the stream's events, usage
// and Anthropic's error shape. Pure functions (tests/server cover them without a model).
//
// cache_control breakpoints: each marked block (tools, system text blocks, message text, tool_use and tool_result
// blocks) ends a prefix to retain.
// parse_messages_request appends a marker (unique per request) to each marked block's text; after the chat
// template has rendered, take_breakpoints cuts the markers out and says at which byte of the prompt text each one
// stood, so the server can count the prefix's tokens and retain them (kBreakpointPriority, the TTL as given).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/completion_request.h"
#include "server/api/tool_calls.h"

namespace hearth::server {

// Retention priority of a cache_control prefix: above unmarked text (kDefaultRetentionPriority).
inline constexpr uint8_t kBreakpointPriority = 70;
// Anthropic's default cache_control TTL and its breakpoint limit.
inline constexpr int64_t kDefaultBreakpointTtlMs = 5 * 60 * 1000;
inline constexpr size_t kMaxBreakpoints = 4;

struct Breakpoint {
  std::string marker;  // appended to the marked block's text; removed again by take_breakpoints
  int64_t ttl_ms = kDefaultBreakpointTtlMs;
  size_t text_offset = 0;  // set by take_breakpoints: bytes of prompt text before the breakpoint
  // A tool's breakpoint: its marker is in the tool's description, and the prefix ends with the JSON object the
  // template printed around it (the tool's definition), not at the marker.
  bool ends_json_object = false;
};

struct MessagesRequest {
  CompletionRequest chat;  // endpoint kChat: system + messages normalized to strings (with markers), sampling, stop
  std::vector<Breakpoint> breakpoints;  // in prompt order
  // With a tool breakpoint: a marker at the start of the first message's text. A template that does not print a
  // tool's description (the fallback format prints names only) drops that tool's marker; its breakpoint is then
  // where the messages begin, after the tools in Anthropic's order.
  std::string anchor;
};

// Which route the body is for: POST /v1/messages (max_tokens required) or /v1/messages/count_tokens (the same body,
// max_tokens optional).
enum class MessagesBody { kCreate, kCountTokens };

// Parses (parse_json_body) and validates a Messages body. `nonce` makes the breakpoint markers unique to this
// request (a random hex string). Errors are 400s whose message names the field.
[[nodiscard]] ApiResult<MessagesRequest> parse_messages_request(std::string_view body, std::string_view nonce,
                                                                MessagesBody kind = MessagesBody::kCreate);

// Removes every breakpoint marker (and the `anchor`, when not empty) from the rendered `text`, setting each
// breakpoint's text_offset. Fails when the template dropped or repeated a marker (the prefix would be unknown),
// except a tool's dropped marker, which stands at the anchor.
[[nodiscard]] bool take_breakpoints(std::string& text, std::vector<Breakpoint>& breakpoints,
                                    std::string_view anchor = {});

// Anthropic's usage numbers for a finished request whose breakpoints end at `breakpoint_tokens` (the last one's
// token count; 0 without breakpoints): read = reused from the cache, creation = computed up to the last
// breakpoint (retained because of it), input = the rest of the prompt.
struct MessagesUsage {
  int32_t input_tokens = 0;
  int32_t cache_creation_input_tokens = 0;
  int32_t cache_read_input_tokens = 0;
  int32_t output_tokens = 0;
  int32_t max_tokens_clamped_to = 0;  // RequestUsage's: usage.hearth.max_tokens_clamped_to when not 0
};
[[nodiscard]] MessagesUsage messages_usage(const RequestUsage& usage, int32_t breakpoint_tokens);
[[nodiscard]] nlohmann::json usage_json(const MessagesUsage& usage);

// "end_turn", "max_tokens", "stop_sequence", "tool_use" (when the answer is tool calls); null for an aborted
// request.
[[nodiscard]] nlohmann::json stop_reason_json(FinishReason reason, const std::string& stop_sequence,
                                              bool tool_use = false);

// The answer's tool calls (parse_tool_calls on the text, for a request with tools) with ids in Anthropic's style
// ("toolu_" and 24 alphanumerics; Mistral's templates require their own 9 alphanumerics, which are kept), and the
// text outside them. Without calls, `text` is the whole answer.
struct MessagesAnswer {
  std::string text;
  std::vector<ToolCall> calls;
};
[[nodiscard]] MessagesAnswer messages_answer(const CompletionRequest& chat, ToolCallFormat format, std::string text,
                                             FinishReason reason);
// {"type": "tool_use", "id", "name", "input": the arguments object}.
[[nodiscard]] nlohmann::json tool_use_block_json(const ToolCall& call);

// The whole message object of a non-streaming response: a text block (when there is text), then a tool_use block
// per call.
[[nodiscard]] nlohmann::json message_json(const std::string& id, const std::string& model, const MessagesAnswer& answer,
                                          FinishReason reason, const std::string& stop_sequence,
                                          const MessagesUsage& usage);

// One SSE event: "event: <type>\ndata: <json>\n\n" (the type is the payload's "type").
[[nodiscard]] std::string anthropic_event(const nlohmann::json& payload);

// {"type": "error", "error": {"type": ..., "message": ...}} with Anthropic's type for the status.
[[nodiscard]] nlohmann::json anthropic_error_json(const ApiError& error);

}  // namespace hearth::server
