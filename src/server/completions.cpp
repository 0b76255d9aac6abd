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

// The engine's submit errors: a full queue is an overload (429, retry later); a stopped loop is 503; anything else
// is a request that can never run (too long for the context or the pool), 400 with the engine's numbers.
ApiError submit_error(const std::string& message) {
  if (message.find("overloaded") != std::string::npos) {
    return ApiError{429, message, "rate_limit_error", {}, "server_overloaded"};
  }
  if (message.find("shutting down") != std::string::npos) {
    return ApiError{503, message, "server_error", {}, "server_shutting_down"};
  }
  const bool context = message.find("context") != std::string::npos;
  return invalid_request(message, context ? "max_tokens" : "", context ? "context_length_exceeded" : "");
}

}  // namespace

// One request's state from submit to the last byte; shared with the stream's content provider.
struct HttpServer::Generation {
  HttpServer* server = nullptr;
  CompletionRequest request;
  ResponseMeta meta;
  std::unique_ptr<RequestHandle> handle;
  std::string text;
  bool first_chunk = true;
  bool finished = false;
  int32_t answer_tokens_reused = 0;  // prompt ids taken from a remembered answer (usage.hearth)
  // For the answer memory (when `remember`): the prompt as text and ids, and every generated id.
  bool remember = false;
  bool parse_special = false;
  std::string prompt_text;
  std::vector<TokenId> prompt_ids;
  std::vector<TokenId> answer;

  // Every output passes through here: keeps the generated ids, and completes the usage the engine cannot know.
  void take(RequestOutput& out) {
    if (remember) answer.insert(answer.end(), out.new_tokens.begin(), out.new_tokens.end());
    out.usage.answer_tokens = answer_tokens_reused;
  }

  ~Generation() {
    handle.reset();  // aborts the request if it is still running
    server->num_in_flight_.fetch_sub(1);
  }
};

ApiResult<HttpServer::BuiltPrompt> HttpServer::build_prompt(const CompletionRequest& request) {
  BuiltPrompt built;
  std::vector<TokenId>& prompt = built.tokens;
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
    for (int32_t t : request.prompt_tokens) {
      if (!tokenizer_.is_valid(TokenId{t})) {
        return invalid_request(fmt::format("token id {} is outside the vocabulary of {}", t, tokenizer_.vocab_size()),
                               "prompt", "invalid_value");
      }
      prompt.push_back(TokenId{t});
    }
  } else {
    built.text = request.prompt_text;
  }
  const bool from_text = request.endpoint == Endpoint::kChat || !request.prompt_is_tokens;
  if (from_text) {
    // A later turn of a conversation: the answer's own ids, not a re-tokenization of its text (answer_memory.h).
    std::optional<AnswerMemory::Spliced> spliced;
    if (request.use_cache) spliced = answers_.splice(built.parse_special, built.text);
    if (spliced) {
      prompt = std::move(spliced->tokens);
      built.answer_tokens = spliced->answer_tokens;
    } else {
      prompt = tokenizer_.encode(built.text, add_special, built.parse_special);
    }
  }
  if (prompt.empty()) return invalid_request("the prompt is empty", "prompt");
  if (static_cast<int64_t>(prompt.size()) >= config_.n_ctx) {
    return invalid_request(fmt::format("the prompt is {} tokens, but the model's context is {} tokens (at least one "
                                       "must remain for the completion)",
                                       prompt.size(), config_.n_ctx),
                           request.endpoint == Endpoint::kChat ? "messages" : "prompt", "context_length_exceeded");
  }
  return built;
}

