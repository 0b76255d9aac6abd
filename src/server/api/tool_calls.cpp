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
