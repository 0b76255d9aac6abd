// POST /v1/chat/completions and /v1/completions: validate, build the prompt, submit (one engine request per
// choice), then answer as one JSON object or as an SSE stream, produced by a Generation (generation.h) as the
// engine's outputs arrive (no thread waits for them).

#include <chrono>
#include <random>

#include "server/generation.h"
#include "server/server.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::string random_hex(uint64_t salt) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ salt);
  return fmt::format("{:016x}", rng());
}

}  // namespace

void HttpServer::begin_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  ++num_in_flight_;
}

void HttpServer::end_in_flight() {
  std::function<void()> on_idle;  // a copy: once the lock is released this server may be destroyed (an unload)
  {
    std::lock_guard lock(in_flight_mutex_);
    if (--num_in_flight_ > 0) return;
    in_flight_done_.notify_all();
    on_idle = config_.on_idle;
  }
  if (on_idle) on_idle();
}

std::optional<ApiError> HttpServer::check_model(const CompletionRequest& request) const {
  return model_names_.check(request.model);
}

std::optional<ApiError> HttpServer::force_tool_call(CompletionRequest& request) const {
  if (!request.tool_call_forced()) return std::nullopt;
  // One call in the template's own format, its arguments following the function's parameters schema.
  const bool named = request.tool_choice == CompletionRequest::ToolChoice::kFunction;
  auto grammar = forced_tool_call_grammar(chat_.tool_call_format(), request.tools,
                                          named ? request.tool_choice_name : std::string());
  if (!grammar) return invalid_request(grammar.error().message, "tools", "unsupported_schema");
  request.grammar = std::make_shared<const Grammar>(std::move(*grammar));
  return std::nullopt;
}

ApiResult<HttpServer::BuiltPrompt> HttpServer::render_chat(const CompletionRequest& request) const {
  BuiltPrompt built;
  auto text = chat_.render(request.messages, request.tools, request.chat_template_kwargs);
  if (!text) return invalid_request("cannot render the chat template: " + text.error().message, "messages");
  // A template that writes BOS itself must not get a second one from the tokenizer.
  const std::string_view bos = tokenizer_.token_text(tokenizer_.bos());
  built.add_special = bos.empty() || std::string_view(*text).substr(0, bos.size()) != bos;
  built.text = std::move(*text);
  built.parse_special = true;
  return built;
}

void HttpServer::tokenize_prompt(const CompletionRequest& request, BuiltPrompt& built) {
  // A later turn of a conversation: the answer's own ids, not a re-tokenization of its text (answer_memory.h).
  std::optional<AnswerMemory::Spliced> spliced;
  if (request.use_cache) spliced = answers_.splice(request.cache_salt, built.parse_special, built.text);
  if (spliced) {
    built.tokens = std::move(spliced->tokens);
    built.answer_tokens = spliced->answer_tokens;
  } else {
    built.tokens = tokenizer_.encode(built.text, built.add_special, built.parse_special);
  }
}

ApiResult<HttpServer::BuiltPrompt> HttpServer::build_prompt(const CompletionRequest& request) {
  if (request.endpoint == Endpoint::kChat) {
    auto built = render_chat(request);
    if (auto* b = std::get_if<BuiltPrompt>(&built)) tokenize_prompt(request, *b);
    return built;
  }
  BuiltPrompt built;
  if (request.prompt_is_tokens) {
    // Ids are checked against the vocabulary by the engine (check_request), with every other limit.
    for (int32_t t : request.prompt_tokens) built.tokens.push_back(TokenId{t});
    return built;
  }
  built.text = request.prompt_text;
  tokenize_prompt(request, built);
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
  spec.sampling.frequency_penalty = request.frequency_penalty;
  spec.sampling.presence_penalty = request.presence_penalty;
  spec.sampling.logit_bias = request.logit_bias;
  spec.sampling.seed = request.seed ? *request.seed : std::random_device{}();
  spec.stop = request.stop;
  spec.ignore_eos = request.ignore_eos;
  spec.use_cache = request.use_cache;
  spec.cache_salt = request.cache_salt;
  spec.retention = request.retention;
  spec.pin_prefix = request.pin_prefix;
  spec.top_logprobs = request.top_logprobs;
  spec.grammar = request.grammar;
  spec.render_special_tokens = uses_harmony(request);
  return spec;
}

