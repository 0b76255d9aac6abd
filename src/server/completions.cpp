// POST /v1/chat/completions and /v1/completions: validate, build the prompt, submit, then answer as one JSON
// object or as an SSE stream, produced by a Generation as the engine's outputs arrive (no thread waits for them).

#include <chrono>
#include <random>

#include "server/logprobs_json.h"
#include "server/server.h"

namespace hearth::server {
namespace {

using nlohmann::json;

constexpr auto kKeepAliveInterval = std::chrono::milliseconds(1000);

std::string random_hex(uint64_t salt) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ salt);
  return fmt::format("{:016x}", rng());
}

}  // namespace

// One request from submit to the last byte, as the HTTP side sees it: the transport pulls its response (an SSE
// stream, or one JSON object once the request ends) whenever the engine delivers news. The engine's facts (token
// ids, usage) arrive with the final output; nothing here copies them. If the client leaves, the request is aborted
// and the Generation keeps itself alive until the engine's final output has been recorded.
class HttpServer::Generation : public ResponseSource, public std::enable_shared_from_this<Generation> {
 public:
  Generation(HttpServer& server, CompletionRequest request, ResponseMeta meta, std::unique_ptr<RequestHandle> handle)
      : server_(server), request_(std::move(request)), meta_(std::move(meta)), handle_(std::move(handle)) {
    server_.begin_in_flight();
    if (request_.echo) text_ = request_.prompt_text;
    text_offset_ = static_cast<int64_t>(text_.size());
  }
  ~Generation() override {
    handle_.reset();  // aborts the request if it is still running
    server_.end_in_flight();
  }

  // For the answer memory: the prompt as text and how it was tokenized.
  bool remember = false;
  bool parse_special = false;
  std::string prompt_text;
  const CompletionRequest& request() const { return request_; }
  const ResponseMeta& meta() const { return meta_; }

  void start(std::function<void()> wake) override { handle_->set_notify(std::move(wake)); }

  Chunk pull() override {
    Chunk chunk;
    if (request_.stream && !head_sent_) {
      head_sent_ = true;
      HttpResponse head;
      head.content_type = "text/event-stream";
      head.streamed = true;
      head.set_header("Cache-Control", "no-cache");
      head.set_header("X-Accel-Buffering", "no");
      chunk.head = std::move(head);
    }
    while (!finished_) {
      std::optional<RequestOutput> out = handle_->try_next();
      if (!out) break;
      if (request_.stream) {
        chunk.data += stream_events(*out);
      } else {
        text_ += out->new_text;
        logprobs_.insert(logprobs_.end(), out->logprobs.begin(), out->logprobs.end());
      }
      if (out->finished) finish(*out, chunk);
    }
    chunk.done = finished_;
    return chunk;
  }

  void cancel() override {
    server_.metrics_.record_disconnect();
    if (finished_) return;
    // The final output (aborted) comes within one engine step; it is recorded like any other.
    auto self = shared_from_this();
    handle_->set_notify([self] { self->drain_after_cancel(); });
    handle_->abort();
  }

  std::chrono::milliseconds keep_alive_interval() const override {
    return request_.stream ? kKeepAliveInterval : std::chrono::milliseconds(0);
  }
  std::string keep_alive() override { return ": keep-alive\n\n"; }

 private:
  std::string stream_events(const RequestOutput& out);
  // The choice's logprobs object for `logprobs` (null when the request asked for none).
  nlohmann::json logprobs_json(std::span<const TokenLogprobs> logprobs);
  void finish(RequestOutput& out, Chunk& chunk);
  void drain_after_cancel() {
    while (auto out = handle_->try_next()) {
      if (!out->finished) continue;
      finished_ = true;
      server_.record_finish(*this, *out);
      handle_->set_notify({});  // drops the reference that kept this alive
      return;
    }
  }

