// POST /v1/chat/completions and /v1/completions: validate, build the prompt, submit (one engine request per
// choice), then answer as one JSON object or as an SSE stream, produced by a CompletionGeneration
// (completion_generation.h) as the engine's outputs arrive (no thread waits for them).

#include <ctime>
#include <random>

#include "server/http/tenant_keys.h"
#include "server/openai/completion_generation.h"
#include "server/openai/routes.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::string random_hex(uint64_t salt) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ salt);
  return fmt::format("{:016x}", rng());
}

HttpResponse handle_completion(ServerContext& context, const HttpRequest& req, Endpoint endpoint) {
  if (context.draining()) {
    return context.error_response(
        ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  auto parsed = parse_completion_request(req.body, endpoint);
  if (!parsed) return context.error_response(parsed.error());
  CompletionRequest& request = *parsed;
  request.cache_salt = scoped_cache_salt(req, request.cache_salt);
  if (auto error = context.check_model(request)) return context.error_response(*error);
  if (auto error = context.force_tool_call(request)) return context.error_response(*error);
  auto built = context.build_prompt(request);
  if (!built) return context.error_response(built.error());
  ServerContext::BuiltPrompt& prompt = *built;
  request.answer_primer = std::move(prompt.answer_primer);
  auto handles = context.submit_choices(request, std::move(prompt.tokens), prompt.checkpoint_hints);
  if (!handles) return context.error_response(handles.error());

  const EngineInfo& info = context.loop().info();
  ResponseMeta meta{
      fmt::format("{}{}", endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-", random_hex(context.next_id())),
      static_cast<int64_t>(std::time(nullptr)), info.model_id, prompt.answer_tokens, info.system_fingerprint};
  const bool remember = request.use_cache && context.answers().max_entries() > 0 && !prompt.text.empty();
  auto gen = std::make_shared<CompletionGeneration>(context, std::move(request), std::move(meta), std::move(*handles));
  // The answer memory remembers turns of text prompts (choice 0's answer); the ids come with the final output.
  if (remember) {
    gen->remember = true;
    gen->prompt_text = std::move(prompt.text);
    gen->parse_special = prompt.parse_special;
  }
  HttpResponse res;
  res.source = std::move(gen);
  return res;
}

}  // namespace

void add_completion_routes(Routes& routes, ServerContext& context) {
  routes.add("POST", "/v1/chat/completions",
             [&context](const HttpRequest& req) { return handle_completion(context, req, Endpoint::kChat); });
  routes.add("POST", "/v1/completions",
             [&context](const HttpRequest& req) { return handle_completion(context, req, Endpoint::kCompletion); });
}

}  // namespace hearth::server
