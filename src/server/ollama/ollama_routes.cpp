// The Ollama API over the same engine, prefix cache, salts, answer memory and metrics as the OpenAI routes:
//
//   POST /api/chat, /api/generate   parse (ollama_json.h) → template → tokenize → num_ctx → submit; the answer is
//                                   NDJSON (application/x-ndjson: one object per piece, then the final object with
//                                   done_reason, counts and durations) or, with "stream": false, one JSON object
//   GET  /api/tags, /api/ps         the served model (and its aliases) as Ollama lists models
//   POST /api/show                  its details, context length, template description and capabilities
//   GET  /api/version               the Ollama API version these routes follow
//   POST /api/embed, /api/embeddings  embeddings (ollama_embed.cpp)
//
// num_ctx: a request's context is min(options.num_ctx, the model's) (Ollama clamps a larger num_ctx too); a prompt
// that does not fit it is a 400 naming options.num_ctx, and the answer stops when the context is full
// (num_predict, default unlimited, is clamped to the room left: done_reason "length").

#include <algorithm>
#include <limits>

#include "server/api/generation.h"
#include "server/api/harmony.h"
#include "server/http/tenant_keys.h"
#include "server/ollama/ollama_json.h"
#include "server/ollama/routes.h"

namespace hearth::server {
namespace {

using nlohmann::json;

class OllamaGeneration : public Generation, public std::enable_shared_from_this<OllamaGeneration> {
 public:
  OllamaGeneration(ServerContext& context, OllamaRequest request, std::unique_ptr<RequestHandle> handle)
      : Generation(context, request.chat.stream),
        request_(std::move(request)),
        handle_(std::move(handle)),
        format_(context.chat().tool_call_format()) {
    channels_ = context.channel_parser(request_.chat);  // harmony or Gemma 4: content, thinking, calls
    if (!channels_ && request_.chat.stream && request_.chat.tools_active()) {
      tools_.emplace(format_, request_.chat.tool_call_forced());
    }
  }

  bool parse_special = false;
  std::string prompt_text;           // for the answer memory; empty: nothing to remember
  int32_t answer_tokens_reused = 0;  // prompt ids taken from a remembered answer

  // NDJSON has no comment line a client would skip: no keep-alives (the transport still notices a client leaving).
  std::chrono::milliseconds keep_alive_interval() const override { return std::chrono::milliseconds(0); }
  void start(std::function<void()> wake) override { handle_->set_notify(std::move(wake)); }

