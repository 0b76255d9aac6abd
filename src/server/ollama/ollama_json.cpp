#include "server/ollama/ollama_json.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <memory>

#include "server/api/request_tools.h"
#include "server/http/json_body.h"

namespace hearth::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxStopStrings = 16;  // as the OpenAI route's

ApiError bad(std::string message, std::string param) {
  return invalid_request(std::move(message), std::move(param), "invalid_value");
}

bool present(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

std::optional<ApiError> read_bool(const json& body, const char* key, bool& out) {
  if (!present(body, key)) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_boolean()) return bad(fmt::format("'{}' must be a boolean", key), key);
  out = v.get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const json& body, const char* key, std::string& out) {
  if (!present(body, key)) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_string()) return bad(fmt::format("'{}' must be a string", key), key);
  out = v.get<std::string>();
  return std::nullopt;
}

// A field this server does not implement: refused unless absent, null or `neutral(value)`.
template <class Neutral>
std::optional<ApiError> refuse_unless(const json& body, const char* key, const std::string& param, Neutral neutral,
                                      const char* why) {
  if (!present(body, key) || neutral(body.at(key))) return std::nullopt;
  return invalid_request(fmt::format("'{}' is not supported: {}", param, why), param, "unsupported_parameter");
}

bool is_number_equal(const json& v, double x) {
  return v.is_number() && v.get<double>() == x;
}

bool is_false(const json& v) {
  return v == false;
}

bool is_zero(const json& v) {
  return v == 0;
}

bool never(const json&) {
  return false;
}

bool is_empty_string_or_array(const json& v) {
  return (v.is_string() && v.get<std::string>().empty()) || (v.is_array() && v.empty());
}

// options.* reading: `key` inside `options`, named "options.key" in errors.
struct Options {
  const json& o;
  std::optional<ApiError> number(const char* key, double lo, double hi, float& out) const {
    if (!present(o, key)) return std::nullopt;
    const json& v = o.at(key);
    const std::string param = std::string("options.") + key;
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() <= hi)) {
      return bad(fmt::format("'{}' must be a number in [{}, {}]", param, lo, hi), param);
    }
    out = v.get<float>();
    return std::nullopt;
  }
  std::optional<ApiError> integer(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>& out) const {
    if (!present(o, key)) return std::nullopt;
    const json& v = o.at(key);
    const std::string param = std::string("options.") + key;
    const bool in_range = v.is_number_integer() &&
                          !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) &&
                          v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    if (!in_range) return bad(fmt::format("'{}' must be an integer in [{}, {}]", param, lo, hi), param);
    out = v.get<int64_t>();
    return std::nullopt;
  }
};

// The options the sampler applies.
constexpr const char* kAppliedOptions[] = {"temperature",       "top_k", "top_p",          "seed",
                                           "num_predict",       "stop",  "num_ctx",        "presence_penalty",
                                           "frequency_penalty", "min_p", "repeat_penalty", "repeat_last_n"};
// The engine has no mirostat, tail-free or typical sampling: only their neutral values.
constexpr std::pair<const char*, double> kNeutralOnlyOptions[] = {
    {"mirostat", 0.0}, {"tfs_z", 1.0}, {"typical_p", 1.0}};
// The options Hearth accepts without applying them: they place or size the computation (server-wide settings
// here), or tune a stage that is refused away from its neutral value. Any value of the right kind.
constexpr const char* kNoEffectOptions[] = {"num_thread", "num_gpu",      "main_gpu",     "num_batch",
                                            "numa",       "low_vram",     "f16_kv",       "use_mmap",
                                            "use_mlock",  "vocab_only",   "logits_all",   "embedding_only",
                                            "num_keep",   "mirostat_tau", "mirostat_eta", "penalize_newline"};

