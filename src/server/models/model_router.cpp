#include "server/models/model_router.h"

#include <fmt/format.h>

#include <map>

#include "server/anthropic/anthropic_json.h"
#include "server/anthropic/routes.h"
#include "server/cache/kv_plan_json.h"
#include "server/http/json_body.h"
#include "server/http/serve_access.h"
#include "server/ollama/ollama_json.h"
#include "server/ollama/routes.h"
#include "server/server.h"
#include "util/log.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The routes a model serves, and whether they compute (load the model, count as use) or only read.
enum class RouteKind { kUse, kRead, kPage };
struct ModelRoute {
  const char* method;
  const char* path;  // a prefix when it ends in '/'
  RouteKind kind;
};
constexpr ModelRoute kModelRoutes[] = {
    {"POST", "/v1/chat/completions", RouteKind::kUse},
    {"POST", "/v1/completions", RouteKind::kUse},
    {"POST", "/v1/messages", RouteKind::kUse},
    {"POST", "/v1/messages/count_tokens", RouteKind::kUse},
    {"POST", "/v1/responses", RouteKind::kUse},
    {"GET", "/v1/responses/", RouteKind::kRead},
    {"DELETE", "/v1/responses/", RouteKind::kRead},
    {"POST", "/api/chat", RouteKind::kUse},
    {"POST", "/api/generate", RouteKind::kUse},
    {"POST", "/v1/embeddings", RouteKind::kUse},
    {"POST", "/api/embed", RouteKind::kUse},
    {"POST", "/api/embeddings", RouteKind::kUse},
    {"POST", "/tokenize", RouteKind::kUse},
    {"POST", "/v1/cache/explain", RouteKind::kUse},
    {"POST", "/v1/cache/warm", RouteKind::kUse},
    {"POST", "/v1/cache/pin", RouteKind::kUse},
    {"DELETE", "/v1/cache/pin/", RouteKind::kUse},
    {"GET", "/v1/stats", RouteKind::kRead},
    {"GET", "/v1/cache", RouteKind::kRead},
    {"GET", "/v1/kv/plan", RouteKind::kRead},
    {"GET", "/", RouteKind::kPage},
    {"GET", "/dashboard", RouteKind::kPage},
};

bool path_matches(std::string_view route, const std::string& path) {
  const bool prefix = route.size() > 1 && route.back() == '/';
  return prefix ? path.size() > route.size() && path.starts_with(route) : path == route;
}

// "name{labels} value" → "name{model="id",labels} value".
std::string with_model_label(std::string_view line, const std::string& label) {
  const size_t name_end = line.find_first_of("{ ");
  if (name_end == std::string_view::npos) return std::string(line);
  std::string out(line.substr(0, name_end));
  out += '{';
  out += label;
  if (line[name_end] == '{') {
    if (line.size() > name_end + 1 && line[name_end + 1] != '}') out += ',';
    out += line.substr(name_end + 1);
  } else {
    out += '}';
    out += line.substr(name_end);
  }
  return out;
}

// The body's "model" when it is a string (a wrong type is the model route's 400 to give).
std::string model_field(const json& body) {
  if (!body.is_object()) return {};
  const auto it = body.find("model");
  return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// An error body in the shape of the dialect `path` belongs to: Anthropic's under /v1/messages, Ollama's under /api/,
// else OpenAI's.
json error_body(std::string_view path, const ApiError& error) {
  if (is_ollama_path(path)) return ollama_error_json(error);
  return is_anthropic_path(path) ? anthropic_error_json(error) : error_json(error);
}

// A Prometheus label value: backslash, double quote and newline escaped (the exposition format's only escapes).
std::string label_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string merge_model_metrics(const std::vector<std::pair<std::string, std::string>>& texts) {
  struct Family {
    std::vector<std::string> head;  // # HELP, # TYPE (from the first text that has them)
    std::vector<std::string> samples;
  };
  std::vector<std::string> order;
  std::map<std::string, Family> families;
  for (const auto& [id, text] : texts) {
    const std::string label = "model=\"" + label_escape(id) + "\"";
    std::string current;
    bool head_from_this = false;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string_view line(text.data() + pos, end - pos);
      pos = end + 1;
      if (line.empty()) continue;
      if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
        const std::string_view rest = line.substr(7);
        std::string name(rest.substr(0, rest.find(' ')));
        if (name != current) {
          current = name;
          head_from_this = !families.contains(name);
          if (head_from_this) order.push_back(name);
        }
        if (head_from_this) families[name].head.emplace_back(line);
        continue;
      }
      if (line.front() == '#') continue;
      families[current].samples.push_back(with_model_label(line, label));
      if (current.empty() && std::find(order.begin(), order.end(), "") == order.end()) order.push_back("");
    }
  }
  std::string out;
  for (const std::string& name : order) {
    const Family& f = families[name];
    for (const std::string& l : f.head) out += l + "\n";
    for (const std::string& l : f.samples) out += l + "\n";
  }
  return out;
}

