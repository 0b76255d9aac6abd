#pragma once
// ModelRouter: the HTTP front of a server with several models (hearth serve -m a.gguf -m b.gguf, --models DIR).
// It owns the socket, checks the API key, picks the model of each request and hands the request to that model's
// HttpServer (server.h, one per loaded model, without a socket of its own) through a ModelLease (model_host.h).
//
// Which model a request names:
//   POST routes   the body's "model" string; else a ?model= query parameter
//   GET, DELETE   ?model=
//   none named    the first model (the first -m, or the first file of --models by name)
//   a name that is no model id nor alias: 404 model_not_found listing the ids (with one model and lenient names,
//   the one model, as without the router)
//
// Routes that compute (completions, chat, messages, tokenize, cache explain/warm/pin) load the model when needed and
// count as its use (LRU, keep-alive). Routes that only read (/v1/stats, /v1/cache, /v1/kv/plan, the dashboard page)
// never load a model nor keep one alive: on an unloaded model they answer 409 model_not_loaded. The router itself
// answers /health, /v1/models (every model, its state and KV plan), /metrics (each loaded model's series with a
// `model` label, plus the budget's own) and Ollama's listings (/api/tags, /api/ps, /api/show, /api/version); Ollama's
// /api/chat and /api/generate name their model as "id" or "id:latest".

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api/api_error.h"
#include "server/http/http_transport.h"
#include "server/http/http_types.h"
#include "server/http/tenant_keys.h"
#include "server/models/model_host.h"

namespace hearth::server {

struct ModelRouterConfig {
  std::string api_key;  // empty: no authentication
  // --api-keys: each key names a tenant, passed on to the model's server in HttpRequest::tenant. Null: none.
  std::shared_ptr<TenantKeys> tenants;
  HttpTransportConfig http;
  double shutdown_grace_s = 10.0;
  bool strict_model_names = false;  // matters with one model only: several models always need a known name
};

// Rewrites each model's Prometheus text so that every sample carries model="ID" as its first label, and merges the
// texts so each family's HELP, TYPE and samples appear once, in the order families first appear.
[[nodiscard]] std::string merge_model_metrics(const std::vector<std::pair<std::string, std::string>>& texts);

class ModelRouter {
 public:
  ModelRouter(ModelRouterConfig config, ModelHost& host);
  ~ModelRouter();
  ModelRouter(const ModelRouter&) = delete;
  ModelRouter& operator=(const ModelRouter&) = delete;

  [[nodiscard]] Result<void> bind();
  int bound_port() const;
  // config.http.extra_ports as bound (--ollama-port).
  std::vector<int> bound_extra_ports() const;
  // Serves until shutdown(). Requires bind().
  void listen();
  // Like HttpServer::warm, for the model the body names (--warm lines may carry "model").
  [[nodiscard]] ApiResult<nlohmann::json> warm(const nlohmann::json& body);
  // Refuses new work, lets requests in flight finish for the grace period, aborts the rest, closes. Idempotent.
  void shutdown();
  // Ends shutdown()'s grace period now (a second SIGTERM). Any thread.
  void cut_grace() { host_.cut_drain(); }

  // The model a name stands for (id or alias): its index; with strict names or several models, 404 otherwise.
  [[nodiscard]] ApiResult<size_t> resolve(const std::string& name) const;

 private:
  HttpResponse handle(const HttpRequest& req);
  // The 401 for a request without a known key.
  HttpResponse unauthorized(const HttpRequest& req);
  // The route of an authenticated `req` (its tenant set).
  HttpResponse route(const HttpRequest& req);
  // The ?model= of a request without a body to read it from; empty when none.
  static std::string requested_model(const HttpRequest& req);
  HttpResponse handle_use(const HttpRequest& req);   // load when needed, counts as use
  HttpResponse handle_read(const HttpRequest& req);  // loaded models only
  HttpResponse handle_dashboard_page(const HttpRequest& req);
  HttpResponse handle_models(const HttpRequest& req);
  // GET /api/tags, /api/ps, /api/version, POST /api/show (every model, loaded or not): Ollama's
  // listing routes, answered by the router; nullopt for any other path.
  std::optional<HttpResponse> handle_ollama_listing(const HttpRequest& req);
  HttpResponse handle_metrics(const HttpRequest& req);
  nlohmann::json model_entry(size_t i, const std::string& name);
  HttpResponse error_response(const HttpRequest& req, const ApiError& error);

  ModelRouterConfig config_;
  ModelHost& host_;
  std::unordered_map<std::string, size_t> names_;  // ids and aliases → model index
  std::atomic<bool> draining_{false};
  std::mutex refused_mutex_;
  std::unordered_map<int, uint64_t> refused_;  // status → requests the router answered with an error
  std::unique_ptr<HttpTransport> transport_;   // last: destroyed first
};

}  // namespace hearth::server
