#pragma once
// A harmony answer (api/harmony.h) or a Gemma 4 one (api/gemma4_answer.h) for Anthropic's Messages route: the content
// as its text (the analysis has no place there, the route has no extended thinking) and the calls harmony_tool_calls
// keeps, with "toolu_" ids.

#include <string>
#include <string_view>
#include <vector>

#include "server/anthropic/anthropic_json.h"
#include "server/api/harmony.h"

namespace hearth::server {

// From the whole answer, or (the streamed form) from calls already parsed.
[[nodiscard]] MessagesAnswer harmony_messages_answer(const CompletionRequest& chat, ChannelParser& parser,
                                                     std::string_view text, FinishReason reason);
[[nodiscard]] MessagesAnswer harmony_messages_answer(const CompletionRequest& chat, std::string content,
                                                     const std::vector<HarmonyCall>& calls, FinishReason reason);

}  // namespace hearth::server