ModelRouter::ModelRouter(ModelRouterConfig config, ModelHost& host) : config_(std::move(config)), host_(host) {
  const auto& specs = host_.specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    names_.emplace(specs[i].id, i);
    for (const std::string& a : specs[i].aliases) names_.emplace(a, i);
  }
  config_.http.answer_inline = is_health_probe;  // handle() answers it from draining_ alone
  config_.http.alias_path = v1_route_for_alias;
  transport_ = std::make_unique<HttpTransport>(
      config_.http, [this](const HttpRequest& req) { return handle(req); },
      [](int status, const std::string& message, std::string_view path) {
        const char* code = status == 413 ? "request_too_large" : status == 431 ? "header_too_large" : "";
        const ApiError error{status, message, error_type_for_status(status), {}, code};
        HttpResponse res;
        res.status = status;
        res.body = dump(error_body(path, error));
        if (status == 503) res.set_header("Retry-After", "1");
        return res;
      });
}

ModelRouter::~ModelRouter() {
  transport_.reset();
}

Result<void> ModelRouter::bind() {
  return transport_->bind();
}

int ModelRouter::bound_port() const {
  return transport_->bound_port();
}

std::vector<int> ModelRouter::bound_extra_ports() const {
  return transport_->bound_extra_ports();
}

void ModelRouter::listen() {
  if (!draining_) transport_->run();
}

ApiResult<size_t> ModelRouter::resolve(const std::string& name) const {
  const auto& specs = host_.specs();
  if (name.empty()) return size_t{0};
  if (auto it = names_.find(name); it != names_.end()) return it->second;
  if (specs.size() == 1 && !config_.strict_model_names) return size_t{0};
  std::string known;
  for (const ModelSpec& s : specs) {
    known += fmt::format("{}'{}'", known.empty() ? "" : ", ", s.id);
    for (const std::string& a : s.aliases) known += fmt::format(" (alias '{}')", a);
  }
  return ApiError{404, fmt::format("the model '{}' does not exist; this server serves {}", name, known),
                  "invalid_request_error", "model", "model_not_found"};
}

std::string ModelRouter::requested_model(const HttpRequest& req) {
  if (auto q = req.param("model")) return std::string(*q);
  return {};
}

