// ServerContext: the state the routes share, and the steps from a CompletionRequest to engine requests.

#include "server/api/server_context.h"

#include <algorithm>
#include <random>
#include <utility>

#include "engine/explain.h"
#include "server/api/gemma4_answer.h"
#include "server/api/harmony.h"
#include "util/log.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

ServerContext::ServerContext(EngineLoop& loop, const Tokenizer& tokenizer, const ChatFormatter& chat, Options options)
    : loop_(loop),
      tokenizer_(tokenizer),
      chat_(chat),
      model_names_(std::move(options.model_names)),
      on_idle_(std::move(options.on_idle)),
      strict_max_tokens_(options.strict_max_tokens),
      answers_(tokenizer, options.answer_memory_entries),
      volatile_(options.volatile_prefix) {}

double ServerContext::seconds_since_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void ServerContext::begin_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  ++num_in_flight_;
}

void ServerContext::end_in_flight() {
  std::function<void()> on_idle;  // a copy: once the lock is released this context may be destroyed (an unload)
  {
    std::lock_guard lock(in_flight_mutex_);
    if (--num_in_flight_ > 0) return;
    in_flight_done_.notify_all();
    on_idle = on_idle_;
  }
  if (on_idle) on_idle();
}

int ServerContext::num_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  return num_in_flight_;
}

int ServerContext::wait_in_flight(std::chrono::duration<double> timeout, bool until_grace_cut) {
  std::unique_lock lock(in_flight_mutex_);
  in_flight_done_.wait_for(lock, timeout, [&] { return num_in_flight_ == 0 || (until_grace_cut && grace_cut_); });
  return num_in_flight_;
}

void ServerContext::cut_grace() {
  {
    std::lock_guard lock(in_flight_mutex_);
    grace_cut_ = true;
  }
  in_flight_done_.notify_all();
}

HttpResponse ServerContext::json_response(const json& body) {
  HttpResponse res;
  res.body = dump(body);
  return res;
}

