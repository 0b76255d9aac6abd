#include "server/anthropic/anthropic_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <random>
#include <tuple>

#include "server/api/request_tools.h"
#include "server/cache/retention_json.h"
#include "server/http/json_body.h"

namespace hearth::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxStopSequences = 16;  // as the OpenAI route's stop strings

ApiError bad(std::string message, std::string param = {}) {
  return invalid_request(std::move(message), std::move(param), "invalid_value");
}

bool is_int_in(const json& v, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) return false;
  return v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
}

// cache_control on a block: {"type": "ephemeral", "ttl": "5m" | "1h"}; adds a breakpoint whose marker is appended
// to `text`.
std::optional<ApiError> read_cache_control(const json& block, const std::string& param, std::string_view nonce,
                                           std::string& text, MessagesRequest& r) {
  auto cc = block.find("cache_control");
  if (cc == block.end() || cc->is_null()) return std::nullopt;
  const std::string name = param + ".cache_control";
  if (!cc->is_object() || cc->value("type", json()) != "ephemeral") {
    return bad(
        fmt::format("'{}' must be {{\"type\": \"ephemeral\"}} (with an optional \"ttl\": \"5m\" or \"1h\")", name),
        name);
  }
  Breakpoint bp;
  for (const auto& [key, value] : cc->items()) {
    if (key == "type") continue;
    if (key != "ttl") return bad(fmt::format("'{}.{}' is not a cache_control field (type, ttl)", name, key), name);
    if (value != "5m" && value != "1h") return bad(fmt::format("'{}.ttl' must be \"5m\" or \"1h\"", name), name);
    bp.ttl_ms = *parse_ttl(value.get<std::string>());
  }
  if (r.breakpoints.size() == kMaxBreakpoints) {
    return bad(fmt::format("a maximum of {} blocks with cache_control may be provided", kMaxBreakpoints), name);
  }
  bp.marker = fmt::format("[[hearth-cache-breakpoint-{}-{}]]", nonce, r.breakpoints.size());
  text += bp.marker;
  r.breakpoints.push_back(std::move(bp));
  return std::nullopt;
}

// A block's cache_control ends a prefix at the end of what the block rendered; for a tool, the marker goes into
// its description, and take_breakpoints moves the breakpoint to the end of the JSON object that holds it.
std::optional<ApiError> read_text_block(const json& block, const std::string& name, std::string_view nonce,
                                        std::string& out, MessagesRequest& r) {
  auto text = block.find("text");
  if (text == block.end() || !text->is_string()) return bad(fmt::format("'{}.text' must be a string", name), name);
  out += text->get<std::string>();
  return read_cache_control(block, name, nonce, out, r);
}

std::optional<ApiError> unsupported_block(const json& type, const std::string& name, const char* allowed) {
  const std::string shown = type.is_string() ? type.get<std::string>() : type.dump();
  return invalid_request(
      fmt::format("'{}.type' is {}: only {} content blocks are supported here", name, shown, allowed), name + ".type",
      "unsupported_content");
}

// Content: a string, or an array of text blocks (each maybe with cache_control), joined into one string.
std::optional<ApiError> read_content(const json& content, const std::string& param, std::string_view nonce,
                                     std::string& out, MessagesRequest& r) {
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return bad(fmt::format("'{}' must be a string or an array of content blocks", param), param);
  for (size_t i = 0; i < content.size(); ++i) {
    const json& block = content[i];
    const std::string name = fmt::format("{}[{}]", param, i);
    if (!block.is_object()) return bad(fmt::format("'{}' must be an object", name), name);
    const json type = block.value("type", json());
    if (type != "text") return unsupported_block(type, name, "text");
    if (auto err = read_text_block(block, name, nonce, out, r)) return err;
  }
  return std::nullopt;
}

