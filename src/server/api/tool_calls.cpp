#include "server/api/tool_calls.h"

#include <fmt/format.h>

#include "server/api/gemma4_answer.h"

#include <random>

namespace hearth::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kGemma4Open = "<|tool_call>";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool has_tool(const json& tools, const std::string& name) {
  if (!tools.is_array()) return false;
  for (const json& t : tools) {
    const json* f = t.contains("function") ? &t["function"] : nullptr;
    if (f && f->is_object() && f->value("name", json()) == name) return true;
  }
  return false;
}

// {"name": ..., "arguments"|"parameters": {...}} naming one of `tools`; arguments absent means {}.
std::optional<ToolCall> read_call(const ordered_json& v, const json& tools) {
  if (!v.is_object()) return std::nullopt;
  auto name = v.find("name");
  if (name == v.end() || !name->is_string() || !has_tool(tools, name->get<std::string>())) return std::nullopt;
  ordered_json args = ordered_json::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (auto a = v.find(key); a != v.end()) {
      args = *a;
      break;
    }
  }
  if (args.is_string()) args = ordered_json::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return std::nullopt;
  return ToolCall{{}, name->get<std::string>(), args.dump()};
}

ordered_json parse_json(std::string_view text) {
  return ordered_json::parse(text.begin(), text.end(), nullptr, false);
}

// One object or an array of them: every element must be a call.
std::optional<std::vector<ToolCall>> read_calls(const ordered_json& v, const json& tools) {
  std::vector<ToolCall> calls;
  if (v.is_array()) {
    if (v.empty()) return std::nullopt;
    for (const ordered_json& x : v) {
      auto call = read_call(x, tools);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  auto call = read_call(v, tools);
  if (!call) return std::nullopt;
  calls.push_back(std::move(*call));
  return calls;
}

std::optional<ParsedAnswer> parse_hermes(std::string_view text, const json& tools) {
  const size_t first = text.find(kHermesOpen);
  if (first == std::string_view::npos) return std::nullopt;
  ParsedAnswer out;
  std::string content(trim(text.substr(0, first)));
  size_t at = first;
  while (at != std::string_view::npos) {
    const size_t body = at + kHermesOpen.size();
    size_t close = text.find(kHermesClose, body);
    const std::string_view inner = trim(text.substr(body, close == std::string_view::npos ? close : close - body));
    auto call = read_call(parse_json(inner), tools);
    if (!call) return std::nullopt;
    out.calls.push_back(std::move(*call));
    if (close == std::string_view::npos) break;  // the answer ended inside the block (a stop or EOS)
    const size_t next = text.find(kHermesOpen, close);
    const std::string_view between = trim(text.substr(close + kHermesClose.size(), next - close - kHermesClose.size()));
    if (!between.empty()) {
      if (!content.empty()) content.push_back('\n');
      content.append(between);
    }
    at = next;
  }
  out.content = std::move(content);
  return out;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view source) {
  if (source.find("<|tool_call>call:") != std::string_view::npos) return ToolCallFormat::kGemma4;
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolCallFormat::kHermes;
  if (source.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::kMistral;
  if (source.find("<|start_header_id|>") != std::string_view::npos &&
      source.find("\"parameters\"") != std::string_view::npos) {
    return ToolCallFormat::kLlama3;
  }
  return ToolCallFormat::kJson;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kJson:
      return "json";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3:
      return "llama3";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kGemma4:
      return "gemma4";
  }
  return "json";
}

std::optional<ParsedAnswer> parse_tool_calls(ToolCallFormat format, std::string_view text, const json& tools) {
  if (format == ToolCallFormat::kHermes) return parse_hermes(text, tools);
  if (format == ToolCallFormat::kGemma4) return parse_gemma4_tool_calls(text, tools);
  std::string_view body = trim(text);
  if (format == ToolCallFormat::kMistral && body.starts_with("[TOOL_CALLS]")) body = trim(body.substr(12));
  const char open = format == ToolCallFormat::kMistral ? '[' : '{';
  if (body.empty() || (body[0] != open && !(format == ToolCallFormat::kJson && body[0] == '['))) return std::nullopt;
  auto calls = read_calls(parse_json(body), tools);
  if (!calls) return std::nullopt;
  return ParsedAnswer{{}, std::move(*calls)};
}

namespace {

// After `key` (a quoted JSON key) at or after `from`: the position past the ':' and the whitespace around it.
std::optional<size_t> value_after(std::string_view text, std::string_view key, size_t from) {
  const size_t at = text.find(key, from);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t colon = text.find_first_not_of(" \t\r\n", at + key.size());
  if (colon == std::string_view::npos || text[colon] != ':') return std::nullopt;
  const size_t value = text.find_first_not_of(" \t\r\n", colon + 1);
  if (value == std::string_view::npos) return std::nullopt;
  return value;
}

// The JSON string at text[at], when it is whole; `end` is set past its closing quote.
std::optional<std::string> whole_string(std::string_view text, size_t at, size_t& end) {
  if (at >= text.size() || text[at] != '"') return std::nullopt;
  for (size_t i = at + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      const json s = json::parse(text.substr(at, i + 1 - at), nullptr, false);
      if (!s.is_string()) return std::nullopt;
      end = i + 1;
      return s.get<std::string>();
    }
  }
  return std::nullopt;
}

// The length of the JSON object `text` starts with, when it is closed; 0 otherwise.
size_t whole_object_size(std::string_view text) {
  if (text.empty() || text[0] != '{') return 0;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return 0;
}

// The JSON formats (the grammar writes the name first): the name once whole, the arguments' text so far.
std::optional<ToolCall> truncated_json_call(std::string_view text, const json& tools) {
  const auto name_at = value_after(text, "\"name\"", 0);
  size_t end = 0;
  const auto name = name_at ? whole_string(text, *name_at, end) : std::nullopt;
  if (!name || !has_tool(tools, *name)) return std::nullopt;
  ToolCall call{{}, *name, {}, /*whole=*/false};
  for (std::string_view key : {"\"arguments\"", "\"parameters\""}) {
    if (auto args = value_after(text, key, end)) {
      call.arguments = std::string(trim(text.substr(*args)));
      break;
    }
  }
  // Only the closing markup is missing: the arguments are whole, and so is the call.
  if (const size_t n = whole_object_size(call.arguments); n > 0) {
    const ordered_json args = parse_json(std::string_view(call.arguments).substr(0, n));
    if (args.is_object()) return ToolCall{{}, *name, args.dump()};
  }
  return call;
}

// Gemma 4: the name once the '{' after it came; its arguments are not JSON, so none are kept.
std::optional<ToolCall> truncated_gemma4_call(std::string_view text, const json& tools) {
  constexpr std::string_view kCall = "call:";
  const size_t open = text.find(kGemma4Open);
  if (open == std::string_view::npos || text.substr(open + kGemma4Open.size(), kCall.size()) != kCall) {
    return std::nullopt;
  }
  const size_t name_at = open + kGemma4Open.size() + kCall.size();
  const size_t brace = text.find('{', name_at);
  if (brace == std::string_view::npos) return std::nullopt;
  std::string name(text.substr(name_at, brace - name_at));
  if (!has_tool(tools, name)) return std::nullopt;
  return ToolCall{{}, std::move(name), {}, /*whole=*/false};
}

}  // namespace

std::optional<ParsedAnswer> parse_answer_calls(ToolCallFormat format, std::string_view text, const json& tools,
                                               bool forced_call_cut_short) {
  auto parsed = parse_tool_calls(format, text, tools);
  if (parsed || !forced_call_cut_short) return parsed;
  ParsedAnswer cut;  // no content: what was written is the call's beginning, never text
  auto call = format == ToolCallFormat::kGemma4 ? truncated_gemma4_call(text, tools) : truncated_json_call(text, tools);
  if (call) cut.calls.push_back(std::move(*call));
  return cut;
}

std::string new_tool_call_id(ToolCallFormat format) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  constexpr std::string_view kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const size_t n = format == ToolCallFormat::kMistral ? 9 : 24;
  std::string id = format == ToolCallFormat::kMistral ? "" : "call_";
  for (size_t i = 0; i < n; ++i) id += kAlnum[rng() % kAlnum.size()];
  return id;
}

