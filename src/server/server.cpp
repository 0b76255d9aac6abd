// HttpServer: the routes of every feature in one list, authentication, the error shape of each path, shutdown.

#include "server/server.h"

#include <chrono>

#include "server/anthropic/routes.h"
#include "server/api/routes.h"
#include "server/cache/routes.h"
#include "server/http/serve_access.h"
#include "server/models/routes.h"
#include "server/observe/routes.h"
#include "server/ollama/routes.h"
#include "server/openai/routes.h"
#include "server/responses/routes.h"
#include "util/log.h"

namespace hearth::server {

HttpServer::HttpServer(ServerConfig config, EngineLoop& loop, const Tokenizer& tokenizer, const ChatFormatter& chat)
    : config_(std::move(config)),
      loop_(loop),
      context_(loop, tokenizer, chat,
               {ModelNames{loop.info().model_id, config_.model_aliases, config_.strict_model_names},
                config_.volatile_prefix, config_.answer_memory_entries, config_.strict_max_tokens, config_.on_idle}) {
  install_routes();
  sampler_ = std::make_unique<StatsSampler>(std::chrono::seconds(1), [this] { sample_stats(context_); });
  if (!config_.own_transport) return;
  config_.http.answer_inline = is_health_probe;  // the /health route is a constant: it never waits for a worker
  config_.http.alias_path = v1_route_for_alias;
  transport_ = std::make_unique<HttpTransport>(
      config_.http, [this](const HttpRequest& req) { return handle(req); },
      [this](int status, const std::string& message, std::string_view path) {
        const char* code = status == 413 ? "request_too_large" : status == 431 ? "header_too_large" : "";
        return error_response(path, ApiError{status, message, error_type_for_status(status), {}, code});
      });
}

HttpServer::~HttpServer() {
  transport_.reset();
  sampler_.reset();
}

// A new endpoint is a file with its add_*_routes and one line here; the order is the order of lookup.
void HttpServer::install_routes() {
  add_health_routes(routes_, context_);
  add_model_list_routes(routes_, context_);
  add_metrics_routes(routes_, context_);
  add_kv_plan_routes(routes_, context_);
  add_dashboard_routes(routes_, context_);
  add_tokenize_routes(routes_, context_);
  add_cache_explain_routes(routes_, context_);
  add_cache_warm_routes(routes_, context_);
  add_cache_pin_routes(routes_, context_);
  add_messages_routes(routes_, context_);
  add_completion_routes(routes_, context_);
  add_embedding_routes(routes_, context_);
  add_responses_routes(routes_, context_, config_.responses_store);
  add_ollama_routes(routes_, context_);
}

HttpResponse HttpServer::error_response(std::string_view path, const ApiError& error) {
  // Under /v1/messages (the Anthropic route and what an Anthropic client may call beside it, e.g. count_tokens),
  // errors keep Anthropic's shape; under /api/, Ollama's.
  if (is_ollama_path(path)) return ollama_error_response(context_, error);
  return is_anthropic_path(path) ? anthropic_error_response(context_, error) : context_.error_response(error);
}

HttpResponse HttpServer::unauthorized(const HttpRequest& req) {
  const bool sent = req.header("Authorization") || req.header("x-api-key");
  const ApiError error{
      401,
      sent ? "incorrect API key provided" : "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
      "authentication_error",
      {},
      "invalid_api_key"};
  if (is_anthropic_path(req.path)) return anthropic_error_response(context_, error);
  if (is_ollama_path(req.path)) return ollama_error_response(context_, error);
  return context_.error_response(error);
}

HttpResponse HttpServer::handle(const HttpRequest& req) {
  // The dashboard page itself holds no data: it asks for the key and sends it with every request it makes.
  // "Authorization: Bearer KEY" (OpenAI clients) or "x-api-key: KEY" (Anthropic clients), on every other route.
  const bool open = req.path == "/health" || (req.method == "GET" && (req.path == "/" || req.path == "/dashboard"));
  if (open) return route(req);
  const std::optional<std::string> tenant = authenticate(req, config_.api_key, config_.tenants.get());
  if (!tenant) return unauthorized(req);
  if (tenant->empty()) return route(req);  // no tenants here (a front may have set req.tenant already)
  auto slot = config_.tenants->try_acquire(*tenant);
  if (!slot) {
    return error_response(req.path, ApiError{429,
                                             "too many requests in flight for this API key's tenant",
                                             "rate_limit_error",
                                             {},
                                             "tenant_max_concurrent"});
  }
  HttpRequest scoped = req;
  scoped.tenant = *tenant;
  return hold_until_sent(route(scoped), std::move(*slot));
}

HttpResponse HttpServer::route(const HttpRequest& req) {
  const Routes::Match match = routes_.find(req);
  if (match.route != nullptr) return (*match.route)(req);
  if (match.path_known) {
    return error_response(
        req.path,
        ApiError{405, "method " + req.method + " is not allowed on " + req.path, "invalid_request_error", {}, {}});
  }
  return error_response(
      req.path,
      ApiError{404, "unknown endpoint: " + req.method + " " + req.path, "not_found_error", {}, "unknown_url"});
}

ApiResult<nlohmann::json> HttpServer::warm(const nlohmann::json& body) {
  return warm_prefix(context_, body);
}

std::string HttpServer::metrics_text(std::string_view tenant) {
  return server::metrics_text(context_, tenant);
}

int HttpServer::num_in_flight() {
  return context_.num_in_flight();
}

void HttpServer::cut_grace() {
  context_.cut_grace();
}

Result<void> HttpServer::bind() {
  return transport_->bind();
}

void HttpServer::listen() {
  if (!context_.draining()) transport_->run();
}

void HttpServer::shutdown() {
  if (context_.start_draining()) return;
  if (transport_) {
    spdlog::info("shutting down: refusing new requests, {} in flight", context_.num_in_flight());
    transport_->stop_accepting();
  }
  // In-flight generations may finish on their own for the grace period (woken by the last one); the rest are
  // aborted when the loop stops, and their final outputs still reach their clients before the connections close.
  const int left = context_.wait_in_flight(std::chrono::duration<double>(config_.shutdown_grace_s),
                                           /*until_grace_cut=*/true);
  if (left > 0) spdlog::info("aborting {} requests still in flight", left);
  loop_.stop(/*drain=*/false);
  (void)context_.wait_in_flight(std::chrono::seconds(2), /*until_grace_cut=*/false);
  if (transport_) transport_->stop();
}

}  // namespace hearth::server
