#include "server/responses/responses_request.h"

#include <fmt/format.h>

#include <array>
#include <limits>

#include "server/api/request_tools.h"
#include "server/http/json_body.h"

namespace hearth::server {
namespace {

using nlohmann::json;

ApiError bad(std::string message, std::string param) {
  return invalid_request(std::move(message), std::move(param), "invalid_value");
}

ApiError unsupported(std::string message, std::string param) {
  return invalid_request(std::move(message), std::move(param), "unsupported_parameter");
}

const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> read_number(const json& body, const char* key, double lo, double hi, bool lo_open, float& out) {
  const json* v = field(body, key);
  if (v == nullptr) return std::nullopt;
  const bool ok =
      v->is_number() && (lo_open ? v->get<double>() > lo : v->get<double>() >= lo) && v->get<double>() <= hi;
  if (!ok) return bad(fmt::format("'{}' must be a number in {}{}, {}]", key, lo_open ? "(" : "[", lo, hi), key);
  out = v->get<float>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const json& body, const char* key, std::string& out) {
  const json* v = field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return bad(fmt::format("'{}' must be a string", key), key);
  out = v->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& body, const char* key, bool& out) {
  const json* v = field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return bad(fmt::format("'{}' must be a boolean", key), key);
  out = v->get<bool>();
  return std::nullopt;
}

// The fields this route reads; any other is refused by name.
constexpr std::array kKnownFields = {"model",
                                     "input",
                                     "instructions",
                                     "tools",
                                     "tool_choice",
                                     "parallel_tool_calls",
                                     "text",
                                     "reasoning",
                                     "store",
                                     "previous_response_id",
                                     "max_output_tokens",
                                     "temperature",
                                     "top_p",
                                     "stream",
                                     "stream_options",
                                     "metadata",
                                     "user",
                                     "safety_identifier",
                                     "prompt_cache_key",
                                     "service_tier",
                                     "truncation",
                                     "include",
                                     "top_logprobs",
                                     "background",
                                     "max_tool_calls",
                                     "cache_salt",
                                     "cache_prompt",
                                     "seed",
                                     "top_k",
                                     "min_p",
                                     "repeat_penalty"};

// Fields whose only supported value is their neutral one.
std::optional<ApiError> refuse_unsupported(const json& body) {
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const char* k : kKnownFields) known |= key == k;
    if (!known) return unsupported(fmt::format("'{}' is not supported by this server", key), key);
  }
  if (const json* v = field(body, "background"); v != nullptr && *v != false) {
    return unsupported("background responses are not supported ('background' must be false)", "background");
  }
  if (const json* v = field(body, "truncation"); v != nullptr && *v != "disabled") {
    return unsupported("only 'truncation': \"disabled\" is supported (a prompt too long for the context is a 400)",
                       "truncation");
  }
  if (const json* v = field(body, "include"); v != nullptr) {
    if (!v->is_array()) return bad("'include' must be an array", "include");
    if (!v->empty()) {
      return unsupported(fmt::format("'include' value {} is not supported", (*v)[0].dump()), "include[0]");
    }
  }
  if (const json* v = field(body, "top_logprobs"); v != nullptr && *v != 0) {
    return unsupported("logprobs are not supported on /v1/responses ('top_logprobs' must be 0)", "top_logprobs");
  }
  if (const json* v = field(body, "max_tool_calls"); v != nullptr) {
    return unsupported("'max_tool_calls' is not supported", "max_tool_calls");
  }
  if (const json* v = field(body, "service_tier"); v != nullptr && *v != "auto" && *v != "default") {
    return unsupported("'service_tier' must be \"auto\" or \"default\"", "service_tier");
  }
  for (const char* key : {"user", "safety_identifier", "prompt_cache_key"}) {
    if (const json* v = field(body, key); v != nullptr && !v->is_string()) {
      return bad(fmt::format("'{}' must be a string", key), key);
    }
  }
  if (const json* v = field(body, "metadata"); v != nullptr && !v->is_object()) {
    return bad("'metadata' must be an object", "metadata");
  }
  if (const json* v = field(body, "stream_options"); v != nullptr && !v->is_object()) {
    return bad("'stream_options' must be an object", "stream_options");
  }
  return std::nullopt;
}

// A message's content: a string, or parts of input_text / output_text (joined); refusal parts are text too.
std::optional<ApiError> read_content(const json& content, const std::string& param, std::string& out) {
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return bad(fmt::format("'{}' must be a string or an array of content parts", param), param);
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string name = fmt::format("{}[{}]", param, i);
    if (!part.is_object()) return bad(fmt::format("'{}' must be an object", name), name);
    const json type = part.value("type", json());
    const char* key = type == "refusal" ? "refusal" : "text";
    if (type != "input_text" && type != "output_text" && type != "text" && type != "refusal") {
      return invalid_request(
          fmt::format("'{}.type' is {}: only text content (input_text, output_text) is supported", name, type.dump()),
          name + ".type", "unsupported_content");
    }
    auto text = part.find(key);
    if (text == part.end() || !text->is_string()) return bad(fmt::format("'{}.{}' must be a string", name, key), name);
    out += text->get<std::string>();
  }
  return std::nullopt;
}

