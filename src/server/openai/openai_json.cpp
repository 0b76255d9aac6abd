#include "server/openai/openai_json.h"

#include "server/api/logprobs_json.h"
#include "server/api/request_tools.h"
#include "server/cache/retention_json.h"
#include "server/http/json_body.h"
#include "server/openai/request_fields.h"

#include <fmt/format.h>

#include <cstdlib>
#include <limits>

namespace hearth::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxStopStrings = 16;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::binary:
    case json::value_t::discarded:
      return "invalid";
  }
  return "invalid";
}

ApiError wrong_type(const std::string& param, const char* expected, const json& got) {
  return invalid_request(fmt::format("'{}' must be {}, got {}", param, expected, type_name(got)), param,
                         "invalid_type");
}

// Each reader leaves `out` alone when the key is absent or null, and returns an error for a wrong type.
std::optional<ApiError> read_bool(const json& body, const char* key, bool& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return wrong_type(key, "a boolean", *it);
  out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const json& body, const char* key, std::string& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return wrong_type(key, "a string", *it);
  out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> read_number(const json& body, const char* key, double lo, double hi, float& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return wrong_type(key, "a number", *it);
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    return invalid_request(fmt::format("'{}' is {}, outside the allowed range [{}, {}]", key, v, lo, hi), key,
                           "invalid_value");
  }
  out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<ApiError> read_int(const json& body, const char* key, int64_t lo, int64_t hi,
                                 std::optional<int64_t>& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return wrong_type(key, "an integer", *it);
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return invalid_request(fmt::format("'{}' is {}, above the maximum {}", key, it->get<uint64_t>(), hi), key,
                           "invalid_value");
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return invalid_request(fmt::format("'{}' is {}, outside the allowed range [{}, {}]", key, v, lo, hi), key,
                           "invalid_value");
  }
  out = v;
  return std::nullopt;
}

// Message content may be a string, null, or an array of {"type": "text", "text": ...} parts, joined here.
std::optional<ApiError> normalize_content(const json& content, const std::string& param, json& out) {
  if (content.is_null() || content.is_string()) {
    out = content.is_null() ? json("") : content;
    return std::nullopt;
  }
  if (!content.is_array()) return wrong_type(param, "a string or an array of content parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string part_param = fmt::format("{}[{}]", param, i);
    if (!part.is_object()) return wrong_type(part_param, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || *type != "text") {
      return invalid_request(fmt::format("'{}.type' must be \"text\": only text content is supported", part_param),
                             part_param + ".type", "unsupported_content");
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string())
      return wrong_type(part_param + ".text", "a string", part.value("text", json()));
    text += t->get<std::string>();
  }
  out = text;
  return std::nullopt;
}

// chat_template_kwargs (vLLM's and llama.cpp's name): an object of extra template variables. The variables the
// server sets itself cannot be overridden.
std::optional<ApiError> parse_chat_template_kwargs(const json& body, CompletionRequest& r) {
  auto k = body.find("chat_template_kwargs");
  if (k == body.end() || k->is_null()) return std::nullopt;
  if (!k->is_object()) return wrong_type("chat_template_kwargs", "an object", *k);
  for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}) {
    if (k->contains(reserved)) {
      return invalid_request(
          fmt::format("'chat_template_kwargs.{}' is set by the server and cannot be overridden", reserved),
          std::string("chat_template_kwargs.") + reserved, "invalid_value");
    }
  }
  r.chat_template_kwargs = *k;
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& body, CompletionRequest& r) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    return invalid_request("'messages' is required", "messages", "missing_required_parameter");
  }
  if (!it->is_array()) return wrong_type("messages", "an array", *it);
  if (it->empty()) return invalid_request("'messages' must contain at least one message", "messages", "empty_array");
  static const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool"};
  r.messages = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(param, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return invalid_request(fmt::format("'{}.role' is required and must be a string", param), param + ".role",
                             "missing_required_parameter");
    }
    bool known = false;
    for (const char* k : kRoles) known |= (*role == k);
    if (!known) {
      return invalid_request(fmt::format("'{}.role' is \"{}\"; expected system, developer, user, assistant or tool",
                                         param, role->get<std::string>()),
                             param + ".role", "invalid_value");
    }
    json normalized = m;
    json content;
    if (auto err = normalize_content(m.value("content", json()), param + ".content", content)) return err;
    normalized["content"] = content;
    if (auto err = normalize_tool_calls(normalized, param)) return err;
    r.messages.push_back(std::move(normalized));
  }
  if (auto err = parse_tools(body, r)) return err;
  if (auto err = parse_tool_choice(body, r)) return err;
  if (auto err = parse_response_format(body, r)) return err;
  // vLLM's extension: the last message, the assistant's, is continued rather than answered.
  if (auto err = read_bool(body, "continue_final_message", r.continue_final_message)) return err;
  return parse_chat_template_kwargs(body, r);
}

