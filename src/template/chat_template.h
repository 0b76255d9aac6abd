#pragma once
// ChatTemplate: renders chat messages into prompt text with a model's Jinja chat template
// (`tokenizer.chat_template` in GGUF), using Hearth's own interpreter for the Jinja subset chat templates use.
//
// Semantics follow HF transformers' apply_chat_template: Jinja with trim_blocks=True and lstrip_blocks=True
// (and Jinja2's defaults: newlines read as "\n", one trailing newline of the source dropped), Python
// truthiness/str()/repr(), Jinja's default Undefined (falsy, prints "", `is defined` false, arithmetic on it fails),
// `tojson` = json.dumps(ensure_ascii=False, indent=...), and the globals raise_exception(msg), strftime_now(fmt) (local
// time from the clock, see set_clock), range(), namespace(), dict().
//
// Supported: {{ }}, {% %}, {# #}, whitespace control (-, +); if/elif/else; for (tuple unpacking, inline `if`
// filter, else, loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem/cycle, break/continue);
// set (names, tuples, namespace attributes, {% set x %}...{% endset %}); macro (positional/keyword args,
// defaults, recursion); {% generation %}; all Python/Jinja operators (+ - * / // % ** ~, comparisons, and/or/not,
// in/not in, x if c else y); literals; attribute/subscript/slice access.
//   Filters: trim length count tojson(indent, sort_keys) string upper lower title capitalize default/d first last
//     join items list replace round int float abs selectattr rejectattr select reject map sort dictsort reverse
//     unique indent safe escape/e wordcount sum min max.
//   Tests: defined undefined none boolean true false integer float number string mapping iterable sequence callable
//     even odd divisibleby eq/equalto/== ne/!= lt gt le ge in lower upper sameas.
//   Methods: str.strip/lstrip/rstrip/split/startswith/endswith/upper/lower/title/capitalize/replace/find/count/join/
//     isdigit/isspace/isalpha/isalnum; dict.items/keys/values/get.
// Tuples (literals, items(), dictsort) print as (a, b) and never equal a list; round() rounds halves to even.
// Checked byte for byte against Jinja2 itself: tests/template/template_jinja2_test.cpp.
// Deliberate differences from Jinja: an attribute or subscript of undefined/none is undefined rather than an
// error; upper/lower/title/capitalize change ASCII letters only; string % formatting is not supported.
// Not supported (parse error naming the construct and its line:col): include/import/extends/block, call blocks,
// filter blocks, with, raw, recursive loops, *args/**kwargs, unknown filters/tests.
//
// Guards: rendering stops with an Error (never hangs or crashes) after 5,000,000 steps, 400 nested levels
// (macro recursion included), or 64 MiB of output; input JSON deeper than 256 levels is rejected.
//
// Thread safety: a ChatTemplate is immutable after parse; render() is const and may run concurrently.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "util/result.h"

namespace hearth {

namespace tmpl {
struct Program;
}

class ChatTemplate {
 public:
  // An empty template whose render() fails; assign one from parse(), from_gguf() or fallback().
  ChatTemplate() = default;