std::optional<ApiError> read_options(const json& body, OllamaRequest& r) {
  if (!present(body, "options")) return std::nullopt;
  const json& o = body.at("options");
  if (!o.is_object()) return bad("'options' must be an object", "options");
  for (const auto& [key, value] : o.items()) {
    bool known = false;
    for (const char* k : kAppliedOptions) known |= key == k;
    for (const auto& [k, neutral] : kNeutralOnlyOptions) known |= key == k;
    for (const char* k : kNoEffectOptions) known |= key == k;
    if (!known) {
      return invalid_request(fmt::format("'options.{}' is not an option this server knows", key), "options." + key,
                             "unsupported_parameter");
    }
    if (!value.is_null() && !value.is_number() && !value.is_boolean() && key != "stop") {
      return bad(fmt::format("'options.{}' must be a number or a boolean", key), "options." + key);
    }
  }
  for (const auto& [key, neutral] : kNeutralOnlyOptions) {
    if (present(o, key) && !is_number_equal(o.at(key), neutral)) {
      return invalid_request(
          fmt::format("'options.{}' is not supported: the engine has no such sampler stage (only {} is accepted)", key,
                      neutral),
          std::string("options.") + key, "unsupported_parameter");
    }
  }

  const Options opt{o};
  CompletionRequest& c = r.chat;
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  if (auto e = opt.number("temperature", 0.0, 2.0, c.temperature)) return e;
  if (auto e = opt.number("top_p", 0.0, 1.0, c.top_p)) return e;
  if (c.top_p <= 0.0f) return bad("'options.top_p' must be greater than 0", "options.top_p");
  if (auto e = opt.number("presence_penalty", -2.0, 2.0, c.presence_penalty)) return e;
  if (auto e = opt.number("frequency_penalty", -2.0, 2.0, c.frequency_penalty)) return e;
  if (auto e = opt.number("min_p", 0.0, 1.0, c.min_p)) return e;
  if (auto e = opt.number("repeat_penalty", 0.0, 10.0, c.repeat_penalty)) return e;
  if (c.repeat_penalty <= 0.0f) {
    return bad("'options.repeat_penalty' must be greater than 0 (1 disables it)", "options.repeat_penalty");
  }
  std::optional<int64_t> v;
  // -1: the whole context (num_ctx), as Ollama reads it.
  if (auto e = opt.integer("repeat_last_n", -1, kMaxInt, v)) return e;
  if (v) c.repeat_last_n = static_cast<int32_t>(*v);
  v.reset();
  if (auto e = opt.integer("top_k", 0, kMaxInt, v)) return e;
  if (v) c.top_k = static_cast<int32_t>(*v);
  v.reset();
  // -1: until the context is full (Ollama's "infinite"), -2: fill the context; both are the server's default.
  if (auto e = opt.integer("num_predict", -2, kMaxInt, v)) return e;
  if (v && *v == 0) {
    return bad("'options.num_predict' must be at least 1 (or -1, -2: until the context is full)",
               "options.num_predict");
  }
  if (v && *v > 0) c.max_tokens = static_cast<int32_t>(*v);
  v.reset();
  if (auto e = opt.integer("num_ctx", 1, kMaxInt, v)) return e;
  if (v) r.num_ctx = static_cast<int32_t>(*v);
  if (present(o, "seed")) {
    const json& s = o.at("seed");
    if (!s.is_number_integer()) return bad("'options.seed' must be an integer", "options.seed");
    c.seed = s.is_number_unsigned() ? s.get<uint64_t>() : static_cast<uint64_t>(s.get<int64_t>());
  }
  if (present(o, "stop")) {
    const json& s = o.at("stop");
    if (s.is_string()) {
      if (!s.get<std::string>().empty()) c.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= kMaxStopStrings) {
      for (const json& x : s) {
        if (!x.is_string()) return bad("'options.stop' must be an array of strings", "options.stop");
        if (!x.get<std::string>().empty()) c.stop.push_back(x.get<std::string>());
      }
    } else {
      return bad(fmt::format("'options.stop' must be an array of at most {} strings", kMaxStopStrings), "options.stop");
    }
    if (auto e = check_stop_lengths(c.stop, "options.stop")) return e;
  }
  return std::nullopt;
}

// format: "json" (any JSON object, as Ollama's JSON mode), "" (none) or a JSON schema object.
std::optional<ApiError> read_format(const json& body, CompletionRequest& c) {
  if (!present(body, "format")) return std::nullopt;
  const json& f = body.at("format");
  if (f == "json") {
    c.grammar = std::make_shared<const Grammar>(Grammar::any_json_object());
    return std::nullopt;
  }
  if (f == "") return std::nullopt;
  if (!f.is_object()) return bad("'format' must be \"json\" or a JSON schema object", "format");
  auto grammar = Grammar::from_json_schema(f);
  if (!grammar) return invalid_request("'format': " + grammar.error().message, "format", "unsupported_schema");
  c.grammar = std::make_shared<const Grammar>(std::move(*grammar));
  return std::nullopt;
}

