#pragma once
// ChatFormatter: turns OpenAI chat messages into the prompt text the model expects, with the chat template
// stored in the GGUF (tokenizer.chat_template, read by ChatTemplate::from_gguf and rendered by hearth_template's
// Jinja subset). A model without a template, or with one the interpreter cannot run, gets the documented fallback
// format (see ChatTemplate), and the reason is reported once at startup.
// Fallback format (ChatTemplate::kFallbackSource): system contents then "\n\n"; "User: ...\n" per user turn,
// "Assistant:...\n" (the content verbatim, as the model continued "Assistant:") per answer; then "Assistant:".

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "server/api/tool_calls.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace hearth::server {

// A chat whose last message, the assistant's, is continued rather than answered (render_continued).
struct ContinuedChat {
  std::string text;    // the prompt: the chat up to the end of the final assistant message's content
  std::string primer;  // the answer so far as the model wrote it, for a channel parser (may be empty)
};

class ChatFormatter {
 public:
  // Renders with `chat_template` (the model's, or the fallback) and the tokenizer's BOS and EOS texts.
  [[nodiscard]] static std::unique_ptr<ChatFormatter> create(ChatTemplate chat_template, const Tokenizer& tokenizer);
  virtual ~ChatFormatter() = default;

  // Renders `messages` (normalized: every content is a string) and `tools` (null or an array) with the
  // generation prompt for the assistant's turn. Fails with a message for the client (e.g. a template's
  // raise_exception on an unsupported role order).
  // `extra` (null or an object) adds template variables, e.g. {"enable_thinking": false}.
  [[nodiscard]] virtual Result<std::string> render(const nlohmann::json& messages, const nlohmann::json& tools,
                                                   const nlohmann::json& extra = {}) const = 0;
  // Continues the final assistant message (Anthropic's prefill, Ollama's, OpenAI's continue_final_message): the
  // text stops where that message's content ends, with no end of turn, so the answer goes on from it. `primer` is
  // the text from where the chat without that message, with its generation prompt, stops matching (e.g. harmony's
  // "<|channel|>final<|message|>" and the content), so a channel parser reads the continuation in the right
  // channel. The caller has checked that the last message
  // is the assistant's, with text and no tool calls. Fails when the template does not print that text.
  [[nodiscard]] virtual Result<ContinuedChat> render_continued(const nlohmann::json& messages,
                                                               const nlohmann::json& tools,
                                                               const nlohmann::json& extra = {}) const = 0;
  // The tool-call format the template speaks (tool_calls.h); kJson for the fallback format.
  [[nodiscard]] virtual ToolCallFormat tool_call_format() const = 0;
  // The model answers in harmony (gpt-oss: a template that writes <|channel|>, and a vocabulary with <|channel|>
  // and <|message|> tokens): its chat answers are parsed into content, reasoning and tool calls (harmony.h), and
  // render() passes an assistant message's reasoning_content to the template as its "thinking".
  [[nodiscard]] virtual bool harmony() const { return false; }
  // "gguf template", "fallback", ...: for the startup log.
  [[nodiscard]] virtual std::string describe() const = 0;
};

}  // namespace hearth::server