ApiResult<RequestSpec> HttpServer::build_spec(const CompletionRequest& request, std::vector<TokenId> prompt) const {
  const int32_t room = config_.n_ctx - static_cast<int32_t>(prompt.size());
  RequestSpec spec;
  if (request.max_tokens) {
    if (*request.max_tokens > config_.n_ctx) {
      return invalid_request(
          fmt::format("max_tokens is {}, beyond the model's context of {} tokens", *request.max_tokens, config_.n_ctx),
          "max_tokens", "context_length_exceeded");
    }
    spec.max_tokens = *request.max_tokens;
  } else {
    // OpenAI's defaults: 16 for completions, "until the context is full" for chat.
    spec.max_tokens = request.endpoint == Endpoint::kCompletion ? std::min(16, room) : room;
  }
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
    send_error(res, ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
    return;
  }
  auto parsed = parse_completion_request(req.body, endpoint);
  if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  if (!request.model.empty() && request.model != config_.model_id) {
    return send_error(res, ApiError{404,
                                    fmt::format("the model '{}' does not exist; this server serves '{}'", request.model,
                                                config_.model_id),
                                    "invalid_request_error", "model", "model_not_found"});
  }
  auto built = build_prompt(request);
  if (auto* error = std::get_if<ApiError>(&built)) return send_error(res, *error);
  BuiltPrompt& prompt = std::get<BuiltPrompt>(built);
  // The answer memory needs the prompt's ids when the request ends; a copy only when it will be remembered.
  const bool remember = request.use_cache && answers_.max_entries() > 0 && !prompt.text.empty();
  std::vector<TokenId> prompt_ids = remember ? prompt.tokens : std::vector<TokenId>{};
  auto spec = build_spec(request, std::move(prompt.tokens));
  if (auto* error = std::get_if<ApiError>(&spec)) return send_error(res, *error);

  if (std::get<RequestSpec>(spec).use_cache) observe_prompt(std::get<RequestSpec>(spec).prompt, std::get<RequestSpec>(spec));
  num_in_flight_.fetch_add(1);
  auto gen = std::make_shared<Generation>();
  gen->server = this;
  auto handle = loop_.submit(std::move(std::get<RequestSpec>(spec)));
  if (!handle) return send_error(res, submit_error(handle.error().message));
  gen->handle = std::move(*handle);
  const bool chat = endpoint == Endpoint::kChat;
  gen->meta = ResponseMeta{(chat ? "chatcmpl-" : "cmpl-") + random_hex(next_id_.fetch_add(1)),
                           static_cast<int64_t>(std::time(nullptr)), config_.model_id};
  gen->request = std::move(request);
  gen->answer_tokens_reused = prompt.answer_tokens;
  if (remember) {
    gen->remember = true;
    gen->prompt_text = std::move(prompt.text);
    gen->prompt_ids = std::move(prompt_ids);
    gen->parse_special = prompt.parse_special;
  }
  if (gen->request.stream) {
    respond_stream(std::move(gen), res);
  } else {
    respond_whole(std::move(gen), res);
  }
}

void HttpServer::finish(Generation& gen, const RequestOutput& out) {
  gen.finished = true;
  if (gen.remember) {
    answers_.remember(gen.parse_special, std::move(gen.prompt_text), std::move(gen.prompt_ids), gen.answer);
  }
  if (gen.answer_tokens_reused > 0) metrics_.record_answer_tokens_reused(gen.answer_tokens_reused);
  if (!out.usage.reuse.reason.empty()) metrics_.record_reuse_stop(out.usage.reuse.reason);
  metrics_.record_request(gen.request.endpoint == Endpoint::kChat ? "chat" : "completions",
                          finish_reason_text(out.finish_reason), out.usage.ttft_ms / 1000.0,
                          out.usage.total_ms / 1000.0);
}

void HttpServer::respond_whole(std::shared_ptr<Generation> gen, httplib::Response& res) {
  std::string text = gen->request.echo ? gen->request.prompt_text : std::string();
  while (auto out = gen->handle->next()) {
    gen->take(*out);
    text += out->new_text;
    if (out->finished) {
      finish(*gen, *out);
      const json body = response_json(gen->request, gen->meta, text, out->finish_reason, out->usage);
      res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
      return;
    }
  }
  send_error(res, ApiError{500, "the request ended without a result", "server_error", {}, {}});
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
  gen.take(*out);
  std::string events;
  if (gen.first_chunk && gen.request.echo && !gen.request.prompt_text.empty()) {
    events += sse_event(chunk_json(gen.request, gen.meta, gen.request.prompt_text, true, FinishReason::kNone));
    gen.first_chunk = false;
  }
  if (!out->new_text.empty() || (gen.first_chunk && !out->finished)) {
    events += sse_event(chunk_json(gen.request, gen.meta, out->new_text, gen.first_chunk, FinishReason::kNone));
    gen.first_chunk = false;
  }
  if (out->finished) {
    events += sse_event(chunk_json(gen.request, gen.meta, "", gen.first_chunk, out->finish_reason));
    if (gen.request.include_usage) events += sse_event(usage_chunk_json(gen.request, gen.meta, out->usage));
    events += kSseDone;
    finish(gen, *out);
  }
  return events.empty() || write(events);
}

// The client is gone: abort, and wait (bounded) for the engine's final output so the request is counted with
// its finish reason like any other.
void HttpServer::on_disconnect(Generation& gen) {
  metrics_.record_disconnect();
  gen.handle->abort();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    bool timed_out = false;
    auto out = gen.handle->next_for(std::chrono::milliseconds(100), &timed_out);
    if (timed_out) continue;
    if (!out) return;
    gen.take(*out);
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
