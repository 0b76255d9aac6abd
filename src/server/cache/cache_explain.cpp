// POST /v1/cache/explain and the volatile-prefix warning: the server side of cache-miss explanations.

#include "engine/explain.h"
#include "server/http/json_body.h"
#include "server/server.h"
#include "util/log.h"

namespace hearth::server {

HttpResponse HttpServer::handle_cache_explain(const HttpRequest& req) {
  // The body is a completion or chat body (prompt or messages, cache_salt, cache_prompt, model); generation
  // fields are accepted and ignored.
  auto json_body = parse_json_body(req.body);
  if (!json_body) return error_response(api_error(json_body.error()));
  const nlohmann::json& body = *json_body;
  const bool chat = body.is_object() && body.contains("messages");
  auto parsed = validate_completion_request(body, chat ? Endpoint::kChat : Endpoint::kCompletion);
  if (!parsed) return error_response(parsed.error());
  const CompletionRequest& request = *parsed;
  if (auto error = check_model(request)) return error_response(*error);
  auto prompt = build_prompt(request);
  if (!prompt) return error_response(prompt.error());
  const auto& tokens = prompt->tokens;
  // The same checks as a request (token ids, the context), without running it.
  RequestSpec spec = build_spec(request, tokens);
  spec.max_tokens = 1;
  AdmissionLimits limits{loop_.info().n_ctx, loop_.info().block_size, INT32_MAX, INT32_MAX};
  if (auto checked = check_request(spec, loop_.info(), limits, 0); !checked) {
    return error_response(api_error(checked.error(), request.endpoint));
  }
  const std::optional<CacheReport> report = loop_.explain_prompt(tokens, request.cache_salt, request.use_cache);
  if (!report) {
    return error_response(ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  nlohmann::json out = cache_report_json(*report, loop_.info().model_id);
  // The prompt as a request would build it: with a recent answer's own ids where its text quotes one.
  out["answer_tokens_reused"] = prompt->answer_tokens;
  return json_response(out);
}

void HttpServer::observe_prompt(std::span<const TokenId> prompt, const RequestSpec& spec) {
  std::optional<VolatilePrefixDetector::Finding> finding;
  {
    std::lock_guard lock(volatile_mutex_);
    finding = volatile_.observe(spec.cache_salt, prompt);
  }
  if (!finding) return;
  const VolatileRegion& r = finding->region;
  metrics_.record_volatile_prefix(r.tokens_lost, finding->warn);
  if (!finding->warn) return;
  const std::string text = token_excerpt(tokenizer_, prompt, r.begin, std::min(r.end, r.begin + 2 * kExcerptTokens));
  history_.record_warning({seconds_since_start(), spec.cache_salt, r, text});
  spdlog::warn(
      "volatile prompt prefix: tokens {}..{} ({:?}) differ in {} recent requests that share the {} tokens "
      "after them, so each request recomputes about {} tokens; move the changing part after the shared "
      "text to let the prefix cache reuse it",
      r.begin, r.end, text, r.num_requests, r.tokens_lost, r.tokens_lost);
}

}  // namespace hearth::server