// Reads the input items into chat messages. A function_call joins the assistant message right before it (or
// starts one); a reasoning item becomes the reasoning_content of the assistant turn that follows it.
class InputReader {
 public:
  explicit InputReader(json& messages) : messages_(messages) {}

  std::optional<ApiError> read(const json& item, const std::string& name) {
    if (!item.is_object()) return bad(fmt::format("'{}' must be an object", name), name);
    const json type = item.value("type", json("message"));
    if (type == "message") return read_message(item, name);
    if (type == "function_call") return read_call(item, name);
    if (type == "function_call_output") return read_output(item, name);
    if (type == "reasoning") return read_reasoning(item, name);
    return invalid_request(
        fmt::format("'{}.type' is {}: the input items supported are message, function_call, function_call_output "
                    "and reasoning",
                    name, type.dump()),
        name + ".type", "unsupported_parameter");
  }

 private:
  std::optional<ApiError> read_message(const json& item, const std::string& name) {
    const json role = item.value("role", json());
    if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
      return bad(fmt::format("'{}.role' must be \"user\", \"system\", \"developer\" or \"assistant\"", name),
                 name + ".role");
    }
    std::string text;
    if (auto err = read_content(item.value("content", json()), name + ".content", text)) return err;
    if (role == "assistant") {
      assistant()["content"] = assistant().value("content", std::string()) + text;
      return std::nullopt;
    }
    open_assistant_ = false;
    messages_.push_back({{"role", role == "developer" ? "system" : role}, {"content", std::move(text)}});
    return std::nullopt;
  }

  std::optional<ApiError> read_call(const json& item, const std::string& name) {
    const json call_id = item.value("call_id", json());
    const json fn = item.value("name", json());
    const json args = item.value("arguments", json());
    if (!call_id.is_string() || !fn.is_string() || !args.is_string()) {
      return bad(fmt::format("'{}' must have string 'call_id', 'name' and 'arguments'", name), name);
    }
    json& message = assistant();
    json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", fn}, {"arguments", args}}}};
    message["tool_calls"].push_back(std::move(call));
    return normalize_tool_calls(message, name);
  }

  std::optional<ApiError> read_output(const json& item, const std::string& name) {
    const json call_id = item.value("call_id", json());
    if (!call_id.is_string()) return bad(fmt::format("'{}.call_id' must be a string", name), name + ".call_id");
    std::string output;
    if (auto err = read_content(item.value("output", json()), name + ".output", output)) return err;
    open_assistant_ = false;
    messages_.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(output)}});
    return std::nullopt;
  }

  // A reasoning item's text: its content (reasoning_text parts), or else its summary.
  std::optional<ApiError> read_reasoning(const json& item, const std::string& name) {
    std::string content;
    std::string summary;
    for (const char* key : {"content", "summary"}) {
      const json* parts = field(item, key);
      if (parts == nullptr) continue;
      const std::string param = name + "." + key;
      if (!parts->is_array()) return bad(fmt::format("'{}' must be an array", param), param);
      for (size_t i = 0; i < parts->size(); ++i) {
        const json& p = (*parts)[i];
        if (!p.is_object() || !p.value("text", json()).is_string()) {
          return bad(fmt::format("'{}[{}].text' must be a string", param, i), param);
        }
        (key == std::string_view("content") ? content : summary) += p["text"].get<std::string>();
      }
    }
    open_assistant_ = false;
    pending_reasoning_ += content.empty() ? summary : content;
    return std::nullopt;
  }

  // The assistant message the next output item belongs to: the open one, or a new one.
  json& assistant() {
    if (!open_assistant_) {
      json message = {{"role", "assistant"}, {"content", ""}};
      if (!pending_reasoning_.empty()) message["reasoning_content"] = std::move(pending_reasoning_);
      pending_reasoning_.clear();
      messages_.push_back(std::move(message));
      open_assistant_ = true;
    }
    return messages_.back();
  }

  json& messages_;
  bool open_assistant_ = false;
  std::string pending_reasoning_;
};

