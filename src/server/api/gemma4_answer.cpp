#include "server/api/gemma4_answer.h"

#include <array>

namespace hearth::server {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kChannelOpen = "<|channel>";
constexpr std::string_view kChannelClose = "<channel|>";
constexpr std::string_view kCallOpen = "<|tool_call>";
constexpr std::string_view kCallClose = "<tool_call|>";
constexpr std::string_view kQuote = "<|\"|>";
// In text: the markers that start a channel or a call, and the ends of a turn (dropped when they reach the text).
constexpr std::array<std::string_view, 4> kTextMarkers = {kChannelOpen, kCallOpen, "<|tool_response>", "<turn|>"};
constexpr int kMaxArgumentDepth = 32;

// Length of the longest suffix of `text` that is a proper prefix of one of `markers`.
template <size_t N>
size_t partial_marker_length(std::string_view text, const std::array<std::string_view, N>& markers) {
  size_t keep = 0;
  for (const std::string_view m : markers) {
    for (size_t n = std::min(m.size() - 1, text.size()); n > keep; --n) {
      if (text.substr(text.size() - n) == m.substr(0, n)) {
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

bool names_tool(const nlohmann::json& tools, std::string_view name) {
  if (!tools.is_array()) return false;
  for (const nlohmann::json& t : tools) {
    const nlohmann::json* f = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
    if (f && f->is_object() && f->contains("name") && (*f)["name"] == name) return true;
  }
  return false;
}

// Recursive descent over Gemma 4's argument syntax; every read_* advances at_ past what it read or fails.
class ArgumentReader {
 public:
  explicit ArgumentReader(std::string_view text) : text_(text) {}

  std::optional<ordered_json> read_whole() {
    auto v = read_value(0);
    skip_spaces();
    if (!v || at_ != text_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip_spaces() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }
  bool eat(std::string_view s) {
    if (text_.substr(at_).starts_with(s)) {
      at_ += s.size();
      return true;
    }
    return false;
  }

  std::optional<ordered_json> read_value(int depth) {
    if (depth > kMaxArgumentDepth) return std::nullopt;
    skip_spaces();
    if (at_ >= text_.size()) return std::nullopt;
    if (text_.substr(at_).starts_with(kQuote)) {
      auto s = read_string();
      if (!s) return std::nullopt;
      return ordered_json(std::move(*s));
    }
    if (text_[at_] == '{') return read_object(depth);
    if (text_[at_] == '[') return read_array(depth);
    return read_scalar();
  }

  std::optional<std::string> read_string() {
    if (!eat(kQuote)) return std::nullopt;
    const size_t end = text_.find(kQuote, at_);
    if (end == std::string_view::npos) return std::nullopt;
    std::string s(text_.substr(at_, end - at_));
    at_ = end + kQuote.size();
    return s;
  }

  // A bare key: up to the ':' (spaces around it trimmed), without the characters that would make it ambiguous.
  std::optional<std::string> read_key() {
    skip_spaces();
    if (text_.substr(at_).starts_with(kQuote)) return read_string();
    const size_t colon = text_.find(':', at_);
    if (colon == std::string_view::npos) return std::nullopt;
    const std::string_view key = trim(text_.substr(at_, colon - at_));
    if (key.empty() || key.find_first_of("{}[],<\"") != std::string_view::npos) return std::nullopt;
    at_ = colon;
    return std::string(key);
  }

  std::optional<ordered_json> read_object(int depth) {
    ++at_;  // '{'
    ordered_json out = ordered_json::object();
    skip_spaces();
    if (eat("}")) return out;
    while (true) {
      auto key = read_key();
      skip_spaces();
      if (!key || !eat(":") || out.contains(*key)) return std::nullopt;
      auto value = read_value(depth + 1);
      if (!value) return std::nullopt;
      out[*key] = std::move(*value);
      skip_spaces();
      if (eat("}")) return out;
      if (!eat(",")) return std::nullopt;
    }
  }

  std::optional<ordered_json> read_array(int depth) {
    ++at_;  // '['
    ordered_json out = ordered_json::array();
    skip_spaces();
    if (eat("]")) return out;
    while (true) {
      auto value = read_value(depth + 1);
      if (!value) return std::nullopt;
      out.push_back(std::move(*value));
      skip_spaces();
      if (eat("]")) return out;
      if (!eat(",")) return std::nullopt;
    }
  }

  // true, false, null or a JSON number, up to the next delimiter.
  std::optional<ordered_json> read_scalar() {
    const size_t end = text_.find_first_of(",}] \t\r\n", at_);
    const std::string_view word = text_.substr(at_, end == std::string_view::npos ? end : end - at_);
    if (word.empty()) return std::nullopt;
    ordered_json v = ordered_json::parse(word.begin(), word.end(), nullptr, false);
    if (!(v.is_number() || v.is_boolean() || v.is_null()) || v.is_discarded()) return std::nullopt;
    at_ += word.size();
    return v;
  }

  std::string_view text_;
  size_t at_ = 0;
};

// Where a call's <tool_call|> is: the first one outside its <|"|> strings (a string may hold the marker's text);
// npos while it has not come, or a string is still open.
size_t find_call_close(std::string_view text) {
  size_t at = 0;
  while (true) {
    const size_t quote = text.find(kQuote, at);
    const size_t close = text.find(kCallClose, at);
    if (close < quote) return close;
    if (quote == std::string_view::npos) return std::string_view::npos;
    const size_t end = text.find(kQuote, quote + kQuote.size());
    if (end == std::string_view::npos) return std::string_view::npos;
    at = end + kQuote.size();
  }
}

}  // namespace

std::optional<std::string> gemma4_value_to_json(std::string_view text) {
  auto v = ArgumentReader(text).read_whole();
  if (!v) return std::nullopt;
  return v->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::optional<ChannelCall> parse_gemma4_call(std::string_view body) {
  body = trim(body);
  if (!body.starts_with("call:")) return std::nullopt;
  body.remove_prefix(5);
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  const std::string_view name = body.substr(0, brace);
  if (name.empty() || name.find_first_of(" \t\r\n<>:,\"") != std::string_view::npos) return std::nullopt;
  const std::string_view args_text = body.substr(brace);
  auto args = ArgumentReader(args_text).read_whole();
  if (!args || !args->is_object()) return std::nullopt;
  return ChannelCall{std::string(name), args->dump(-1, ' ', false, ordered_json::error_handler_t::replace)};
}

ChannelDelta Gemma4Parser::push(std::string_view text) {
  buf_.append(text);
  ChannelDelta out;
  while (step(out)) {
  }
  return out;
}

ChannelDelta Gemma4Parser::finish() {
  ChannelDelta out;
  switch (mode_) {
    case Mode::kText:
      out.content.append(buf_);
      break;
    case Mode::kChannelName:
    case Mode::kReasoning:
      out.reasoning.append(buf_);
      break;
    case Mode::kCall:
      end_call(buf_, false, out);
      break;
  }
  buf_.clear();
  mode_ = Mode::kText;
  return out;
}

bool Gemma4Parser::step(ChannelDelta& out) {
  switch (mode_) {
    case Mode::kText: {
      size_t at = std::string::npos;
      std::string_view marker;
      for (const std::string_view m : kTextMarkers) {
        const size_t found = buf_.find(m);
        if (found < at) at = found, marker = m;
      }
      if (at == std::string::npos) {
        const size_t ready = buf_.size() - partial_marker_length(buf_, kTextMarkers);
        out.content.append(buf_, 0, ready);
        buf_.erase(0, ready);
        return false;
      }
      out.content.append(buf_, 0, at);
      buf_.erase(0, at + marker.size());
      if (marker == kChannelOpen) mode_ = Mode::kChannelName;
      if (marker == kCallOpen) mode_ = Mode::kCall;
      return true;
    }
    case Mode::kChannelName: {
      // The channel's name ends at its line; a channel closed on the same line is empty.
      const size_t newline = buf_.find('\n');
      const size_t close = buf_.find(kChannelClose);
      if (close <= kMaxChannelNameBytes && close < newline) {
        buf_.erase(0, close + kChannelClose.size());
        mode_ = Mode::kText;
        return true;
      }
      if (newline != std::string::npos && newline <= kMaxChannelNameBytes) {
        buf_.erase(0, newline + 1);
        mode_ = Mode::kReasoning;
        return true;
      }
      // Decided by the first kMaxChannelNameBytes + the marker's bytes only, so the cut of the pushes never matters.
      if (buf_.size() < kMaxChannelNameBytes + kChannelClose.size()) return false;
      mode_ = Mode::kReasoning;  // no name: all of it is the thought
      return true;
    }
    case Mode::kReasoning: {
      const size_t close = buf_.find(kChannelClose);
      if (close == std::string::npos) {
        const size_t ready = buf_.size() - partial_marker_length(buf_, std::array{kChannelClose});
        out.reasoning.append(buf_, 0, ready);
        buf_.erase(0, ready);
        return false;
      }
      out.reasoning.append(buf_, 0, close);
      buf_.erase(0, close + kChannelClose.size());
      mode_ = Mode::kText;
      return true;
    }
    case Mode::kCall: {
      const size_t close = find_call_close(buf_);
      if (close == std::string::npos) return false;
      end_call(std::string_view(buf_).substr(0, close), true, out);
      buf_.erase(0, close + kCallClose.size());
      mode_ = Mode::kText;
      return true;
    }
  }
  return false;
}

void Gemma4Parser::end_call(std::string_view body, bool closed, ChannelDelta& out) {
  std::optional<ChannelCall> call = parse_gemma4_call(body);
  if (call && names_tool(tools_, call->name)) {
    calls_.push_back(std::move(*call));
    return;
  }
  out.content.append(kCallOpen);
  out.content.append(body);
  if (closed) out.content.append(kCallClose);
}

std::optional<ParsedAnswer> parse_gemma4_tool_calls(std::string_view text, const nlohmann::json& tools) {
  Gemma4Parser parser(tools);
  ChannelAnswer answer = parse_channels(parser, text);
  if (answer.calls.empty() || answer.content.find(kCallOpen) != std::string::npos) return std::nullopt;
  ParsedAnswer out;
  out.content = std::string(trim(answer.content));
  for (ChannelCall& c : answer.calls) out.calls.push_back(ToolCall{{}, std::move(c.name), std::move(c.arguments)});
  return out;
}

}  // namespace hearth::server