// A Go duration ("1h30m", "300ms", "-5m", "0") or a bare number of seconds ("300", "-1"): milliseconds, or nullopt
// when it does not parse.
std::optional<double> parse_duration_ms(std::string_view s) {
  if (s.empty() || s.size() > 32) return std::nullopt;
  const bool negative = s.front() == '-';
  if (negative || s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  const bool bare = s.find_first_not_of("0123456789.") == std::string_view::npos;
  double total = 0;
  while (!s.empty()) {
    const size_t digits = s.find_first_not_of("0123456789.");
    if (digits == 0) return std::nullopt;
    const std::string number(s.substr(0, digits));
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size()) return std::nullopt;
    s.remove_prefix(std::min(digits, s.size()));
    if (bare) return (negative ? -v : v) * 1000.0;
    static const std::pair<std::string_view, double> kUnits[] = {{"ns", 1e-6}, {"us", 1e-3}, {"ms", 1.0},
                                                                 {"s", 1e3},   {"m", 6e4},   {"h", 3.6e6}};
    bool found = false;
    for (const auto& [unit, scale] : kUnits) {
      if (s.starts_with(unit) && !(unit == "m" && s.starts_with("ms"))) {
        total += v * scale;
        s.remove_prefix(unit.size());
        found = true;
        break;
      }
    }
    if (!found) return std::nullopt;
  }
  return negative ? -total : total;
}

// keep_alive: a duration string or a number of seconds; negative: forever.
std::optional<ApiError> read_keep_alive(const json& body, OllamaRequest& r) {
  if (!present(body, "keep_alive")) return std::nullopt;
  auto ms = ollama_keep_alive_ms(body.at("keep_alive"));
  if (!ms) return bad("'keep_alive' must be a duration (\"5m\", \"1h\", \"-1\") or a number of seconds", "keep_alive");
  r.keep_alive_ms = *ms;
  return std::nullopt;
}

// think: false, true or a level ("low", "medium", "high": a harmony model's reasoning_effort).
std::optional<ApiError> read_think(const json& body, OllamaRequest& r) {
  if (!present(body, "think")) return std::nullopt;
  const json& t = body.at("think");
  if (t.is_boolean()) {
    r.think = t.get<bool>();
    return std::nullopt;
  }
  if (t == "low" || t == "medium" || t == "high") {
    r.think = true;
    r.chat.chat_template_kwargs = {{"reasoning_effort", t}};
    return std::nullopt;
  }
  return bad("'think' must be a boolean or \"low\", \"medium\", \"high\"", "think");
}

// The fields both endpoints share, after the endpoint's own.
std::optional<ApiError> read_common(const json& body, OllamaRequest& r) {
  if (auto e = read_string(body, "model", r.model)) return e;
  if (r.model.empty()) return invalid_request("'model' is required", "model", "missing_required_parameter");
  r.chat.model = strip_latest_tag(r.model);
  r.chat.stream = true;  // Ollama streams unless told not to
  r.chat.temperature = kOllamaDefaultTemperature;
  r.chat.top_k = kOllamaDefaultTopK;
  r.chat.top_p = kOllamaDefaultTopP;
  if (auto e = read_bool(body, "stream", r.chat.stream)) return e;
  if (auto e = read_format(body, r.chat)) return e;
  if (auto e = read_keep_alive(body, r)) return e;
  if (auto e = read_think(body, r)) return e;
  if (auto e = read_options(body, r)) return e;
  if (auto e = read_string(body, "cache_salt", r.chat.cache_salt)) return e;
  if (auto e = read_bool(body, "cache_prompt", r.chat.use_cache)) return e;
  const char* kNoLogprobs = "token logprobs are not implemented on the Ollama routes (the OpenAI routes have them)";
  if (auto e = refuse_unless(body, "logprobs", "logprobs", is_false, kNoLogprobs)) return e;
  if (auto e = refuse_unless(body, "top_logprobs", "top_logprobs", is_zero, kNoLogprobs)) return e;
  return std::nullopt;
}

