#pragma once
// The Responses API's objects: the response object, its output items (message, reasoning, function_call), usage
// and the typed stream events ("event: response.output_text.delta\ndata: {...}\n\n", each with its
// sequence_number). Pure functions, and ResponseOutput, which turns an answer as it arrives into output items and
// the events that announce them (tests/server cover both without a model).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine_types.h"
#include "server/api/completion_request.h"
#include "server/api/tool_calls.h"

namespace hearth::server {

// What the response object says besides its output.
struct ResponseHead {
  std::string id;  // "resp_" + 32 hex digits
  int64_t created_at = 0;
  std::string model;
  std::optional<std::string> instructions;
  std::string previous_response_id;  // empty renders as null
  bool store = true;
  nlohmann::json echo;  // ResponsesRequest::echo
};

// A fresh id: `prefix` + 32 hex digits ("resp_", "msg_", "rs_", "fc_").
[[nodiscard]] std::string new_item_id(std::string_view prefix);

// The response object. `status`: "in_progress" (output empty, usage null), "completed", "incomplete" (with
// incomplete_details {"reason": "max_output_tokens"}) or "failed".
[[nodiscard]] nlohmann::json response_object(const ResponseHead& head, std::string_view status, nlohmann::json output,
                                             nlohmann::json usage);

// usage: input_tokens, input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens,
// total_tokens, and Hearth's `hearth` (the chat route's, with previous_response_tokens: the prompt ids taken from
// the previous response).
struct ResponsesUsage {
  RequestUsage usage;
  int32_t answer_tokens_reused = 0;
  int32_t previous_response_tokens = 0;
  int32_t reasoning_tokens = 0;
};
[[nodiscard]] nlohmann::json responses_usage_json(const ResponsesUsage& usage, const CompletionRequest& request);

// "completed", or "incomplete" for an answer cut by max_output_tokens (or the context).
[[nodiscard]] std::string_view response_status(FinishReason reason);

// One SSE event: "event: <type>\ndata: <json>\n\n".
[[nodiscard]] std::string response_event(const nlohmann::json& payload);

// The output of one response, built as the answer arrives: text goes to a message item, reasoning to a reasoning
// item (a switch closes the open item and opens the other), and calls become function_call items. Each step
// appends the events it causes (with increasing sequence numbers) to `events`; a whole response ignores them and
// reads items() at the end, so both forms have the same output.
class ResponseOutput {
 public:
  // The events before any output: response.created and response.in_progress, with `in_progress` as response.
  void start(const nlohmann::json& in_progress, std::string& events);
  void text(std::string_view delta, std::string& events);
  void reasoning(std::string_view delta, std::string& events);
  // Closes the open item, then adds a function_call item (its arguments as one delta).
  void call(const ToolCall& call, std::string& events);
  // Closes the open item with `item_status` ("completed" or "incomplete"); with no item at all, first adds an
  // empty message (an answer is never without output).
  void finish(std::string_view item_status, std::string& events);
  // The final event: response.completed, response.incomplete or response.failed, by the response's status.
  void end(const nlohmann::json& response, std::string& events);
  // An error event (a stream that fails after it started).
  void error(const nlohmann::json& error_object, std::string& events);

  const nlohmann::json& items() const { return items_; }

 private:
  enum class Open { kNone, kMessage, kReasoning };
  void emit(nlohmann::json payload, std::string& events);
  void open(Open kind, std::string& events);
  void close(std::string_view item_status, std::string& events);

  nlohmann::json items_ = nlohmann::json::array();
  Open open_ = Open::kNone;
  std::string open_text_;  // the open item's text so far
  int64_t sequence_ = 0;
};

}  // namespace hearth::server