ApiResult<std::vector<std::unique_ptr<RequestHandle>>> HttpServer::submit_choices(const CompletionRequest& request,
                                                                                  std::vector<TokenId> prompt) {
  // In order, so the scheduler admits choice 0 first and the others wait for its prompt blocks, then share them
  // (Scheduler::waits_for_shared_prefix): the prompt is computed once, not n times.
  std::vector<std::unique_ptr<RequestHandle>> handles;
  for (int32_t i = 0; i < request.n; ++i) {
    RequestSpec spec = build_spec(request, i + 1 < request.n ? prompt : std::move(prompt));
    if (request.seed) spec.sampling.seed = *request.seed + static_cast<uint64_t>(i);  // distinct, reproducible
    if (i == 0 && spec.use_cache && !spec.prompt.empty()) observe_prompt(spec.prompt, spec);
    auto handle = loop_.submit(std::move(spec));
    if (!handle) return api_error(handle.error(), request.endpoint);  // the choices submitted are aborted
    handles.push_back(std::move(*handle));
  }
  return handles;
}

HttpResponse HttpServer::handle_completion(const HttpRequest& req, Endpoint endpoint) {
  if (draining_) {
    return error_response(ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  auto parsed = parse_completion_request(req.body, endpoint);
  if (auto* error = std::get_if<ApiError>(&parsed)) return error_response(*error);
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  if (auto error = check_model(request)) return error_response(*error);
  if (auto error = force_tool_call(request)) return error_response(*error);
  auto built = build_prompt(request);
  if (auto* error = std::get_if<ApiError>(&built)) return error_response(*error);
  BuiltPrompt& prompt = std::get<BuiltPrompt>(built);
  auto handles = submit_choices(request, std::move(prompt.tokens));
  if (auto* error = std::get_if<ApiError>(&handles)) return error_response(*error);

  ResponseMeta meta{
      fmt::format("{}{}", endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-", random_hex(next_id_.fetch_add(1))),
      static_cast<int64_t>(std::time(nullptr)), loop_.info().model_id, prompt.answer_tokens,
      loop_.info().system_fingerprint};
  const bool remember = request.use_cache && answers_.max_entries() > 0 && !prompt.text.empty();
  auto gen = std::make_shared<Generation>(*this, std::move(request), std::move(meta), std::move(std::get<0>(handles)));
  // The answer memory remembers turns of text prompts (choice 0's answer); the ids come with the final output.
  if (remember) {
    gen->remember = true;
    gen->prompt_text = std::move(prompt.text);
    gen->parse_special = prompt.parse_special;
  }
  HttpResponse res;
  res.source = std::move(gen);
  return res;
}

void HttpServer::remember_answer(const std::string& cache_salt, bool parse_special, std::string& prompt_text,
                                 const RequestOutput& out) {
  const auto prompt_end = out.tokens.begin() + out.usage.prompt_tokens;
  answers_.remember(cache_salt, parse_special, std::move(prompt_text),
                    std::vector<TokenId>(out.tokens.begin(), prompt_end),
                    std::span<const TokenId>(prompt_end, out.tokens.end()));
}

void HttpServer::record_finish(Generation& gen, RequestOutput& out, size_t choice) {
  if (out.error) return;  // refused by the engine: it never ran
  if (gen.remember && choice == 0) remember_answer(gen.request().cache_salt, gen.parse_special, gen.prompt_text, out);
  if (choice == 0 && gen.meta().answer_tokens_reused > 0)
    metrics_.record_answer_tokens_reused(gen.meta().answer_tokens_reused);
  const std::string reuse_stop = out.usage.reuse.reason ? reuse_stop_name(*out.usage.reuse.reason) : "";
  if (!reuse_stop.empty()) metrics_.record_reuse_stop(reuse_stop);
  metrics_.record_tenant(gen.request().cache_salt, out.usage.prompt_tokens, out.usage.cached_tokens,
                         out.usage.completion_tokens, reuse_stop);
  history_.record_ttft(seconds_since_start(), out.usage.ttft_ms / 1000.0);
  metrics_.record_request(gen.request().endpoint == Endpoint::kChat ? "chat" : "completions",
                          finish_reason_text(out.finish_reason), out.usage.ttft_ms / 1000.0,
                          out.usage.total_ms / 1000.0);
}

}  // namespace hearth::server
