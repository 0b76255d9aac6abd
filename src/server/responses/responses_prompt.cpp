#include "server/responses/responses_prompt.h"

#include "server/responses/responses_json.h"

namespace hearth::server {

using nlohmann::json;

std::optional<std::string> follow_up_text(const ChatFormatter& chat, const StoredResponse& stored, const json& input) {
  if (!stored.messages.is_array() || stored.messages.empty()) return std::nullopt;
  json messages = stored.messages;
  json& answer = messages.back();
  const bool calls = answer.contains("tool_calls");
  if (chat.harmony() && calls) {
    // A harmony call ends at <|call|> (the stop the engine dropped); the template ends the turn with it too.
    for (const json& m : input) {
      if (m.value("role", json()) == "assistant") return std::nullopt;
    }
    for (const json& m : input) messages.push_back(m);
    auto text = chat.render(messages, stored.tools, stored.template_kwargs);
    if (!text) return std::nullopt;
    const size_t at = text->rfind("<|call|>");
    if (at == std::string::npos) return std::nullopt;
    return text->substr(at);
  }
  // The answer's end is marked in its content; with calls, the content is the model's own text (the calls as it
  // wrote them, which its ids hold), so the template adds nothing of its own for them.
  const std::string mark = new_item_id("[[hearth-answer-end-") + "]]";
  if (calls) answer = {{"role", "assistant"}, {"content", stored.answer_text}};
  answer["content"] = answer.value("content", std::string()) + mark;
  for (const json& m : input) messages.push_back(m);
  auto text = chat.render(messages, stored.tools, stored.template_kwargs);
  if (!text) return std::nullopt;
  const size_t at = text->find(mark);
  if (at == std::string::npos || text->find(mark, at + 1) != std::string::npos) return std::nullopt;
  return text->substr(at + mark.size());
}

namespace {

bool empty_tools(const json& tools) {
  return !tools.is_array() || tools.empty();
}

// The stored conversation with the request's instructions in place of the stored ones.
json conversation(const StoredResponse& previous, const ResponsesRequest& request) {
  json messages = json::array();
  const bool replace = request.instructions && request.instructions != previous.instructions;
  if (replace) messages.push_back({{"role", "system"}, {"content", *request.instructions}});
  for (size_t i = 0; i < previous.messages.size(); ++i) {
    if (replace && i == 0 && previous.instructions) continue;  // the stored instructions lead the messages
    messages.push_back(previous.messages[i]);
  }
  for (const json& m : request.input_messages) messages.push_back(m);
  return messages;
}

ApiResult<ResponsesPrompt> render_whole(ServerContext& context, ResponsesRequest& request) {
  ResponsesPrompt p;
  auto rendered = context.render_chat(request.chat);
  if (!rendered) return rendered.error();
  p.built = std::move(*rendered);
  context.tokenize_prompt(request.chat, p.built);
  p.messages = request.chat.messages;
  p.tools = request.chat.tools;
  p.template_kwargs = request.chat.chat_template_kwargs;
  p.instructions = request.instructions;
  return p;
}

}  // namespace

ApiResult<ResponsesPrompt> build_responses_prompt(ServerContext& context, ResponsesRequest& request,
                                                  const StoredResponse* previous) {
  if (previous == nullptr) return render_whole(context, request);
  const bool same_prefix =
      (!request.instructions || request.instructions == previous->instructions) &&
      (empty_tools(request.chat.tools) || request.chat.tools == previous->tools) &&
      (request.chat.chat_template_kwargs.is_null() || request.chat.chat_template_kwargs == previous->template_kwargs);
  std::optional<std::string> rest;
  if (same_prefix) rest = follow_up_text(context.chat(), *previous, request.input_messages);
  if (!rest) {
    request.chat.messages = conversation(*previous, request);
    return render_whole(context, request);
  }
  const Tokenizer& tokenizer = context.tokenizer();
  ResponsesPrompt p;
  p.built.tokens = previous->tokens;
  p.previous_response_tokens = static_cast<int32_t>(previous->tokens.size());
  // After a control token the rest starts a new text, as it would in the whole rendered prompt.
  const bool after_control = !p.built.tokens.empty() && tokenizer.is_control(p.built.tokens.back());
  const std::vector<TokenId> tail =
      after_control ? tokenizer.encode(*rest, /*add_special=*/false, true) : tokenizer.encode_continuation(*rest, true);
  p.built.tokens.insert(p.built.tokens.end(), tail.begin(), tail.end());
  p.messages = previous->messages;
  for (const json& m : request.input_messages) p.messages.push_back(m);
  p.tools = previous->tools;
  p.template_kwargs = previous->template_kwargs;
  p.instructions = previous->instructions;
  return p;
}

}  // namespace hearth::server