std::optional<ApiError> parse_token_array(const json& arr, const std::string& param, std::vector<int32_t>& out) {
  for (const json& t : arr) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return invalid_request(fmt::format("'{}' must be a string or an array of token ids", param), param,
                             "invalid_type");
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

// prompt: a string, an array of one string, an array of token ids, or an array of one array of token ids.
std::optional<ApiError> parse_prompt(const json& body, CompletionRequest& r) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) {
    return invalid_request("'prompt' is required", "prompt", "missing_required_parameter");
  }
  const json* p = &*it;
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() != 1) {
      return invalid_request(
          fmt::format("'prompt' has {} prompts; only one prompt per request is supported", p->size()), "prompt",
          "unsupported_value");
    }
    p = &p->front();
  }
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return std::nullopt;
  }
  if (!p->is_array()) return wrong_type("prompt", "a string or an array of token ids", *p);
  if (p->empty()) return invalid_request("'prompt' must not be an empty array", "prompt", "empty_array");
  r.prompt_is_tokens = true;
  return parse_token_array(*p, "prompt", r.prompt_tokens);
}

std::optional<ApiError> parse_stop(const json& body, CompletionRequest& r) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) r.stop.push_back(it->get<std::string>());
    return check_stop_lengths(r.stop, "stop");
  }
  if (!it->is_array()) return wrong_type("stop", "a string or an array of strings", *it);
  if (it->size() > kMaxStopStrings) {
    return invalid_request(fmt::format("'stop' has {} strings; at most {} are allowed", it->size(), kMaxStopStrings),
                           "stop", "invalid_value");
  }
  for (const json& s : *it) {
    if (!s.is_string()) return wrong_type("stop", "a string or an array of strings", s);
    if (!s.get<std::string>().empty()) r.stop.push_back(s.get<std::string>());
  }
  return check_stop_lengths(r.stop, "stop");
}

// logit_bias: {"token id": bias in [-100, 100]} (at most kMaxLogitBias entries; ids are checked by the engine).
std::optional<ApiError> parse_logit_bias(const json& body, CompletionRequest& r) {
  constexpr size_t kMaxLogitBias = 1024;
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return wrong_type("logit_bias", "an object of token ids to biases", *it);
  if (it->size() > kMaxLogitBias) {
    return invalid_request(fmt::format("'logit_bias' has {} entries; at most {}", it->size(), kMaxLogitBias),
                           "logit_bias", "invalid_value");
  }
  for (const auto& [key, value] : it->items()) {
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return invalid_request(fmt::format("'logit_bias' key \"{}\" is not a token id", key), "logit_bias",
                             "invalid_value");
    }
    if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
      return invalid_request(fmt::format("'logit_bias' of token {} must be a number in [-100, 100]", key),
                             "logit_bias", "invalid_value");
    }
    r.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  return std::nullopt;
}

