// POST /v1/messages: Anthropic's Messages API over the same engine as the OpenAI routes. The body becomes a chat
// (anthropic_json.h), rendered by the model's chat template; each cache_control breakpoint becomes a retention span
// over the prompt's tokens up to it (kBreakpointPriority, its TTL). One engine request; the answer is a message
// object or Anthropic's SSE events (message_start at the first output, with the cache split; content_block_start,
// ping, content_block_delta, content_block_stop, message_delta with the final usage, message_stop). Errors use
// Anthropic's error shape. With tools, the answer's calls (in the template's format, as on the OpenAI route) become
// tool_use blocks and stop_reason "tool_use"; tool_choice any or tool forces one call by grammar.

#include <random>

#include "server/anthropic/anthropic_json.h"
#include "server/anthropic/harmony_messages.h"
#include "server/anthropic/routes.h"
#include "server/api/generation.h"
#include "server/http/tenant_keys.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::string random_hex() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

class MessagesGeneration : public Generation, public std::enable_shared_from_this<MessagesGeneration> {
 public:
  MessagesGeneration(ServerContext& context, MessagesRequest request, std::unique_ptr<RequestHandle> handle,
                     int32_t prompt_tokens, int32_t breakpoint_tokens)
      : Generation(context, request.chat.stream),
        request_(std::move(request)),
        handle_(std::move(handle)),
        id_("msg_" + random_hex()),
        model_(context.loop().info().model_id),
        prompt_tokens_(prompt_tokens),
        breakpoint_tokens_(breakpoint_tokens),
        format_(context.chat().tool_call_format()) {
    // With tools, streamed text that may be a call is held back (ToolCallStream) and sent as tool_use blocks.
    // A harmony or Gemma 4 model's answer goes through its channel parser instead: the content streams, the
    // reasoning is left out, the calls come at the end.
    channels_ = context.channel_parser(request_.chat);
    if (!channels_ && request_.chat.stream && request_.chat.tools_active()) {
      tools_.emplace(format_, request_.chat.tool_call_forced());
    }
  }

  bool parse_special = false;
  std::string prompt_text;  // for the answer memory; empty: nothing to remember
  int32_t answer_tokens_reused = 0;  // prompt ids taken from a remembered answer

  void start(std::function<void()> wake) override { handle_->set_notify(std::move(wake)); }
  std::string keep_alive() override { return anthropic_event(json{{"type", "ping"}}); }

  Chunk pull() override {
    Chunk chunk;
    if (request_.chat.stream && !head_sent_) {
      head_sent_ = true;
      chunk.head = sse_head();
    }
    while (!done_) {
      std::optional<RequestOutput> out = handle_->try_next();
      if (!out) break;
      if (out->error || out->runtime_error) {
        fail(*out, chunk);
        break;
      }
      if (request_.chat.stream && !message_started_) start_message(*out, chunk);
      text_ += out->new_text;
      if (request_.chat.stream && channels_) {
        send_text(channels_->push(out->new_text).content, chunk);
      } else if (request_.chat.stream) {
        send_text(tools_ ? tools_->push(out->new_text) : out->new_text, chunk);
      }
      if (out->finished) finish(*out, chunk);
    }
    chunk.done = done_;
    return chunk;
  }

  void cancel() override {
    context_.metrics().record_disconnect();
    if (done_) return;
    done_ = true;
    auto self = shared_from_this();
    handle_->set_notify([self] { self->drain_after_cancel(); });
    handle_->abort();
  }

 private:
  // message_start waits for the request's first output, which says how much of the prompt the cache supplied, so
  // its usage is the real split (message_delta repeats it with the output tokens).
  void start_message(const RequestOutput& out, Chunk& chunk) {
    message_started_ = true;
    RequestUsage so_far;
    so_far.prompt_tokens = prompt_tokens_;
    so_far.cached_tokens = std::max(0, out.num_cached_tokens);
    const MessagesUsage usage = messages_usage(so_far, breakpoint_tokens_);
    json message = message_json(id_, model_, MessagesAnswer{}, FinishReason::kNone, "", usage);
    chunk.data += anthropic_event(json{{"type", "message_start"}, {"message", std::move(message)}});
    // Without tools the answer is one text block, opened at once; with tools it opens at the first text, if any.
    if (!tools_ && !(channels_ && request_.chat.tools_active())) open_text_block(chunk);
    chunk.data += anthropic_event(json{{"type", "ping"}});
  }

  void open_text_block(Chunk& chunk) {
    text_block_open_ = true;
    chunk.data += anthropic_event(json{{"type", "content_block_start"},
                                       {"index", num_blocks_++},
                                       {"content_block", {{"type", "text"}, {"text", ""}}}});
  }

