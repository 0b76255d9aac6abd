#include "server/anthropic/harmony_messages.h"

namespace hearth::server {

MessagesAnswer harmony_messages_answer(const CompletionRequest& chat, std::string content,
                                       const std::vector<HarmonyCall>& calls, FinishReason reason) {
  std::vector<ToolCall> tool_calls = harmony_tool_calls(chat, calls, reason);
  for (ToolCall& call : tool_calls) call.id = "toolu_" + call.id.substr(std::string_view("call_").size());
  return MessagesAnswer{std::move(content), std::move(tool_calls)};
}

MessagesAnswer harmony_messages_answer(const CompletionRequest& chat, ChannelParser& parser, std::string_view text,
                                       FinishReason reason) {
  ChannelAnswer answer = parse_channels(parser, text);
  return harmony_messages_answer(chat, std::move(answer.content), answer.calls, reason);
}

}  // namespace hearth::server