std::optional<ApiError> parse_limits(const json& body, CompletionRequest& r) {
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto it = body.find(key);
    // An unsigned JSON integer (2^63 and above included) is read as unsigned: as int64 it would wrap negative.
    const bool below_one = it != body.end() && it->is_number_integer() &&
                           (it->is_number_unsigned() ? it->get<uint64_t>() == 0 : it->get<int64_t>() <= 0);
    if (below_one) {
      return invalid_request(fmt::format("'{}' must be at least 1, got {}", key, it->dump()), key, "invalid_value");
    }
    std::optional<int64_t> v;
    if (auto err = read_int(body, key, 1, kMaxInt, v)) return err;
    if (v) r.max_tokens = static_cast<int32_t>(*v);
  }
  std::optional<int64_t> n;
  if (auto err = read_int(body, "n", 1, kMaxChoices, n)) return err;
  if (n) r.n = static_cast<int32_t>(*n);
  std::optional<int64_t> best_of;
  if (auto err = read_int(body, "best_of", 1, 1, best_of)) return err;
  if (auto err = read_number(body, "temperature", 0.0, 2.0, r.temperature)) return err;
  if (auto err = read_number(body, "top_p", 0.0, 1.0, r.top_p)) return err;
  if (r.top_p <= 0.0f) return invalid_request("'top_p' must be greater than 0", "top_p", "invalid_value");
  std::optional<int64_t> top_k;
  if (auto err = read_int(body, "top_k", 0, kMaxInt, top_k)) return err;
  if (top_k) r.top_k = static_cast<int32_t>(*top_k);
  if (auto err = read_number(body, "frequency_penalty", -2.0, 2.0, r.frequency_penalty)) return err;
  if (auto err = read_number(body, "presence_penalty", -2.0, 2.0, r.presence_penalty)) return err;
  if (auto err = read_number(body, "min_p", 0.0, 1.0, r.min_p)) return err;
  if (auto err = read_number(body, "repeat_penalty", 0.0, 10.0, r.repeat_penalty)) return err;
  if (r.repeat_penalty <= 0.0f) {
    return invalid_request("'repeat_penalty' must be greater than 0 (1 disables it)", "repeat_penalty",
                           "invalid_value");
  }
  std::optional<int64_t> repeat_last_n;
  if (auto err = read_int(body, "repeat_last_n", -1, kMaxInt, repeat_last_n)) return err;
  if (repeat_last_n) r.repeat_last_n = static_cast<int32_t>(*repeat_last_n);
  if (auto err = parse_logit_bias(body, r)) return err;
  auto seed = body.find("seed");
  if (seed != body.end() && !seed->is_null()) {
    if (!seed->is_number_integer()) return wrong_type("seed", "an integer", *seed);
    r.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  }
  return std::nullopt;
}

// chat: "logprobs": true with "top_logprobs" 0..20; completions: "logprobs" 0..5 (alternatives per token).
std::optional<ApiError> parse_logprobs(const json& body, CompletionRequest& r) {
  std::optional<int64_t> top;
  if (r.endpoint == Endpoint::kCompletion) {
    if (auto err = read_int(body, "logprobs", 0, kMaxCompletionLogprobs, top)) return err;
    if (top && r.echo) {
      return invalid_request("'logprobs' with 'echo' (the prompt's logprobs) is not supported", "logprobs",
                             "unsupported_value");
    }
    if (top) r.top_logprobs = static_cast<int32_t>(*top);
    return std::nullopt;
  }
  bool logprobs = false;
  if (auto err = read_bool(body, "logprobs", logprobs)) return err;
  if (auto err = read_int(body, "top_logprobs", 0, kMaxTopLogprobs, top)) return err;
  if (top && !logprobs) {
    return invalid_request("'top_logprobs' requires 'logprobs': true", "top_logprobs", "invalid_value");
  }
  if (logprobs) r.top_logprobs = top ? static_cast<int32_t>(*top) : 0;
  return std::nullopt;
}

std::optional<ApiError> parse_stream(const json& body, CompletionRequest& r) {
  if (auto err = read_bool(body, "stream", r.stream)) return err;
  auto it = body.find("stream_options");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return wrong_type("stream_options", "an object", *it);
  if (auto err = read_bool(*it, "include_usage", r.include_usage)) {
    err->param = "stream_options.include_usage";
    return err;
  }
  return std::nullopt;
}

// "speculative": "off" | "prompt_lookup" | "auto", or {"mode": ..., "max_draft": k}. Anything else is a 400.
std::optional<ApiError> parse_speculative(const json& value, CompletionRequest& r) {
  constexpr const char* kModes = "one of \"off\", \"prompt_lookup\", \"auto\", \"draft_model\"";
  SpeculativeParams p;
  p.mode = SpeculativeMode::kPromptLookup;
  const json* mode = nullptr;
  if (value.is_string()) {
    mode = &value;
  } else if (value.is_object()) {
    for (const auto& [key, v] : value.items()) {
      if (key != "mode" && key != "max_draft") {
        return invalid_request(fmt::format("'speculative.{}' is not a field of 'speculative' (mode, max_draft)", key),
                               "speculative." + key, "invalid_value");
      }
    }
    if (auto it = value.find("mode"); it != value.end() && !it->is_null()) mode = &*it;
    std::optional<int64_t> max_draft;
    if (auto err = read_int(value, "max_draft", 1, SpeculativeParams::kMaxDraftLimit, max_draft)) {
      err->param = "speculative.max_draft";
      return err;
    }
    if (max_draft) p.max_draft = static_cast<int32_t>(*max_draft);
  } else if (!value.is_null()) {
    return wrong_type("speculative", "a string or an object", value);
  } else {
    return std::nullopt;
  }
  if (mode) {
    const std::optional<SpeculativeMode> parsed =
        mode->is_string() ? parse_speculative_mode(mode->get<std::string>()) : std::nullopt;
    if (!parsed) {
      return invalid_request(fmt::format("'speculative' mode must be {}", kModes), "speculative.mode", "invalid_value");
    }
    p.mode = *parsed;
  }
  r.speculative = p;
  return std::nullopt;
}

