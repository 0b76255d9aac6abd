#pragma once
// The prompt of a /v1/responses request: the chat rendered and tokenized as on the chat route, or, with
// previous_response_id, the stored conversation's exact ids followed by the rest of the new conversation.
//
// A follow-up's prompt is
//   stored ids (the previous prompt's, then its answer's, as the model generated them)
//   + the ids of follow_up_text: what the chat template writes after the answer (the end of the assistant's turn),
//     the new input items, and the generation prompt
// so nothing the model saw or wrote is tokenized again, and the prefix cache serves the whole previous turn. When the
// request changes what the stored prompt rendered (other instructions, other tools), or the template gives no such
// split, the whole conversation is rendered again (instructions of the request replacing the stored ones, as
// OpenAI's API does) and tokenized as on the chat route (the answer memory still splices remembered answers).

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "server/api/chat.h"
#include "server/api/server_context.h"
#include "server/responses/response_store.h"
#include "server/responses/responses_request.h"

namespace hearth::server {

// The text that follows a stored turn's ids in a follow-up whose new messages are `input` (chat shape): the
// template's end of the answer's turn, the input, the generation prompt. nullopt when the template gives no such
// split (a harmony answer with calls followed by an assistant message, a template that repeats the answer's text).
// Renders with the stored tools and template variables.
[[nodiscard]] std::optional<std::string> follow_up_text(const ChatFormatter& chat, const StoredResponse& stored,
                                                        const nlohmann::json& input);

struct ResponsesPrompt {
  ServerContext::BuiltPrompt built;  // the ids (text and parse_special when the chat was rendered whole)
  nlohmann::json messages;           // the conversation the prompt holds, in the chat shape
  nlohmann::json tools;              // chat-shaped tools it rendered
  nlohmann::json template_kwargs;
  std::optional<std::string> instructions;
  int32_t previous_response_tokens = 0;  // leading ids taken from the stored response
};

// The prompt of `request`, continuing `previous` when set (same tenant: the caller looked it up by salt).
[[nodiscard]] ApiResult<ResponsesPrompt> build_responses_prompt(ServerContext& context, ResponsesRequest& request,
                                                                const StoredResponse* previous);

}  // namespace hearth::server