std::optional<ApiError> check_known_fields(const json& body, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : body.items()) {
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (!ok) {
      return invalid_request(fmt::format("'{}' is not a field of this endpoint", key), key, "unsupported_parameter");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> refuse_images(const json& holder, const std::string& param) {
  return refuse_unless(holder, "images", param, is_empty_string_or_array,
                       "images need a vision model; this server runs text models only");
}

// An assistant's tool_calls in Ollama's shape: [{"function": {"name", "arguments": object}}], given the OpenAI
// shape the templates read ({"type": "function", "function": ...}).
std::optional<ApiError> read_tool_calls(json& message, const std::string& param) {
  if (auto err = normalize_tool_calls(message, param)) return err;
  auto calls = message.find("tool_calls");
  if (calls == message.end()) return std::nullopt;
  for (json& call : *calls) {
    call["type"] = "function";
    json& args = call["function"]["arguments"];
    if (args.is_null()) args = json::object();
    if (!args.is_object()) {
      return bad(fmt::format("'{}.tool_calls[].function.arguments' must be an object", param), param + ".tool_calls");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> read_messages(const json& body, CompletionRequest& c) {
  c.messages = json::array();
  if (!present(body, "messages")) return std::nullopt;  // Ollama: no messages loads the model
  const json& messages = body.at("messages");
  if (!messages.is_array()) return bad("'messages' must be an array", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) return bad(fmt::format("'{}' must be an object", param), param);
    const json role = m.value("role", json());
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return bad(fmt::format("'{}.role' must be system, user, assistant or tool", param), param + ".role");
    }
    const json content = m.value("content", json(""));
    if (!content.is_string() && !content.is_null()) {
      return bad(fmt::format("'{}.content' must be a string", param), param + ".content");
    }
    if (auto e = refuse_images(m, param + ".images")) return e;
    if (auto e = check_known_fields(
            m, {"role", "content", "images", "tool_calls", "tool_name", "tool_call_id", "thinking"})) {
      e->message = param + ": " + e->message;
      e->param = param + "." + e->param;
      return e;
    }
    json normalized = {{"role", role}, {"content", content.is_null() ? json("") : content}};
    if (m.contains("tool_calls")) normalized["tool_calls"] = m["tool_calls"];
    if (auto e = read_tool_calls(normalized, param)) return e;
    if (present(m, "tool_call_id")) {
      if (!m["tool_call_id"].is_string()) return bad(fmt::format("'{}.tool_call_id' must be a string", param), param);
      normalized["tool_call_id"] = m["tool_call_id"];  // OpenAI's name for it, which some templates print
    }
    if (present(m, "tool_name")) {
      if (!m["tool_name"].is_string()) return bad(fmt::format("'{}.tool_name' must be a string", param), param);
      normalized["name"] = m["tool_name"];  // what templates that name a result's tool read
      normalized["tool_name"] = m["tool_name"];
    }
    // An assistant's earlier thinking: a harmony template reads it back (reasoning_content); others drop it.
    if (present(m, "thinking")) {
      if (!m["thinking"].is_string()) return bad(fmt::format("'{}.thinking' must be a string", param), param);
      if (role == "assistant") normalized["reasoning_content"] = m["thinking"];
    }
    c.messages.push_back(std::move(normalized));
  }
  // As Ollama does: a chat that ends with the assistant's text is continued from it.
  if (!c.messages.empty()) {
    const json& last = c.messages.back();
    c.continue_final_message = last["role"] == "assistant" && !last.contains("tool_calls") &&
                               last["content"].is_string() && !last["content"].get_ref<const std::string&>().empty();
  }
  return std::nullopt;
}

}  // namespace

ApiResult<OllamaRequest> validate_ollama_chat(const json& body) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object", {}, "invalid_json");
  if (auto e = check_known_fields(body, {"model", "messages", "stream", "format", "keep_alive", "tools", "think",
                                         "logprobs", "top_logprobs", "options", "cache_salt", "cache_prompt"})) {
    return *e;
  }
  OllamaRequest r;
  r.chat.endpoint = Endpoint::kChat;
  if (auto e = read_messages(body, r.chat)) return *e;
  r.load_only = r.chat.messages.empty();
  if (auto e = parse_tools(body, r.chat)) return *e;
  if (auto e = read_common(body, r)) return *e;
  return r;
}

ApiResult<OllamaRequest> validate_ollama_generate(const json& body) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object", {}, "invalid_json");
  if (auto e = check_known_fields(
          body, {"model", "prompt", "suffix", "system",     "template",   "context",     "stream",
                 "raw",   "format", "images", "keep_alive", "think",      "logprobs",    "top_logprobs",
                 "width", "height", "steps",  "options",    "cache_salt", "cache_prompt"})) {
    return *e;
  }
  OllamaRequest r;
  r.generate = true;
  constexpr const char* kNoTemplate = "the model's own chat template is always used (or none with raw: true)";
  constexpr const char* kNoSuffix = "fill-in-the-middle is not implemented";
  if (auto e = refuse_unless(body, "suffix", "suffix", is_empty_string_or_array, kNoSuffix)) return *e;
  if (auto e = refuse_unless(body, "template", "template", is_empty_string_or_array, kNoTemplate)) return *e;
  if (auto e = refuse_images(body, "images")) return *e;
  for (const char* key : {"width", "height", "steps"}) {
    if (auto e = refuse_unless(body, key, key, never, "image generation is not implemented")) return *e;
  }
  std::string prompt;
  std::string system;
  bool raw = false;
  if (auto e = read_string(body, "prompt", prompt)) return *e;
  if (auto e = read_string(body, "system", system)) return *e;
  if (auto e = read_bool(body, "raw", raw)) return *e;
  if (present(body, "context")) {
    const json& ctx = body.at("context");
    if (!ctx.is_array()) return bad("'context' must be an array of token ids", "context");
    for (const json& t : ctx) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return bad("'context' must be an array of token ids", "context");
      }
      r.context.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  }
  if (raw && !system.empty())
    return bad("'system' cannot be combined with raw: true (no template is applied)", "system");
  r.load_only = prompt.empty() && r.context.empty();
  if (raw) {
    r.chat.endpoint = Endpoint::kCompletion;
    r.chat.prompt_text = std::move(prompt);
  } else {
    r.chat.endpoint = Endpoint::kChat;
    r.chat.messages = json::array();
    if (!system.empty()) r.chat.messages.push_back({{"role", "system"}, {"content", std::move(system)}});
    r.chat.messages.push_back({{"role", "user"}, {"content", std::move(prompt)}});
  }
  if (auto e = read_common(body, r)) return *e;
  return r;
}

