// HttpServer set-up: routes, authentication, error mapping, /health, /v1/models, /metrics, /tokenize, shutdown.
// The completion endpoints live in completions.cpp.

#include "server/server.h"

#include "server/kv_plan_json.h"
#include "server/tokenize_request.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <ctime>

#include "util/log.h"

namespace hearth::server {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";

// The message for a status httplib produced before any handler ran (unknown route, body too large, ...).
std::string default_message(int status, const httplib::Request& req, size_t max_body_bytes) {
  switch (status) {
    case 404:
      return "unknown endpoint: " + req.method + " " + req.path;
    case 405:
      return "method " + req.method + " is not allowed on " + req.path;
    case 413:
      return fmt::format("the request body exceeds the limit of {} bytes (--max-body-bytes)", max_body_bytes);
    case 400:
      return "malformed HTTP request";
    default:
      return fmt::format("HTTP error {}", status);
  }
}

}  // namespace

bool bearer_matches(std::string_view header, std::string_view key) {
  // RFC 7235: the scheme is case-insensitive and one or more spaces separate it from the credentials.
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() || header[kScheme.size()] != ' ') return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  }
  std::string_view given = header.substr(kScheme.size());
  given.remove_prefix(std::min(given.find_first_not_of(' '), given.size()));
  // Compare every byte of the longer length so timing reveals neither the key nor the matching prefix length.
  const size_t n = std::max(given.size(), key.size());
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    const unsigned char b = i < key.size() ? static_cast<unsigned char>(key[i]) : 0;
    diff |= static_cast<unsigned>(a ^ b);
  }
  return diff == 0;
}

HttpServer::HttpServer(ServerConfig config, EngineLoop& loop, const Tokenizer& tokenizer, const ChatFormatter& chat)
    : config_(std::move(config)),
      loop_(loop),
      tokenizer_(tokenizer),
      chat_(chat),
      http_(std::make_unique<httplib::Server>()),
      volatile_(config_.volatile_prefix),
      answers_(tokenizer, config_.answer_memory_entries) {
  const int threads = config_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(config_.max_body_bytes);
  http_->set_keep_alive_timeout(2);
  http_->set_read_timeout(30);
  http_->set_write_timeout(30);
  install_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(error_json(error).dump(-1, ' ', false, json::error_handler_t::replace), kJson);
  if (error.status == 429 || error.status == 503) res.set_header("Retry-After", "1");
  metrics_.record_error(error.status);
}

void HttpServer::install_middleware() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // httplib 0.11 enforces set_payload_max_length only on Content-Length bodies and would read a chunked body of
    // any size, so chunked request bodies are refused before they are read (clients send Content-Length).
    if (req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
      send_error(res, ApiError{411,
                               "chunked request bodies are not accepted; send Content-Length",
                               "invalid_request_error",
                               {},
                               "length_required"});
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path == "/health" || config_.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (bearer_matches(req.get_header_value("Authorization"), config_.api_key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const bool missing = !req.has_header("Authorization");
    send_error(res,
               ApiError{401,
                        missing ? "missing API key: send 'Authorization: Bearer KEY'" : "incorrect API key provided",
                        "authentication_error",
                        {},
                        "invalid_api_key"});
    res.set_header("WWW-Authenticate", "Bearer");
    return httplib::Server::HandlerResponse::Handled;
  });

  // Statuses httplib sets itself (404 route, 413 body, 400 framing) get an error object too.
  http_->set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const int status = res.status;
        ApiError error{status,
                       default_message(status, req, config_.max_body_bytes),
                       error_type_for_status(status),
                       {},
                       status == 413 ? "request_too_large" : (status == 404 ? "unknown_url" : "")};
        send_error(res, error);
        return httplib::Server::HandlerResponse::Handled;
      }));

  http_->set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError{500, "internal error", "server_error", {}, {}});
  });
}

