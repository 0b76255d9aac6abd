// Fuzz target: the chat template interpreter (src/template). Input: template source, then optionally a NUL byte
// and a JSON messages array (a fixed conversation when absent or not an array). Parse errors and render errors
// are fine; crashes, hangs and unbounded memory are not. Limits are tighter than the server's so each input
// stays fast.

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "template/chat_template.h"

namespace {

using nlohmann::ordered_json;

const ordered_json& default_messages() {
  static const ordered_json messages = ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": " Hello", "tool_calls": [{"type": "function",
      "function": {"name": "f", "arguments": {"x": 1}}}]},
    {"role": "tool", "content": "42", "tool_call_id": "c1"},
    {"role": "user", "content": [{"type": "text", "text": "again"}]}])");
  return messages;
}

const ordered_json& default_tools() {
  static const ordered_json tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "description": "d",
           "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}])");
  return tools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  auto tmpl = hearth::ChatTemplate::parse(source);
  if (!tmpl) return 0;
  tmpl->set_limits({/*max_steps=*/200'000, /*max_depth=*/400, /*max_output_bytes=*/1u << 20});
  tmpl->set_clock([] { return std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000)); });
  ordered_json messages = default_messages();
  if (nul != std::string_view::npos) {
    // Bounded depth: the server never hands the template anything deeper (server/http/json_body.h).
    auto parsed = ordered_json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_array()) messages = std::move(parsed);
  }
  for (bool add_generation_prompt : {false, true}) {
    (void)tmpl->render(messages, default_tools(), add_generation_prompt, "<s>", "</s>");
    (void)tmpl->render(messages, ordered_json(), add_generation_prompt, "", "");
  }
  return 0;
}