// An assistant turn: text blocks become its content; tool_use blocks its tool_calls (OpenAI's shape, arguments as
// the object, which the templates print). A cache_control on a tool_use block marks the end of the turn's text.
std::optional<ApiError> read_assistant(const json& content, const std::string& param, std::string_view nonce,
                                       MessagesRequest& r) {
  json message = {{"role", "assistant"}};
  std::string text;
  if (content.is_array()) {
    json calls = json::array();
    for (size_t i = 0; i < content.size(); ++i) {
      const json& block = content[i];
      const std::string name = fmt::format("{}[{}]", param, i);
      if (!block.is_object()) return bad(fmt::format("'{}' must be an object", name), name);
      const json type = block.value("type", json());
      if (type == "text") {
        if (auto err = read_text_block(block, name, nonce, text, r)) return err;
        continue;
      }
      if (type != "tool_use") return unsupported_block(type, name, "text and tool_use");
      const json id = block.value("id", json());
      const json tool = block.value("name", json());
      const json input = block.value("input", json());
      if (!id.is_string() || !tool.is_string() || !input.is_object()) {
        return bad(fmt::format("'{}' must have a string 'id', a string 'name' and an object 'input'", name), name);
      }
      calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", tool}, {"arguments", input}}}});
      if (auto err = read_cache_control(block, name, nonce, text, r)) return err;
    }
    if (!calls.empty()) message["tool_calls"] = std::move(calls);
  } else if (auto err = read_content(content, param, nonce, text, r)) {
    return err;
  }
  message["content"] = std::move(text);
  r.chat.messages.push_back(std::move(message));
  return std::nullopt;
}

// A user turn: tool_result blocks become tool messages (OpenAI's "tool" role, with tool_call_id), in order; the
// text blocks between them become user messages.
std::optional<ApiError> read_user(const json& content, const std::string& param, std::string_view nonce,
                                  MessagesRequest& r) {
  if (!content.is_array()) {
    std::string text;
    if (auto err = read_content(content, param, nonce, text, r)) return err;
    r.chat.messages.push_back({{"role", "user"}, {"content", std::move(text)}});
    return std::nullopt;
  }
  const size_t first = r.chat.messages.size();
  std::optional<std::string> text;  // the user text since the last tool result
  auto flush_text = [&] {
    if (text) r.chat.messages.push_back({{"role", "user"}, {"content", std::move(*text)}});
    text.reset();
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const json& block = content[i];
    const std::string name = fmt::format("{}[{}]", param, i);
    if (!block.is_object()) return bad(fmt::format("'{}' must be an object", name), name);
    const json type = block.value("type", json());
    if (type == "text") {
      if (!text) text.emplace();
      if (auto err = read_text_block(block, name, nonce, *text, r)) return err;
      continue;
    }
    if (type != "tool_result") return unsupported_block(type, name, "text and tool_result");
    flush_text();
    const json id = block.value("tool_use_id", json());
    if (!id.is_string()) return bad(fmt::format("'{}.tool_use_id' must be a string", name), name + ".tool_use_id");
    std::string result;
    if (auto c = block.find("content"); c != block.end() && !c->is_null()) {
      if (auto err = read_content(*c, name + ".content", nonce, result, r)) return err;
    }
    if (auto e = block.find("is_error"); e != block.end() && !e->is_null() && !e->is_boolean()) {
      return bad(fmt::format("'{}.is_error' must be a boolean", name), name + ".is_error");
    }
    // The templates have no field for it: an error result says so in its text.
    if (block.value("is_error", false)) result = "Error: " + result;
    if (auto err = read_cache_control(block, name, nonce, result, r)) return err;
    r.chat.messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", std::move(result)}});
  }
  if (r.chat.messages.size() == first && !text) text.emplace();  // an empty content array: an empty turn
  flush_text();
  return std::nullopt;
}

std::optional<ApiError> read_messages(const json& body, std::string_view nonce, MessagesRequest& r) {
  json& messages = r.chat.messages;
  messages = json::array();
  if (auto s = body.find("system"); s != body.end() && !s->is_null()) {
    std::string text;
    if (auto err = read_content(*s, "system", nonce, text, r)) return err;
    messages.push_back({{"role", "system"}, {"content", std::move(text)}});
  }
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return invalid_request("'messages' is required and must be a non-empty array", "messages",
                           "missing_required_parameter");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string name = fmt::format("messages[{}]", i);
    if (!m.is_object()) return bad(fmt::format("'{}' must be an object", name), name);
    const json role = m.value("role", json());
    if (role != "user" && role != "assistant") {
      return bad(fmt::format("'{}.role' must be \"user\" or \"assistant\"", name), name + ".role");
    }
    const json content = m.value("content", json());
    auto err = role == "user" ? read_user(content, name + ".content", nonce, r)
                              : read_assistant(content, name + ".content", nonce, r);
    if (err) return err;
  }
  // A chat that ends with the assistant's words (a prefill) is continued from them.
  if (it->back().value("role", json()) == "assistant") {
    const std::string& text = messages.back()["content"].get_ref<const std::string&>();
    if (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
      return bad("final assistant content cannot end with trailing whitespace",
                 fmt::format("messages[{}].content", it->size() - 1));
    }
    r.chat.continue_final_message = true;
  }
  return std::nullopt;
}