  void send_text(const std::string& text, Chunk& chunk) {
    if (text.empty()) return;
    if (!text_block_open_) open_text_block(chunk);
    chunk.data += anthropic_event(json{{"type", "content_block_delta"},
                                       {"index", num_blocks_ - 1},
                                       {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }

  void close_text_block(Chunk& chunk) {
    if (!text_block_open_) return;
    text_block_open_ = false;
    chunk.data += anthropic_event(json{{"type", "content_block_stop"}, {"index", num_blocks_ - 1}});
  }

  // The calls as tool_use blocks: a start with empty input, the arguments as one input_json_delta, a stop.
  void send_tool_uses(const std::vector<ToolCall>& calls, Chunk& chunk) {
    for (const ToolCall& call : calls) {
      json start = tool_use_block_json(call);
      start["input"] = json::object();
      const int index = num_blocks_++;
      chunk.data += anthropic_event(json{{"type", "content_block_start"}, {"index", index}, {"content_block", start}});
      chunk.data += anthropic_event(json{{"type", "content_block_delta"},
                                         {"index", index},
                                         {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
      chunk.data += anthropic_event(json{{"type", "content_block_stop"}, {"index", index}});
    }
  }

  void record(RequestOutput& out) {
    if (out.error) return;
    if (!prompt_text.empty()) context_.remember_answer(request_.chat.cache_salt, parse_special, prompt_text, out);
    record_finished("messages", request_.chat.cache_salt, out, answer_tokens_reused);
  }

  void finish(RequestOutput& out, Chunk& chunk) {
    done_ = true;
    record(out);
    const MessagesUsage usage = messages_usage(out.usage, breakpoint_tokens_);
    if (!request_.chat.stream) {
      const MessagesAnswer answer = channels_
                                        ? harmony_messages_answer(request_.chat, *channels_, text_, out.finish_reason)
                                        : messages_answer(request_.chat, format_, std::move(text_), out.finish_reason);
      chunk.head =
          ServerContext::json_response(message_json(id_, model_, answer, out.finish_reason, out.stop_sequence, usage));
      return;
    }
    bool tool_use = false;
    if (channels_) {
      send_text(channels_->finish().content, chunk);
      close_text_block(chunk);
      const MessagesAnswer answer = harmony_messages_answer(request_.chat, {}, channels_->calls(), out.finish_reason);
      send_tool_uses(answer.calls, chunk);
      tool_use = !answer.calls.empty();
      if (num_blocks_ == 0) open_text_block(chunk);
    } else if (tools_) {
      MessagesAnswer answer = messages_answer(request_.chat, format_, tools_->held(), out.finish_reason);
      send_text(answer.text, chunk);
      close_text_block(chunk);
      send_tool_uses(answer.calls, chunk);
      tool_use = !answer.calls.empty() && answer.calls[0].whole;  // a call cut short stops at max_tokens
      if (num_blocks_ == 0) open_text_block(chunk);  // an empty answer is one empty text block, as without tools
    }
    close_text_block(chunk);
    chunk.data +=
        anthropic_event(json{{"type", "message_delta"},
                             {"delta",
                              {{"stop_reason", stop_reason_json(out.finish_reason, out.stop_sequence, tool_use)},
                               {"stop_sequence", out.stop_sequence.empty() ? json() : json(out.stop_sequence)}}},
                             {"usage", usage_json(usage)}});
    chunk.data += anthropic_event(json{{"type", "message_stop"}});
  }

  void fail(RequestOutput& out, Chunk& chunk) {
    done_ = true;
    record(out);
    const ApiError error = out.error ? api_error(*out.error, Endpoint::kChat) : api_error(*out.runtime_error);
    if (!request_.chat.stream) {
      chunk.head = anthropic_error_response(context_, error);
      return;
    }
    chunk.data += anthropic_event(anthropic_error_json(error));
  }

  void drain_after_cancel() {
    while (auto out = handle_->try_next()) {
      if (!out->finished) continue;
      record(*out);
      handle_->set_notify({});  // drops the reference that kept this alive
      return;
    }
  }

  MessagesRequest request_;
  std::unique_ptr<RequestHandle> handle_;
  std::string id_;
  std::string model_;
  int32_t prompt_tokens_;
  int32_t breakpoint_tokens_;
  ToolCallFormat format_;
  std::optional<ToolCallStream> tools_;  // streaming with tools: holds back what may be a call
  std::unique_ptr<ChannelParser> channels_;  // a harmony or Gemma 4 answer (channel_parser.h)
  std::string text_;
  int num_blocks_ = 0;  // content blocks started
  bool text_block_open_ = false;
  bool head_sent_ = false;
  bool message_started_ = false;
  bool done_ = false;
};

// The prompt of a parsed request as /v1/messages submits it (count_tokens counts the same ids): model check, forced
// tool call, template, breakpoints (each retains the prompt's tokens up to it), ids (answer memory first).
struct PreparedMessages {
  ServerContext::BuiltPrompt prompt;
  int32_t breakpoint_tokens = 0;  // the last breakpoint's token count (0: none)
};

ApiResult<PreparedMessages> prepare_messages(ServerContext& context, MessagesRequest& request) {
  if (auto error = context.check_model(request.chat)) return *error;
  if (auto error = context.force_tool_call(request.chat)) return *error;
  auto rendered = context.render_chat(request.chat);
  if (!rendered) return rendered.error();
  PreparedMessages prepared{std::move(*rendered)};
  ServerContext::BuiltPrompt& prompt = prepared.prompt;
  if (!take_breakpoints(prompt.text, request.breakpoints, request.anchor)) {
    return invalid_request("the chat template dropped or repeated a cache_control breakpoint's text", "messages");
  }
  // Found again in the text without the markers (a system prompt with a breakpoint: up to its first marker).
  prompt.system_end_bytes = context.system_prompt_end(request.chat, prompt.text);
  // Each breakpoint retains the prompt's tokens up to it: the tokens of the text before it.
  for (const Breakpoint& bp : request.breakpoints) {
    const auto n = static_cast<int32_t>(
        context.tokenizer()
            .encode(std::string_view(prompt.text).substr(0, bp.text_offset), prompt.add_special, true)
            .size());
    request.chat.retention.push_back(RetentionSpan{n, kBreakpointPriority, bp.ttl_ms});
    prepared.breakpoint_tokens = std::max(prepared.breakpoint_tokens, n);
  }
  context.tokenize_prompt(request.chat, prompt);
  return prepared;
}

HttpResponse handle_messages(ServerContext& context, const HttpRequest& req) {
  if (context.draining()) {
    return anthropic_error_response(context, ApiError{503, "the server is shutting down", "server_error", {}, {}});
  }
  auto parsed = parse_messages_request(req.body, random_hex());
  if (!parsed) return anthropic_error_response(context, parsed.error());
  MessagesRequest& request = *parsed;
  request.chat.cache_salt = scoped_cache_salt(req, request.chat.cache_salt);
  auto prepared = prepare_messages(context, request);
  if (!prepared) return anthropic_error_response(context, prepared.error());
  ServerContext::BuiltPrompt& prompt = prepared->prompt;
  request.chat.answer_primer = std::move(prompt.answer_primer);
  const int32_t breakpoint_tokens = prepared->breakpoint_tokens;
  const auto prompt_tokens = static_cast<int32_t>(prompt.tokens.size());
  RequestSpec spec = context.build_spec(request.chat, std::move(prompt.tokens), std::move(prompt.checkpoint_hints));
  if (spec.use_cache && !spec.prompt.empty()) context.observe_prompt(spec.prompt, spec);
  auto handle = context.loop().submit(std::move(spec));
  if (!handle) return anthropic_error_response(context, api_error(handle.error(), Endpoint::kChat));
  const bool remember = request.chat.use_cache && context.answers().max_entries() > 0;
  auto gen = std::make_shared<MessagesGeneration>(context, std::move(request), std::move(*handle), prompt_tokens,
                                                  breakpoint_tokens);
  gen->answer_tokens_reused = prompt.answer_tokens;
  if (remember) {
    gen->parse_special = prompt.parse_special;
    gen->prompt_text = std::move(prompt.text);
  }
  HttpResponse res;
  res.source = std::move(gen);
  return res;
}

// POST /v1/messages/count_tokens: the ids /v1/messages would submit for the same body, counted; nothing runs.
HttpResponse handle_count_tokens(ServerContext& context, const HttpRequest& req) {
  auto parsed = parse_messages_request(req.body, random_hex(), MessagesBody::kCountTokens);
  if (!parsed) return anthropic_error_response(context, parsed.error());
  parsed->chat.cache_salt = scoped_cache_salt(req, parsed->chat.cache_salt);  // answer memory splices by salt
  auto prepared = prepare_messages(context, *parsed);
  if (!prepared) return anthropic_error_response(context, prepared.error());
  return ServerContext::json_response(json{{"input_tokens", prepared->prompt.tokens.size()}});
}

}  // namespace

HttpResponse anthropic_error_response(ServerContext& context, const ApiError& error) {
  HttpResponse res = ServerContext::json_response(anthropic_error_json(error));
  res.status = error.status;
  if (error.status == 429 || error.status == 503) res.set_header("Retry-After", "1");
  context.metrics().record_error(error.status);
  return res;
}

void add_messages_routes(Routes& routes, ServerContext& context) {
  routes.add("POST", std::string(kMessagesPath),
             [&context](const HttpRequest& req) { return handle_messages(context, req); });
  routes.add("POST", std::string(kMessagesPath) + "/count_tokens",
             [&context](const HttpRequest& req) { return handle_count_tokens(context, req); });
}

}  // namespace hearth::server
