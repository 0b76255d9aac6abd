#include "server/api/request_tools.h"

#include <fmt/format.h>

#include <memory>

namespace hearth::server {
namespace {

using nlohmann::json;

ApiError wrong_type(const std::string& param, const char* expected, const json& got) {
  return invalid_request(fmt::format("'{}' must be {}, got {}", param, expected, got.type_name()), param,
                         "invalid_type");
}

}  // namespace

std::optional<ApiError> normalize_tool_calls(json& message, const std::string& param) {
  auto calls = message.find("tool_calls");
  if (calls == message.end() || calls->is_null()) {
    if (calls != message.end()) message.erase(calls);
    return std::nullopt;
  }
  if (!calls->is_array()) return wrong_type(param + ".tool_calls", "an array", *calls);
  for (size_t i = 0; i < calls->size(); ++i) {
    json& call = (*calls)[i];
    const std::string call_param = fmt::format("{}.tool_calls[{}]", param, i);
    if (!call.is_object()) return wrong_type(call_param, "an object", call);
    auto f = call.find("function");
    if (f == call.end() || !f->is_object() || !f->value("name", json()).is_string()) {
      return invalid_request(fmt::format("'{}.function.name' is required and must be a string", call_param),
                             call_param + ".function.name", "missing_required_parameter");
    }
    auto args = f->find("arguments");
    if (args != f->end() && args->is_string()) {
      json parsed = json::parse(args->get<std::string>(), nullptr, false);
      if (parsed.is_object()) *args = std::move(parsed);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tools(const json& body, CompletionRequest& r) {
  auto t = body.find("tools");
  if (t == body.end() || t->is_null()) return std::nullopt;
  if (!t->is_array()) return wrong_type("tools", "an array", *t);
  if (t->size() > kMaxTools) {
    return invalid_request(fmt::format("'tools' has {} tools; at most {} are allowed", t->size(), kMaxTools), "tools",
                           "invalid_value");
  }
  for (size_t i = 0; i < t->size(); ++i) {
    const json& tool = (*t)[i];
    const std::string param = fmt::format("tools[{}]", i);
    if (!tool.is_object() || tool.value("type", json("function")) != "function") {
      return invalid_request(fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{...}}}}", param),
                             param, "invalid_value");
    }
    auto f = tool.find("function");
    if (f == tool.end() || !f->is_object() || !f->value("name", json()).is_string()) {
      return invalid_request(fmt::format("'{}.function.name' is required and must be a string", param),
                             param + ".function.name", "missing_required_parameter");
    }
  }
  r.tools = *t;
  return std::nullopt;
}

// "auto", "none", "required", or {"type": "function", "function": {"name": ...}} naming one of the tools; and
// parallel_tool_calls.
std::optional<ApiError> parse_tool_choice(const json& body, CompletionRequest& r) {
  using ToolChoice = CompletionRequest::ToolChoice;
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) return wrong_type("parallel_tool_calls", "a boolean", *p);
    r.parallel_tool_calls = p->get<bool>();
  }
  auto c = body.find("tool_choice");
  if (c == body.end() || c->is_null()) return std::nullopt;
  if (*c == "auto") return std::nullopt;
  if (*c == "none") {
    r.tool_choice = ToolChoice::kNone;
    return std::nullopt;
  }
  if (*c == "required") {
    r.tool_choice = ToolChoice::kRequired;
  } else if (c->is_object() && c->value("type", json()) == "function" && c->contains("function") &&
             (*c)["function"].is_object() && (*c)["function"].value("name", json()).is_string()) {
    r.tool_choice = ToolChoice::kFunction;
    r.tool_choice_name = (*c)["function"]["name"].get<std::string>();
  } else {
    return invalid_request(
        "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": "
        "{\"name\": ...}}",
        "tool_choice", "invalid_value");
  }
  if (!r.tools.is_array() || r.tools.empty()) {
    return invalid_request("'tool_choice' forces a tool call, but the request has no tools", "tool_choice",
                           "invalid_value");
  }
  if (r.tool_choice == ToolChoice::kFunction) {
    bool found = false;
    for (const json& t : r.tools) found |= t["function"]["name"] == r.tool_choice_name;
    if (!found) {
      return invalid_request(
          fmt::format("'tool_choice' names \"{}\", which is not among the tools", r.tool_choice_name), "tool_choice",
          "invalid_value");
    }
  }
  return std::nullopt;
}

// {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}.
std::optional<ApiError> parse_response_format(const json& body, CompletionRequest& r) {
  auto f = body.find("response_format");
  if (f == body.end() || f->is_null()) return std::nullopt;
  if (!f->is_object()) return wrong_type("response_format", "an object", *f);
  const json type = f->value("type", json());
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    r.grammar = std::make_shared<const Grammar>(Grammar::any_json_object());
  } else if (type == "json_schema") {
    auto spec = f->find("json_schema");
    if (spec == f->end() || !spec->is_object() || !spec->contains("schema")) {
      return invalid_request("'response_format.json_schema.schema' is required", "response_format.json_schema.schema",
                             "missing_required_parameter");
    }
    auto grammar = Grammar::from_json_schema((*spec)["schema"]);
    if (!grammar) {
      return invalid_request("'response_format.json_schema.schema': " + grammar.error().message,
                             "response_format.json_schema.schema", "unsupported_schema");
    }
    r.grammar = std::make_shared<const Grammar>(std::move(*grammar));
  } else {
    return invalid_request("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"",
                           "response_format.type", "invalid_value");
  }
  if (r.tool_call_forced()) {
    return invalid_request("a forced 'tool_choice' and a JSON 'response_format' cannot be combined", "response_format",
                           "invalid_value");
  }
  return std::nullopt;
}

}  // namespace hearth::server