std::optional<ApiError> read_input(const json& body, ResponsesRequest& r) {
  r.input_messages = json::array();
  const json* input = field(body, "input");
  if (input == nullptr) {
    return invalid_request("'input' is required: a string or an array of input items", "input",
                           "missing_required_parameter");
  }
  if (input->is_string()) {
    r.input_messages.push_back({{"role", "user"}, {"content", *input}});
    return std::nullopt;
  }
  if (!input->is_array() || input->empty())
    return bad("'input' must be a string or a non-empty array of items", "input");
  InputReader reader(r.input_messages);
  for (size_t i = 0; i < input->size(); ++i) {
    if (auto err = reader.read((*input)[i], fmt::format("input[{}]", i))) return err;
  }
  return std::nullopt;
}

// tools (function tools in the Responses shape) and tool_choice, through the chat route's readers.
std::optional<ApiError> read_tools(const json& body, ResponsesRequest& r) {
  json chat = json::object();
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) return bad("'tools' must be an array", "tools");
    json converted = json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string name = fmt::format("tools[{}]", i);
      if (!t.is_object()) return bad(fmt::format("'{}' must be an object", name), name);
      const json type = t.value("type", json());
      if (type != "function") {
        return unsupported(fmt::format("'{}.type' is {}: only function tools are supported (built-in tools such as "
                                       "web_search run on OpenAI's servers, not here)",
                                       name, type.dump()),
                           name + ".type");
      }
      const json fn_name = t.value("name", json());
      if (!fn_name.is_string() || fn_name.get<std::string>().empty()) {
        return invalid_request(fmt::format("'{}.name' is required and must be a string", name), name + ".name",
                               "missing_required_parameter");
      }
      json function = {{"name", fn_name}};
      if (const json* d = field(t, "description")) {
        if (!d->is_string()) return bad(fmt::format("'{}.description' must be a string", name), name + ".description");
        function["description"] = *d;
      }
      if (const json* p = field(t, "parameters")) {
        if (!p->is_object()) return bad(fmt::format("'{}.parameters' must be an object", name), name + ".parameters");
        function["parameters"] = *p;
      }
      converted.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    chat["tools"] = std::move(converted);
  }
  if (const json* p = field(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = *p;
  if (const json* c = field(body, "tool_choice")) {
    if (c->is_object()) {
      if (c->value("type", json()) != "function") {
        return unsupported(
            fmt::format("'tool_choice.type' is {}: only \"function\" is supported", c->value("type", json()).dump()),
            "tool_choice.type");
      }
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", c->value("name", json())}}}};
    } else {
      chat["tool_choice"] = *c;
    }
  }
  if (auto err = parse_tools(chat, r.chat)) return err;
  return parse_tool_choice(chat, r.chat);
}

// text.format as the chat route's response_format; its errors name text.format.
std::optional<ApiError> read_text(const json& body, ResponsesRequest& r) {
  const json* text = field(body, "text");
  if (text == nullptr) return std::nullopt;
  if (!text->is_object()) return bad("'text' must be an object", "text");
  for (const auto& [key, value] : text->items()) {
    if (key != "format" && key != "verbosity")
      return unsupported(fmt::format("'text.{}' is not supported", key), "text." + key);
  }
  if (const json* v = field(*text, "verbosity"); v != nullptr && *v != "medium") {
    return unsupported("only 'text.verbosity': \"medium\" is supported", "text.verbosity");
  }
  const json* format = field(*text, "format");
  if (format == nullptr) return std::nullopt;
  if (!format->is_object()) return bad("'text.format' must be an object", "text.format");
  json response_format = {{"type", format->value("type", json())}};
  if (format->value("type", json()) == "json_schema") {
    if (!format->value("name", json()).is_string()) {
      return invalid_request("'text.format.name' is required", "text.format.name", "missing_required_parameter");
    }
    json spec = json::object();
    if (format->contains("schema")) spec["schema"] = (*format)["schema"];
    response_format["json_schema"] = std::move(spec);
  }
  auto err = parse_response_format(json{{"response_format", std::move(response_format)}}, r.chat);
  if (!err) return std::nullopt;
  for (std::string* s : {&err->message, &err->param}) {
    for (const std::string_view from : {"response_format.json_schema", "response_format"}) {
      for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at))
        s->replace(at, from.size(), "text.format");
    }
  }
  return err;
}