// tools: [{"name", "description", "input_schema", "cache_control"}] (custom tools; Anthropic's server tools, which
// carry a versioned "type", are refused), as the OpenAI function tools the templates render.
std::optional<ApiError> read_tools(const json& body, std::string_view nonce, MessagesRequest& r) {
  auto t = body.find("tools");
  if (t == body.end() || t->is_null()) return std::nullopt;
  if (!t->is_array()) return bad("'tools' must be an array", "tools");
  if (t->size() > kMaxTools) {
    return bad(fmt::format("'tools' has {} tools; at most {} are allowed", t->size(), kMaxTools), "tools");
  }
  json tools = json::array();
  for (size_t i = 0; i < t->size(); ++i) {
    const json& tool = (*t)[i];
    const std::string name = fmt::format("tools[{}]", i);
    if (!tool.is_object()) return bad(fmt::format("'{}' must be an object", name), name);
    if (const json type = tool.value("type", json("custom")); type != "custom") {
      return invalid_request(
          fmt::format("'{}.type' is {}: only custom tools (name, description, input_schema) are supported", name,
                      type.dump()),
          name + ".type", "unsupported_parameter");
    }
    const json tool_name = tool.value("name", json());
    if (!tool_name.is_string() || tool_name.get<std::string>().empty() || tool_name.get<std::string>().size() > 128) {
      return bad(fmt::format("'{}.name' must be a string of 1 to 128 characters", name), name + ".name");
    }
    auto schema = tool.find("input_schema");
    if (schema == tool.end() || !schema->is_object()) {
      return invalid_request(fmt::format("'{}.input_schema' is required and must be an object", name),
                             name + ".input_schema", "missing_required_parameter");
    }
    json function = {{"name", tool_name}, {"parameters", *schema}};
    std::string description;
    if (auto d = tool.find("description"); d != tool.end() && !d->is_null()) {
      if (!d->is_string()) return bad(fmt::format("'{}.description' must be a string", name), name + ".description");
      description = d->get<std::string>();
    }
    const size_t marked = r.breakpoints.size();
    if (auto err = read_cache_control(tool, name, nonce, description, r)) return err;
    if (r.breakpoints.size() > marked) r.breakpoints.back().ends_json_object = true;
    if (!description.empty() || tool.contains("description")) function["description"] = std::move(description);
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  r.chat.tools = std::move(tools);
  return std::nullopt;
}

// tool_choice: {"type": "auto" | "any" | "tool" (with "name") | "none", "disable_parallel_tool_use"}: auto, a forced
// call to any tool, a forced call to that tool, no call. Requires read_tools first.
std::optional<ApiError> read_tool_choice(const json& body, MessagesRequest& r) {
  using ToolChoice = CompletionRequest::ToolChoice;
  auto c = body.find("tool_choice");
  if (c == body.end() || c->is_null()) return std::nullopt;
  const json type = c->is_object() ? c->value("type", json()) : json();
  if (auto p = c->is_object() ? c->find("disable_parallel_tool_use") : c->end();
      c->is_object() && p != c->end() && !p->is_null() && !p->is_boolean()) {
    return bad("'tool_choice.disable_parallel_tool_use' must be a boolean", "tool_choice.disable_parallel_tool_use");
  }
  if (c->is_object()) r.chat.parallel_tool_calls = !c->value("disable_parallel_tool_use", false);
  if (type == "auto") return std::nullopt;
  if (type == "none") {
    r.chat.tool_choice = ToolChoice::kNone;
    return std::nullopt;
  }
  if (type == "any") {
    r.chat.tool_choice = ToolChoice::kRequired;
  } else if (type == "tool" && c->value("name", json()).is_string()) {
    r.chat.tool_choice = ToolChoice::kFunction;
    r.chat.tool_choice_name = (*c)["name"].get<std::string>();
  } else {
    return bad(
        "'tool_choice' must be {\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"tool\", \"name\": ...} or "
        "{\"type\": \"none\"}",
        "tool_choice");
  }
  if (!r.chat.tools.is_array() || r.chat.tools.empty()) {
    return bad("'tool_choice' forces a tool call, but the request has no tools", "tool_choice");
  }
  if (r.chat.tool_choice == ToolChoice::kFunction) {
    bool found = false;
    for (const json& t : r.chat.tools) found |= t["function"]["name"] == r.chat.tool_choice_name;
    if (!found) {
      return bad(fmt::format("'tool_choice.name' is \"{}\", which is not among the tools", r.chat.tool_choice_name),
                 "tool_choice.name");
    }
  }
  return std::nullopt;
}

// Fields that would change the answer and are not implemented: refused, never dropped.
std::optional<ApiError> refuse_unsupported(const json& body) {
  if (auto t = body.find("thinking"); t != body.end() && !t->is_null()) {
    if (!t->is_object() || t->value("type", json()) != "disabled") {
      return invalid_request("extended thinking is not supported", "thinking", "unsupported_parameter");
    }
  }
  for (const char* key : {"mcp_servers", "container"}) {
    if (auto t = body.find(key); t != body.end() && !t->is_null()) {
      return invalid_request(fmt::format("'{}' is not supported", key), key, "unsupported_parameter");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> read_sampling(const json& body, MessagesBody kind, CompletionRequest& c) {
  auto mt = body.find("max_tokens");
  if ((mt == body.end() || mt->is_null()) && kind == MessagesBody::kCreate) {
    return invalid_request("'max_tokens' is required", "max_tokens", "missing_required_parameter");
  }
  if (mt != body.end() && !mt->is_null()) {
    if (!is_int_in(*mt, 1, std::numeric_limits<int32_t>::max())) {
      return bad("'max_tokens' must be an integer of at least 1", "max_tokens");
    }
    c.max_tokens = static_cast<int32_t>(mt->get<int64_t>());
  }
  if (auto t = body.find("temperature"); t != body.end() && !t->is_null()) {
    if (!t->is_number() || !(t->get<double>() >= 0.0 && t->get<double>() <= 1.0)) {
      return bad("'temperature' must be a number in [0, 1]", "temperature");
    }
    c.temperature = t->get<float>();
  }
  if (auto t = body.find("top_p"); t != body.end() && !t->is_null()) {
    if (!t->is_number() || !(t->get<double>() > 0.0 && t->get<double>() <= 1.0)) {
      return bad("'top_p' must be a number in (0, 1]", "top_p");
    }
    c.top_p = t->get<float>();
  }
  if (auto t = body.find("top_k"); t != body.end() && !t->is_null()) {
    if (!is_int_in(*t, 0, std::numeric_limits<int32_t>::max())) return bad("'top_k' must be an integer >= 0", "top_k");
    c.top_k = static_cast<int32_t>(t->get<int64_t>());
  }
  if (auto s = body.find("stop_sequences"); s != body.end() && !s->is_null()) {
    if (!s->is_array() || s->size() > kMaxStopSequences) {
      return bad(fmt::format("'stop_sequences' must be an array of at most {} strings", kMaxStopSequences),
                 "stop_sequences");
    }
    for (const json& v : *s) {
      if (!v.is_string() || v.get<std::string>().empty()) {
        return bad("'stop_sequences' must hold non-empty strings", "stop_sequences");
      }
      c.stop.push_back(v.get<std::string>());
    }
  }
  return check_stop_lengths(c.stop, "stop_sequences");
}

std::optional<ApiError> read_misc(const json& body, CompletionRequest& c) {
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) return bad("'model' must be a string", "model");
    c.model = m->get<std::string>();
  }
  if (auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return bad("'stream' must be a boolean", "stream");
    c.stream = s->get<bool>();
  }
  if (auto m = body.find("metadata"); m != body.end() && !m->is_null() && !m->is_object()) {
    return bad("'metadata' must be an object", "metadata");
  }
  if (auto s = body.find("cache_salt"); s != body.end() && !s->is_null()) {
    if (!s->is_string()) return bad("'cache_salt' must be a string", "cache_salt");
    c.cache_salt = s->get<std::string>();
  }
  // As on the OpenAI routes: false keeps the prompt out of every cache (pool, disk, listings, answer memory).
  if (auto s = body.find("cache_prompt"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return bad("'cache_prompt' must be a boolean", "cache_prompt");
    c.use_cache = s->get<bool>();
  }
  return std::nullopt;
}

// The end of the JSON object around `at`, a place inside one of its strings: the byte after the '}' that closes
// it. `at` itself when the text there is not JSON (a template that printed the description bare).
size_t end_of_json_object(std::string_view text, size_t at) {
  bool in_string = true;
  int depth = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return c == '}' ? i + 1 : at;
      --depth;
    }
  }
  return at;
}

}  // namespace

