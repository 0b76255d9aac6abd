// Tool calls in responses: a choice's answer parsed into tool_calls, and their streamed deltas (openai_json.h).

#include "server/openai/openai_json.h"

namespace hearth::server {
namespace {

using nlohmann::json;

json fingerprint_json(const ResponseMeta& meta) {
  return meta.system_fingerprint.empty() ? json() : json(meta.system_fingerprint);
}

}  // namespace

ChoiceResult choice_with_tool_calls(const CompletionRequest& request, ToolCallFormat format, std::string text,
                                    FinishReason reason, nlohmann::json logprobs) {
  ChoiceResult result{std::move(text), reason, std::move(logprobs), {}};
  if (!request.tools_active() || reason == FinishReason::kAborted) return result;
  auto parsed = parse_answer_calls(format, result.text, request.tools,
                                   request.tool_call_forced() && reason == FinishReason::kLength);
  if (!parsed) return result;
  if (!request.parallel_tool_calls) parsed->calls.resize(1);
  for (ToolCall& call : parsed->calls) call.id = new_tool_call_id(format);
  result.text = std::move(parsed->content);
  result.tool_calls = std::move(parsed->calls);
  return result;
}

namespace {

json tool_delta_chunk(const CompletionRequest& request, const ResponseMeta& meta, json delta, int32_t index,
                      json finish_reason) {
  json chunk = {{"id", meta.id},
                {"object", "chat.completion.chunk"},
                {"created", meta.created},
                {"model", meta.model},
                {"system_fingerprint", fingerprint_json(meta)},
                {"choices", json::array({json{{"index", index},
                                              {"delta", std::move(delta)},
                                              {"logprobs", nullptr},
                                              {"finish_reason", std::move(finish_reason)}}})}};
  if (request.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

}  // namespace

std::vector<nlohmann::json> tool_call_chunks_json(const CompletionRequest& request, const ResponseMeta& meta,
                                                  const std::vector<ToolCall>& calls, bool first, int32_t index) {
  std::vector<json> chunks;
  for (size_t k = 0; k < calls.size(); ++k) {
    json head = {{"index", k},
                 {"id", calls[k].id},
                 {"type", "function"},
                 {"function", {{"name", calls[k].name}, {"arguments", ""}}}};
    json delta = {{"tool_calls", json::array({std::move(head)})}};
    if (first && k == 0) {
      delta["role"] = "assistant";
      delta["content"] = nullptr;
    }
    chunks.push_back(tool_delta_chunk(request, meta, std::move(delta), index, nullptr));
    json args = {{"index", k}, {"function", {{"arguments", calls[k].arguments}}}};
    chunks.push_back(tool_delta_chunk(request, meta, {{"tool_calls", json::array({std::move(args)})}}, index, nullptr));
  }
  return chunks;
}

nlohmann::json tool_calls_finish_chunk_json(const CompletionRequest& request, const ResponseMeta& meta, int32_t index,
                                            bool cut_short) {
  return tool_delta_chunk(request, meta, json::object(), index, cut_short ? "length" : "tool_calls");
}

}  // namespace hearth::server
