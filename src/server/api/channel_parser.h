#pragma once
// ChannelParser: a chat answer read as it streams, in a format that sets reasoning and tool calls apart from the
// content with markers of its own (harmony.h for gpt-oss, gemma4_answer.h for Gemma 4). The routes hold one per
// answer (ServerContext::channel_parser) and send what push() and finish() return as content and reasoning
// deltas (reasoning_content on /v1/chat/completions, thinking on /api/chat), and the calls at the end.
// Contract of every parser: the concatenated deltas, and the calls, are the same however the text is cut into
// pushes.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::server {

struct ChannelCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments (harmony: as the model wrote them; checked at the end)
};

struct ChannelDelta {
  std::string content;
  std::string reasoning;
  bool empty() const { return content.empty() && reasoning.empty(); }
};

class ChannelParser {
 public:
  virtual ~ChannelParser() = default;
  // Reads the next piece of the answer; returns the content and reasoning that are certain now.
  [[nodiscard]] virtual ChannelDelta push(std::string_view text) = 0;
  // The answer has ended: returns what was held back. Call once.
  [[nodiscard]] virtual ChannelDelta finish() = 0;
  // Every call so far, in order (whole once finish() ran).
  [[nodiscard]] virtual const std::vector<ChannelCall>& calls() const = 0;
};

struct ChannelAnswer {
  std::string content;
  std::string reasoning;
  std::vector<ChannelCall> calls;
};

// A whole answer at once: push it and finish.
[[nodiscard]] inline ChannelAnswer parse_channels(ChannelParser& parser, std::string_view text) {
  ChannelDelta all = parser.push(text);
  ChannelDelta rest = parser.finish();
  return ChannelAnswer{all.content + rest.content, all.reasoning + rest.reasoning, parser.calls()};
}

}  // namespace hearth::server
