#pragma once
// ServerContext: what the routes of one served model share. HttpServer (server.h) owns one and hands it to every
// feature's add_*_routes; the routes and their generations keep a reference, so it outlives them.
//
//   the engine side      loop(), tokenizer(), chat() (the model's template), model_names()
//   what routes feed     metrics() (/metrics), history() (/v1/stats), answers() (answer memory), the volatile-prefix
//                        detector (observe_prompt)
//   requests in flight   begin_in_flight/end_in_flight (each Generation, generation.h), so shutdown can wait for
//                        them and a front can unload the model once the last one is done (on_idle)
//   one request's path   check_model → force_tool_call → build_prompt (render_chat, tokenize_prompt) → submit_choices
//                        (build_spec, observe_prompt): the same for every dialect and for the cache endpoints
//
// Every member may be called from any thread unless it says otherwise.

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_loop.h"
#include "kv/volatile_prefix.h"
#include "server/api/api_error.h"
#include "server/api/channel_parser.h"
#include "server/api/chat.h"
#include "server/api/completion_request.h"
#include "server/cache/answer_memory.h"
#include "server/http/http_types.h"
#include "server/models/model_names.h"
#include "server/observe/metrics.h"
#include "server/observe/stats_history.h"
#include "tokenizer/tokenizer.h"

namespace hearth::server {

class ServerContext {
 public:
  struct Options {
    ModelNames model_names;
    VolatilePrefixConfig volatile_prefix;  // the volatile-prefix warning (see kv/volatile_prefix.h)
    size_t answer_memory_entries = 256;    // recent answers whose ids later turns reuse (0: off; answer_memory.h)
    // A max_tokens beyond the context's room is a 400 (--strict-max-tokens), not clamped (RequestSpec).
    bool strict_max_tokens = false;
    // Called (from any thread, under no lock of this context) whenever the last request in flight has ended. May
    // be empty.
    std::function<void()> on_idle;
  };
  ServerContext(EngineLoop& loop, const Tokenizer& tokenizer, const ChatFormatter& chat, Options options);
  ServerContext(const ServerContext&) = delete;
  ServerContext& operator=(const ServerContext&) = delete;

