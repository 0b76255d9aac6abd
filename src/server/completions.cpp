// POST /v1/chat/completions and /v1/completions: validate, build the prompt, submit, then answer as one JSON
// object or as an SSE stream.

#include <httplib.h>

#include <chrono>
#include <random>

#include "server/server.h"

namespace hearth::server {
namespace {

using nlohmann::json;

constexpr auto kKeepAliveInterval = std::chrono::milliseconds(1000);

std::string random_hex(uint64_t salt) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ salt);
  return fmt::format("{:016x}", rng());
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

// What the HTTP side keeps of one request from submit to the last byte (shared with the stream's content
// provider). The engine's facts (token ids, usage) arrive with the final output; nothing here copies them.
struct HttpServer::Generation {
  HttpServer* server = nullptr;
  CompletionRequest request;
  ResponseMeta meta;
  std::unique_ptr<RequestHandle> handle;
  bool first_chunk = true;
  bool finished = false;
  // For the answer memory (when `remember`): the prompt as text and how it was tokenized.
  bool remember = false;
  bool parse_special = false;
  std::string prompt_text;

  ~Generation() {
    handle.reset();  // aborts the request if it is still running
    server->end_in_flight();
  }
};

void HttpServer::begin_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  ++num_in_flight_;
}

void HttpServer::end_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  if (--num_in_flight_ == 0) in_flight_done_.notify_all();
}

std::optional<ApiError> HttpServer::check_model(const CompletionRequest& request) const {
  const std::string& served = loop_.info().model_id;
  if (request.model.empty() || request.model == served) return std::nullopt;
  return ApiError{404, fmt::format("the model '{}' does not exist; this server serves '{}'", request.model, served),
                  "invalid_request_error", "model", "model_not_found"};
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
  if (request.use_cache) spliced = answers_.splice(built.parse_special, built.text);
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
  return spec;
}

