// POST /v1/embeddings (OpenAI): {"model", "input", "encoding_format": "float"|"base64", "dimensions", "user"} →
// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}. The vectors are
// the model's pooling of its last hidden states, L2-normalised (server/api/embeddings.h, engine Engine::embed).

#include <fmt/format.h>

#include "server/api/embeddings.h"
#include "server/http/json_body.h"
#include "server/openai/routes.h"

namespace hearth::server {
namespace {

using nlohmann::json;

struct EmbeddingRequest {
  std::string model;
  bool base64 = false;
};

// The fields beside `input`: model (a string when given), encoding_format, dimensions (only the native width: the
// GGUF says nothing of Matryoshka training, so no other width is offered).
ApiResult<EmbeddingRequest> parse_fields(const json& body, int32_t dim) {
  EmbeddingRequest r;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return invalid_request("'model' must be a string", "model", "invalid_type");
    r.model = it->get<std::string>();
  }
  if (auto it = body.find("encoding_format"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "float" && *it != "base64")) {
      return invalid_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format", "invalid_value");
    }
    r.base64 = *it == "base64";
  }
  if (auto it = body.find("dimensions"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer())
      return invalid_request("'dimensions' must be an integer", "dimensions", "invalid_type");
    if (it->get<int64_t>() != dim) {
      return invalid_request(fmt::format("this model does not support 'dimensions' {}: its embeddings have {} "
                                         "dimensions and it is not known to be trained for shorter ones",
                                         it->get<int64_t>(), dim),
                             "dimensions", "unsupported_value");
    }
  }
  return r;
}

json embeddings_json(const Embeddings& vectors, bool base64, const std::string& model, int64_t num_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json embedding = base64 ? json(embedding_base64(vectors[i])) : json(vectors[i]);
    data.push_back(json{{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", num_tokens}, {"total_tokens", num_tokens}}}};
}

HttpResponse handle_embeddings(ServerContext& context, const HttpRequest& req) {
  auto parsed = parse_json_body(req.body);
  if (!parsed) return context.error_response(api_error(parsed.error()));
  const json& body = *parsed;
  if (!body.is_object()) return context.error_response(invalid_request("the request body must be a JSON object"));
  const EngineInfo& info = context.loop().info();
  auto fields = parse_fields(body, info.embedding_dim);
  if (!fields) return context.error_response(fields.error());
  if (auto error = context.model_names().check(fields->model)) return context.error_response(*error);
  if (auto error = check_embedding_model(context)) return context.error_response(*error);
  auto inputs = parse_embedding_inputs(body.contains("input") ? body["input"] : json(), context.tokenizer(),
                                       info.vocab_size, "input");
  if (!inputs) return context.error_response(inputs.error());
  auto vectors = compute_embeddings(context, *inputs, "input");
  if (!vectors) return context.error_response(vectors.error());
  return ServerContext::json_response(embeddings_json(*vectors, fields->base64, info.model_id, inputs->num_tokens));
}

}  // namespace

void add_embedding_routes(Routes& routes, ServerContext& context) {
  routes.add("POST", "/v1/embeddings", [&context](const HttpRequest& req) { return handle_embeddings(context, req); });
}

}  // namespace hearth::server
