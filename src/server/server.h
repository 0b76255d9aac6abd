#pragma once
// HttpServer: the HTTP front end of one served model over an EngineLoop. It owns the ServerContext the routes share
// (api/server_context.h), the route table (api/route_table.h) that each feature fills through its add_*_routes (the
// list is the constructor, server.cpp), and the transport (http/http_transport.h, Boost.Beast), which owns sockets,
// deadlines and limits. The routes read an HttpRequest and return an HttpResponse (http/http_types.h):
//
//   POST /v1/chat/completions, /v1/completions   parse → template → tokenize → EngineLoop::submit → JSON or SSE
//   POST /v1/messages                            the same in Anthropic's Messages dialect (and its count_tokens)
//   POST /api/chat, /api/generate, /api/show; GET /api/tags, /api/ps, /api/version   Ollama's dialect (NDJSON)
//   GET  /v1/models, /v1/models/{id}, /health, /metrics;  POST /tokenize (token ids of a text, llama.cpp style)
//   GET  /v1/kv/plan;  POST /v1/cache/explain (what the prefix cache holds of a prompt and why reuse would stop)
//   POST /v1/cache/warm (prefill and pin a prefix, e.g. the house rules);  POST, DELETE /v1/cache/pin
//   GET  /, /dashboard (the live page, no key needed);  /v1/stats (the page's JSON);  /v1/cache (cached prefixes)
//
// Every error leaves as an OpenAI error object with its status (Anthropic's shape under /v1/messages, Ollama's
// {"error": "..."} under /api/); a route that
// throws becomes a 500 (the transport's worker catches it). With an API key, every endpoint except /health and the
// dashboard page (/, /dashboard) needs "Authorization: Bearer KEY" or "x-api-key: KEY". With --api-keys the key
// names a tenant, and every route sees only that tenant's cache, answers, responses and pins (docs/tenants.md).
// A generation is a ResponseSource driven by engine events (api/generation.h): no thread waits for it, and a client
// that leaves (a stream or not) aborts its request, whose blocks return to the pool within one engine step.

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_loop.h"
#include "kv/volatile_prefix.h"
#include "server/api/api_error.h"
#include "server/api/chat.h"
#include "server/api/route_table.h"
#include "server/api/server_context.h"
#include "server/http/http_transport.h"
#include "server/http/http_types.h"
#include "server/http/tenant_keys.h"
#include "server/observe/stats_history.h"
#include "server/responses/response_store.h"
#include "tokenizer/tokenizer.h"

namespace hearth::server {

struct ServerConfig {
  std::string api_key;             // empty: no authentication
  // --api-keys: every key names a tenant, the caller's cache namespace (http/tenant_keys.h). Null: none. Not with
  // api_key.
  std::shared_ptr<TenantKeys> tenants;
  HttpTransportConfig http;        // host, port (0 picks a free one), body and header limits, deadlines, connection cap
  double shutdown_grace_s = 10.0;  // in-flight requests may finish for this long after SIGINT/SIGTERM
  VolatilePrefixConfig volatile_prefix;    // the volatile-prefix warning (see kv/volatile_prefix.h)
  size_t answer_memory_entries = 256;      // recent answers whose ids later turns reuse (0: off; answer_memory.h)
  ResponseStore::Limits responses_store;   // stored /v1/responses (responses/response_store.h)
  std::vector<std::string> model_aliases;  // more names for the served model (--model-alias), listed by /v1/models
  bool strict_model_names = false;         // only the model id and its aliases; other names 404 (model_names.h)
  bool strict_max_tokens = false;          // prompt + max_tokens beyond the context: 400, not clamped
  // False: the server has no socket of its own; a front (model_router.h, several models) calls handle() after it
  // checked the key and chose the model. listen() and bind() must not be called then.
  bool own_transport = true;
  // Called (from any thread, under no lock of this server) whenever the last request in flight has ended, so a
  // front can unload the model. May be empty.
  std::function<void()> on_idle;
};

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
  // config.http.extra_ports as bound (--ollama-port).
  std::vector<int> bound_extra_ports() const { return transport_->bound_extra_ports(); }
  // Serves until shutdown() has run and every connection is done. Requires bind().
  void listen();
  // Prefills and (unless "pin": false) pins the prompt or chat of a completion-shaped body, waiting until done:
  // POST /v1/cache/warm and --warm. The result says what the prefix cache holds of it (cache/cache_warm.cpp).
  [[nodiscard]] ApiResult<nlohmann::json> warm(const nlohmann::json& body);

  // Routes one request (authentication included); what the transport calls. Any thread.
  HttpResponse handle(const HttpRequest& req);
  // Requests whose generation has not ended yet (each choice of each response); any thread.
  int num_in_flight();
  // The GET /metrics text of this server and its engine (observe/metrics.h): the per-tenant series of `tenant` only,
  // or of every tenant when empty; any thread.
  std::string metrics_text(std::string_view tenant = {});

  // Graceful stop, from any thread: refuse new work (503), stop accepting, let in-flight requests finish for up to
  // shutdown_grace_s, then abort the rest, stop the engine loop and close the connections. Idempotent.
  void shutdown();
  // Ends shutdown()'s grace period now (a second SIGTERM): what is in flight is aborted. Any thread; before or
  // during shutdown().
  void cut_grace();

 private:
  // The routes of every feature, in the order they are looked up: one line per feature.
  void install_routes();
  // The 401 for a request without a known key.
  HttpResponse unauthorized(const HttpRequest& req);
  // The route of `req` (already authenticated), or its 404 / 405.
  HttpResponse route(const HttpRequest& req);
  // The error in the shape of the dialect `path` belongs to (Anthropic's under /v1/messages, else OpenAI's).
  HttpResponse error_response(std::string_view path, const ApiError& error);

  ServerConfig config_;
  EngineLoop& loop_;
  ServerContext context_;
  Routes routes_;                          // after context_, which its routes use
  std::unique_ptr<StatsSampler> sampler_;  // after context_, whose history and loop its ticks use
  // Last: destroyed first, so no connection outlives what its routes use.
  std::unique_ptr<HttpTransport> transport_;
};

}  // namespace hearth::server