// OpenAI's predicted output: "prediction": {"type": "content", "content": a string or an array of text parts}.
std::optional<ApiError> parse_prediction(const json& body, CompletionRequest& r) {
  auto it = body.find("prediction");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return wrong_type("prediction", "an object", *it);
  for (const auto& [key, v] : it->items()) {
    if (key != "type" && key != "content") {
      return invalid_request(fmt::format("'prediction.{}' is not a field of 'prediction' (type, content)", key),
                             "prediction." + key, "invalid_value");
    }
  }
  auto type = it->find("type");
  if (type == it->end() || *type != "content") {
    return invalid_request("'prediction.type' must be \"content\"", "prediction.type", "invalid_value");
  }
  auto content = it->find("content");
  if (content == it->end()) return invalid_request("'prediction.content' is required", "prediction.content");
  std::string text;
  if (content->is_string()) {
    text = content->get<std::string>();
  } else if (content->is_array()) {
    for (const json& part : *content) {
      auto t = part.is_object() ? part.find("text") : part.end();
      if (!part.is_object() || part.value("type", "") != "text" || t == part.end() || !t->is_string()) {
        return invalid_request("'prediction.content' parts must be {\"type\": \"text\", \"text\": string}",
                               "prediction.content", "invalid_value");
      }
      text += t->get<std::string>();
    }
  } else {
    return wrong_type("prediction.content", "a string or an array of text parts", *content);
  }
  if (text.size() > kMaxPredictionBytes) {
    return invalid_request(fmt::format("'prediction.content' is {} bytes; at most {} are allowed", text.size(),
                                       kMaxPredictionBytes),
                           "prediction.content", "invalid_value");
  }
  r.has_prediction = true;
  r.prediction_text = std::move(text);
  return std::nullopt;
}

// Cache controls: top level, or inside "hearth": {...}; the inner object wins.
std::optional<ApiError> parse_cache_controls(const json& body, CompletionRequest& r) {
  for (const json* scope : {&body, static_cast<const json*>(nullptr)}) {
    const json* s = scope;
    if (!s) {
      auto it = body.find("hearth");
      if (it == body.end() || it->is_null()) break;
      if (!it->is_object()) return wrong_type("hearth", "an object", *it);
      s = &*it;
    }
    if (auto err = read_string(*s, "cache_salt", r.cache_salt)) return err;
    if (auto err = read_bool(*s, "pin_prefix", r.pin_prefix)) return err;
    if (auto err = read_bool(*s, "cache_prompt", r.use_cache)) return err;
    if (auto err = read_bool(*s, "ignore_eos", r.ignore_eos)) return err;
    if (auto it = s->find("speculative"); it != s->end()) {
      if (auto err = parse_speculative(*it, r)) return err;
    }
    if (auto it = s->find("cache_retention"); it != s->end() && !it->is_null()) {
      auto span = parse_cache_retention(*it, "cache_retention");
      if (!span) return span.error();
      r.retention = {*span};
    }
  }
  return std::nullopt;
}

}  // namespace

ApiResult<CompletionRequest> parse_completion_request(std::string_view body_text, Endpoint endpoint) {
  auto body = parse_json_body(body_text);
  if (!body) return api_error(body.error());
  return validate_completion_request(*body, endpoint);
}

