// HttpServer set-up: routing, authentication, error objects, /health, /v1/models, /metrics, /v1/kv/plan, /tokenize,
// shutdown. The completion endpoints live in completions.cpp, /v1/cache/explain in cache_explain.cpp.

#include "server/server.h"

#include <chrono>
#include <ctime>

#include "server/api/tokenize_request.h"
#include "server/cache/kv_plan_json.h"
#include "server/http/serve_access.h"
#include "server/observe/dashboard_page.h"
#include "util/log.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

HttpServer::HttpServer(ServerConfig config, EngineLoop& loop, const Tokenizer& tokenizer, const ChatFormatter& chat)
    : config_(std::move(config)),
      loop_(loop),
      tokenizer_(tokenizer),
      chat_(chat),
      model_names_{loop.info().model_id, config_.model_aliases, config_.strict_model_names},
      volatile_(config_.volatile_prefix),
      answers_(tokenizer, config_.answer_memory_entries),
      dashboard_csp_(dashboard_csp(dashboard_html())) {
  install_routes();
  sampler_ = std::make_unique<StatsSampler>(std::chrono::seconds(1), [this] { sample_stats(); });
  if (!config_.own_transport) return;
  config_.http.answer_inline = is_health_probe;  // handle_health() is a constant: it never waits for a worker
  transport_ = std::make_unique<HttpTransport>(
      config_.http, [this](const HttpRequest& req) { return handle(req); },
      [this](int status, const std::string& message, std::string_view path) {
        const char* code = status == 413 ? "request_too_large" : status == 431 ? "header_too_large" : "";
        const ApiError error{status, message, error_type_for_status(status), {}, code};
        return is_anthropic_path(path) ? anthropic_error_response(error) : error_response(error);
      });
}

HttpServer::~HttpServer() {
  transport_.reset();
  sampler_.reset();
}

HttpResponse HttpServer::json_response(const json& body) {
  HttpResponse res;
  res.body = dump(body);
  return res;
}

HttpResponse HttpServer::error_response(const ApiError& error) {
  HttpResponse res = json_response(error_json(error));
  res.status = error.status;
  if (error.status == 429 || error.status == 503) res.set_header("Retry-After", "1");
  if (error.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  metrics_.record_error(error.status);
  return res;
}

std::optional<HttpResponse> HttpServer::check_auth(const HttpRequest& req) {
  // The dashboard page itself holds no data: it asks for the key and sends it with every request it makes.
  const bool open = req.path == "/health" || (req.method == "GET" && (req.path == "/" || req.path == "/dashboard"));
  if (open || config_.api_key.empty()) return std::nullopt;
  // "Authorization: Bearer KEY" (OpenAI clients) or "x-api-key: KEY" (Anthropic clients), on every route.
  const auto header = req.header("Authorization");
  const auto x_api_key = req.header("x-api-key");
  if (header && bearer_matches(*header, config_.api_key)) return std::nullopt;
  if (x_api_key && api_key_matches(*x_api_key, config_.api_key)) return std::nullopt;
  const ApiError error{401,
                       header || x_api_key ? "incorrect API key provided"
                                           : "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                       "authentication_error",
                       {},
                       "invalid_api_key"};
  if (req.path == kMessagesPath) return anthropic_error_response(error);
  return error_response(error);
}

HttpResponse HttpServer::handle(const HttpRequest& req) {
  if (auto refused = check_auth(req)) return *refused;
  bool path_known = false;
  for (const RouteEntry& r : routes_) {
    const bool prefix = r.path.size() > 1 && r.path.back() == '/';
    const bool match = prefix ? req.path.size() > r.path.size() && req.path.starts_with(r.path) : req.path == r.path;
    if (!match) continue;
    path_known = true;
    if (r.method == req.method) return r.route(req);
  }
  // Under /v1/messages (the Anthropic route and what an Anthropic client may call beside it, e.g. count_tokens),
  // errors keep Anthropic's shape.
  const bool anthropic = is_anthropic_path(req.path);
  if (path_known) {
    const ApiError error{
        405, "method " + req.method + " is not allowed on " + req.path, "invalid_request_error", {}, {}};
    return anthropic ? anthropic_error_response(error) : error_response(error);
  }
  const ApiError error{404, "unknown endpoint: " + req.method + " " + req.path, "not_found_error", {}, "unknown_url"};
  return anthropic ? anthropic_error_response(error) : error_response(error);
}

void HttpServer::install_routes() {
  auto add = [this](std::string method, std::string path, Route route) {
    routes_.push_back({std::move(method), std::move(path), std::move(route)});
  };
  add("GET", "/health", [this](const HttpRequest&) { return handle_health(); });
  add("GET", "/v1/models", [this](const HttpRequest& req) { return handle_models(req); });
  add("GET", "/v1/models/", [this](const HttpRequest& req) { return handle_models(req); });
  add("GET", "/metrics", [this](const HttpRequest&) { return handle_metrics(); });
  add("GET", "/v1/kv/plan", [this](const HttpRequest& req) { return handle_kv_plan(req); });
  add("GET", "/", [this](const HttpRequest&) { return handle_dashboard_page(); });
  add("GET", "/dashboard", [this](const HttpRequest&) { return handle_dashboard_page(); });
  add("GET", "/v1/stats", [this](const HttpRequest& req) { return handle_stats(req); });
  add("GET", "/v1/cache", [this](const HttpRequest& req) { return handle_cache(req); });
  add("POST", "/tokenize", [this](const HttpRequest& req) { return handle_tokenize(req); });
  add("POST", "/v1/cache/explain", [this](const HttpRequest& req) { return handle_cache_explain(req); });
  add("POST", "/v1/cache/warm", [this](const HttpRequest& req) { return handle_cache_warm(req); });
  add("POST", "/v1/cache/pin", [this](const HttpRequest& req) { return handle_cache_pin(req); });
  add("DELETE", "/v1/cache/pin/", [this](const HttpRequest& req) { return handle_cache_unpin(req); });
  add("POST", "/v1/messages", [this](const HttpRequest& req) { return handle_messages(req); });
  add("POST", "/v1/chat/completions",
      [this](const HttpRequest& req) { return handle_completion(req, Endpoint::kChat); });
  add("POST", "/v1/completions",
      [this](const HttpRequest& req) { return handle_completion(req, Endpoint::kCompletion); });
}

HttpResponse HttpServer::handle_health() const {
  HttpResponse res;
  if (draining_) {
    res.status = 503;
    res.set_header("Retry-After", "1");
    res.body = R"({"status":"shutting_down"})";
    return res;
  }
  res.body = R"({"status":"ok"})";
  return res;
}

// GET /v1/models and /v1/models/{id}: an alias answers as itself; with lenient names any other id answers as the
// served model (what a completion naming it would run), with strict names it is a 404.
HttpResponse HttpServer::handle_models(const HttpRequest& req) const {
  const EngineInfo& info = loop_.info();
  constexpr std::string_view kPrefix = "/v1/models/";
  if (!req.path.starts_with(kPrefix)) return json_response(model_list_json(model_names_, info.n_ctx, info.block_size));
  const std::string id = req.path.substr(kPrefix.size());
  if (auto error = model_names_.check(id)) return const_cast<HttpServer*>(this)->error_response(*error);
  const std::string& answered = model_names_.is_listed(id) ? id : info.model_id;
  return json_response(model_entry_json(answered, model_names_, info.n_ctx, info.block_size));
}

HttpResponse HttpServer::handle_metrics() {
  HttpResponse res;
  res.content_type = "text/plain; version=0.0.4; charset=utf-8";
  res.body = metrics_text();
  return res;
}

std::string HttpServer::metrics_text() {
  // After shutdown the engine's counters are gone; the server's own series still render.
  const EngineStats stats = loop_.stats().value_or(EngineStats{});
  return metrics_.render(stats, loop_.info().kv_plan);
}

int HttpServer::num_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  return num_in_flight_;
}

