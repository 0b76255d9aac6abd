#pragma once
// The body of POST /v1/responses (OpenAI's Responses API) read into the chat request every route runs
// (completion_request.h), plus what only this API has: instructions, previous_response_id, store, and the fields the
// response object repeats. Pure functions (tests/server cover them without a model).
//
//   input          a string (one user message) or items: messages (user, system, developer, assistant; content a
//                  string or input_text / output_text parts), function_call, function_call_output and reasoning
//                  (the reasoning_content of the assistant turn that follows it)
//   instructions   a system message before the input
//   tools          function tools {"type": "function", "name", "description", "parameters", "strict"}; tool_choice
//                  "auto" | "none" | "required" | {"type": "function", "name"}; parallel_tool_calls
//   text.format    {"type": "text"} | {"type": "json_object"} | {"type": "json_schema", "name", "schema", "strict"}
//   reasoning      {"effort"}: the harmony template's reasoning_effort (the route refuses it for other models)
//   sampling       max_output_tokens, temperature, top_p; Hearth's seed, top_k, min_p, repeat_penalty
//   Hearth's       cache_salt, cache_prompt (as on the other routes)
// Fields that cannot change the answer (metadata, user, safety_identifier, prompt_cache_key, service_tier "auto" or
// "default", stream_options) are accepted; every other field, and every value Hearth does not implement (built-in
// tools such as web_search, background: true, truncation "auto", include, image or file inputs, ...), is a 400
// naming it.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "server/api/completion_request.h"

namespace hearth::server {

struct ResponsesRequest {
  CompletionRequest chat;         // endpoint kChat: messages are the instructions (a system message) then the input
  nlohmann::json input_messages;  // the input alone, in the chat shape: what a follow-up appends
  std::optional<std::string> instructions;
  std::string previous_response_id;  // empty: none
  bool store = true;                 // OpenAI's default
  std::optional<std::string> reasoning_effort;
  // The request's own fields that the response object repeats: tools (as sent), tool_choice, text, reasoning,
  // metadata, max_output_tokens, temperature, top_p, parallel_tool_calls, user.
  nlohmann::json echo;
};

// Parses (parse_json_body: nesting limited while parsing) and validates a body. Errors are 400s whose param names
// the field (input[2].content[0].type, tools[1].type, ...).
[[nodiscard]] ApiResult<ResponsesRequest> parse_responses_request(std::string_view body);

}  // namespace hearth::server
