// CompletionGeneration for the chat answers of a harmony model (api/harmony.h) or Gemma 4 (api/gemma4_answer.h):
// each choice's text goes through its ChannelParser, streamed as reasoning_content and content deltas, and its tool
// calls are sent at its end.

#include "server/openai/completion_generation.h"
#include "server/openai/harmony_json.h"

namespace hearth::server {

std::string CompletionGeneration::stream_harmony(size_t i, const RequestOutput& out) {
  Choice& c = choices_[i];
  const auto index = static_cast<int32_t>(i);
  std::string events;
  const HarmonyDelta delta = c.channels->push(out.new_text);
  if (!delta.empty() || !out.logprobs.empty() || (c.first_chunk && !out.finished)) {
    events +=
        sse_event(harmony_chunk_json(request_, meta_, delta, c.first_chunk, logprobs_json(c, out.logprobs), index));
    c.first_chunk = false;
  }
  if (!out.finished) return events;
  const HarmonyDelta rest = c.channels->finish();
  if (!rest.empty()) {
    events += sse_event(harmony_chunk_json(request_, meta_, rest, c.first_chunk, nullptr, index));
    c.first_chunk = false;
  }
  const ChoiceResult result = harmony_choice(request_, {}, {}, c.channels->calls(), out.finish_reason, nullptr);
  if (result.tool_calls.empty()) {
    events += sse_event(chunk_json(request_, meta_, "", c.first_chunk, out.finish_reason, nullptr, index));
    return events;
  }
  for (const nlohmann::json& chunk : tool_call_chunks_json(request_, meta_, result.tool_calls, c.first_chunk, index)) {
    events += sse_event(chunk);
  }
  c.first_chunk = false;
  events += sse_event(tool_calls_finish_chunk_json(request_, meta_, index));
  return events;
}

ChoiceResult CompletionGeneration::harmony_result(Choice& c) {
  HarmonyDelta all = c.channels->push(c.text);
  const HarmonyDelta rest = c.channels->finish();
  return harmony_choice(request_, all.content + rest.content, all.reasoning + rest.reasoning, c.channels->calls(),
                        c.finish_reason, logprobs_json(c, c.logprobs));
}

}  // namespace hearth::server
