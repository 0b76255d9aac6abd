#pragma once
// A harmony answer (api/harmony.h) in OpenAI's chat shapes: the finished choice and the streamed chunk.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/api/harmony.h"
#include "server/openai/openai_json.h"

namespace hearth::server {

// A finished chat choice of a harmony answer: content, reasoning (message.reasoning_content) and the calls
// harmony_tool_calls keeps.
[[nodiscard]] ChoiceResult harmony_choice(const CompletionRequest& request, std::string content, std::string reasoning,
                                          const std::vector<HarmonyCall>& calls, FinishReason reason,
                                          nlohmann::json logprobs);

// A streamed chat chunk with a harmony delta: delta.reasoning_content and/or delta.content (chunk_json otherwise).
[[nodiscard]] nlohmann::json harmony_chunk_json(const CompletionRequest& request, const ResponseMeta& meta,
                                                const HarmonyDelta& delta, bool first, const nlohmann::json& logprobs,
                                                int32_t index);

}  // namespace hearth::server