  HttpServer& server_;
  CompletionRequest request_;
  ResponseMeta meta_;
  std::unique_ptr<RequestHandle> handle_;
  std::string text_;                     // the whole answer so far (non-streaming)
  std::vector<TokenLogprobs> logprobs_;  // of every token so far (non-streaming, with logprobs asked)
  int64_t text_offset_ = 0;              // completions logprobs: where the next token's text starts
  bool head_sent_ = false;
  bool first_chunk_ = true;
  bool finished_ = false;
};

// The SSE events for one piece of news (with the final chunk, usage and [DONE] when it is the last).
std::string HttpServer::Generation::stream_events(const RequestOutput& out) {
  std::string events;
  if (out.error || out.runtime_error) {
    // Refused after the stream started (the engine re-checks what submit checked), or ended by the engine (non-finite
    // logits, shutdown): whatever text came first, then an error event and [DONE] instead of a finish reason.
    if (!out.new_text.empty())
      events += sse_event(chunk_json(request_, meta_, out.new_text, first_chunk_, FinishReason::kNone));
    events +=
        sse_event(error_json(out.error ? api_error(*out.error, request_.endpoint) : api_error(*out.runtime_error)));
    events.append(kSseDone);
    return events;
  }
  if (first_chunk_ && request_.echo && !request_.prompt_text.empty()) {
    events += sse_event(chunk_json(request_, meta_, request_.prompt_text, true, FinishReason::kNone));
    first_chunk_ = false;
  }
  if (!out.new_text.empty() || !out.logprobs.empty() || (first_chunk_ && !out.finished)) {
    events += sse_event(
        chunk_json(request_, meta_, out.new_text, first_chunk_, FinishReason::kNone, logprobs_json(out.logprobs)));
    first_chunk_ = false;
  }
  if (out.finished) {
    events += sse_event(chunk_json(request_, meta_, "", first_chunk_, out.finish_reason));
    if (request_.include_usage) events += sse_event(usage_chunk_json(request_, meta_, out.usage));
    events.append(kSseDone);
  }
  return events;
}

// The final output: record it, and (non-streaming) the whole response, an error object if the engine refused it.
void HttpServer::Generation::finish(RequestOutput& out, Chunk& chunk) {
  finished_ = true;
  server_.record_finish(*this, out);
  if (request_.stream) return;
  if (out.error || out.runtime_error) {
    chunk.head =
        server_.error_response(out.error ? api_error(*out.error, request_.endpoint) : api_error(*out.runtime_error));
    return;
  }
  chunk.head =
      json_response(response_json(request_, meta_, text_, out.finish_reason, out.usage, logprobs_json(logprobs_)));
}

nlohmann::json HttpServer::Generation::logprobs_json(std::span<const TokenLogprobs> logprobs) {
  if (!request_.top_logprobs) return nullptr;
  const Tokenizer& tokenizer = server_.tokenizer_;
  if (request_.endpoint == Endpoint::kChat) return chat_logprobs_json(logprobs, tokenizer);
  return completion_logprobs_json(logprobs, tokenizer, text_offset_);
}

void HttpServer::begin_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  ++num_in_flight_;
}

void HttpServer::end_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  if (--num_in_flight_ == 0) in_flight_done_.notify_all();
}

std::optional<ApiError> HttpServer::check_model(const CompletionRequest& request) const {
  return model_names_.check(request.model);
}

ApiResult<HttpServer::BuiltPrompt> HttpServer::build_prompt(const CompletionRequest& request) {
  BuiltPrompt built;
  bool add_special = true;
  if (request.endpoint == Endpoint::kChat) {
    auto text = chat_.render(request.messages, request.tools);
    if (!text) return invalid_request("cannot render the chat template: " + text.error().message, "messages");
    // A template that writes BOS itself must not get a second one from the tokenizer.
    const std::string_view bos = tokenizer_.token_text(tokenizer_.bos());
    add_special = bos.empty() || std::string_view(*text).substr(0, bos.size()) != bos;
    built.text = std::move(*text);
    built.parse_special = true;
  } else if (request.prompt_is_tokens) {
    // Ids are checked against the vocabulary by the engine (check_request), with every other limit.
    for (int32_t t : request.prompt_tokens) built.tokens.push_back(TokenId{t});
    return built;
  } else {
    built.text = request.prompt_text;
  }
  // A later turn of a conversation: the answer's own ids, not a re-tokenization of its text (answer_memory.h).
  std::optional<AnswerMemory::Spliced> spliced;
  if (request.use_cache) spliced = answers_.splice(request.cache_salt, built.parse_special, built.text);
  if (spliced) {
    built.tokens = std::move(spliced->tokens);
    built.answer_tokens = spliced->answer_tokens;
  } else {
    built.tokens = tokenizer_.encode(built.text, add_special, built.parse_special);
  }
  return built;
}

