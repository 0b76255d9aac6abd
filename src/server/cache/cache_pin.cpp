// POST /v1/cache/pin and DELETE /v1/cache/pin/{key}: the operator's pins. A pin holds the cached full blocks of a
// prompt (built exactly as a request would build it: chat template, answer memory, cache_salt) so they are never
// evicted, within the pin cap (half the pool); the same mechanism as a request's "pin_prefix": true.

#include "server/cache/routes.h"
#include "server/http/json_body.h"
#include "server/http/tenant_keys.h"
#include "server/openai/openai_json.h"

namespace hearth::server {
namespace {

HttpResponse handle_cache_pin(ServerContext& context, const HttpRequest& req) {
  auto json_body = parse_json_body(req.body);
  if (!json_body) return context.error_response(api_error(json_body.error()));
  const nlohmann::json& body = *json_body;
  const bool chat = body.is_object() && body.contains("messages");
  auto parsed = validate_completion_request(body, chat ? Endpoint::kChat : Endpoint::kCompletion);
  if (!parsed) return context.error_response(parsed.error());
  CompletionRequest& request = *parsed;
  request.cache_salt = scoped_cache_salt(req, request.cache_salt);
  if (auto error = context.check_model(request)) return context.error_response(*error);
  auto prompt = context.build_prompt(request);
  if (!prompt) return context.error_response(prompt.error());
  const auto pinned = context.loop().pin_prefix(prompt->tokens, request.cache_salt);
  if (!pinned) {
    return context.error_response(
        ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  if (!*pinned)
    return context.error_response(invalid_request(pinned->error().message, chat ? "messages" : "prompt", "pin_failed"));
  return ServerContext::json_response(
      {{"object", "cache.pin"}, {"key", (*pinned)->key.hex()}, {"pinned_tokens", (*pinned)->num_tokens}});
}

HttpResponse handle_cache_unpin(ServerContext& context, const HttpRequest& req) {
  constexpr std::string_view kPrefix = "/v1/cache/pin/";
  const std::string key = req.path.substr(kPrefix.size());
  // A tenant removes only the pins of its own namespaces (its ?cache_salt=); without tenants, any pin by its key
  // unless ?cache_salt= names the namespace.
  const auto salt = req.param("cache_salt");
  std::optional<std::string> scope;
  if (salt || !req.tenant.empty()) scope = scoped_cache_salt(req, salt.value_or(""));
  const auto removed = context.loop().unpin(key, scope);
  if (!removed) {
    return context.error_response(
        ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  if (!*removed) {
    return context.error_response(
        ApiError{404, "no pin has the key " + key.substr(0, 80), "not_found_error", "key", "pin_not_found"});
  }
  return ServerContext::json_response({{"object", "cache.pin.deleted"}, {"key", key}, {"deleted", true}});
}

}  // namespace

void add_cache_pin_routes(Routes& routes, ServerContext& context) {
  routes.add("POST", "/v1/cache/pin", [&context](const HttpRequest& req) { return handle_cache_pin(context, req); });
  routes.add("DELETE", "/v1/cache/pin/",
             [&context](const HttpRequest& req) { return handle_cache_unpin(context, req); });
}

}  // namespace hearth::server
