#pragma once
// The chat request fields of tool calling and structured output (server-internal, used by openai_json.cpp):
// assistant tool_calls, tools, tool_choice and response_format, read into a CompletionRequest. Each returns a 400
// naming the field at fault, or nullopt.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "server/api/completion_request.h"

namespace hearth::server {

// Most tools one request may declare (OpenAI's own limit). Every tool is rendered into the prompt by the chat
// template before the context check can refuse it, so the count is refused first.
inline constexpr size_t kMaxTools = 128;

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}]. Arguments
// sent as a JSON string (the OpenAI format) become the object they hold, as templates print them with tojson.
[[nodiscard]] std::optional<ApiError> normalize_tool_calls(nlohmann::json& message, const std::string& param);
// tools: [{"type": "function", "function": {"name", ...}}], at most kMaxTools.
[[nodiscard]] std::optional<ApiError> parse_tools(const nlohmann::json& body, CompletionRequest& r);
// tool_choice: "auto", "none", "required", or {"type": "function", "function": {"name"}} naming one of the tools.
// Requires parse_tools first.
[[nodiscard]] std::optional<ApiError> parse_tool_choice(const nlohmann::json& body, CompletionRequest& r);
// response_format: text, json_object or json_schema, compiled to r.grammar. Requires parse_tool_choice first (a
// forced call and a JSON format cannot be combined).
[[nodiscard]] std::optional<ApiError> parse_response_format(const nlohmann::json& body, CompletionRequest& r);

}  // namespace hearth::server
