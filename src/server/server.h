#pragma once
// HttpServer: the OpenAI-compatible HTTP front end over an EngineLoop. The routes read an HttpRequest and return
// an HttpResponse (http_types.h); the transport (http_transport.h, Boost.Beast) owns sockets, deadlines and limits.
//
//   POST /v1/chat/completions, /v1/completions   parse → template → tokenize → EngineLoop::submit → JSON or SSE
//   GET  /v1/models, /v1/models/{id}, /health, /metrics;  POST /tokenize (token ids of a text, llama.cpp style)
//   GET  /v1/kv/plan;  POST /v1/cache/explain (what the prefix cache holds of a prompt and why reuse would stop)
//   POST /v1/cache/warm (prefill and pin a prefix, e.g. the house rules)
//   GET  /, /dashboard (the live page, no key needed);  /v1/stats (the page's JSON);  /v1/cache (cached prefixes)
//
// Every error leaves as an OpenAI error object with its status; a route that throws becomes a 500 (the transport's
// worker catches it). With an API key, every endpoint except /health and the dashboard page (/, /dashboard) needs
// "Authorization: Bearer KEY".
// A generation is a ResponseSource driven by engine events: no thread waits for it, and a client that leaves (a
// stream or not) aborts its request, whose blocks return to the pool within one engine step.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_loop.h"
#include "kv/volatile_prefix.h"
#include "server/answer_memory.h"
#include "server/chat.h"
#include "server/http_transport.h"
#include "server/http_types.h"
#include "server/metrics.h"
#include "server/model_names.h"
#include "server/openai_json.h"
#include "server/stats_history.h"
#include "tokenizer/tokenizer.h"

namespace hearth::server {

// The Anthropic Messages route (messages.cpp); errors on it and under it use Anthropic's shape.
inline constexpr std::string_view kMessagesPath = "/v1/messages";
[[nodiscard]] inline bool is_anthropic_path(std::string_view path) {
  return path == kMessagesPath ||
         (path.starts_with(kMessagesPath) && path.substr(kMessagesPath.size()).starts_with("/"));
}

struct ServerConfig {
  std::string api_key;             // empty: no authentication
  HttpTransportConfig http;        // host, port (0 picks a free one), body and header limits, deadlines, connection cap
  double shutdown_grace_s = 10.0;  // in-flight requests may finish for this long after SIGINT/SIGTERM
  VolatilePrefixConfig volatile_prefix;    // the volatile-prefix warning (see kv/volatile_prefix.h)
  size_t answer_memory_entries = 256;      // recent answers whose ids later turns reuse (0: off; answer_memory.h)
  std::vector<std::string> model_aliases;  // more names for the served model (--model-alias), listed by /v1/models
  bool strict_model_names = false;         // only the model id and its aliases; other names 404 (model_names.h)
  // False: the server has no socket of its own; a front (model_router.h, several models) calls handle() after it
  // checked the key and chose the model. listen() and bind() must not be called then.
  bool own_transport = true;
  // Called (from any thread, under no lock of this server) whenever the last request in flight has ended, so a
  // front can unload the model. May be empty.
  std::function<void()> on_idle;
};

// Constant-time comparison of an Authorization header against "Bearer KEY" (the scheme case-insensitive).
[[nodiscard]] bool bearer_matches(std::string_view header, std::string_view key);
// Constant-time comparison of a bare key (the x-api-key header) against `key`.
[[nodiscard]] bool api_key_matches(std::string_view given, std::string_view key);

// The model's facts (id, context, block size, KV plan) are the engine's: the server reads loop.info().
class HttpServer {
 public:
  HttpServer(ServerConfig config, EngineLoop& loop, const Tokenizer& tokenizer, const ChatFormatter& chat);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket; fails with the reason (port in use, bad host).
  [[nodiscard]] Result<void> bind();
  int bound_port() const { return transport_->bound_port(); }
  // Serves until shutdown() has run and every connection is done. Requires bind().
  void listen();
  // Prefills and (unless "pin": false) pins the prompt or chat of a completion-shaped body, waiting until done:
  // POST /v1/cache/warm and --warm. The result says what the prefix cache holds of it (cache_warm.cpp).
  [[nodiscard]] ApiResult<nlohmann::json> warm(const nlohmann::json& body);

  // Routes one request (authentication included); what the transport calls. Any thread.
  HttpResponse handle(const HttpRequest& req);
  // Requests whose generation has not ended yet (each choice of each response); any thread.
  int num_in_flight();
  // The GET /metrics text of this server and its engine (metrics.h); any thread.
  std::string metrics_text();

  // Graceful stop, from any thread: refuse new work (503), stop accepting, let in-flight requests finish for up to
  // shutdown_grace_s, then abort the rest, stop the engine loop and close the connections. Idempotent.
  void shutdown();
  // Ends shutdown()'s grace period now (a second SIGTERM): what is in flight is aborted. Any thread; before or
  // during shutdown().
  void cut_grace();

