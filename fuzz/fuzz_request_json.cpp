// Fuzz target: request bodies as the server parses them (parse_json_body, parse_completion_request for both
// endpoints, parse_tokenize_request, parse_messages_request, Ollama's chat, generate and show), the rendering of whatever parses, its grammar
// (response_format, forced tool calls) and the tool-call parser. Must never crash, hang or recurse past the nesting
// limit; every failure must be an ApiError with a status of 400.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/anthropic/anthropic_json.h"
#include "server/api/tokenize_request.h"
#include "server/http/json_body.h"
#include "server/ollama/ollama_json.h"
#include "server/openai/openai_json.h"

namespace {

using namespace hearth::server;

void check(const ApiError& e) {
  if (e.status != 400 || e.message.empty()) std::abort();
  (void)error_json(e).dump();
}

template <class T>
void check(const ApiResult<T>& result) {
  if (!result) check(result.error());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  if (auto parsed = parse_json_body(body); !parsed) check(api_error(parsed.error()));
  for (Endpoint endpoint : {Endpoint::kChat, Endpoint::kCompletion}) {
    auto request = parse_completion_request(body, endpoint);
    check(request);
    if (request) {
      const CompletionRequest* r = &*request;
      // Everything a response renders from the request must be renderable.
      const ResponseMeta meta{"id", 0, r->model};
      (void)response_json(*r, meta, "text", hearth::FinishReason::kStop, hearth::RequestUsage{})
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      (void)sse_event(chunk_json(*r, meta, "t", true, hearth::FinishReason::kNone));
      if (r->endpoint == Endpoint::kChat)
        (void)r->messages.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      // The grammar of a response_format, and of a forced call, fed the body's own bytes; the body parsed as an
      // answer with tool calls in every format.
      if (r->grammar) {
        hearth::GrammarState state = r->grammar->start();
        for (size_t i = 0; i < body.size() && r->grammar->advance(state, static_cast<uint8_t>(body[i])); ++i) {
        }
        (void)r->grammar->can_end(state);
      }
      for (ToolCallFormat format :
           {ToolCallFormat::kJson, ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral}) {
        if (r->tool_call_forced()) (void)forced_tool_call_grammar(format, r->tools, r->tool_choice_name);
        (void)choice_with_tool_calls(*r, format, std::string(body), hearth::FinishReason::kStop, nullptr);
      }
    }
  }
  check(parse_tokenize_request(body));
  // The Anthropic Messages body: its markers must come out of the text the chat would render, whatever it holds.
  auto messages = parse_messages_request(body, "fuzz");
  check(messages);
  if (messages) {
    MessagesRequest* m = &*messages;
    std::string text;
    for (const auto& message : m->chat.messages) text += message["content"].get<std::string>();
    if (!m->chat.tools.is_null()) text += m->chat.tools.dump();
    // False only when the body itself holds a marker (it knows this nonce; the server draws a random one).
    (void)take_breakpoints(text, m->breakpoints, m->anchor);
    (void)message_json("id", "m", MessagesAnswer{text, {}}, hearth::FinishReason::kStop, "", messages_usage({}, 0))
        .dump();
  }
  // Ollama's bodies, and what their answers render.
  for (bool generate : {false, true}) {
    auto ollama = generate ? parse_ollama_generate(body) : parse_ollama_chat(body);
    check(ollama);
    if (ollama) {
      OllamaFinal f;
      f.text = std::string(body);
      (void)ndjson_line(ollama_chunk_json(*ollama, "t", f.text));
      (void)ndjson_line(ollama_final_json(*ollama, "t", f));
    }
  }
  check(parse_ollama_show(body));
  return 0;
}
