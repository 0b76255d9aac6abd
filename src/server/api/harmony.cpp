#include "server/api/harmony.h"

#include <algorithm>
#include <array>

namespace hearth::server {
namespace {

using nlohmann::json;

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kStart = "<|start|>";
// What ends a body. The first three are dropped; <|start|> and <|channel|> begin the next header.
constexpr std::array<std::string_view, 5> kBodyEnds = {"<|end|>", "<|return|>", "<|call|>", kStart, kChannel};
constexpr std::string_view kFunctions = "functions.";
constexpr std::array<std::string_view, 3> kHeaderMarkers = {kStart, kChannel, "<|constrain|>"};

struct Header {
  std::string_view channel;
  std::string_view recipient;
};

// The word after the last `marker` in `header`: up to a space, a '<' or the end.
std::string_view word_after_last(std::string_view header, std::string_view marker) {
  const size_t at = header.rfind(marker);
  if (at == std::string_view::npos) return {};
  const std::string_view rest = header.substr(at + marker.size());
  return rest.substr(0, rest.find_first_of(" <"));
}

Header parse_header(std::string_view header) {
  return Header{word_after_last(header, kChannel), word_after_last(header, " to=")};
}

// Length of the longest suffix of `text` that is a proper prefix of a body end: it may be a marker cut in two.
size_t partial_end_length(std::string_view text) {
  size_t keep = 0;
  for (const std::string_view end : kBodyEnds) {
    for (size_t n = std::min(end.size() - 1, text.size()); n > keep; --n) {
      if (text.substr(text.size() - n) == end.substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool names_tool(const json& tools, std::string_view name) {
  for (const json& t : tools) {
    const json* f = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
    if (f && f->is_object() && f->contains("name") && (*f)["name"] == name) return true;
  }
  return false;
}

}  // namespace

HarmonyDelta HarmonyParser::push(std::string_view text) {
  buf_.append(text);
  HarmonyDelta out;
  while (step(out)) {
  }
  return out;
}

HarmonyDelta HarmonyParser::finish() {
  HarmonyDelta out;
  // An unfinished header without a header's markers is plain text from a model that does not speak harmony; one
  // with them is a message cut short before its body.
  const bool cut_header = std::any_of(kHeaderMarkers.begin(), kHeaderMarkers.end(),
                                      [&](std::string_view m) { return buf_.find(m) != std::string::npos; });
  if (mode_ == Mode::kBody || !cut_header) emit(buf_, out);
  buf_.clear();
  return out;
}

bool HarmonyParser::step(HarmonyDelta& out) {
  if (mode_ == Mode::kHeader) {
    // Looked for only within the first kMaxHeaderBytes, so that the result never depends on how the text came in.
    const size_t at = buf_.find(kMessage);
    if (at != std::string::npos && at <= kMaxHeaderBytes) {
      start_body(std::string_view(buf_).substr(0, at));
      buf_.erase(0, at + kMessage.size());
      return true;
    }
    if (buf_.size() < kMaxHeaderBytes + kMessage.size()) return false;
    destination_ = Destination::kContent;  // not harmony: the text is the answer
    mode_ = Mode::kBody;
    return true;
  }
  size_t end_at = std::string::npos;
  std::string_view end;
  for (const std::string_view e : kBodyEnds) {
    const size_t at = buf_.find(e);
    if (at < end_at) end_at = at, end = e;
  }
  if (end_at == std::string::npos) {
    const size_t ready = buf_.size() - partial_end_length(buf_);
    emit(std::string_view(buf_).substr(0, ready), out);
    buf_.erase(0, ready);
    return false;
  }
  emit(std::string_view(buf_).substr(0, end_at), out);
  const bool begins_header = end == kStart || end == kChannel;
  buf_.erase(0, begins_header ? end_at : end_at + end.size());
  mode_ = Mode::kHeader;
  return true;
}

void HarmonyParser::start_body(std::string_view header_text) {
  mode_ = Mode::kBody;
  const Header header = parse_header(header_text);
  if (!header.recipient.empty() && header.recipient != "assistant") {
    if (!header.recipient.starts_with(kFunctions)) {
      destination_ = Destination::kDrop;
      return;
    }
    destination_ = Destination::kCall;
    calls_.push_back(HarmonyCall{std::string(header.recipient.substr(kFunctions.size())), {}});
    return;
  }
  destination_ = header.channel == "analysis" ? Destination::kReasoning : Destination::kContent;
}

void HarmonyParser::emit(std::string_view text, HarmonyDelta& out) {
  switch (destination_) {
    case Destination::kContent:
      out.content.append(text);
      break;
    case Destination::kReasoning:
      out.reasoning.append(text);
      break;
    case Destination::kCall:
      calls_.back().arguments.append(text);
      break;
    case Destination::kDrop:
      break;
  }
}

HarmonyAnswer parse_harmony(std::string_view text) {
  HarmonyParser parser;
  return parse_channels(parser, text);
}

json harmony_template_messages(const json& messages) {
  json out = messages;
  for (json& m : out) {
    if (!m.is_object() || m.value("role", json()) != "assistant") continue;
    auto reasoning = m.find("reasoning_content");
    if (reasoning == m.end() || !reasoning->is_string()) continue;
    m["thinking"] = *reasoning;
    auto calls = m.find("tool_calls");
    if (calls != m.end() && calls->is_array() && !calls->empty()) m.erase("content");
  }
  return out;
}

json harmony_template_tools(const json& tools) {
  if (!tools.is_array()) return tools;
  json out = tools;
  for (json& t : out) {
    json* f = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
    if (f && f->is_object() && !f->contains("description")) (*f)["description"] = "";
  }
  return out;
}

std::vector<ToolCall> harmony_tool_calls(const CompletionRequest& request, const std::vector<HarmonyCall>& calls,
                                         FinishReason reason) {
  std::vector<ToolCall> out;
  if (!request.tools_active() || reason == FinishReason::kAborted) return out;
  for (const HarmonyCall& call : calls) {
    if (!names_tool(request.tools, call.name)) continue;
    const std::string_view body = trim(call.arguments);
    nlohmann::ordered_json args = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
    if (!args.is_object()) continue;
    out.push_back(ToolCall{new_tool_call_id(ToolCallFormat::kJson), call.name, args.dump()});
    if (!request.parallel_tool_calls) break;
  }
  return out;
}

}  // namespace hearth::server