ApiResult<MessagesRequest> parse_messages_request(std::string_view body_text, std::string_view nonce,
                                                  MessagesBody kind) {
  auto parsed = parse_json_body(body_text);
  if (!parsed) return api_error(parsed.error());
  const json& body = *parsed;
  if (!body.is_object()) return invalid_request("the request body must be a JSON object", {}, "invalid_json");
  MessagesRequest r;
  r.chat.endpoint = Endpoint::kChat;
  if (auto err = refuse_unsupported(body)) return *err;
  if (auto err = read_misc(body, r.chat)) return *err;
  if (auto err = read_sampling(body, kind, r.chat)) return *err;
  // Anthropic's prompt order: tools, then system, then messages (the breakpoints in that order).
  if (auto err = read_tools(body, nonce, r)) return *err;
  if (auto err = read_tool_choice(body, r)) return *err;
  if (auto err = read_messages(body, nonce, r)) return *err;
  const bool tool_breakpoint =
      std::any_of(r.breakpoints.begin(), r.breakpoints.end(), [](const Breakpoint& bp) { return bp.ends_json_object; });
  if (tool_breakpoint) {
    r.anchor = fmt::format("[[hearth-cache-anchor-{}]]", nonce);
    json& first = r.chat.messages[0]["content"];
    first = r.anchor + first.get<std::string>();
  }
  return r;
}