// The pool the server runs with, and the memory plan for ?ctx=&users=&memory= (default: the model's context,
// one user, no budget) at the server's KV dtype, with every other dtype for comparison.
HttpResponse HttpServer::handle_kv_plan(const HttpRequest& req) {
  const EngineInfo& info = loop_.info();
  const KvPlan& pool = info.kv_plan;
  MemoryPlanRequest request;
  request.shape = pool.shape;
  request.weights_bytes = info.weights_bytes;
  request.block_size = pool.block_size;
  request.context = info.n_ctx;
  request.costs = info.kv_dtype_costs;
  request.dtype = pool.cost.dtype;
  request.window = pool.window;  // what the pool keeps of sliding-window layers
  std::optional<ApiError> error;
  auto read_count = [&](const char* name, int64_t max, int64_t& out) {
    const auto text = req.param(name);
    if (!text || error) return;
    auto v = parse_plan_count(name, std::string(*text), max);
    if (!v) {
      error = v.error();
    } else {
      out = *v;
    }
  };
  read_count("ctx", kMaxPlanContext, request.context);
  read_count("users", kMaxPlanUsers, request.users);
  if (error) return error_response(*error);
  if (const auto memory_text = req.param("memory")) {
    auto memory = parse_bytes(*memory_text);
    if (!memory) return error_response(invalid_request(memory.error().message, "memory"));
    request.memory_bytes = *memory;
  }
  auto plan = plan_memory(request);
  if (!plan) return error_response(invalid_request(plan.error().message, "ctx"));
  return json_response(json{{"object", "kv.plan"}, {"pool", kv_pool_json(pool)}, {"plan", memory_plan_json(*plan)}});
}

HttpResponse HttpServer::handle_tokenize(const HttpRequest& req) {
  auto parsed = parse_tokenize_request(req.body);
  if (!parsed) return error_response(parsed.error());
  const TokenizeRequest& request = *parsed;
  json tokens = json::array();
  for (TokenId t : tokenizer_.encode(request.content, request.add_special, request.parse_special)) {
    tokens.push_back(t.value);
  }
  return json_response(json{{"tokens", std::move(tokens)}});
}

void HttpServer::cut_grace() {
  {
    std::lock_guard lock(in_flight_mutex_);
    grace_cut_ = true;
  }
  in_flight_done_.notify_all();
}

Result<void> HttpServer::bind() {
  return transport_->bind();
}

void HttpServer::listen() {
  if (!draining_) transport_->run();
}

void HttpServer::shutdown() {
  if (draining_.exchange(true)) return;
  std::unique_lock lock(in_flight_mutex_);
  if (transport_) {
    spdlog::info("shutting down: refusing new requests, {} in flight", num_in_flight_);
    transport_->stop_accepting();
  }
  // In-flight generations may finish on their own for the grace period (woken by the last one); the rest are
  // aborted when the loop stops, and their final outputs still reach their clients before the connections close.
  const auto grace = std::chrono::duration<double>(config_.shutdown_grace_s);
  in_flight_done_.wait_for(lock, grace, [&] { return num_in_flight_ == 0 || grace_cut_; });
  if (num_in_flight_ > 0) spdlog::info("aborting {} requests still in flight", num_in_flight_);
  lock.unlock();
  loop_.stop(/*drain=*/false);
  lock.lock();
  in_flight_done_.wait_for(lock, std::chrono::seconds(2), [&] { return num_in_flight_ == 0; });
  lock.unlock();
  if (transport_) transport_->stop();
}

}  // namespace hearth::server
