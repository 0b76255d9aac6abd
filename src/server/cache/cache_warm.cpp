// POST /v1/cache/warm and `hearth serve --warm FILE`: prefill a prefix (a prompt or a chat) and pin it, so the first
// request of the morning finds the house rules cached. One engine request of one token with pin_prefix; the answer
// says what the cache holds of the prompt afterwards.

#include <atomic>
#include <memory>

#include "server/cache/routes.h"
#include "server/http/json_body.h"
#include "server/http/tenant_keys.h"
#include "server/openai/openai_json.h"

namespace hearth::server {

ApiResult<nlohmann::json> warm_prefix(ServerContext& context, const nlohmann::json& body, std::string_view tenant) {
  if (context.draining()) {
    return ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"};
  }
  const bool chat = body.is_object() && body.contains("messages");
  auto parsed = validate_completion_request(body, chat ? Endpoint::kChat : Endpoint::kCompletion);
  if (!parsed) return parsed.error();
  CompletionRequest& request = *parsed;
  request.cache_salt = tenant_cache_salt(tenant, request.cache_salt);
  if (auto error = context.check_model(request)) return *error;
  if (!request.use_cache) {
    return ApiError{400, "warming needs the prefix cache: cache_prompt must not be false", "invalid_request_error",
                    "cache_prompt", "invalid_value"};
  }
  const bool pin = !body.contains("pin") || (body["pin"].is_boolean() && body["pin"].get<bool>());
  if (body.contains("pin") && !body["pin"].is_boolean()) {
    return ApiError{400, "pin must be a boolean", "invalid_request_error", "pin", "invalid_type"};
  }
  auto built = context.build_prompt(request);
  if (!built) return built.error();
  RequestSpec spec = context.build_spec(request, std::move(built->tokens), std::move(built->checkpoint_hints));
  spec.max_tokens = 1;
  spec.sampling.temperature = 0;
  spec.pin_prefix = pin;
  auto handle = context.loop().submit(std::move(spec));
  if (!handle) return api_error(handle.error(), request.endpoint);
  std::optional<RequestOutput> last;
  while (auto out = (*handle)->next()) last = std::move(out);
  if (!last || !last->finished) {
    return ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"};
  }
  if (last->error) return api_error(*last->error, request.endpoint);
  if (last->runtime_error) {
    return ApiError{500, last->runtime_error->message, "server_error", {}, "runtime_error"};
  }
  const RequestUsage& u = last->usage;
  nlohmann::json out = {
      {"object", "cache.warm"},
      {"model", context.loop().info().model_id},
      {"prompt_tokens", u.prompt_tokens},
      {"cached_tokens", u.cached_tokens},  // reused when the warm-up ran: what was already there
      {"computed_tokens", u.prompt_tokens - u.cached_tokens},
      {"tiers",
       {{"ram", u.cached_tokens - u.tier.loaded_tokens},
        {"disk", u.tier.loaded_tokens - u.tier.loaded_tokens_redis},
        {"redis", u.tier.loaded_tokens_redis}}},
      {"pinned", pin},
  };
  if (pin) {
    out["pinned_tokens"] = u.pinned_tokens;
    out["pin_error"] = u.pin_error.empty() ? nlohmann::json() : nlohmann::json(u.pin_error);
  }
  return out;
}

namespace {

constexpr int kMaxWarmsInFlight = 2;

HttpResponse handle_cache_warm(ServerContext& context, std::atomic<int>& warms_in_flight, const HttpRequest& req) {
  auto json_body = parse_json_body(req.body);
  if (!json_body) return context.error_response(api_error(json_body.error()));
  // A warm-up holds a route worker until its prefill is done: a few at a time, the rest are told to retry.
  if (warms_in_flight.fetch_add(1) >= kMaxWarmsInFlight) {
    warms_in_flight.fetch_sub(1);
    return context.error_response(
        ApiError{429,
                 fmt::format("{} warm-ups are already running; retry when one is done", kMaxWarmsInFlight),
                 "rate_limit_exceeded",
                 {},
                 "too_many_warmups"});
  }
  auto result = warm_prefix(context, *json_body, req.tenant);
  warms_in_flight.fetch_sub(1);
  if (!result) return context.error_response(result.error());
  return ServerContext::json_response(*result);
}

}  // namespace

void add_cache_warm_routes(Routes& routes, ServerContext& context) {
  // The warm-ups running now: the route's own count, shared by its copies.
  auto warms_in_flight = std::make_shared<std::atomic<int>>(0);
  routes.add("POST", "/v1/cache/warm", [&context, warms_in_flight](const HttpRequest& req) {
    return handle_cache_warm(context, *warms_in_flight, req);
  });
}

}  // namespace hearth::server