bool take_breakpoints(std::string& text, std::vector<Breakpoint>& breakpoints, std::string_view anchor) {
  // (position in text, marker length, breakpoint or npos for the anchor)
  std::vector<std::tuple<size_t, size_t, size_t>> found;
  auto find_once = [&](std::string_view marker) {
    const size_t at = text.find(marker);
    if (at == std::string::npos || text.find(marker, at + 1) != std::string::npos) return std::string::npos;
    return at;
  };
  std::vector<size_t> dropped;  // tool breakpoints whose marker the template did not print
  for (size_t i = 0; i < breakpoints.size(); ++i) {
    const size_t at = find_once(breakpoints[i].marker);
    if (at == std::string::npos && breakpoints[i].ends_json_object && !anchor.empty() &&
        text.find(breakpoints[i].marker) == std::string::npos) {
      dropped.push_back(i);
      continue;
    }
    if (at == std::string::npos) return false;
    found.emplace_back(at, breakpoints[i].marker.size(), i);
  }
  if (!anchor.empty()) {
    const size_t at = find_once(anchor);
    if (at == std::string::npos) return false;
    found.emplace_back(at, anchor.size(), std::string::npos);
  }
  std::sort(found.begin(), found.end());
  std::string out;
  size_t from = 0;
  size_t anchor_offset = 0;
  for (const auto& [at, size, i] : found) {
    out.append(text, from, at - from);
    (i == std::string::npos ? anchor_offset : breakpoints[i].text_offset) = out.size();
    from = at + size;
  }
  out.append(text, from);
  text = std::move(out);
  for (Breakpoint& bp : breakpoints) {
    if (bp.ends_json_object) bp.text_offset = end_of_json_object(text, bp.text_offset);
  }
  for (size_t i : dropped) breakpoints[i].text_offset = anchor_offset;
  return true;
}