  // The fallback format, used when a model has no template (e.g. stories260K). Plain text, no special tokens
  // (the tokenizer adds BOS as it would for any prompt):
  //   each system message:         "<content>\n\n"
  //   each user/tool/... turn:     "User: <content>\n" (role name capitalized)
  //   each assistant turn:         "Assistant:<content>\n", the content verbatim
  //   add_generation_prompt:        "Assistant:"
  //   with tools:                   "Tools: <name>, <name>\n\n" first (names only: a model without a template is
  //                                 small, its context too), and an assistant turn's tool_calls follow its content
  //                                 as {"name": <name>, "arguments": <arguments>} (server/api/tool_calls.h's kJson)
  // An assistant turn is written the way the model continues the generation prompt: an answer generated after
  // "Assistant:" (usually with its own leading space, " Hi") renders back as exactly that text, so the
  // conversation's next prompt starts with the previous prompt plus the answer's exact text, and the server can
  // reuse the answer's token ids and their cached K/V (see server/cache/answer_memory.h). A hand-written assistant
  // content should therefore start with a space, as a model's answer would.
  // A content that is a list of parts renders the parts' "text" fields joined.
  static constexpr std::string_view kFallbackSource =
      "{%- if tools %}Tools: {% for tool in tools %}{{ tool.function.name }}{% if not loop.last %}, {% endif %}"
      "{%- endfor %}{{ '\\n\\n' }}{% endif %}"
      "{%- for message in messages %}"
      "{%- if message.content is string %}{% set content = message.content %}"
      "{%- elif message.content is iterable and message.content is not mapping %}"
      "{% set content = message.content | map(attribute='text') | join('') %}"
      "{%- else %}{% set content = '' %}{% endif %}"
      "{%- if message.role == 'system' %}{{ content }}{{ '\\n\\n' }}"
      "{%- elif message.role == 'assistant' %}Assistant:{{ content }}"
      "{%- for call in message.tool_calls or [] %}{\"name\": {{ call.function.name | tojson }}, \"arguments\": "
      "{{ call.function.arguments | tojson }}}{% endfor %}{{ '\\n' }}"
      "{%- else %}{{ message.role | capitalize }}: {{ content }}{{ '\\n' }}{% endif %}"
      "{%- endfor %}"
      "{%- if add_generation_prompt %}Assistant:{% endif %}";

  // Parses a template. Fails with "chat template: line:col: <what>" naming the syntax error or unsupported
  // construct.
  [[nodiscard]] static Result<ChatTemplate> parse(std::string_view source);

  // The template of a GGUF (`tokenizer.chat_template`), or fallback() when the file has none or when it fails to
  // read or parse; then `*warning` (if not null) says why, for a startup log line. Otherwise `*warning` is cleared.
  static ChatTemplate from_gguf(const GgufFile& file, std::string* warning);

  static ChatTemplate fallback();

  // Renders. messages: JSON array of {"role", "content", optional "tool_calls", "tool_call_id", "name"};
  // tools: JSON array, or null (then `tools` is none in the template). Context variables: messages, tools,
  // add_generation_prompt, bos_token, eos_token, plus every key of `extra` (an object; it may override the others,
  // e.g. "date_string" for Llama 3.x). Fails with the template's own message when it calls raise_exception
  // (e.g. "Conversation roles must alternate user/assistant/user/assistant/..."), or with
  // "chat template: line:col: <what>" for evaluation errors and exceeded limits.
  // nlohmann::json sorts object keys; pass ordered_json (the overload below) to keep the client's key order in
  // `tojson` output as HF does.
  [[nodiscard]] Result<std::string> render(const nlohmann::json& messages, const nlohmann::json& tools,
                                           bool add_generation_prompt, const std::string& bos_token,
                                           const std::string& eos_token, const nlohmann::json& extra = {}) const;
  [[nodiscard]] Result<std::string> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                           bool add_generation_prompt, const std::string& bos_token,
                                           const std::string& eos_token,
                                           const nlohmann::ordered_json& extra = {}) const;

  bool is_fallback() const { return is_fallback_; }
  const std::string& source() const { return source_; }

  // strftime_now() reads this clock (default: system_clock::now). Tests pin it for deterministic dates.
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  void set_clock(Clock clock) { clock_ = std::move(clock); }

  // Tighter budgets for tests; defaults as documented above.
  struct Limits {
    int64_t max_steps = 5'000'000;
    int max_depth = 400;
    size_t max_output_bytes = 64u << 20;
  };
  void set_limits(const Limits& limits) { limits_ = limits; }

 private:
  template <class Json>
  Result<std::string> render_impl(const Json& messages, const Json& tools, bool add_generation_prompt,
                                  const std::string& bos_token, const std::string& eos_token, const Json& extra) const;

  std::shared_ptr<const tmpl::Program> program_;
  std::string source_;
  bool is_fallback_ = false;
  Clock clock_;
  Limits limits_;
};

}  // namespace hearth