HttpResponse ServerContext::error_response(const ApiError& error) {
  HttpResponse res = json_response(error_json(error));
  res.status = error.status;
  if (error.status == 429 || error.status == 503) res.set_header("Retry-After", "1");
  if (error.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  metrics_.record_error(error.status);
  return res;
}

std::optional<ApiError> ServerContext::check_model(const CompletionRequest& request) const {
  if (auto error = model_names_.check(request.model)) return error;
  const std::string& refusal = loop().info().generation_refusal;  // an encoder: embeddings only
  if (!refusal.empty()) return invalid_request(refusal, "model", "model_not_generative");
  return std::nullopt;
}

std::optional<ApiError> ServerContext::force_tool_call(CompletionRequest& request) const {
  if (!request.tool_call_forced()) return std::nullopt;
  // One call in the template's own format, its arguments following the function's parameters schema.
  const bool named = request.tool_choice == CompletionRequest::ToolChoice::kFunction;
  auto grammar = forced_tool_call_grammar(chat_.tool_call_format(), request.tools,
                                          named ? request.tool_choice_name : std::string());
  if (!grammar) return invalid_request(grammar.error().message, "tools", "unsupported_schema");
  request.grammar = std::make_shared<const Grammar>(std::move(*grammar));
  return std::nullopt;
}

ApiResult<ServerContext::BuiltPrompt> ServerContext::render_chat(const CompletionRequest& request) const {
  BuiltPrompt built;
  Result<std::string> text = std::string();
  if (request.continue_final_message) {
    if (auto error = check_continuation(request)) return *error;
    auto continued = chat_.render_continued(request.messages, request.tools, request.chat_template_kwargs);
    if (!continued) return invalid_request("cannot render the chat template: " + continued.error().message, "messages");
    built.answer_primer = std::move(continued->primer);
    text = std::move(continued->text);
  } else {
    text = chat_.render(request.messages, request.tools, request.chat_template_kwargs);
  }
  if (!text) return invalid_request("cannot render the chat template: " + text.error().message, "messages");
  // A template that writes BOS itself must not get a second one from the tokenizer.
  const std::string_view bos = tokenizer_.token_text(tokenizer_.bos());
  built.add_special = bos.empty() || std::string_view(*text).substr(0, bos.size()) != bos;
  built.text = std::move(*text);
  built.parse_special = true;
  built.system_end_bytes = system_prompt_end(request, built.text);
  return built;
}

std::optional<ApiError> ServerContext::check_continuation(const CompletionRequest& request) {
  const nlohmann::json& messages = request.messages;
  const nlohmann::json* last = messages.is_array() && !messages.empty() ? &messages.back() : nullptr;
  if (!last || !last->is_object() || last->value("role", nlohmann::json()) != "assistant") {
    return invalid_request("only a chat whose last message is the assistant's can be continued", "messages");
  }
  if (last->contains("tool_calls") || !last->value("content", nlohmann::json()).is_string() ||
      (*last)["content"].get_ref<const std::string&>().empty()) {
    return invalid_request("the final assistant message must be text (no tool calls) to be continued", "messages");
  }
  if (request.grammar || request.tool_call_forced()) {
    return invalid_request(
        "a continued assistant message cannot be combined with a forced tool call or a response format: the "
        "constraint would hold for the continuation only",
        "messages");
  }
  return std::nullopt;
}

size_t ServerContext::system_prompt_end(const CompletionRequest& request, const std::string& text) const {
  if (loop_.info().num_state_checkpoint_slots == 0 || !request.messages.is_array()) return 0;
  size_t k = 0;
  while (k < request.messages.size() && request.messages[k].is_object()) {
    const nlohmann::json& role = request.messages[k].value("role", nlohmann::json());
    if (role != "system" && role != "developer") break;
    ++k;
  }
  if (k == 0 || k == request.messages.size()) return 0;
  // The leading system messages alone, rendered: where their text stops matching the whole chat's, the chat's
  // first other message begins (give or take the markup both put next, which every user's prompt shares too).
  const nlohmann::json system(request.messages.begin(), request.messages.begin() + static_cast<ptrdiff_t>(k));
  auto alone = chat_.render(system, request.tools, request.chat_template_kwargs);
  if (!alone) return 0;
  const auto mismatch = std::mismatch(alone->begin(), alone->end(), text.begin(), text.end());
  return static_cast<size_t>(mismatch.second - text.begin());
}

void ServerContext::tokenize_prompt(const CompletionRequest& request, BuiltPrompt& built) {
  // A later turn of a conversation: the answer's own ids, not a re-tokenization of its text (answer_memory.h).
  std::optional<AnswerMemory::Spliced> spliced;
  if (request.use_cache) spliced = answers_.splice(request.cache_salt, built.parse_special, built.text);
  if (spliced) {
    built.tokens = std::move(spliced->tokens);
    built.answer_tokens = spliced->answer_tokens;
  } else {
    built.tokens = tokenizer_.encode(built.text, built.add_special, built.parse_special);
  }
  if (built.system_end_bytes > 0) {
    // The ids the system prompt's text has in the whole prompt: those its own tokenization agrees on.
    const std::vector<TokenId> head = tokenizer_.encode(std::string_view(built.text).substr(0, built.system_end_bytes),
                                                        built.add_special, built.parse_special);
    const auto same = std::mismatch(head.begin(), head.end(), built.tokens.begin(), built.tokens.end());
    const auto n = static_cast<int32_t>(same.first - head.begin());
    if (n > 0) built.checkpoint_hints = {n};
  }
}

ApiResult<ServerContext::BuiltPrompt> ServerContext::build_prompt(const CompletionRequest& request) {
  if (request.endpoint == Endpoint::kChat) {
    auto built = render_chat(request);
    if (built) tokenize_prompt(request, *built);
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

RequestSpec ServerContext::build_spec(const CompletionRequest& request, std::vector<TokenId> prompt,
                                      std::vector<int32_t> checkpoint_hints) const {
  RequestSpec spec;
  spec.checkpoint_hints = std::move(checkpoint_hints);
  spec.max_tokens = request.max_tokens;
  spec.strict_max_tokens = strict_max_tokens_;
  // OpenAI's defaults: 16 for completions, "until the context is full" for chat.
  if (request.endpoint == Endpoint::kCompletion) spec.default_max_tokens = 16;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = request.temperature;
  spec.sampling.top_p = request.top_p;
  spec.sampling.top_k = request.top_k;
  spec.sampling.frequency_penalty = request.frequency_penalty;
  spec.sampling.presence_penalty = request.presence_penalty;
  spec.sampling.min_p = request.min_p;
  spec.sampling.repeat_penalty = request.repeat_penalty;
  spec.sampling.repeat_last_n = request.repeat_last_n;
  spec.sampling.logit_bias = request.logit_bias;
  spec.sampling.seed = request.seed ? *request.seed : std::random_device{}();
  spec.stop = request.stop;
  spec.ignore_eos = request.ignore_eos;
  spec.use_cache = request.use_cache;
  spec.cache_salt = request.cache_salt;
  spec.retention = request.retention;
  spec.pin_prefix = request.pin_prefix;
  spec.speculative = request.speculative;
  spec.top_logprobs = request.top_logprobs;
  spec.grammar = request.grammar;
  spec.render_special_tokens = uses_channels(request);
  return spec;
}

ApiResult<std::vector<std::unique_ptr<RequestHandle>>> ServerContext::submit_choices(
    const CompletionRequest& request, std::vector<TokenId> prompt, const std::vector<int32_t>& checkpoint_hints) {
  // In order, so the scheduler admits choice 0 first and the others wait for its prompt blocks, then share them
  // (Scheduler::waits_for_shared_prefix): the prompt is computed once, not n times.
  std::vector<std::unique_ptr<RequestHandle>> handles;
  // The predicted output's ids as the answer would spell them: plain text, no special tokens.
  const std::vector<TokenId> prediction =
      request.has_prediction ? tokenizer_.encode(request.prediction_text, false, false) : std::vector<TokenId>{};
  for (int32_t i = 0; i < request.n; ++i) {
    RequestSpec spec = build_spec(request, i + 1 < request.n ? prompt : std::move(prompt), checkpoint_hints);
    spec.prediction = prediction;
    if (request.seed) spec.sampling.seed = *request.seed + static_cast<uint64_t>(i);  // distinct, reproducible
    if (i == 0 && spec.use_cache && !spec.prompt.empty()) observe_prompt(spec.prompt, spec);
    auto handle = loop_.submit(std::move(spec));
    if (!handle) return api_error(handle.error(), request.endpoint);  // the choices submitted are aborted
    handles.push_back(std::move(*handle));
  }
  return handles;
}

void ServerContext::observe_prompt(std::span<const TokenId> prompt, const RequestSpec& spec) {
  std::optional<VolatilePrefixDetector::Finding> finding;
  {
    std::lock_guard lock(volatile_mutex_);
    finding = volatile_.observe(spec.cache_salt, prompt);
  }
  if (!finding) return;
  const VolatileRegion& r = finding->region;
  metrics_.record_volatile_prefix(r.tokens_lost, finding->warn);
  if (!finding->warn) return;
  const std::string text = token_excerpt(tokenizer_, prompt, r.begin, std::min(r.end, r.begin + 2 * kExcerptTokens));
  history_.record_warning({seconds_since_start(), spec.cache_salt, r, text});
  spdlog::warn(
      "volatile prompt prefix: tokens {}..{} ({:?}) differ in {} recent requests that share the {} tokens "
      "after them, so each request recomputes about {} tokens; move the changing part after the shared "
      "text to let the prefix cache reuse it",
      r.begin, r.end, text, r.num_requests, r.tokens_lost, r.tokens_lost);
}

void ServerContext::remember_answer(const std::string& cache_salt, bool parse_special, std::string& prompt_text,
                                    const RequestOutput& out) {
  const auto prompt_end = out.tokens.begin() + out.usage.prompt_tokens;
  answers_.remember(cache_salt, parse_special, std::move(prompt_text),
                    std::vector<TokenId>(out.tokens.begin(), prompt_end),
                    std::span<const TokenId>(prompt_end, out.tokens.end()));
}

bool ServerContext::uses_channels(const CompletionRequest& request) const {
  return request.endpoint == Endpoint::kChat && !request.grammar &&
         (chat_.harmony() || chat_.tool_call_format() == ToolCallFormat::kGemma4);
}

std::unique_ptr<ChannelParser> ServerContext::channel_parser(const CompletionRequest& request) const {
  if (!uses_channels(request)) return nullptr;
  std::unique_ptr<ChannelParser> parser;
  if (chat_.harmony()) {
    parser = std::make_unique<HarmonyParser>();
  } else {
    parser = std::make_unique<Gemma4Parser>(request.tools_active() ? request.tools : nlohmann::json::array());
  }
  // A continued message: the parser reads the answer so far (which the client has) and drops what it returns.
  if (!request.answer_primer.empty()) (void)parser->push(request.answer_primer);
  return parser;
}

}  // namespace hearth::server
