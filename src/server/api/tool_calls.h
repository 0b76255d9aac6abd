#pragma once
// Tool calls in a chat template's own format: which format a template speaks, the grammar that forces one valid
// call (tool_choice "required" or a named function), the parser that turns a model's answer into OpenAI
// tool_calls, and the stream filter that holds back text that may be a call.
//
// Formats (detected from the template source, detect_tool_call_format):
//   kHermes   Qwen 2.5/3, Hermes 2 Pro: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one block per
//             call, anywhere in the answer (the text before the first block is the message content)
//   kLlama3   Llama 3.1/3.2/3.3: the whole answer is {"name": "f", "parameters": {...}} (<|python_tag|> is a
//             control token: it never reaches the text)
//   kMistral  Mistral Nemo and friends: [TOOL_CALLS] (a control token) then [{"name": "f", "arguments": {...}}, ...]
//   kGemma4   Gemma 4: <|tool_call>call:f{key:<|"|>text<|"|>,n:3}<tool_call|>, anywhere in the answer, after any
//             thinking (<|channel>thought\n...<channel|>); gemma4_answer.h has the syntax and the parser
//   kJson     every other template and the fallback format: the whole answer is {"name": "f", "arguments": {...}}
//             (or an array of them)
// A call is recognized only when every part parses, names a function in `tools` and has object arguments;
// otherwise the answer is plain text, never a broken tool_calls.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "util/result.h"

namespace hearth::server {

enum class ToolCallFormat { kJson, kHermes, kLlama3, kMistral, kGemma4 };

[[nodiscard]] ToolCallFormat detect_tool_call_format(std::string_view template_source);
[[nodiscard]] const char* tool_call_format_name(ToolCallFormat format);

struct ToolCall {
  std::string id;  // "call_..." (Mistral: 9 alphanumerics, as its template requires)
  std::string name;
  std::string arguments;  // compact JSON text of an object, in the model's key order
  // false: a forced call the length limit cut short (parse_answer_calls); `arguments` is the text written so far
  // (not valid JSON; empty for Gemma 4, whose arguments are not JSON), and the finish reason stays "length".
  bool whole = true;
};

struct ParsedAnswer {
  std::string content;  // text outside the calls, trimmed (empty: none)
  std::vector<ToolCall> calls;
};

// The calls in `text` (ids left empty), or nullopt when it holds none or a malformed one.
[[nodiscard]] std::optional<ParsedAnswer> parse_tool_calls(ToolCallFormat format, std::string_view text,
                                                           const nlohmann::json& tools);

// What the routes report for an answer with tools: parse_tool_calls, except that a forced call (tool_choice required
// or a named function) cut short by the length limit (`forced_call_cut_short`) is that call as far as it got, one
// that is not `whole`, once its name is whole, and no content either way: the markup is never sent as text.
[[nodiscard]] std::optional<ParsedAnswer> parse_answer_calls(ToolCallFormat format, std::string_view text,
                                                             const nlohmann::json& tools, bool forced_call_cut_short);

// A fresh call id for `format`.
[[nodiscard]] std::string new_tool_call_id(ToolCallFormat format);

// The grammar of exactly one call in `format` to one of `tools` (or to `only`, when set), whose arguments follow
// the function's parameters schema. Fails naming the tool and keyword the grammar does not support.
[[nodiscard]] Result<Grammar> forced_tool_call_grammar(ToolCallFormat format, const nlohmann::json& tools,
                                                       const std::string& only);

// Streaming: lets content through at once and holds back, from the first place a call may start, everything
// after it (all of it when `forced`), so a call is sent as tool_calls deltas at the end, never as content.
class ToolCallStream {
 public:
  ToolCallStream(ToolCallFormat format, bool forced) : format_(format), holding_(forced) {}
  // Returns the part of `text` that is content for sure.
  [[nodiscard]] std::string push(std::string_view text);
  // What is held back (parse it at the end; send it as content if it holds no call).
  [[nodiscard]] const std::string& held() const { return held_; }

 private:
  ToolCallFormat format_;
  bool holding_;          // a call may have started: hold everything
  bool content_ = false;  // no call can start any more: let everything through
  std::string held_;
};

}  // namespace hearth::server
