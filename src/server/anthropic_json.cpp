#include "server/anthropic_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "server/json_body.h"
#include "server/retention_json.h"

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
    if (type != "text") {
      const std::string shown = type.is_string() ? type.get<std::string>() : type.dump();
      return invalid_request(fmt::format("'{}.type' is {}: only text content blocks are supported", name, shown),
                             name + ".type", "unsupported_content");
    }
    auto text = block.find("text");
    if (text == block.end() || !text->is_string()) return bad(fmt::format("'{}.text' must be a string", name), name);
    out += text->get<std::string>();
    if (auto err = read_cache_control(block, name, nonce, out, r)) return err;
  }
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
    std::string text;
    if (auto err = read_content(m.value("content", json()), name + ".content", nonce, text, r)) return err;
    messages.push_back({{"role", role}, {"content", std::move(text)}});
  }
  return std::nullopt;
}

// Fields that would change the answer and are not implemented: refused, never dropped.
std::optional<ApiError> refuse_unsupported(const json& body) {
  if (auto t = body.find("tools"); t != body.end() && !t->is_null() && !(t->is_array() && t->empty())) {
    return invalid_request("tools are not supported yet on /v1/messages", "tools", "unsupported_parameter");
  }
  if (auto t = body.find("tool_choice"); t != body.end() && !t->is_null()) {
    const json type = t->is_object() ? t->value("type", json()) : json();
    if (type != "auto" && type != "none") {
      return invalid_request("tool_choice other than auto or none is not supported (no tools yet)", "tool_choice",
                             "unsupported_parameter");
    }
  }
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

std::optional<ApiError> read_sampling(const json& body, CompletionRequest& c) {
  auto mt = body.find("max_tokens");
  if (mt == body.end() || mt->is_null()) {
    return invalid_request("'max_tokens' is required", "max_tokens", "missing_required_parameter");
  }
  if (!is_int_in(*mt, 1, std::numeric_limits<int32_t>::max())) {
    return bad("'max_tokens' must be an integer of at least 1", "max_tokens");
  }
  c.max_tokens = static_cast<int32_t>(mt->get<int64_t>());
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
  return std::nullopt;
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
  return std::nullopt;
}

}  // namespace

ApiResult<MessagesRequest> parse_messages_request(std::string_view body_text, std::string_view nonce) {
  auto parsed = parse_json_body(body_text);
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  const json& body = std::get<json>(parsed);
  if (!body.is_object()) return invalid_request("the request body must be a JSON object", {}, "invalid_json");
  MessagesRequest r;
  r.chat.endpoint = Endpoint::kChat;
  if (auto err = refuse_unsupported(body)) return *err;
  if (auto err = read_misc(body, r.chat)) return *err;
  if (auto err = read_sampling(body, r.chat)) return *err;
  if (auto err = read_messages(body, nonce, r)) return *err;
  return r;
}

bool take_breakpoints(std::string& text, std::vector<Breakpoint>& breakpoints) {
  std::vector<std::pair<size_t, size_t>> found;  // (position in text, breakpoint)
  for (size_t i = 0; i < breakpoints.size(); ++i) {
    const size_t at = text.find(breakpoints[i].marker);
    if (at == std::string::npos || text.find(breakpoints[i].marker, at + 1) != std::string::npos) return false;
    found.emplace_back(at, i);
  }
  std::sort(found.begin(), found.end());
  std::string out;
  size_t from = 0;
  for (const auto& [at, i] : found) {
    out.append(text, from, at - from);
    breakpoints[i].text_offset = out.size();
    from = at + breakpoints[i].marker.size();
  }
  out.append(text, from);
  text = std::move(out);
  return true;
}

MessagesUsage messages_usage(const RequestUsage& usage, int32_t breakpoint_tokens) {
  MessagesUsage u;
  u.cache_read_input_tokens = usage.cached_tokens;
  u.cache_creation_input_tokens = std::max(0, std::min(breakpoint_tokens, usage.prompt_tokens) - usage.cached_tokens);
  u.input_tokens = usage.prompt_tokens - u.cache_read_input_tokens - u.cache_creation_input_tokens;
  u.output_tokens = usage.completion_tokens;
  return u;
}

nlohmann::json usage_json(const MessagesUsage& u) {
  return json{{"input_tokens", u.input_tokens},
              {"cache_creation_input_tokens", u.cache_creation_input_tokens},
              {"cache_read_input_tokens", u.cache_read_input_tokens},
              {"output_tokens", u.output_tokens}};
}

nlohmann::json stop_reason_json(FinishReason reason, const std::string& stop_sequence) {
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

nlohmann::json message_json(const std::string& id, const std::string& model, const std::string& text,
                            FinishReason reason, const std::string& stop_sequence, const MessagesUsage& usage) {
  json content = json::array();
  if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
  return json{{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", std::move(content)},
              {"stop_reason", stop_reason_json(reason, stop_sequence)},
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