 private:
  class Generation;
  friend class Generation;
  class MessagesGeneration;
  friend class MessagesGeneration;
  using Route = std::function<HttpResponse(const HttpRequest&)>;
  struct RouteEntry {
    std::string method;
    std::string path;  // exact, or a prefix when it ends in '/' (except "/" itself)
    Route route;
  };
  // A request's prompt ids, and what the answer memory needs to remember its answer.
  struct BuiltPrompt {
    std::vector<TokenId> tokens;
    std::string text;            // the text the ids stand for (rendered chat or prompt text); empty for ids
    bool parse_special = false;  // how `text` was tokenized
    bool add_special = true;     // whether the tokenizer adds BOS (not when the template wrote it)
    int32_t answer_tokens = 0;   // ids taken from a remembered answer
  };

  std::optional<HttpResponse> check_auth(const HttpRequest& req);
  void install_routes();
  HttpResponse handle_health() const;
  HttpResponse handle_models(const HttpRequest& req) const;
  HttpResponse handle_completion(const HttpRequest& req, Endpoint endpoint);
  HttpResponse handle_metrics();
  HttpResponse handle_kv_plan(const HttpRequest& req);
  HttpResponse handle_tokenize(const HttpRequest& req);
  HttpResponse handle_cache_explain(const HttpRequest& req);
  HttpResponse handle_cache_warm(const HttpRequest& req);
  static constexpr int kMaxWarmsInFlight = 2;
  // The dashboard (dashboard.cpp): the page, GET /v1/stats, GET /v1/cache, and the 1 s sampler's tick.
  HttpResponse handle_dashboard_page() const;
  HttpResponse handle_stats(const HttpRequest& req);
  HttpResponse handle_cache(const HttpRequest& req);
  void sample_stats();
  double seconds_since_start() const;
  HttpResponse handle_cache_pin(const HttpRequest& req);
  HttpResponse handle_cache_unpin(const HttpRequest& req);
  HttpResponse handle_messages(const HttpRequest& req);
  // Feeds an admitted prompt to the volatile-prefix detector; logs (rate-limited) and counts what it finds.
  void observe_prompt(std::span<const TokenId> prompt, const RequestSpec& spec);
  ApiResult<BuiltPrompt> build_prompt(const CompletionRequest& request);
  // The chat's text through the model's template (no ids yet), and the ids of a built text (answer memory first).
  ApiResult<BuiltPrompt> render_chat(const CompletionRequest& request) const;
  void tokenize_prompt(const CompletionRequest& request, BuiltPrompt& built);
  // Remembers a finished request's answer (answer_memory.h); takes `prompt_text`.
  void remember_answer(const std::string& cache_salt, bool parse_special, std::string& prompt_text,
                       const RequestOutput& out);
  RequestSpec build_spec(const CompletionRequest& request, std::vector<TokenId> prompt) const;
  // A chat request to a harmony model (gpt-oss) whose answer's markers are rendered and parsed (harmony.h); not one
  // with a grammar (a forced tool call, response_format), whose output is the grammar's plain text.
  bool uses_harmony(const CompletionRequest& request) const;
  // One engine request per choice (request.n), in order; a refusal is the error of the first refused choice.
  ApiResult<std::vector<std::unique_ptr<RequestHandle>>> submit_choices(const CompletionRequest& request,
                                                                        std::vector<TokenId> prompt);
  // 404 only with strict model names, for a name that is neither the served model nor an alias (model_names.h).
  std::optional<ApiError> check_model(const CompletionRequest& request) const;
  // tool_choice required or a named function: sets request.grammar to one call in the template's format.
  std::optional<ApiError> force_tool_call(CompletionRequest& request) const;
  // A finished generation: the answer memory and the metrics (from the final output, whoever reads it).
  void record_finish(Generation& gen, RequestOutput& out, size_t choice);
  HttpResponse error_response(const ApiError& error);
  // The same error in Anthropic's shape (the /v1/messages route).
  HttpResponse anthropic_error_response(const ApiError& error);
  static HttpResponse json_response(const nlohmann::json& body);
  // Bookkeeping of requests in flight, so shutdown can wait for them (an event, not a poll).
  void begin_in_flight();
  void end_in_flight();

  ServerConfig config_;
  EngineLoop& loop_;
  const Tokenizer& tokenizer_;
  const ChatFormatter& chat_;
  ModelNames model_names_;
  Metrics metrics_;
  std::vector<RouteEntry> routes_;
  std::atomic<bool> draining_{false};
  std::atomic<int> warms_in_flight_{0};
  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_done_;
  int num_in_flight_ = 0;    // guarded by in_flight_mutex_
  bool grace_cut_ = false;  // guarded by in_flight_mutex_
  std::atomic<uint64_t> next_id_{1};
  std::mutex volatile_mutex_;
  VolatilePrefixDetector volatile_;  // guarded by volatile_mutex_
  AnswerMemory answers_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  const std::string dashboard_csp_;
  StatsHistory history_;
  std::unique_ptr<StatsSampler> sampler_;  // after history_ and loop_, which its ticks use
  // Last: destroyed first, so no connection outlives what its routes use.
  std::unique_ptr<HttpTransport> transport_;
};

}  // namespace hearth::server