std::optional<ApiError> read_reasoning(const json& body, ResponsesRequest& r) {
  const json* reasoning = field(body, "reasoning");
  if (reasoning == nullptr) return std::nullopt;
  if (!reasoning->is_object()) return bad("'reasoning' must be an object", "reasoning");
  for (const auto& [key, value] : reasoning->items()) {
    if (key == "effort") continue;
    if ((key == "summary" || key == "generate_summary") && value.is_null()) continue;
    return unsupported(fmt::format("'reasoning.{}' is not supported (reasoning comes whole, as reasoning_text)", key),
                       "reasoning." + key);
  }
  if (const json* e = field(*reasoning, "effort")) {
    if (*e != "minimal" && *e != "low" && *e != "medium" && *e != "high") {
      return bad("'reasoning.effort' must be \"minimal\", \"low\", \"medium\" or \"high\"", "reasoning.effort");
    }
    // gpt-oss knows low, medium and high.
    r.reasoning_effort = *e == "minimal" ? std::string("low") : e->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> read_sampling(const json& body, CompletionRequest& c) {
  if (const json* m = field(body, "max_output_tokens")) {
    if (!m->is_number_integer() || m->get<int64_t>() < 1 || m->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return bad("'max_output_tokens' must be an integer of at least 1", "max_output_tokens");
    }
    c.max_tokens = static_cast<int32_t>(m->get<int64_t>());
  }
  if (auto err = read_number(body, "temperature", 0.0, 2.0, false, c.temperature)) return err;
  if (auto err = read_number(body, "top_p", 0.0, 1.0, true, c.top_p)) return err;
  if (auto err = read_number(body, "min_p", 0.0, 1.0, false, c.min_p)) return err;
  if (auto err = read_number(body, "repeat_penalty", 0.0, 10.0, true, c.repeat_penalty)) return err;
  if (const json* k = field(body, "top_k")) {
    if (!k->is_number_integer() || k->get<int64_t>() < 0 || k->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return bad("'top_k' must be an integer >= 0", "top_k");
    }
    c.top_k = static_cast<int32_t>(k->get<int64_t>());
  }
  if (const json* s = field(body, "seed")) {
    if (!s->is_number_integer()) return bad("'seed' must be an integer", "seed");
    c.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
  }
  return std::nullopt;
}

std::optional<ApiError> read_misc(const json& body, ResponsesRequest& r) {
  if (auto err = read_string(body, "model", r.chat.model)) return err;
  if (auto err = read_bool(body, "stream", r.chat.stream)) return err;
  if (auto err = read_bool(body, "store", r.store)) return err;
  if (auto err = read_string(body, "previous_response_id", r.previous_response_id)) return err;
  if (auto err = read_string(body, "cache_salt", r.chat.cache_salt)) return err;
  if (auto err = read_bool(body, "cache_prompt", r.chat.use_cache)) return err;
  if (field(body, "instructions") != nullptr) {
    std::string instructions;
    if (auto err = read_string(body, "instructions", instructions)) return err;
    r.instructions = std::move(instructions);
  }
  return std::nullopt;
}

json echo_fields(const json& body, const ResponsesRequest& r) {
  json echo = {
      {"tools", body.value("tools", json::array())},
      {"tool_choice", body.value("tool_choice", json("auto"))},
      {"parallel_tool_calls", r.chat.parallel_tool_calls},
      {"text", {{"format", {{"type", "text"}}}, {"verbosity", "medium"}}},
      {"reasoning", {{"effort", r.reasoning_effort ? json(*r.reasoning_effort) : json()}, {"summary", nullptr}}},
      {"metadata", body.value("metadata", json::object())},
      {"max_output_tokens", r.chat.max_tokens ? json(*r.chat.max_tokens) : json()},
      {"temperature", r.chat.temperature},
      {"top_p", r.chat.top_p},
      {"user", body.value("user", json())},
  };
  if (const json* t = field(body, "text"); t != nullptr && t->contains("format"))
    echo["text"]["format"] = (*t)["format"];
  if (echo["tools"].is_null()) echo["tools"] = json::array();
  if (echo["tool_choice"].is_null()) echo["tool_choice"] = "auto";
  if (echo["metadata"].is_null()) echo["metadata"] = json::object();
  return echo;
}

}  // namespace

ApiResult<ResponsesRequest> parse_responses_request(std::string_view body_text) {
  auto parsed = parse_json_body(body_text);
  if (!parsed) return api_error(parsed.error());
  const json& body = *parsed;
  if (!body.is_object()) return invalid_request("the request body must be a JSON object", {}, "invalid_json");
  ResponsesRequest r;
  r.chat.endpoint = Endpoint::kChat;
  if (auto err = refuse_unsupported(body)) return *err;
  if (auto err = read_misc(body, r)) return *err;
  if (auto err = read_sampling(body, r.chat)) return *err;
  if (auto err = read_reasoning(body, r)) return *err;
  if (auto err = read_tools(body, r)) return *err;
  if (auto err = read_text(body, r)) return *err;
  if (auto err = read_input(body, r)) return *err;
  r.chat.messages = json::array();
  if (r.instructions) r.chat.messages.push_back({{"role", "system"}, {"content", *r.instructions}});
  for (const json& m : r.input_messages) r.chat.messages.push_back(m);
  if (r.reasoning_effort) r.chat.chat_template_kwargs = {{"reasoning_effort", *r.reasoning_effort}};
  r.echo = echo_fields(body, r);
  return r;
}

}  // namespace hearth::server