  EngineLoop& loop() const { return loop_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const ChatFormatter& chat() const { return chat_; }
  // A chat request to a model whose answers set reasoning and calls apart with markers (harmony: gpt-oss,
  // api/harmony.h; Gemma 4, api/gemma4_answer.h): its answer's markers are rendered and parsed; not one with a
  // grammar (a forced tool call, response_format), whose output is the grammar's plain text.
  [[nodiscard]] bool uses_channels(const CompletionRequest& request) const;
  // The parser of such a request's answer (its calls recognized to the request's active tools); null for others.
  [[nodiscard]] std::unique_ptr<ChannelParser> channel_parser(const CompletionRequest& request) const;
  const ModelNames& model_names() const { return model_names_; }
  Metrics& metrics() { return metrics_; }
  StatsHistory& history() { return history_; }
  AnswerMemory& answers() { return answers_; }
  double seconds_since_start() const;
  // A number no other call returned (response ids draw from it).
  uint64_t next_id() { return next_id_.fetch_add(1); }

  // Set once by HttpServer::shutdown: the generating routes answer 503 from then on.
  bool draining() const { return draining_; }
  // Sets draining; returns whether it was already set.
  bool start_draining() { return draining_.exchange(true); }

  // Bookkeeping of requests in flight, so shutdown can wait for them (an event, not a poll). end_in_flight calls
  // on_idle when it ends the last one.
  void begin_in_flight();
  void end_in_flight();
  int num_in_flight();
  // Waits until no request is in flight, at most `timeout`; with `until_grace_cut`, also no longer than until
  // cut_grace() has run. Returns the requests still in flight.
  int wait_in_flight(std::chrono::duration<double> timeout, bool until_grace_cut);
  // Ends the waits of wait_in_flight(..., true), now and later (a second SIGTERM).
  void cut_grace();

  // The error object with its status (OpenAI's shape: every route but Anthropic's), counted in the metrics; 429 and
  // 503 carry Retry-After, 401 WWW-Authenticate.
  HttpResponse error_response(const ApiError& error);
  static HttpResponse json_response(const nlohmann::json& body);

  // A request's prompt ids, and what the answer memory needs to remember its answer.
  struct BuiltPrompt {
    std::vector<TokenId> tokens;
    std::string text;            // the text the ids stand for (rendered chat or prompt text); empty for ids
    bool parse_special = false;  // how `text` was tokenized
    bool add_special = true;     // whether the tokenizer adds BOS (not when the template wrote it)
    int32_t answer_tokens = 0;   // ids taken from a remembered answer
    // Hybrid models: where the chat's leading system messages end in `text` (bytes; 0: unknown), and then in the
    // ids: RequestSpec::checkpoint_hints, so the next user's prompt after the same system prompt resumes there.
    size_t system_end_bytes = 0;
    std::vector<int32_t> checkpoint_hints;
    std::string answer_primer;  // a continued chat's ContinuedChat::primer, for CompletionRequest::answer_primer
  };
  // 404 only with strict model names, for a name that is neither the served model nor an alias (model_names.h);
  // 400 model_not_generative for an embedding-only model (EngineInfo::generation_refusal).
  [[nodiscard]] std::optional<ApiError> check_model(const CompletionRequest& request) const;
  // tool_choice required or a named function: sets request.grammar to one call in the template's format.
  [[nodiscard]] std::optional<ApiError> force_tool_call(CompletionRequest& request) const;
  [[nodiscard]] ApiResult<BuiltPrompt> build_prompt(const CompletionRequest& request);
  // The chat's text through the model's template (no ids yet), and the ids of a built text (answer memory first).
  [[nodiscard]] ApiResult<BuiltPrompt> render_chat(const CompletionRequest& request) const;
  void tokenize_prompt(const CompletionRequest& request, BuiltPrompt& built);
  // A 400 unless the chat can be continued: its last message is the assistant's text, with no constraint.
  [[nodiscard]] static std::optional<ApiError> check_continuation(const CompletionRequest& request);
  // Hybrid models (BuiltPrompt::system_end_bytes): where the leading system and developer messages end in the chat's
  // rendered `text`; 0 for other models, a chat of system messages only or none.
  [[nodiscard]] size_t system_prompt_end(const CompletionRequest& request, const std::string& text) const;
  [[nodiscard]] RequestSpec build_spec(const CompletionRequest& request, std::vector<TokenId> prompt,
                                       std::vector<int32_t> checkpoint_hints = {}) const;
  // One engine request per choice (request.n), in order; a refusal is the error of the first refused choice.
  [[nodiscard]] ApiResult<std::vector<std::unique_ptr<RequestHandle>>> submit_choices(
      const CompletionRequest& request, std::vector<TokenId> prompt, const std::vector<int32_t>& checkpoint_hints = {});
  // Feeds an admitted prompt to the volatile-prefix detector; logs (rate-limited) and counts what it finds.
  void observe_prompt(std::span<const TokenId> prompt, const RequestSpec& spec);
  // Remembers a finished request's answer (answer_memory.h); takes `prompt_text`.
  void remember_answer(const std::string& cache_salt, bool parse_special, std::string& prompt_text,
                       const RequestOutput& out);

 private:
  EngineLoop& loop_;
  const Tokenizer& tokenizer_;
  const ChatFormatter& chat_;
  const ModelNames model_names_;
  const std::function<void()> on_idle_;
  const bool strict_max_tokens_;
  Metrics metrics_;
  StatsHistory history_;
  AnswerMemory answers_;
  std::mutex volatile_mutex_;
  VolatilePrefixDetector volatile_;  // guarded by volatile_mutex_
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};
  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_done_;
  int num_in_flight_ = 0;   // guarded by in_flight_mutex_
  bool grace_cut_ = false;  // guarded by in_flight_mutex_
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace hearth::server