ApiResult<OllamaRequest> parse_ollama_chat(std::string_view body) {
  auto parsed = parse_json_body(body);
  if (!parsed) return api_error(parsed.error());
  return validate_ollama_chat(*parsed);
}

ApiResult<OllamaRequest> parse_ollama_generate(std::string_view body) {
  auto parsed = parse_json_body(body);
  if (!parsed) return api_error(parsed.error());
  return validate_ollama_generate(*parsed);
}

ApiResult<std::string> parse_ollama_show(std::string_view body) {
  auto parsed = parse_json_body(body);
  if (!parsed) return api_error(parsed.error());
  const json& b = *parsed;
  if (!b.is_object()) return invalid_request("the request body must be a JSON object", {}, "invalid_json");
  for (const char* key : {"model", "name"}) {
    if (present(b, key)) {
      if (!b.at(key).is_string()) return bad(fmt::format("'{}' must be a string", key), key);
      return b.at(key).get<std::string>();
    }
  }
  return invalid_request("'model' is required", "model", "missing_required_parameter");
}

std::optional<int64_t> ollama_keep_alive_ms(const json& value) {
  std::optional<double> ms;
  if (value.is_number()) ms = value.get<double>() * 1000.0;
  if (value.is_string()) ms = parse_duration_ms(value.get<std::string>());
  if (!ms || std::isnan(*ms)) return std::nullopt;
  if (*ms < 0 || *ms > kMaxKeepAliveMs) return kKeepAliveForever;
  return static_cast<int64_t>(*ms);
}

std::string ollama_model_name(const std::string& id) {
  return id.find(':') == std::string::npos ? id + ":latest" : id;
}

std::string strip_latest_tag(const std::string& name) {
  constexpr std::string_view kLatest = ":latest";
  return name.ends_with(kLatest) ? name.substr(0, name.size() - kLatest.size()) : name;
}

std::string ollama_timestamp_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ns % 1'000'000'000);
}

json ollama_stats_json(const RequestUsage& u) {
  const auto ns = [](double ms) { return static_cast<int64_t>(ms * 1e6); };
  const double eval_ms = std::max(0.0, u.total_ms - u.ttft_ms);
  return json{{"total_duration", ns(u.total_ms)},
              {"load_duration", 0},
              {"prompt_eval_count", std::max(0, u.prompt_tokens - u.cached_tokens)},
              {"prompt_eval_duration", ns(u.prefill_ms)},
              {"eval_count", u.completion_tokens},
              {"eval_duration", ns(eval_ms)},
              {"hearth", {{"prompt_tokens", u.prompt_tokens}, {"cached_tokens", u.cached_tokens}}}};
}

const char* ollama_done_reason(FinishReason reason) {
  return finish_reason_text(reason);
}

json ollama_tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& call : calls) {
    json args = json::parse(call.arguments, nullptr, false);
    if (!args.is_object()) args = json::object();
    out.push_back({{"function", {{"name", call.name}, {"arguments", std::move(args)}}}});
  }
  return out;
}

