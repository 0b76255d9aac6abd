#include "server/responses/responses_generation.h"

#include "server/openai/openai_json.h"

namespace hearth::server {

using nlohmann::json;

ResponsesGeneration::ResponsesGeneration(ServerContext& context, std::shared_ptr<ResponseStore> store,
                                         ResponsesRequest request, ResponseHead head, ResponsesPrompt prompt,
                                         std::unique_ptr<RequestHandle> handle)
    : Generation(context, request.chat.stream),
      store_(std::move(store)),
      request_(std::move(request)),
      head_(std::move(head)),
      prompt_(std::move(prompt)),
      handle_(std::move(handle)),
      format_(context.chat().tool_call_format()) {
  channels_ = context.channel_parser(request_.chat);
  if (!channels_ && request_.chat.tools_active()) tools_.emplace(format_, request_.chat.tool_call_forced());
}

ResponseSource::Chunk ResponsesGeneration::pull() {
  Chunk chunk;
  std::string events;  // the stream's; a whole response reads the output items at the end instead
  if (!head_sent_) {
    head_sent_ = true;
    if (request_.chat.stream) chunk.head = sse_head();
    output_.start(response_object(head_, "in_progress", json::array(), nullptr), events);
  }
  while (!done_) {
    std::optional<RequestOutput> out = handle_->try_next();
    if (!out) break;
    if (out->error || out->runtime_error) {
      fail(*out, chunk, events);
      break;
    }
    read(*out, events);
    if (out->finished) finish(*out, chunk, events);
  }
  if (request_.chat.stream) chunk.data = std::move(events);
  chunk.done = done_;
  return chunk;
}

void ResponsesGeneration::read(const RequestOutput& out, std::string& events) {
  if (channels_) {
    const ChannelDelta delta = channels_->push(out.new_text);
    reasoning_ += delta.reasoning;
    text_ += delta.content;
    output_.reasoning(delta.reasoning, events);
    output_.text(delta.content, events);
    return;
  }
  const std::string text = tools_ ? tools_->push(out.new_text) : out.new_text;
  text_ += text;
  output_.text(text, events);
}

void ResponsesGeneration::finish(const RequestOutput& out, Chunk& chunk, std::string& events) {
  done_ = true;
  record(out);
  if (channels_) {
    const ChannelDelta delta = channels_->finish();
    reasoning_ += delta.reasoning;
    text_ += delta.content;
    output_.reasoning(delta.reasoning, events);
    output_.text(delta.content, events);
    calls_ = harmony_tool_calls(request_.chat, channels_->calls(), out.finish_reason);
  } else if (tools_) {
    ChoiceResult held = choice_with_tool_calls(request_.chat, format_, tools_->held(), out.finish_reason, nullptr);
    text_ += held.text;
    output_.text(held.text, events);
    calls_ = std::move(held.tool_calls);
  }
  for (const ToolCall& call : calls_) output_.call(call, events);
  const std::string_view status = response_status(out.finish_reason);
  output_.finish(status, events);
  ResponsesUsage usage{out.usage, prompt_.built.answer_tokens, prompt_.previous_response_tokens, 0};
  if (!reasoning_.empty()) {
    const auto n = static_cast<int32_t>(context_.tokenizer().encode(reasoning_, false, false).size());
    usage.reasoning_tokens = std::min(n, out.usage.completion_tokens);
  }
  json response = response_object(head_, status, output_.items(), responses_usage_json(usage, request_.chat));
  if (request_.store) keep(out, response);
  if (!request_.chat.stream) {
    chunk.head = ServerContext::json_response(response);
    return;
  }
  output_.end(response, events);
}

void ResponsesGeneration::keep(const RequestOutput& out, const json& response) {
  StoredResponse stored;
  stored.id = head_.id;
  stored.cache_salt = request_.chat.cache_salt;
  stored.response = response;
  json answer = {{"role", "assistant"}, {"content", text_}};
  if (!reasoning_.empty()) answer["reasoning_content"] = reasoning_;
  for (const ToolCall& call : calls_) {
    json arguments = json::parse(call.arguments, nullptr, false);
    if (!arguments.is_object()) arguments = json::object();
    answer["tool_calls"].push_back(
        {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", arguments}}}});
  }
  stored.messages = prompt_.messages;
  stored.messages.push_back(std::move(answer));
  stored.tools = prompt_.tools;
  stored.template_kwargs = prompt_.template_kwargs;
  stored.instructions = prompt_.instructions;
  stored.tokens = out.tokens;
  const Tokenizer& tokenizer = context_.tokenizer();
  for (size_t i = static_cast<size_t>(out.usage.prompt_tokens); i < out.tokens.size(); ++i) {
    stored.answer_text += tokenizer.token_to_piece(out.tokens[i], /*render_special=*/true);
  }
  (void)store_->put(std::move(stored));
}

void ResponsesGeneration::record(const RequestOutput& out) {
  if (out.error) return;
  if (!prompt_.built.text.empty() && request_.chat.use_cache && context_.answers().max_entries() > 0) {
    context_.remember_answer(request_.chat.cache_salt, prompt_.built.parse_special, prompt_.built.text, out);
  }
  record_finished("responses", request_.chat.cache_salt, out, prompt_.built.answer_tokens);
}

void ResponsesGeneration::fail(const RequestOutput& out, Chunk& chunk, std::string& events) {
  done_ = true;
  record(out);
  const ApiError error = out.error ? api_error(*out.error, Endpoint::kChat) : api_error(*out.runtime_error);
  if (!request_.chat.stream) {
    chunk.head = context_.error_response(error);
    return;
  }
  context_.metrics().record_error(error.status);
  output_.error(error_json(error)["error"], events);
}

void ResponsesGeneration::cancel() {
  context_.metrics().record_disconnect();
  if (done_) return;
  done_ = true;
  auto self = shared_from_this();
  handle_->set_notify([self] { self->drain_after_cancel(); });
  handle_->abort();
}

void ResponsesGeneration::drain_after_cancel() {
  while (auto out = handle_->try_next()) {
    if (!out->finished) continue;
    record(*out);
    handle_->set_notify({});  // drops the reference that kept this alive
    return;
  }
}

}  // namespace hearth::server
