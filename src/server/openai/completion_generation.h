#pragma once
// CompletionGeneration (included by completions.cpp and completion_generation.cpp only): the Generation
// (api/generation.h) of /v1/chat/completions and /v1/completions, whose response is an SSE stream, or one JSON
// object once every choice has ended. Each of the request's n choices is its own engine request
// with its own handle; they share the prompt's KV through the prefix cache. The engine's facts (token ids, usage)
// arrive with each choice's final output; nothing here copies them. If the client leaves, every choice is aborted
// and the Generation keeps itself alive until the engine's final outputs have been recorded.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api/generation.h"
#include "server/api/harmony.h"
#include "server/openai/openai_json.h"

namespace hearth::server {

class CompletionGeneration : public Generation, public std::enable_shared_from_this<CompletionGeneration> {
 public:
  // Requires at least one handle (choice i is handles[i]).
  CompletionGeneration(ServerContext& context, CompletionRequest request, ResponseMeta meta,
                       std::vector<std::unique_ptr<RequestHandle>> handles);

  // For the answer memory (choice 0's answer): the prompt as text and how it was tokenized.
  bool remember = false;
  bool parse_special = false;
  std::string prompt_text;

  void start(std::function<void()> wake) override;
  Chunk pull() override;
  void cancel() override;
  std::string keep_alive() override { return ": keep-alive\n\n"; }

 private:
  struct Choice {
    std::unique_ptr<RequestHandle> handle;
    std::string text;                     // the whole answer so far (non-streaming)
    std::vector<TokenLogprobs> logprobs;  // of every token so far (non-streaming, with logprobs asked)
    int64_t text_offset = 0;              // completions logprobs: where the next token's text starts
    bool first_chunk = true;
    std::optional<RequestUsage> usage;  // set when its final output arrived
    FinishReason finish_reason = FinishReason::kNone;
    std::optional<ToolCallStream> tools;  // streaming with tools: holds back what may be a call
    std::unique_ptr<ChannelParser> channels;  // harmony or Gemma 4 chat answer (completion_generation_harmony.cpp)
  };
  // Choice i's news as channel deltas (reasoning_content, content), and at its end its tool calls.
  std::string stream_harmony(size_t i, const RequestOutput& out);
  // Choice i's whole answer through its channel parser.
  ChoiceResult harmony_result(Choice& c);
  // A streamed choice with tools has ended: its calls as tool_calls deltas, or what was held back as content.
  std::string stream_tool_calls(size_t i, const RequestOutput& out);
  // A finished choice: the answer memory and the metrics (from the final output, whoever reads it).
  void record_finish(RequestOutput& out, size_t choice);

  // Reads choice i's news into `chunk` (stream events, or the answer so far); false once the response failed.
  bool read_choice(size_t i, Chunk& chunk);
  std::string stream_events(size_t i, const RequestOutput& out);
  // A choice the engine refused or ended: the error response (or event and [DONE]); the other choices are aborted.
  void fail(size_t i, const RequestOutput& out, Chunk& chunk);
  // Every choice has ended: the usage chunk and [DONE], or the whole response.
  void complete(Chunk& chunk);
  bool all_finished() const;
  nlohmann::json usage() const;
  // The choice's logprobs object for `logprobs` (null when the request asked for none).
  nlohmann::json logprobs_json(Choice& choice, std::span<const TokenLogprobs> logprobs);
  void drain_after_cancel();

  CompletionRequest request_;
  ResponseMeta meta_;
  std::vector<Choice> choices_;
  bool head_sent_ = false;
  bool done_ = false;  // the response is complete (or failed, or the client left)
};

}  // namespace hearth::server
