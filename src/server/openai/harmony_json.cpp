#include "server/openai/harmony_json.h"

namespace hearth::server {

using json = nlohmann::json;

ChoiceResult harmony_choice(const CompletionRequest& request, std::string content, std::string reasoning,
                            const std::vector<HarmonyCall>& calls, FinishReason reason, json logprobs) {
  ChoiceResult result{std::move(content), reason, std::move(logprobs), {}, std::move(reasoning)};
  result.tool_calls = harmony_tool_calls(request, calls, reason);
  return result;
}

json harmony_chunk_json(const CompletionRequest& request, const ResponseMeta& meta, const HarmonyDelta& delta,
                        bool first, const json& logprobs, int32_t index) {
  json chunk = chunk_json(request, meta, delta.content, first, FinishReason::kNone, logprobs, index);
  if (delta.reasoning.empty()) return chunk;
  json& d = chunk["choices"][0]["delta"];
  if (delta.content.empty()) d.erase("content");
  d["reasoning_content"] = delta.reasoning;
  return chunk;
}

}  // namespace hearth::server
