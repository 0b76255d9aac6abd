#pragma once
// Gemma 4's answers: thinking in a channel, tool calls in its own argument syntax. After the generation prompt
// "<|turn>model\n" (with "<|channel>thought\n<channel|>", an empty thought, when thinking is off) the model writes
//   <|channel>thought\nLet me think.<channel|>                                    reasoning (any channel name)
//   The weather:                                                                  content
//   <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,units:{c:true}}<tool_call|>   a call
// and ends its turn with <turn|> (or, after calls, <|tool_response>): end-of-generation tokens where the vocabulary
// has them (tokenizer.cpp), dropped here when they reach the text anyway.
//
// The argument syntax (the template's format_argument): strings between <|"|> and <|"|> (no escapes: the text is
// taken as it is), objects {key:value,...} with bare keys (or keys quoted with <|"|>), arrays [v,...], JSON numbers,
// true, false, null; spaces around the punctuation are allowed. A call becomes compact JSON arguments with the keys
// in the model's order.
//
// A call is recognized only when it parses whole and names one of `tools`; otherwise its text (markers included)
// is content, never a broken tool_calls. Content and reasoning stream at once, less a tail that may be the start of
// a marker; a call is held until its <tool_call|> (or the answer's end, for a call cut short that parses).

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/channel_parser.h"
#include "server/api/tool_calls.h"

namespace hearth::server {

class Gemma4Parser : public ChannelParser {
 public:
  static constexpr size_t kMaxChannelNameBytes = 32;  // a channel header longer than this is reasoning text

  // Calls are recognized to `tools` only (an OpenAI tools array; null or empty: every call stays text).
  explicit Gemma4Parser(nlohmann::json tools) : tools_(std::move(tools)) {}

  [[nodiscard]] ChannelDelta push(std::string_view text) override;
  [[nodiscard]] ChannelDelta finish() override;
  const std::vector<ChannelCall>& calls() const override { return calls_; }

 private:
  enum class Mode { kText, kChannelName, kReasoning, kCall };
  // Moves what is certain out of buf_; false when it must wait for more text.
  bool step(ChannelDelta& out);
  // A call's text (between the markers) is whole: a call, or content when it is not one.
  void end_call(std::string_view body, bool closed, ChannelDelta& out);

  nlohmann::json tools_;
  Mode mode_ = Mode::kText;
  std::string buf_;
  std::vector<ChannelCall> calls_;
};

// "call:NAME{...}" (surrounding spaces allowed) as a call with JSON arguments, or nullopt when it does not parse.
[[nodiscard]] std::optional<ChannelCall> parse_gemma4_call(std::string_view body);
// One Gemma 4 argument value (the whole of `text`) as compact JSON, or nullopt when it does not parse.
[[nodiscard]] std::optional<std::string> gemma4_value_to_json(std::string_view text);

// For tool_calls.h (a forced call's answer): the calls of a whole answer, or nullopt when it holds none or a
// malformed one. Thinking is left out of the content.
[[nodiscard]] std::optional<ParsedAnswer> parse_gemma4_tool_calls(std::string_view text, const nlohmann::json& tools);

}  // namespace hearth::server
