// POST /v1/cache/explain: the server side of cache-miss explanations (the volatile-prefix warning is
// ServerContext::observe_prompt).

#include "engine/explain.h"
#include "server/cache/routes.h"
#include "server/http/json_body.h"
#include "server/http/tenant_keys.h"
#include "server/openai/openai_json.h"

namespace hearth::server {
namespace {

HttpResponse handle_cache_explain(ServerContext& context, const HttpRequest& req) {
  // The body is a completion or chat body (prompt or messages, cache_salt, cache_prompt, model); generation
  // fields are accepted and ignored.
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
  const auto& tokens = prompt->tokens;
  // The same checks as a request (token ids, the context), without running it.
  RequestSpec spec = context.build_spec(request, tokens);
  spec.max_tokens = 1;
  AdmissionLimits limits{context.loop().info().n_ctx, context.loop().info().block_size, INT32_MAX, INT32_MAX};
  if (auto checked = check_request(spec, context.loop().info(), limits, 0); !checked) {
    return context.error_response(api_error(checked.error(), request.endpoint));
  }
  const std::optional<CacheReport> report =
      context.loop().explain_prompt(tokens, request.cache_salt, request.use_cache);
  if (!report) {
    return context.error_response(
        ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  nlohmann::json out = cache_report_json(*report, context.loop().info().model_id);
  // The prompt as a request would build it: with a recent answer's own ids where its text quotes one.
  out["answer_tokens_reused"] = prompt->answer_tokens;
  return ServerContext::json_response(out);
}

}  // namespace

void add_cache_explain_routes(Routes& routes, ServerContext& context) {
  routes.add("POST", "/v1/cache/explain",
             [&context](const HttpRequest& req) { return handle_cache_explain(context, req); });
}

}  // namespace hearth::server