void HttpServer::install_routes() {
  install_middleware();
  // Every handler runs inside this wrapper: an exception becomes a 500 error object, never a dropped connection.
  auto guarded = [this](auto fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const std::exception& e) {
        send_error(res, ApiError{500, std::string("internal error: ") + e.what(), "server_error", {}, {}});
      } catch (...) {
        send_error(res, ApiError{500, "internal error", "server_error", {}, {}});
      }
    };
  };

  http_->Get("/health", guarded([this](const httplib::Request&, httplib::Response& res) {
               if (draining_) {
                 res.status = 503;
                 res.set_header("Retry-After", "1");
                 res.set_content(R"({"status":"shutting_down"})", kJson);
                 return;
               }
               res.set_content(R"({"status":"ok"})", kJson);
             }));

  auto model_json = [this] {
    const EngineInfo& info = loop_.info();
    return json{{"id", info.model_id},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "hearth"},
                {"meta", {{"n_ctx", info.n_ctx}, {"block_size", info.block_size}}}};
  };
  http_->Get("/v1/models", guarded([model_json](const httplib::Request&, httplib::Response& res) {
               res.set_content(json{{"object", "list"}, {"data", json::array({model_json()})}}.dump(), kJson);
             }));
  http_->Get(R"(/v1/models/(.+))", guarded([this, model_json](const httplib::Request& req, httplib::Response& res) {
               if (req.matches[1] != loop_.info().model_id) {
                 send_error(res,
                            ApiError{404, fmt::format("the model '{}' does not exist", std::string(req.matches[1])),
                                     "invalid_request_error", "model", "model_not_found"});
                 return;
               }
               res.set_content(model_json().dump(), kJson);
             }));

  http_->Get("/metrics", guarded([this](const httplib::Request&, httplib::Response& res) { handle_metrics(res); }));
  http_->Get("/v1/kv/plan",
             guarded([this](const httplib::Request& req, httplib::Response& res) { handle_kv_plan(req, res); }));
  http_->Post("/tokenize",
              guarded([this](const httplib::Request& req, httplib::Response& res) { handle_tokenize(req, res); }));
  http_->Post("/v1/cache/explain",
              guarded([this](const httplib::Request& req, httplib::Response& res) { handle_cache_explain(req, res); }));
  http_->Post("/v1/chat/completions", guarded([this](const httplib::Request& req, httplib::Response& res) {
                handle_completion(req, res, Endpoint::kChat);
              }));
  http_->Post("/v1/completions", guarded([this](const httplib::Request& req, httplib::Response& res) {
                handle_completion(req, res, Endpoint::kCompletion);
              }));
}

void HttpServer::handle_metrics(httplib::Response& res) {
  // After shutdown the engine's counters are gone; the server's own series still render.
  const EngineStats stats = loop_.stats().value_or(EngineStats{});
  res.set_content(metrics_.render(stats, loop_.info().kv_plan), "text/plain; version=0.0.4; charset=utf-8");
}

// The pool the server runs with, and the memory plan for ?ctx=&users=&memory= (default: the model's context,
// one user, no budget) at the server's KV dtype, with every other dtype for comparison.
void HttpServer::handle_kv_plan(const httplib::Request& req, httplib::Response& res) {
  const EngineInfo& info = loop_.info();
  const KvPlan& pool = info.kv_plan;
  MemoryPlanRequest request;
  request.shape = pool.shape;
  request.weights_bytes = info.weights_bytes;
  request.block_size = pool.block_size;
  request.context = info.n_ctx;
  request.costs = info.kv_dtype_costs;
  request.dtype = pool.cost.dtype;
  auto read_count = [&](const char* name, int64_t max, int64_t& out) {
    if (!req.has_param(name)) return true;
    auto v = parse_plan_count(name, req.get_param_value(name), max);
    if (auto* error = std::get_if<ApiError>(&v)) return send_error(res, *error), false;
    out = std::get<int64_t>(v);
    return true;
  };
  if (!read_count("ctx", kMaxPlanContext, request.context) || !read_count("users", kMaxPlanUsers, request.users)) {
    return;
  }
  if (req.has_param("memory")) {
    auto memory = parse_bytes(req.get_param_value("memory"));
    if (!memory) {
      send_error(res, invalid_request(memory.error().message, "memory"));
      return;
    }
    request.memory_bytes = *memory;
  }
  auto plan = plan_memory(request);
  if (!plan) {
    send_error(res, invalid_request(plan.error().message, "ctx"));
    return;
  }
  json out = {{"object", "kv.plan"}, {"pool", kv_pool_json(pool)}, {"plan", memory_plan_json(*plan)}};
  res.set_content(out.dump(), kJson);
}

void HttpServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_tokenize_request(req.body);
  if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
  const TokenizeRequest& request = std::get<TokenizeRequest>(parsed);
  json tokens = json::array();
  for (TokenId t : tokenizer_.encode(request.content, request.add_special, request.parse_special)) {
    tokens.push_back(t.value);
  }
  res.set_content(json{{"tokens", std::move(tokens)}}.dump(), kJson);
}

Result<void> HttpServer::bind() {
  if (config_.port == 0) {
    bound_port_ = http_->bind_to_any_port(config_.host);
  } else if (http_->bind_to_port(config_.host, config_.port)) {
    bound_port_ = config_.port;
  } else {
    bound_port_ = -1;
  }
  if (bound_port_ <= 0)
    return make_error("cannot listen on {}:{} (address in use or invalid)", config_.host, config_.port);
  return {};
}

void HttpServer::listen() {
  if (!draining_) http_->listen_after_bind();
}

void HttpServer::shutdown() {
  if (draining_.exchange(true)) return;
  std::unique_lock lock(in_flight_mutex_);
  spdlog::info("shutting down: refusing new requests, {} in flight", num_in_flight_);
  http_->stop();
  // In-flight generations may finish on their own for the grace period (woken by the last one); the rest are
  // aborted when the loop stops.
  const auto grace = std::chrono::duration<double>(config_.shutdown_grace_s);
  in_flight_done_.wait_for(lock, grace, [&] { return num_in_flight_ == 0; });
  if (num_in_flight_ > 0) spdlog::info("aborting {} requests still in flight", num_in_flight_);
  lock.unlock();
  loop_.stop(/*drain=*/false);
}

}  // namespace hearth::server