ApiResult<CompletionRequest> validate_completion_request(const nlohmann::json& body, Endpoint endpoint) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object", {}, "invalid_json");
  if (auto err = check_unsupported_fields(body, endpoint)) return *err;
  CompletionRequest r;
  r.endpoint = endpoint;
  if (auto err = read_string(body, "model", r.model)) return *err;
  if (endpoint == Endpoint::kChat) {
    if (auto err = parse_messages(body, r)) return *err;
  } else {
    if (auto err = parse_prompt(body, r)) return *err;
    if (auto err = read_bool(body, "echo", r.echo)) return *err;
    if (auto err = parse_response_format(body, r)) return *err;
  }
  for (auto parse : {parse_limits, parse_stop, parse_stream, parse_logprobs, parse_cache_controls, parse_prediction}) {
    if (auto err = parse(body, r)) return *err;
  }
  return r;
}

namespace {

json fingerprint_json(const ResponseMeta& meta) {
  return meta.system_fingerprint.empty() ? json() : json(meta.system_fingerprint);
}

json tool_call_json(const ToolCall& call) {
  return json{{"id", call.id},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

json choice_json(const CompletionRequest& request, int32_t index, const ChoiceResult& c) {
  json choice = {{"index", index}, {"logprobs", c.logprobs}, {"finish_reason", finish_reason_text(c.reason)}};
  if (request.endpoint == Endpoint::kChat && !c.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCall& call : c.tool_calls) calls.push_back(tool_call_json(call));
    choice["message"] = {{"role", "assistant"},
                         {"content", c.text.empty() ? json() : json(c.text)},
                         {"refusal", nullptr},
                         {"tool_calls", std::move(calls)}};
    if (c.tool_calls.front().whole) choice["finish_reason"] = "tool_calls";  // else "length": a call cut short
  } else if (request.endpoint == Endpoint::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
  } else {
    choice["text"] = c.text;
  }
  if (request.endpoint == Endpoint::kChat && !c.reasoning.empty()) choice["message"]["reasoning_content"] = c.reasoning;
  return choice;
}

}  // namespace

nlohmann::json response_json(const CompletionRequest& request, const ResponseMeta& meta,
                             std::span<const ChoiceResult> choices, nlohmann::json usage) {
  json rendered = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    rendered.push_back(choice_json(request, static_cast<int32_t>(i), choices[i]));
  }
  return json{{"id", meta.id},
              {"object", request.endpoint == Endpoint::kChat ? "chat.completion" : "text_completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"system_fingerprint", fingerprint_json(meta)},
              {"choices", std::move(rendered)},
              {"usage", std::move(usage)}};
}

nlohmann::json response_json(const CompletionRequest& request, const ResponseMeta& meta, const std::string& text,
                             FinishReason reason, const RequestUsage& usage, const nlohmann::json& logprobs) {
  const ChoiceResult choice{text, reason, logprobs};
  return response_json(request, meta, std::span(&choice, 1), usage_json(usage, request, meta.answer_tokens_reused));
}

nlohmann::json chunk_json(const CompletionRequest& request, const ResponseMeta& meta, const std::string& text,
                          bool first, FinishReason reason, const nlohmann::json& logprobs, int32_t index) {
  const bool chat = request.endpoint == Endpoint::kChat;
  json choice = {{"index", index}, {"logprobs", logprobs}};
  choice["finish_reason"] = reason == FinishReason::kNone ? json() : json(finish_reason_text(reason));
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && reason == FinishReason::kNone)) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  json chunk = {{"id", meta.id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", meta.created},
                {"model", meta.model},
                {"system_fingerprint", fingerprint_json(meta)},
                {"choices", json::array({std::move(choice)})}};
  if (request.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

nlohmann::json usage_chunk_json(const CompletionRequest& request, const ResponseMeta& meta, nlohmann::json usage) {
  const bool chat = request.endpoint == Endpoint::kChat;
  return json{{"id", meta.id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"system_fingerprint", fingerprint_json(meta)},
              {"choices", json::array()},
              {"usage", std::move(usage)}};
}

nlohmann::json usage_chunk_json(const CompletionRequest& request, const ResponseMeta& meta, const RequestUsage& usage) {
  return usage_chunk_json(request, meta, usage_json(usage, request, meta.answer_tokens_reused));
}

std::string sse_event(const nlohmann::json& payload) {
  std::string out = "data: ";
  out += payload.dump(-1, ' ', false, json::error_handler_t::replace);
  out += "\n\n";
  return out;
}

}  // namespace hearth::server
