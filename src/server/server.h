#pragma once
// HttpServer: the OpenAI-compatible HTTP front end over an EngineLoop (cpp-httplib).
//
//   POST /v1/chat/completions, /v1/completions   parse → template → tokenize → EngineLoop::submit → JSON or SSE
//   GET  /v1/models, /v1/models/{id}, /health, /metrics;  POST /tokenize (token ids of a text, llama.cpp style)
//   POST /v1/cache/explain   what the prefix cache holds of a prompt and why reuse would stop (no model run)
//
// Every error leaves as an OpenAI error object with its status; handlers never throw into httplib (one wrapper
// maps exceptions to 500). With an API key, every endpoint except /health needs "Authorization: Bearer KEY".
// A stream whose client goes away aborts its request (the RequestHandle is dropped), so its blocks return to the
// pool within one engine step.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "engine/engine_loop.h"
#include "kv/volatile_prefix.h"
#include "model/tokenizer.h"
#include "server/answer_memory.h"
#include "server/chat.h"
#include "server/metrics.h"
#include "server/openai_json.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hearth::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0 picks a free port (see bound_port)
  std::string api_key;  // empty: no authentication
  size_t max_body_bytes = 4u << 20;
  int http_threads = 128;                // connections served at once (streams hold one each)
  double shutdown_grace_s = 10.0;        // in-flight requests may finish for this long after SIGINT/SIGTERM
  VolatilePrefixConfig volatile_prefix;  // the volatile-prefix warning (see kv/volatile_prefix.h)
  size_t answer_memory_entries = 256;    // recent answers whose ids later turns reuse (0: off; answer_memory.h)
};

// Constant-time comparison of an Authorization header against "Bearer KEY" (the scheme in any case, RFC 7235).
[[nodiscard]] bool bearer_matches(std::string_view header, std::string_view key);

// The model's facts (id, context, block size, KV plan) are the engine's: the server reads loop.info().
class HttpServer {
 public:
  HttpServer(ServerConfig config, EngineLoop& loop, const Tokenizer& tokenizer, const ChatFormatter& chat);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket; fails with the reason (port in use, bad host).
  [[nodiscard]] Result<void> bind();
  int bound_port() const { return bound_port_; }
  // Serves until shutdown() has run and every connection is done. Requires bind().
  void listen();
  // Graceful stop, from any thread: refuse new work (503), stop accepting, let in-flight requests finish for up to
  // shutdown_grace_s, then abort the rest and stop the engine loop. Idempotent.
  void shutdown();

 private:
  struct Generation;
  // A request's prompt ids, and what the answer memory needs to remember its answer.
  struct BuiltPrompt {
    std::vector<TokenId> tokens;
    std::string text;            // the text the ids stand for (rendered chat or prompt text); empty for ids
    bool parse_special = false;  // how `text` was tokenized
    int32_t answer_tokens = 0;   // ids taken from a remembered answer
  };
  // Authentication, refusals before routing, and error objects for statuses httplib sets itself.
  void install_middleware();
  void install_routes();
  void handle_completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void handle_metrics(httplib::Response& res);
  void handle_kv_plan(const httplib::Request& req, httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_cache_explain(const httplib::Request& req, httplib::Response& res);
  // Feeds an admitted prompt to the volatile-prefix detector; logs (rate-limited) and counts what it finds.
  void observe_prompt(std::span<const TokenId> prompt, const RequestSpec& spec);
  ApiResult<BuiltPrompt> build_prompt(const CompletionRequest& request);
  RequestSpec build_spec(const CompletionRequest& request, std::vector<TokenId> prompt) const;
  // 404 unless the request names no model or the one this server serves.
  std::optional<ApiError> check_model(const CompletionRequest& request) const;
  void respond_whole(std::shared_ptr<Generation> gen, httplib::Response& res);
  void respond_stream(std::shared_ptr<Generation> gen, httplib::Response& res);
  bool stream_step(Generation& gen, const std::function<bool(const std::string&)>& write);
  std::string stream_events(Generation& gen, const RequestOutput& out);
  void finish(Generation& gen, RequestOutput& out);
  void on_disconnect(Generation& gen);
  void send_error(httplib::Response& res, const ApiError& error);
  // Bookkeeping of requests in flight, so shutdown can wait for them (an event, not a poll).
  void begin_in_flight();
  void end_in_flight();

  ServerConfig config_;
  EngineLoop& loop_;
  const Tokenizer& tokenizer_;
  const ChatFormatter& chat_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  int bound_port_ = 0;
  std::atomic<bool> draining_{false};
  std::mutex in_flight_mutex_;
  std::condition_variable in_flight_done_;
  int num_in_flight_ = 0;  // guarded by in_flight_mutex_
  std::atomic<uint64_t> next_id_{1};
  std::mutex volatile_mutex_;
  VolatilePrefixDetector volatile_;  // guarded by volatile_mutex_
  AnswerMemory answers_;
};

}  // namespace hearth::server
