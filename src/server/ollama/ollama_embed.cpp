// Ollama's embeddings: POST /api/embed {"model", "input": string | [string], "truncate" (default true),
// "dimensions", "options", "keep_alive"} → {"model", "embeddings": [[...]], "total_duration", "load_duration",
// "prompt_eval_count"}, and the legacy POST /api/embeddings {"model", "prompt"} → {"embedding": [...]}. Both give
// the same L2-normalised vectors as /v1/embeddings (server/api/embeddings.h). With truncate (Ollama's default), an
// input longer than the context keeps its first n_ctx tokens; without it, such an input is a 400.

#include <fmt/format.h>

#include <chrono>

#include "server/api/embeddings.h"
#include "server/http/json_body.h"
#include "server/ollama/routes.h"

namespace hearth::server {
namespace {

using nlohmann::json;

struct OllamaEmbedRequest {
  std::string model;
  bool truncate = true;
  json input;
};

ApiResult<OllamaEmbedRequest> parse_embed(const json& body, bool legacy, int32_t dim) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  OllamaEmbedRequest r;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return invalid_request("'model' must be a string", "model", "invalid_type");
    r.model = it->get<std::string>();
    if (r.model.ends_with(":latest")) r.model.resize(r.model.size() - 7);
  }
  if (auto it = body.find("truncate"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid_request("'truncate' must be a boolean", "truncate", "invalid_type");
    r.truncate = it->get<bool>();
  }
  if (auto it = body.find("dimensions"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != dim) {
      return invalid_request(
          fmt::format("this model does not support 'dimensions' {}: its embeddings have {}", it->dump(), dim),
          "dimensions", "unsupported_value");
    }
  }
  const char* field = legacy ? "prompt" : "input";
  if (auto it = body.find(field); it != body.end()) r.input = *it;
  if (legacy && !r.input.is_string()) return invalid_request("'prompt' must be a string", "prompt", "invalid_type");
  // Ollama answers an absent or empty input with no embeddings; an empty list is no work either.
  return r;
}

HttpResponse handle_embed(ServerContext& context, const HttpRequest& req, bool legacy) {
  const auto start = std::chrono::steady_clock::now();
  auto parsed = parse_json_body(req.body);
  if (!parsed) return ollama_error_response(context, api_error(parsed.error()));
  const EngineInfo& info = context.loop().info();
  auto request = parse_embed(*parsed, legacy, info.embedding_dim);
  if (!request) return ollama_error_response(context, request.error());
  if (auto error = context.model_names().check(request->model)) return ollama_error_response(context, *error);
  if (auto error = check_embedding_model(context)) return ollama_error_response(context, *error);
  const bool empty = request->input.is_null() || (request->input.is_array() && request->input.empty()) ||
                     (legacy && request->input.get_ref<const std::string&>().empty());
  EmbeddingInputs inputs;
  if (!empty) {
    auto tokens =
        parse_embedding_inputs(request->input, context.tokenizer(), info.vocab_size, legacy ? "prompt" : "input");
    if (!tokens) return ollama_error_response(context, tokens.error());
    inputs = std::move(*tokens);
  }
  for (std::vector<TokenId>& ids : inputs.tokens) {
    if (request->truncate && ids.size() > static_cast<size_t>(info.n_ctx)) {
      inputs.num_tokens -= static_cast<int64_t>(ids.size()) - info.n_ctx;
      ids.resize(static_cast<size_t>(info.n_ctx));
    }
  }
  Embeddings vectors;
  if (!inputs.tokens.empty()) {
    auto computed = compute_embeddings(context, inputs, legacy ? "prompt" : "input");
    if (!computed) return ollama_error_response(context, computed.error());
    vectors = std::move(*computed);
  }
  if (legacy) {
    return ServerContext::json_response(json{{"embedding", vectors.empty() ? json::array() : json(vectors[0])}});
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  return ServerContext::json_response(json{{"model", request->model.empty() ? info.model_id : request->model},
                                           {"embeddings", vectors},
                                           {"total_duration", ns.count()},
                                           {"load_duration", 0},
                                           {"prompt_eval_count", inputs.num_tokens}});
}

}  // namespace

void add_ollama_embed_routes(Routes& routes, ServerContext& context) {
  routes.add("POST", "/api/embed", [&context](const HttpRequest& req) { return handle_embed(context, req, false); });
  routes.add("POST", "/api/embeddings",
             [&context](const HttpRequest& req) { return handle_embed(context, req, true); });
}

}  // namespace hearth::server