RequestSpec HttpServer::build_spec(const CompletionRequest& request, std::vector<TokenId> prompt) const {
  RequestSpec spec;
  spec.max_tokens = request.max_tokens;
  // OpenAI's defaults: 16 for completions, "until the context is full" for chat.
  if (request.endpoint == Endpoint::kCompletion) spec.default_max_tokens = 16;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = request.temperature;
  spec.sampling.top_p = request.top_p;
  spec.sampling.top_k = request.top_k;
  spec.sampling.seed = request.seed ? *request.seed : std::random_device{}();
  spec.stop = request.stop;
  spec.ignore_eos = request.ignore_eos;
  spec.use_cache = request.use_cache;
  spec.cache_salt = request.cache_salt;
  spec.pin_prefix = request.pin_prefix;
  spec.top_logprobs = request.top_logprobs;
  return spec;
}

HttpResponse HttpServer::handle_completion(const HttpRequest& req, Endpoint endpoint) {
  if (draining_) {
    return error_response(ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  auto parsed = parse_completion_request(req.body, endpoint);
  if (auto* error = std::get_if<ApiError>(&parsed)) return error_response(*error);
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  if (auto error = check_model(request)) return error_response(*error);
  auto built = build_prompt(request);
  if (auto* error = std::get_if<ApiError>(&built)) return error_response(*error);
  BuiltPrompt& prompt = std::get<BuiltPrompt>(built);
  RequestSpec spec = build_spec(request, std::move(prompt.tokens));
  if (spec.use_cache && !spec.prompt.empty()) observe_prompt(spec.prompt, spec);
  auto handle = loop_.submit(std::move(spec));
  if (!handle) return error_response(api_error(handle.error(), endpoint));

  ResponseMeta meta{
      fmt::format("{}{}", endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-", random_hex(next_id_.fetch_add(1))),
      static_cast<int64_t>(std::time(nullptr)), loop_.info().model_id, prompt.answer_tokens};
  const bool remember = request.use_cache && answers_.max_entries() > 0 && !prompt.text.empty();
  auto gen = std::make_shared<Generation>(*this, std::move(request), std::move(meta), std::move(*handle));
  // The answer memory remembers turns of text prompts; the ids come back with the final output.
  if (remember) {
    gen->remember = true;
    gen->prompt_text = std::move(prompt.text);
    gen->parse_special = prompt.parse_special;
  }
  HttpResponse res;
  res.source = std::move(gen);
  return res;
}

void HttpServer::record_finish(Generation& gen, RequestOutput& out) {
  if (out.error) return;  // refused by the engine: it never ran
  if (gen.remember) {
    const auto prompt_end = out.tokens.begin() + out.usage.prompt_tokens;
    answers_.remember(gen.request().cache_salt, gen.parse_special, std::move(gen.prompt_text),
                      std::vector<TokenId>(out.tokens.begin(), prompt_end),
                      std::span<const TokenId>(prompt_end, out.tokens.end()));
  }
  if (gen.meta().answer_tokens_reused > 0) metrics_.record_answer_tokens_reused(gen.meta().answer_tokens_reused);
  if (out.usage.reuse.reason) metrics_.record_reuse_stop(reuse_stop_name(*out.usage.reuse.reason));
  metrics_.record_request(gen.request().endpoint == Endpoint::kChat ? "chat" : "completions",
                          finish_reason_text(out.finish_reason), out.usage.ttft_ms / 1000.0,
                          out.usage.total_ms / 1000.0);
}

}  // namespace hearth::server
