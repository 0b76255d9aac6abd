#pragma once
// Embeddings, dialect-neutral: the inputs of OpenAI's POST /v1/embeddings and Ollama's /api/embed (text or token
// ids) turned into token lists, bounded, and run through EngineLoop::embed. The dialects (openai/embeddings.cpp,
// ollama/ollama_routes.cpp) parse their bodies and render the vectors; the checks and the errors are here, once.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine_types.h"
#include "server/api/api_error.h"
#include "server/api/server_context.h"

namespace hearth::server {

// One request's bounds: more inputs, or more tokens over all of them, is a 400 naming the limit. 2048 inputs is
// OpenAI's own cap; the token cap keeps one request's forward (which holds the engine loop) to seconds.
inline constexpr size_t kMaxEmbeddingInputs = 2048;
inline constexpr int64_t kMaxEmbeddingTokens = 65536;

struct EmbeddingInputs {
  std::vector<std::vector<TokenId>> tokens;  // one list per input, in order
  int64_t num_tokens = 0;                    // over all inputs: usage.prompt_tokens
};

// The 400 for a model that serves no embeddings (EngineInfo::embedding_refusal), nullopt for one that does.
[[nodiscard]] std::optional<ApiError> check_embedding_model(const ServerContext& context);

// `input` as OpenAI takes it: a string, an array of strings, an array of token ids, or an array of such arrays.
// Text is tokenized as the model asks (BOS and EOS as its GGUF says; special tokens are not parsed, as llama.cpp's
// embedding contexts do). `field` names the field in errors ("input"). Fails with a 400 for an empty or mistyped
// input, an empty string or list, an id outside the vocabulary, or the limits above.
[[nodiscard]] ApiResult<EmbeddingInputs> parse_embedding_inputs(const nlohmann::json& input, const Tokenizer& tokenizer,
                                                                int32_t vocab_size, const std::string& field);

// Runs the inputs (EngineLoop::embed): the engine's refusals as 400 (an input beyond the context or the pool),
// 429 (the pool is busy now) or 503 (shutting down).
[[nodiscard]] ApiResult<Embeddings> compute_embeddings(ServerContext& context, const EmbeddingInputs& inputs,
                                                       const std::string& field);

// The vector as OpenAI's encoding_format "base64" sends it: the little-endian float32 bytes, base64 (RFC 4648).
[[nodiscard]] std::string embedding_base64(const std::vector<float>& vector);

}  // namespace hearth::server