MessagesUsage messages_usage(const RequestUsage& usage, int32_t breakpoint_tokens) {
  MessagesUsage u;
  u.cache_read_input_tokens = usage.cached_tokens;
  u.cache_creation_input_tokens = std::max(0, std::min(breakpoint_tokens, usage.prompt_tokens) - usage.cached_tokens);
  u.input_tokens = usage.prompt_tokens - u.cache_read_input_tokens - u.cache_creation_input_tokens;
  u.output_tokens = usage.completion_tokens;
  u.max_tokens_clamped_to = usage.max_tokens_clamped_to;
  return u;
}

nlohmann::json usage_json(const MessagesUsage& u) {
  json usage = {{"input_tokens", u.input_tokens},
                {"cache_creation_input_tokens", u.cache_creation_input_tokens},
                {"cache_read_input_tokens", u.cache_read_input_tokens},
                {"output_tokens", u.output_tokens}};
  if (u.max_tokens_clamped_to > 0) usage["hearth"] = {{"max_tokens_clamped_to", u.max_tokens_clamped_to}};
  return usage;
}

nlohmann::json stop_reason_json(FinishReason reason, const std::string& stop_sequence, bool tool_use) {
  if (tool_use && reason != FinishReason::kAborted && reason != FinishReason::kNone) return "tool_use";
  switch (reason) {
    case FinishReason::kStop:
      return stop_sequence.empty() ? "end_turn" : "stop_sequence";
    case FinishReason::kLength:
      return "max_tokens";
    case FinishReason::kNone:
    case FinishReason::kAborted:
      return nullptr;
  }
  return nullptr;
}

MessagesAnswer messages_answer(const CompletionRequest& chat, ToolCallFormat format, std::string text,
                               FinishReason reason) {
  MessagesAnswer answer{std::move(text), {}};
  if (!chat.tools_active() || reason == FinishReason::kAborted) return answer;
  auto parsed =
      parse_answer_calls(format, answer.text, chat.tools, chat.tool_call_forced() && reason == FinishReason::kLength);
  if (!parsed) return answer;
  if (!chat.parallel_tool_calls) parsed->calls.resize(1);
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr std::string_view kAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  for (ToolCall& call : parsed->calls) {
    if (format == ToolCallFormat::kMistral) {
      call.id = new_tool_call_id(format);
      continue;
    }
    call.id = "toolu_";
    for (int i = 0; i < 24; ++i) call.id += kAlnum[rng() % kAlnum.size()];
  }
  answer.text = std::move(parsed->content);
  answer.calls = std::move(parsed->calls);
  return answer;
}

nlohmann::json tool_use_block_json(const ToolCall& call) {
  json input = json::parse(call.arguments, nullptr, false);
  if (!input.is_object()) input = json::object();  // parse_tool_calls only returns object arguments
  return json{{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", std::move(input)}};
}

nlohmann::json message_json(const std::string& id, const std::string& model, const MessagesAnswer& answer,
                            FinishReason reason, const std::string& stop_sequence, const MessagesUsage& usage) {
  json content = json::array();
  if (!answer.text.empty()) content.push_back({{"type", "text"}, {"text", answer.text}});
  for (const ToolCall& call : answer.calls) content.push_back(tool_use_block_json(call));
  return json{{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", std::move(content)},
              {"stop_reason", stop_reason_json(reason, stop_sequence, !answer.calls.empty() && answer.calls[0].whole)},
              {"stop_sequence", stop_sequence.empty() ? json() : json(stop_sequence)},
              {"usage", usage_json(usage)}};
}

std::string anthropic_event(const nlohmann::json& payload) {
  return fmt::format("event: {}\ndata: {}\n\n", payload.value("type", std::string("error")),
                     payload.dump(-1, ' ', false, json::error_handler_t::replace));
}

nlohmann::json anthropic_error_json(const ApiError& error) {
  const char* type = "invalid_request_error";
  if (error.status == 401)
    type = "authentication_error";
  else if (error.status == 403)
    type = "permission_error";
  else if (error.status == 404)
    type = "not_found_error";
  else if (error.status == 413)
    type = "request_too_large";
  else if (error.status == 429)
    type = "rate_limit_error";
  else if (error.status == 503 || error.status == 529)
    type = "overloaded_error";
  else if (error.status >= 500)
    type = "api_error";
  return json{{"type", "error"}, {"error", {{"type", type}, {"message", error.message}}}};
}

}  // namespace hearth::server
