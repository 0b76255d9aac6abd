#pragma once
// Harmony, gpt-oss's response format. After the generation prompt "<|start|>assistant" the model writes messages,
// each a header, <|message|> and a body:
//   <|channel|>analysis<|message|>Let me think.<|end|>
//   <|start|>assistant<|channel|>final<|message|>The answer.                            (then the stop <|return|>)
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}
//                                                                                        (then the stop <|call|>)
// The recipient may also stand before the channel (" to=functions.f<|channel|>commentary json<|message|>{...}", as
// the template prints a call). The markers are control tokens: the engine renders them as text only for requests
// that ask (RequestSpec::render_special_tokens), which the server does for a harmony model's chat requests.
//
// HarmonyParser routes each message's body by its header (the last " to=" and <|channel|> in it count):
//   to=functions.NAME        a tool call: NAME, and the body as its JSON arguments, kept whole for the end
//   to=assistant             no recipient (a stray "commentary to=assistant" some answers start with)
//   to=anything else         a built-in tool (browser, python) that Hearth does not run: dropped
//   channel analysis         reasoning (reasoning_content, as llama.cpp and vLLM name it)
//   final, commentary, none  content (a commentary message without recipient is a preamble for the user)
// A body ends at <|end|>, <|return|>, <|call|> (all three dropped), <|start|> or <|channel|> (which begin the next
// header). Bodies stream as they arrive, less a tail that may be the start of a marker, and the concatenated
// deltas are the same however the text is cut into pushes. A model that does not speak harmony still reaches the
// client: a header whose <|message|> is not within its first kMaxHeaderBytes is content, and so is an unfinished
// header without <|start|>, <|channel|> or <|constrain|> when the answer ends.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_types.h"
#include "server/api/channel_parser.h"
#include "server/api/completion_request.h"
#include "server/api/tool_calls.h"

namespace hearth::server {

// A call's name is without "functions."; its arguments are the body as the model wrote it.
using HarmonyCall = ChannelCall;
using HarmonyDelta = ChannelDelta;

class HarmonyParser : public ChannelParser {
 public:
  static constexpr size_t kMaxHeaderBytes = 256;

  // Reads the next piece of the answer; returns the content and reasoning that are certain now.
  [[nodiscard]] HarmonyDelta push(std::string_view text) override;
  // The answer has ended: returns what was held back (a partial marker is text after all). Call once.
  [[nodiscard]] HarmonyDelta finish() override;
  // Every call so far, in order; a call's arguments are whole once the next message starts or finish() ran.
  const std::vector<HarmonyCall>& calls() const override { return calls_; }

 private:
  enum class Mode { kHeader, kBody };
  enum class Destination { kContent, kReasoning, kCall, kDrop };
  // Moves what is certain out of buf_; false when it must wait for more text.
  bool step(HarmonyDelta& out);
  void start_body(std::string_view header);
  void emit(std::string_view text, HarmonyDelta& out);

  Mode mode_ = Mode::kHeader;
  Destination destination_ = Destination::kContent;
  std::string buf_;  // text not yet routed
  std::vector<HarmonyCall> calls_;
};

using HarmonyAnswer = ChannelAnswer;

// A whole answer at once: the same as pushing it and finishing.
[[nodiscard]] HarmonyAnswer parse_harmony(std::string_view text);

// The messages for the harmony template: an assistant message's reasoning_content (how OpenAI clients send it
// back) becomes the "thinking" the template reads; with tool calls its content is then dropped, as the template
// refuses both (llama.cpp does the same).
[[nodiscard]] nlohmann::json harmony_template_messages(const nlohmann::json& messages);
// The tools for the harmony template: a function without a description gets an empty one, since the template
// adds it to a string (an error in Jinja for a missing one) and OpenAI's API makes it optional.
[[nodiscard]] nlohmann::json harmony_template_tools(const nlohmann::json& tools);

// The calls of a finished harmony answer (or Gemma 4's: its parser's calls come here too) a client may see: those
// that name one of the request's tools with object arguments (with fresh ids; only the first without
// parallel_tool_calls). Calls to other functions, or with
// arguments that do not parse, are dropped: never content, never a broken tool_calls. None when the request's tools
// are not active or the request was aborted.
[[nodiscard]] std::vector<ToolCall> harmony_tool_calls(const CompletionRequest& request,
                                                       const std::vector<HarmonyCall>& calls, FinishReason reason);

}  // namespace hearth::server