HttpResponse ModelRouter::error_response(const HttpRequest& req, const ApiError& error) {
  {
    std::lock_guard lock(refused_mutex_);
    refused_[error.status]++;
  }
  HttpResponse res;
  res.status = error.status;
  res.body = dump(error_body(req.path, error));
  if (error.status == 429 || error.status == 503) res.set_header("Retry-After", "1");
  if (error.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  return res;
}

HttpResponse ModelRouter::unauthorized(const HttpRequest& req) {
  const bool sent = req.header("Authorization") || req.header("x-api-key");
  return error_response(req, ApiError{401,
                                      sent ? "incorrect API key provided"
                                           : "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                                      "authentication_error",
                                      {},
                                      "invalid_api_key"});
}

HttpResponse ModelRouter::handle(const HttpRequest& req) {
  const bool open = req.path == "/health" || (req.method == "GET" && (req.path == "/" || req.path == "/dashboard"));
  if (open) return route(req);
  const std::optional<std::string> tenant = authenticate(req, config_.api_key, config_.tenants.get());
  if (!tenant) return unauthorized(req);
  if (tenant->empty()) return route(req);
  auto slot = config_.tenants->try_acquire(*tenant);
  if (!slot) {
    return error_response(req, ApiError{429,
                                        "too many requests in flight for this API key's tenant",
                                        "rate_limit_error",
                                        {},
                                        "tenant_max_concurrent"});
  }
  HttpRequest scoped = req;
  scoped.tenant = *tenant;
  return hold_until_sent(route(scoped), std::move(*slot));
}

HttpResponse ModelRouter::route(const HttpRequest& req) {
  if (req.path == "/health" && req.method == "GET") {
    HttpResponse res;
    res.body = draining_ ? R"({"status":"shutting_down"})" : R"({"status":"ok"})";
    if (draining_) res.status = 503, res.set_header("Retry-After", "1");
    return res;
  }
  if (req.path == "/health") {
    // not GET: the 405 below
  } else if (req.path == "/v1/models" || path_matches("/v1/models/", req.path)) {
    if (req.method == "GET") return handle_models(req);
  } else if (req.path == "/metrics") {
    if (req.method == "GET") return handle_metrics(req);
  } else if (auto ollama = handle_ollama_listing(req)) {
    return *ollama;
  } else {
    bool path_known = false;
    for (const ModelRoute& r : kModelRoutes) {
      if (!path_matches(r.path, req.path)) continue;
      path_known = true;
      if (r.method != req.method) continue;
      switch (r.kind) {
        case RouteKind::kUse:
          return handle_use(req);
        case RouteKind::kRead:
          return handle_read(req);
        case RouteKind::kPage:
          return handle_dashboard_page(req);
      }
    }
    if (!path_known) {
      return error_response(
          req, ApiError{404, "unknown endpoint: " + req.method + " " + req.path, "not_found_error", {}, "unknown_url"});
    }
  }
  return error_response(
      req, ApiError{405, "method " + req.method + " is not allowed on " + req.path, "invalid_request_error", {}, {}});
}

std::optional<HttpResponse> ModelRouter::handle_ollama_listing(const HttpRequest& req) {
  const bool get = req.method == "GET";
  const auto not_allowed = [&] {
    return error_response(
        req, ApiError{405, "method " + req.method + " is not allowed on " + req.path, "invalid_request_error", {}, {}});
  };
  const auto facts = [this](size_t i, const std::string& id) {
    const ModelSpec& spec = host_.specs()[i];
    const ModelHost::ModelStatus st = host_.status(i);
    OllamaModelFacts f{id, spec.cost.weights_bytes, spec.n_ctx, st.state == ModelState::kLoaded, -1, spec.listing};
    f.listing.digest = st.digest;
    if (st.keep_alive_seconds >= 0) {
      f.expires_in_s = std::max(0.0, st.keep_alive_seconds - std::max(0.0, st.idle_seconds));
    }
    return f;
  };
  const auto listing = [&](bool ps) {
    json models = json::array();
    for (size_t i = 0; i < host_.specs().size(); ++i) {
      std::vector<std::string> names = {host_.specs()[i].id};
      names.insert(names.end(), host_.specs()[i].aliases.begin(), host_.specs()[i].aliases.end());
      OllamaModelFacts f = facts(i, names[0]);
      if (ps && !f.loaded) continue;
      for (const std::string& name : names) {
        f.id = name;
        if (ps) {
          OllamaModelFacts loaded = f;
          loaded.size_bytes = host_.status(i).cost.total();
          models.push_back(ollama_ps_json(loaded));
        } else {
          models.push_back(ollama_tag_json(f));
        }
      }
    }
    HttpResponse res;
    res.body = dump(json{{"models", std::move(models)}});
    return res;
  };
  if (req.path == "/api/tags") return get ? listing(false) : not_allowed();
  if (req.path == "/api/ps") return get ? listing(true) : not_allowed();
  if (req.path == "/api/version") {
    if (!get) return not_allowed();
    HttpResponse res;
    res.body = dump(json{{"version", std::string(kOllamaApiVersion)}});
    return res;
  }
  if (req.path != "/api/show") return std::nullopt;
  if (req.method != "POST") return not_allowed();
  auto name = parse_ollama_show(req.body);
  if (!name) return error_response(req, name.error());
  auto index = resolve(strip_latest_tag(*name));
  if (!index) {
    return error_response(
        req, ApiError{404, fmt::format("model '{}' not found", *name), "not_found_error", "model", "model_not_found"});
  }
  const std::string id = names_.contains(strip_latest_tag(*name)) ? strip_latest_tag(*name) : host_.specs()[*index].id;
  HttpResponse res;
  // The template is the loaded model's to describe; an unloaded one is described by its file alone.
  res.body = dump(ollama_show_json(facts(*index, id), "", /*tools=*/true));
  return res;
}

HttpResponse ModelRouter::handle_use(const HttpRequest& req) {
  if (draining_) return error_response(req, ApiError{503, "the server is shutting down", "server_error", {}, {}});
  std::string name;
  std::optional<int64_t> keep_alive_ms;  // Ollama's keep_alive: the model's keep-alive from now on
  if (req.method == "POST") {
    // A body that is no JSON gets the error every model's route would give, without loading a model for it.
    auto body = parse_json_body(req.body);
    if (!body) return error_response(req, api_error(body.error()));
    name = model_field(*body);
    // Ollama's clients name models with a tag ("qwen3:latest"); /api/tags lists them so.
    if (is_ollama_path(req.path)) {
      name = strip_latest_tag(name);
      if (body->is_object() && body->contains("keep_alive")) {
        keep_alive_ms = ollama_keep_alive_ms((*body)["keep_alive"]);
      }
    }
  }
  if (auto q = req.param("model"); name.empty() && q) name = std::string(*q);
  auto index = resolve(name);
  if (!index) return error_response(req, index.error());
  auto lease = host_.acquire(*index);
  if (!lease) return error_response(req, lease.error());
  if (keep_alive_ms) {
    host_.set_keep_alive(*index, *keep_alive_ms == kKeepAliveForever
                                     ? ModelBudget::kKeepForever
                                     : ModelBudget::Clock::duration(std::chrono::milliseconds(*keep_alive_ms)));
  }
  // The lease ends when this returns; a generation the route started keeps the model busy (num_in_flight) until
  // its last byte.
  return lease->http().handle(req);
}

HttpResponse ModelRouter::handle_read(const HttpRequest& req) {
  auto index = resolve(requested_model(req));
  if (!index) return error_response(req, index.error());
  const size_t i = *index;
  auto lease = host_.peek(i);
  if (!lease) {
    return error_response(
        req,
        ApiError{409, fmt::format("the model '{}' is not loaded; a completion naming it loads it", host_.specs()[i].id),
                 "invalid_request_error", "model", "model_not_loaded"});
  }
  return lease->http().handle(req);
}

HttpResponse ModelRouter::handle_dashboard_page(const HttpRequest& req) {
  // The page is the same for every model; it reads /v1/stats of the model its ?model= names (or the first one).
  auto index = resolve(requested_model(req));
  if (!index) return error_response(req, index.error());
  for (size_t k = 0; k <= host_.specs().size(); ++k) {
    // The named model first, then any loaded one.
    const size_t i = k == 0 ? *index : k - 1;
    if (auto lease = host_.peek(i)) return lease->http().handle(req);
  }
  return error_response(req, ApiError{409, "no model is loaded yet; the dashboard shows a model once it is",
                                      "invalid_request_error", "model", "model_not_loaded"});
}

json ModelRouter::model_entry(size_t i, const std::string& name) {
  const ModelSpec& spec = host_.specs()[i];
  const ModelHost::ModelStatus st = host_.status(i);
  json meta = {{"n_ctx", spec.n_ctx},
               {"block_size", spec.kv_plan.block_size},
               {"state", model_state_name(st.state)},
               {"aliases", spec.aliases},
               {"memory",
                {{"weights_bytes", st.cost.weights_bytes},
                 {"kv_pool_bytes", st.cost.kv_bytes},
                 {"runtime_bytes", st.cost.runtime_bytes},
                 {"total_bytes", st.cost.total()}}},
               {"num_loads", st.num_loads},
               {"idle_seconds", st.idle_seconds >= 0 ? json(st.idle_seconds) : json(nullptr)},
               {"kv_plan", kv_pool_json(spec.kv_plan)}};
  if (name != spec.id) meta["alias_of"] = spec.id;
  return {{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "hearth"}, {"meta", std::move(meta)}};
}

HttpResponse ModelRouter::handle_models(const HttpRequest& req) {
  HttpResponse res;
  constexpr std::string_view kPrefix = "/v1/models/";
  if (req.path.starts_with(kPrefix)) {
    const std::string name = req.path.substr(kPrefix.size());
    auto index = resolve(name);
    if (!index) return error_response(req, index.error());
    const size_t i = *index;
    res.body = dump(model_entry(i, names_.contains(name) ? name : host_.specs()[i].id));
    return res;
  }
  json data = json::array();
  for (size_t i = 0; i < host_.specs().size(); ++i) {
    data.push_back(model_entry(i, host_.specs()[i].id));
    for (const std::string& a : host_.specs()[i].aliases) data.push_back(model_entry(i, a));
  }
  const ModelHostCounters c = host_.counters();
  res.body = dump(json{{"object", "list"},
                       {"data", std::move(data)},
                       {"memory",
                        {{"budget_bytes", host_.config().budget_bytes},
                         {"process_bytes", host_.config().process_bytes},
                         {"used_bytes", host_.used_bytes()},
                         {"keep_alive_seconds", host_.config().keep_alive.count() / 1000.0},
                         {"num_loads", c.num_loads},
                         {"num_unloads", c.num_unloads},
                         {"last_load_seconds", c.last_load_seconds},
                         {"last_unload_seconds", c.last_unload_seconds}}}});
  return res;
}

HttpResponse ModelRouter::handle_metrics(const HttpRequest& req) {
  std::vector<std::pair<std::string, std::string>> texts;
  std::string own;
  own += "# HELP hearth_memory_budget_bytes The memory budget all models share (--memory).\n";
  own += "# TYPE hearth_memory_budget_bytes gauge\n";
  own += fmt::format("hearth_memory_budget_bytes {}\n", host_.config().budget_bytes);
  own += "# HELP hearth_memory_used_bytes Weights (file size) plus KV pool of the models loaded or loading.\n";
  own += "# TYPE hearth_memory_used_bytes gauge\n";
  own += fmt::format("hearth_memory_used_bytes {}\n", host_.used_bytes());
  own += "# HELP hearth_model_loaded Whether a model is loaded (1) or not (0).\n";
  own += "# TYPE hearth_model_loaded gauge\n";
  std::string loads =
      "# HELP hearth_model_loads_total Times a model was loaded.\n# TYPE hearth_model_loads_total counter\n";
  for (size_t i = 0; i < host_.specs().size(); ++i) {
    const ModelHost::ModelStatus st = host_.status(i);
    const std::string label = "model=\"" + label_escape(host_.specs()[i].id) + "\"";
    own += fmt::format("hearth_model_loaded{{{}}} {}\n", label, st.state == ModelState::kLoaded ? 1 : 0);
    loads += fmt::format("hearth_model_loads_total{{{}}} {}\n", label, st.num_loads);
    if (auto lease = host_.peek(i)) texts.emplace_back(host_.specs()[i].id, lease->http().metrics_text(req.tenant));
  }
  own += loads;
  const ModelHostCounters c = host_.counters();
  own += "# HELP hearth_model_unloads_total Times a model was unloaded (budget, keep-alive or shutdown).\n";
  own += "# TYPE hearth_model_unloads_total counter\n";
  own += fmt::format("hearth_model_unloads_total {}\n", c.num_unloads);
  own += "# HELP hearth_model_load_seconds_total Time spent loading models.\n";
  own += "# TYPE hearth_model_load_seconds_total counter\n";
  own += fmt::format("hearth_model_load_seconds_total {}\n", c.load_seconds);
  own += "# HELP hearth_model_unload_seconds_total Time spent unloading models (disk-tier flush included).\n";
  own += "# TYPE hearth_model_unload_seconds_total counter\n";
  own += fmt::format("hearth_model_unload_seconds_total {}\n", c.unload_seconds);
  own += "# HELP hearth_router_errors_total Requests the model router answered with an error, by status.\n";
  own += "# TYPE hearth_router_errors_total counter\n";
  {
    std::lock_guard lock(refused_mutex_);
    std::map<int, uint64_t> sorted(refused_.begin(), refused_.end());
    for (const auto& [status, n] : sorted)
      own += fmt::format("hearth_router_errors_total{{status=\"{}\"}} {}\n", status, n);
  }
  HttpResponse res;
  res.content_type = "text/plain; version=0.0.4; charset=utf-8";
  res.body = own + merge_model_metrics(texts);
  return res;
}

ApiResult<json> ModelRouter::warm(const json& body) {
  auto index = resolve(model_field(body));
  if (!index) return index.error();
  auto lease = host_.acquire(*index);
  if (!lease) return lease.error();
  return lease->http().warm(body);
}

void ModelRouter::shutdown() {
  if (draining_.exchange(true)) return;
  spdlog::info("shutting down: refusing new requests");
  transport_->stop_accepting();
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(config_.shutdown_grace_s * 1000));
  if (!host_.drain(grace)) spdlog::info("aborting the requests still in flight");
  // Each model's server aborts what is left and stops its engine loop (their own grace is 0: it was spent here).
  host_.for_each_loaded([](HttpServer& http) { http.shutdown(); });
  transport_->stop();
}

}  // namespace hearth::server