Result<Grammar> forced_tool_call_grammar(ToolCallFormat format, const json& tools, const std::string& only) {
  std::vector<Grammar::Branch> branches;
  for (const json& t : tools) {
    const json& f = t["function"];
    const std::string name = f["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const std::string quoted = json(name).dump();
    json parameters = f.value("parameters", json());
    if (parameters.is_null()) parameters = json{{"type", "object"}, {"additionalProperties", false}};
    Grammar::Branch b;
    switch (format) {
      case ToolCallFormat::kHermes:
        b = {fmt::format("<tool_call>\n{{\"name\": {}, \"arguments\": ", quoted), parameters, "}\n</tool_call>"};
        break;
      case ToolCallFormat::kLlama3:
        b = {fmt::format("{{\"name\": {}, \"parameters\": ", quoted), parameters, "}"};
        break;
      case ToolCallFormat::kMistral:
        b = {fmt::format("[{{\"name\": {}, \"arguments\": ", quoted), parameters, "}]"};
        break;
      case ToolCallFormat::kJson:
        b = {fmt::format("{{\"name\": {}, \"arguments\": ", quoted), parameters, "}"};
        break;
      case ToolCallFormat::kGemma4:
        if (name.empty() || name.find_first_of(" \t\r\n<>:,\"{") != std::string::npos) {
          return make_error("tool name {} cannot be written in Gemma 4's call syntax", quoted);
        }
        b = {fmt::format("<|tool_call>call:{}", name), parameters, "<tool_call|>"};
        break;
    }
    branches.push_back(std::move(b));
    if (branches.size() > kMaxGrammarAlternatives) {
      return make_error("a forced tool call chooses among at most {} tools", kMaxGrammarAlternatives);
    }
  }
  if (branches.empty()) return make_error("no tool is named \"{}\"", only);
  return Grammar::branches(branches, format == ToolCallFormat::kGemma4 ? GrammarSyntax::kGemma4 : GrammarSyntax::kJson);
}

std::string ToolCallStream::push(std::string_view text) {
  if (content_) return std::string(text);
  held_ += text;
  if (holding_) return {};
  if (format_ == ToolCallFormat::kHermes || format_ == ToolCallFormat::kGemma4) {
    // Content until a call's opening marker starts; hold its possible beginning.
    const std::string_view marker = format_ == ToolCallFormat::kHermes ? kHermesOpen : kGemma4Open;
    const size_t open = held_.find(marker);
    if (open != std::string::npos) {
      holding_ = true;
      std::string out = held_.substr(0, open);
      held_.erase(0, open);
      return out;
    }
    size_t keep = 0;
    for (size_t n = std::min(held_.size(), marker.size() - 1); n > 0; --n) {
      if (std::string_view(held_).substr(held_.size() - n) == marker.substr(0, n)) {
        keep = n;
        break;
      }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  // The other formats: a call is the whole answer, so the first non-space byte decides.
  const std::string_view t = trim(held_);
  if (t.empty()) return {};
  const bool may_call = t[0] == '{' || t[0] == '[';
  if (may_call) {
    holding_ = true;
    return {};
  }
  content_ = true;
  return std::exchange(held_, {});
}

}  // namespace hearth::server