  Chunk pull() override {
    Chunk chunk;
    if (request_.chat.stream && !head_sent_) {
      head_sent_ = true;
      HttpResponse head;
      head.content_type = "application/x-ndjson";
      head.streamed = true;
      head.set_header("Cache-Control", "no-cache");
      head.set_header("X-Accel-Buffering", "no");
      chunk.head = std::move(head);
    }
    while (!done_) {
      std::optional<RequestOutput> out = handle_->try_next();
      if (!out) break;
      if (out->error || out->runtime_error) {
        fail(*out, chunk);
        break;
      }
      text_ += out->new_text;
      if (request_.chat.stream) {
        if (channels_) {
          ChannelDelta d = channels_->push(out->new_text);
          send(d.content, request_.think ? d.reasoning : std::string(), chunk);
        } else {
          send(tools_ ? tools_->push(out->new_text) : out->new_text, {}, chunk);
        }
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
  void send(const std::string& text, const std::string& thinking, Chunk& chunk) {
    if (text.empty() && thinking.empty()) return;
    chunk.data += ndjson_line(ollama_chunk_json(request_, ollama_timestamp_now(), text, thinking));
  }

  void record(RequestOutput& out) {
    if (out.error) return;
    if (!prompt_text.empty()) context_.remember_answer(request_.chat.cache_salt, parse_special, prompt_text, out);
    record_finished(request_.generate ? "ollama_generate" : "ollama_chat", request_.chat.cache_salt, out,
                    answer_tokens_reused);
  }

  // The answer's calls and the text outside them (the whole text when it holds none).
  void split_calls(std::string text, FinishReason reason, OllamaFinal& f) {
    f.text = std::move(text);
    if (!request_.chat.tools_active() || reason == FinishReason::kAborted) return;
    auto parsed = parse_answer_calls(format_, f.text, request_.chat.tools,
                                     request_.chat.tool_call_forced() && reason == FinishReason::kLength);
    if (!parsed) return;
    f.text = std::move(parsed->content);
    f.calls = std::move(parsed->calls);
    if (!request_.chat.parallel_tool_calls && f.calls.size() > 1) f.calls.resize(1);
  }

  void finish(RequestOutput& out, Chunk& chunk) {
    done_ = true;
    record(out);
    OllamaFinal f;
    f.reason = out.finish_reason;
    f.usage = out.usage;
    if (request_.generate) {
      for (TokenId t : out.tokens) f.context.push_back(t.value);
    }
    if (channels_ && request_.chat.stream) {
      ChannelDelta rest = channels_->finish();
      send(rest.content, request_.think ? rest.reasoning : std::string(), chunk);
      f.calls = harmony_tool_calls(request_.chat, channels_->calls(), out.finish_reason);
    } else if (channels_) {
      ChannelAnswer whole = parse_channels(*channels_, text_);
      f.text = std::move(whole.content);
      if (request_.think) f.thinking = std::move(whole.reasoning);
      f.calls = harmony_tool_calls(request_.chat, whole.calls, out.finish_reason);
    } else if (!request_.chat.stream) {
      split_calls(std::move(text_), out.finish_reason, f);
    } else if (tools_) {
      OllamaFinal held;
      split_calls(tools_->held(), out.finish_reason, held);
      send(held.text, {}, chunk);
      f.calls = std::move(held.calls);
    }
    if (request_.generate) f.calls.clear();  // /api/generate has no tools
    if (!request_.chat.stream) {
      chunk.head = ServerContext::json_response(ollama_final_json(request_, ollama_timestamp_now(), f));
      return;
    }
    // Streamed, the calls come in a piece of their own before the final object, as Ollama sends them.
    if (!f.calls.empty()) {
      json piece = ollama_chunk_json(request_, ollama_timestamp_now(), "");
      piece["message"]["tool_calls"] = ollama_tool_calls_json(f.calls);
      chunk.data += ndjson_line(piece);
      f.calls.clear();
    }
    chunk.data += ndjson_line(ollama_final_json(request_, ollama_timestamp_now(), f));
  }

  void fail(RequestOutput& out, Chunk& chunk) {
    done_ = true;
    record(out);
    const ApiError error = out.error ? api_error(*out.error, request_.chat.endpoint) : api_error(*out.runtime_error);
    if (!request_.chat.stream) {
      chunk.head = ollama_error_response(context_, error);
      return;
    }
    chunk.data += ndjson_line(ollama_error_json(error));
  }

  void drain_after_cancel() {
    while (auto out = handle_->try_next()) {
      if (!out->finished) continue;
      record(*out);
      handle_->set_notify({});  // drops the reference that kept this alive
      return;
    }
  }

  OllamaRequest request_;
  std::unique_ptr<RequestHandle> handle_;
  ToolCallFormat format_;
  std::optional<ToolCallStream> tools_;   // streaming with tools: holds back what may be a call
  std::unique_ptr<ChannelParser> channels_;  // a harmony or Gemma 4 answer (channel_parser.h)
  std::string text_;
  bool head_sent_ = false;
  bool done_ = false;
};

// The prompt's ids: /api/generate's context first (then the new text without BOS), else as every route builds it
// (the answer memory splices a remembered answer's ids).
ApiResult<ServerContext::BuiltPrompt> build_prompt(ServerContext& context, const OllamaRequest& request) {
  ServerContext::BuiltPrompt built;
  if (request.chat.endpoint == Endpoint::kChat) {
    auto rendered = context.render_chat(request.chat);
    if (!rendered) return rendered.error();
    built = std::move(*rendered);
  } else {
    built.text = request.chat.prompt_text;
  }
  if (request.context.empty()) {
    context.tokenize_prompt(request.chat, built);
    return built;
  }
  for (int32_t t : request.context) built.tokens.push_back(TokenId{t});
  for (TokenId t : context.tokenizer().encode(built.text, /*add_special=*/false, built.parse_special)) {
    built.tokens.push_back(t);
  }
  built.text.clear();  // not a text the answer memory could match
  return built;
}

// num_ctx and num_predict against the prompt: the request's context is min(num_ctx, the model's); the answer may
// fill what the prompt leaves of it.
std::optional<ApiError> fit_context(const OllamaRequest& request, int32_t n_ctx, int32_t prompt_tokens,
                                    CompletionRequest& chat) {
  const int32_t ctx = request.num_ctx ? std::min(*request.num_ctx, n_ctx) : n_ctx;
  if (request.num_ctx && ctx < n_ctx && prompt_tokens >= ctx) {
    return invalid_request(fmt::format("the prompt has {} tokens, which leaves no room in options.num_ctx {} (the "
                                       "model's context is {}); raise num_ctx or shorten the prompt",
                                       prompt_tokens, ctx, n_ctx),
                           "options.num_ctx", "context_length_exceeded");
  }
  // A prompt beyond the model's own context is the engine's 400, with its numbers.
  if (prompt_tokens >= ctx) return std::nullopt;
  chat.max_tokens = std::min(chat.max_tokens.value_or(std::numeric_limits<int32_t>::max()), ctx - prompt_tokens);
  return std::nullopt;
}

// Ollama's answer to a request with nothing to generate: the model is loaded (it always is here).
HttpResponse load_only_response(const OllamaRequest& request) {
  json body = ollama_chunk_json(request, ollama_timestamp_now(), "");
  body["done"] = true;
  body["done_reason"] = "load";
  return ServerContext::json_response(body);
}

HttpResponse handle_generation(ServerContext& context, const HttpRequest& req, bool generate) {
  if (context.draining()) {
    return ollama_error_response(context, ApiError{503, "the server is shutting down", "server_error", {}, {}});
  }
  auto parsed = generate ? parse_ollama_generate(req.body) : parse_ollama_chat(req.body);
  if (!parsed) return ollama_error_response(context, parsed.error());
  OllamaRequest& request = *parsed;
  request.chat.cache_salt = scoped_cache_salt(req, request.chat.cache_salt);
  if (auto error = context.check_model(request.chat)) {
    error->message = fmt::format("model '{}' not found", request.model);
    return ollama_error_response(context, *error);
  }
  if (request.load_only) return load_only_response(request);
  const bool gemma4 = context.chat().tool_call_format() == ToolCallFormat::kGemma4;
  if (request.think && !context.chat().harmony() && !gemma4) {
    return ollama_error_response(
        context, invalid_request(fmt::format("\"{}\" does not support thinking", request.model), "think"));
  }
  if (request.think && gemma4) {  // Gemma 4's template thinks when asked to
    if (!request.chat.chat_template_kwargs.is_object()) request.chat.chat_template_kwargs = json::object();
    request.chat.chat_template_kwargs["enable_thinking"] = true;
  }
  auto built = build_prompt(context, request);
  if (!built) return ollama_error_response(context, built.error());
  ServerContext::BuiltPrompt& prompt = *built;
  request.chat.answer_primer = std::move(prompt.answer_primer);
  if (auto error =
          fit_context(request, context.loop().info().n_ctx, static_cast<int32_t>(prompt.tokens.size()), request.chat)) {
    return ollama_error_response(context, *error);
  }
  RequestSpec spec = context.build_spec(request.chat, std::move(prompt.tokens), std::move(prompt.checkpoint_hints));
  if (spec.use_cache && !spec.prompt.empty()) context.observe_prompt(spec.prompt, spec);
  auto handle = context.loop().submit(std::move(spec));
  if (!handle) return ollama_error_response(context, api_error(handle.error(), request.chat.endpoint));
  const bool remember = request.chat.use_cache && context.answers().max_entries() > 0 && !prompt.text.empty();
  auto gen = std::make_shared<OllamaGeneration>(context, std::move(request), std::move(*handle));
  gen->answer_tokens_reused = prompt.answer_tokens;
  if (remember) {
    gen->parse_special = prompt.parse_special;
    gen->prompt_text = std::move(prompt.text);
  }
  HttpResponse res;
  res.source = std::move(gen);
  return res;
}

OllamaModelFacts served_model(ServerContext& context, const std::string& id) {
  const EngineInfo& info = context.loop().info();
  OllamaModelFacts facts{id, info.weights_bytes, info.n_ctx, true, -1, info.listing};
  facts.embedding = info.embedding_refusal.empty();
  facts.completion = info.generation_refusal.empty();
  return facts;
}

HttpResponse handle_tags(ServerContext& context, bool ps) {
  const ModelNames& names = context.model_names();
  json models = json::array();
  std::vector<std::string> ids = {names.served};
  ids.insert(ids.end(), names.aliases.begin(), names.aliases.end());
  for (const std::string& id : ids) {
    OllamaModelFacts facts = served_model(context, id);
    if (ps) facts.size_bytes += context.loop().info().kv_plan.pool_bytes;
    models.push_back(ps ? ollama_ps_json(facts) : ollama_tag_json(facts));
  }
  return ServerContext::json_response(json{{"models", std::move(models)}});
}

HttpResponse handle_show(ServerContext& context, const HttpRequest& req) {
  auto name = parse_ollama_show(req.body);
  if (!name) return ollama_error_response(context, name.error());
  const std::string id = strip_latest_tag(*name);
  if (!context.model_names().accepts(id)) {
    return ollama_error_response(context, ApiError{404, fmt::format("model '{}' not found", *name), "not_found_error",
                                                   "model", "model_not_found"});
  }
  const std::string& shown = context.model_names().is_listed(id) ? id : context.model_names().served;
  return ServerContext::json_response(
      ollama_show_json(served_model(context, shown), context.chat().describe(), /*tools=*/true));
}

}  // namespace

HttpResponse ollama_error_response(ServerContext& context, const ApiError& error) {
  HttpResponse res = ServerContext::json_response(ollama_error_json(error));
  res.status = error.status;
  if (error.status == 429 || error.status == 503) res.set_header("Retry-After", "1");
  context.metrics().record_error(error.status);
  return res;
}

void add_ollama_routes(Routes& routes, ServerContext& context) {
  routes.add("POST", "/api/chat",
             [&context](const HttpRequest& req) { return handle_generation(context, req, false); });
  routes.add("POST", "/api/generate",
             [&context](const HttpRequest& req) { return handle_generation(context, req, true); });
  routes.add("GET", "/api/tags", [&context](const HttpRequest&) { return handle_tags(context, false); });
  routes.add("GET", "/api/ps", [&context](const HttpRequest&) { return handle_tags(context, true); });
  routes.add("POST", "/api/show", [&context](const HttpRequest& req) { return handle_show(context, req); });
  routes.add("GET", "/api/version", [](const HttpRequest&) {
    return ServerContext::json_response(json{{"version", std::string(kOllamaApiVersion)}});
  });
  add_ollama_embed_routes(routes, context);
}

}  // namespace hearth::server