json ollama_chunk_json(const OllamaRequest& request, const std::string& created_at, const std::string& text,
                       const std::string& thinking) {
  json chunk = {{"model", request.model}, {"created_at", created_at}};
  if (request.generate) {
    chunk["response"] = text;
    if (!thinking.empty()) chunk["thinking"] = thinking;
  } else {
    chunk["message"] = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) chunk["message"]["thinking"] = thinking;
  }
  chunk["done"] = false;
  return chunk;
}

json ollama_final_json(const OllamaRequest& request, const std::string& created_at, const OllamaFinal& f) {
  json out = ollama_chunk_json(request, created_at, f.text, f.thinking);
  if (!request.generate && !f.calls.empty()) out["message"]["tool_calls"] = ollama_tool_calls_json(f.calls);
  out["done"] = true;
  out["done_reason"] = ollama_done_reason(f.reason);
  if (request.generate) out["context"] = f.context;
  out.update(ollama_stats_json(f.usage));
  return out;
}

std::string ndjson_line(const json& payload) {
  std::string out = payload.dump(-1, ' ', false, json::error_handler_t::replace);
  out += '\n';
  return out;
}

json ollama_error_json(const ApiError& error) {
  return json{{"error", error.message}};
}

namespace {

// "260.8K", "20.9B": the parameter count as Ollama's parameter_size reads.
std::string parameter_size(uint64_t n) {
  static constexpr const char* kUnits[] = {"", "K", "M", "B", "T"};
  double v = static_cast<double>(n);
  size_t unit = 0;
  while (v >= 1000.0 && unit + 1 < std::size(kUnits)) {
    v /= 1000.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{}", n) : fmt::format("{:.1f}{}", v, kUnits[unit]);
}

json details_json(const ModelListing& m) {
  json families = m.architecture.empty() ? json::array() : json::array({m.architecture});
  return json{{"parent_model", ""},
              {"format", "gguf"},
              {"family", m.architecture},
              {"families", std::move(families)},
              {"parameter_size", m.num_params ? parameter_size(m.num_params) : std::string()},
              {"quantization_level", m.file_type}};
}

std::string rfc3339(std::time_t secs) {
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec);
}

std::string expires_at(double in_s) {
  if (in_s < 0) return "2318-01-01T00:00:00Z";  // never: far in the future, as Ollama writes keep_alive -1
  const auto t = std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(in_s * 1000));
  return rfc3339(std::chrono::system_clock::to_time_t(t));
}

}  // namespace

json ollama_tag_json(const OllamaModelFacts& m) {
  const std::string name = ollama_model_name(m.id);
  return json{{"name", name},
              {"model", name},
              {"modified_at", rfc3339(static_cast<std::time_t>(m.listing.modified_unix_s))},
              {"size", m.size_bytes},
              {"digest", m.listing.digest},
              {"details", details_json(m.listing)}};
}

json ollama_ps_json(const OllamaModelFacts& m) {
  json entry = ollama_tag_json(m);
  entry.erase("modified_at");
  entry["expires_at"] = expires_at(m.expires_in_s);
  entry["size_vram"] = 0;
  entry["context_length"] = m.n_ctx;
  return entry;
}

json ollama_show_json(const OllamaModelFacts& m, const std::string& template_description, bool tools) {
  json capabilities = json::array();
  if (m.completion) capabilities.push_back("completion");
  if (m.completion && tools) capabilities.push_back("tools");
  // Ollama's model_info keys: general.* and the architecture's own ("llama.context_length").
  json info = {{"general.context_length", m.n_ctx},
               {"general.parameter_count", m.listing.num_params},
               {"hearth.model_id", m.id}};
  if (!m.listing.architecture.empty()) {
    info["general.architecture"] = m.listing.architecture;
    info[m.listing.architecture + ".context_length"] = m.n_ctx;
  }
  if (m.embedding) capabilities.push_back("embedding");
  return json{{"modelfile", ""},
              {"parameters", fmt::format("temperature {}\ntop_k {}\ntop_p {}", kOllamaDefaultTemperature,
                                         kOllamaDefaultTopK, kOllamaDefaultTopP)},
              {"template", template_description},
              {"details", details_json(m.listing)},
              {"model_info", std::move(info)},
              {"capabilities", std::move(capabilities)},
              {"modified_at", rfc3339(static_cast<std::time_t>(m.listing.modified_unix_s))}};
}

}  // namespace hearth::server