void HttpServer::handle_completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  if (draining_) {
    return send_error(res, ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  auto parsed = parse_completion_request(req.body, endpoint);
  if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  if (auto error = check_model(request)) return send_error(res, *error);
  auto built = build_prompt(request);
  if (auto* error = std::get_if<ApiError>(&built)) return send_error(res, *error);
  BuiltPrompt& prompt = std::get<BuiltPrompt>(built);
  RequestSpec spec = build_spec(request, std::move(prompt.tokens));
  if (spec.use_cache && !spec.prompt.empty()) observe_prompt(spec.prompt, spec);
  auto handle = loop_.submit(std::move(spec));
  if (!handle) return send_error(res, api_error(handle.error(), endpoint));

  begin_in_flight();
  auto gen = std::make_shared<Generation>();
  gen->server = this;
  gen->handle = std::move(*handle);
  gen->meta = ResponseMeta{
      fmt::format("{}{}", endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-", random_hex(next_id_.fetch_add(1))),
      static_cast<int64_t>(std::time(nullptr)), loop_.info().model_id, prompt.answer_tokens};
  gen->request = std::move(request);
  // The answer memory remembers turns of text prompts; the ids come back with the final output.
  gen->remember = gen->request.use_cache && answers_.max_entries() > 0 && !prompt.text.empty();
  if (gen->remember) {
    gen->prompt_text = std::move(prompt.text);
    gen->parse_special = prompt.parse_special;
  }
  if (gen->request.stream) {
    respond_stream(std::move(gen), res);
  } else {
    respond_whole(std::move(gen), res);
  }
}

void HttpServer::finish(Generation& gen, RequestOutput& out) {
  gen.finished = true;
  if (out.error) return;  // refused by the engine: it never ran
  if (gen.remember) {
    const auto prompt_end = out.tokens.begin() + out.usage.prompt_tokens;
    answers_.remember(gen.parse_special, std::move(gen.prompt_text),
                      std::vector<TokenId>(out.tokens.begin(), prompt_end),
                      std::span<const TokenId>(prompt_end, out.tokens.end()));
  }
  if (gen.meta.answer_tokens_reused > 0) metrics_.record_answer_tokens_reused(gen.meta.answer_tokens_reused);
  if (out.usage.reuse.reason) metrics_.record_reuse_stop(reuse_stop_name(*out.usage.reuse.reason));
  metrics_.record_request(gen.request.endpoint == Endpoint::kChat ? "chat" : "completions",
                          finish_reason_text(out.finish_reason), out.usage.ttft_ms / 1000.0,
                          out.usage.total_ms / 1000.0);
}

void HttpServer::respond_whole(std::shared_ptr<Generation> gen, httplib::Response& res) {
  std::string text = gen->request.echo ? gen->request.prompt_text : std::string();
  while (auto out = gen->handle->next()) {
    text += out->new_text;
    if (!out->finished) continue;
    finish(*gen, *out);
    if (out->error) return send_error(res, api_error(*out->error, gen->request.endpoint));
    const json body = response_json(gen->request, gen->meta, text, out->finish_reason, out->usage);
    return res.set_content(dump(body), "application/json");
  }
  send_error(res, ApiError{500, "the request ended without a result", "server_error", {}, {}});
}

// The SSE events for one piece of news (with the final chunk, usage and [DONE] when it is the last).
std::string HttpServer::stream_events(Generation& gen, const RequestOutput& out) {
  std::string events;
  if (out.error) {
    // Refused after the stream started (the engine re-checks what submit checked): an error event, then [DONE].
    events += sse_event(error_json(api_error(*out.error, gen.request.endpoint)));
    events.append(kSseDone);
    return events;
  }
  if (gen.first_chunk && gen.request.echo && !gen.request.prompt_text.empty()) {
    events += sse_event(chunk_json(gen.request, gen.meta, gen.request.prompt_text, true, FinishReason::kNone));
    gen.first_chunk = false;
  }
  if (!out.new_text.empty() || (gen.first_chunk && !out.finished)) {
    events += sse_event(chunk_json(gen.request, gen.meta, out.new_text, gen.first_chunk, FinishReason::kNone));
    gen.first_chunk = false;
  }
  if (out.finished) {
    events += sse_event(chunk_json(gen.request, gen.meta, "", gen.first_chunk, out.finish_reason));
    if (gen.request.include_usage) events += sse_event(usage_chunk_json(gen.request, gen.meta, out.usage));
    events += kSseDone;
  }
  return events;
}

// Writes the SSE events for one piece of news; false when the client is gone.
bool HttpServer::stream_step(Generation& gen, const std::function<bool(const std::string&)>& write) {
  bool timed_out = false;
  auto out = gen.handle->next_for(kKeepAliveInterval, &timed_out);
  // An SSE comment keeps idle streams alive and finds out that a queued request's client has left.
  if (timed_out) return write(": keep-alive\n\n");
  if (!out) {
    gen.finished = true;
    return write(std::string(kSseDone));
  }
  const std::string events = stream_events(gen, *out);
  if (out->finished) finish(gen, *out);
  return events.empty() || write(events);
}

// The client is gone: abort, and wait for the engine's final output (it comes within one step, or at once when
// the loop stops) so the request is counted with its finish reason like any other.
void HttpServer::on_disconnect(Generation& gen) {
  metrics_.record_disconnect();
  if (gen.finished) return;
  gen.handle->abort();
  while (auto out = gen.handle->next()) {
    if (out->finished) return finish(gen, *out);
  }
}

void HttpServer::respond_stream(std::shared_ptr<Generation> gen, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // The whole stream is written in one provider call: httplib checks for shutdown only between calls, and a
  // stream that has started should end properly (with [DONE]) even while the server drains.
  res.set_chunked_content_provider("text/event-stream", [this, gen](size_t, httplib::DataSink& sink) {
    auto write = [&sink](const std::string& s) { return sink.write(s.data(), s.size()); };
    while (!gen->finished) {
      if (!stream_step(*gen, write)) {
        on_disconnect(*gen);
        return false;
      }
    }
    sink.done();
    return true;
  });
}

}  // namespace hearth::server
