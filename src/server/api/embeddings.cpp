// Embeddings, dialect-neutral (embeddings.h).

#include "server/api/embeddings.h"

#include <fmt/format.h>

#include <cstring>

namespace hearth::server {
namespace {

using nlohmann::json;

// One element of `input`: a string (tokenized) or an array of ids (as given).
ApiResult<std::vector<TokenId>> one_input(const json& item, const Tokenizer& tokenizer, int32_t vocab_size,
                                          const std::string& where) {
  if (item.is_string()) {
    const std::string& text = item.get_ref<const std::string&>();
    if (text.empty()) return invalid_request(fmt::format("{} is an empty string", where), where, "invalid_value");
    return tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/false);
  }
  if (!item.is_array()) {
    return invalid_request(fmt::format("{} must be a string or an array of token ids, got {}", where, item.type_name()),
                           where, "invalid_type");
  }
  if (item.empty()) return invalid_request(fmt::format("{} is an empty array", where), where, "invalid_value");
  std::vector<TokenId> ids;
  ids.reserve(item.size());
  for (const json& id : item) {
    if (!id.is_number_integer()) {
      return invalid_request(fmt::format("{} must hold integer token ids, got {}", where, id.type_name()), where,
                             "invalid_type");
    }
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v >= vocab_size) {
      return invalid_request(fmt::format("{}: token id {} is outside the vocabulary of {}", where, v, vocab_size),
                             where, "invalid_value");
    }
    ids.push_back(TokenId{static_cast<int32_t>(v)});
  }
  return ids;
}

// Whether `input` is one input given as ids ([1, 2, 3]) rather than a list of inputs.
bool is_id_list(const json& input) {
  return input.is_array() && !input.empty() && input.front().is_number();
}

}  // namespace

std::optional<ApiError> check_embedding_model(const ServerContext& context) {
  const EngineInfo& info = context.loop().info();
  if (info.embedding_refusal.empty()) return std::nullopt;
  return invalid_request(info.embedding_refusal, "model", "model_not_embedding");
}

ApiResult<EmbeddingInputs> parse_embedding_inputs(const json& input, const Tokenizer& tokenizer, int32_t vocab_size,
                                                  const std::string& field) {
  if (input.is_null())
    return invalid_request(fmt::format("'{}' is required", field), field, "missing_required_parameter");
  EmbeddingInputs out;
  const bool single = input.is_string() || is_id_list(input);
  if (!single && !input.is_array()) {
    return invalid_request(fmt::format("'{}' must be a string, an array of strings, an array of token ids or an array "
                                       "of such arrays, got {}",
                                       field, input.type_name()),
                           field, "invalid_type");
  }
  if (!single && input.empty())
    return invalid_request(fmt::format("'{}' is an empty array", field), field, "invalid_value");
  if (!single && input.size() > kMaxEmbeddingInputs) {
    return invalid_request(
        fmt::format("'{}' has {} inputs; at most {} are allowed per request", field, input.size(), kMaxEmbeddingInputs),
        field, "too_many_inputs");
  }
  const size_t n = single ? 1 : input.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string where = single ? field : fmt::format("{}[{}]", field, i);
    auto ids = one_input(single ? input : input[i], tokenizer, vocab_size, where);
    if (!ids) return ids.error();
    out.num_tokens += static_cast<int64_t>(ids->size());
    if (out.num_tokens > kMaxEmbeddingTokens) {
      return invalid_request(fmt::format("'{}' holds more than {} tokens over all inputs (the limit per request); "
                                         "split it into several requests",
                                         field, kMaxEmbeddingTokens),
                             field, "too_many_tokens");
    }
    out.tokens.push_back(std::move(*ids));
  }
  return out;
}

ApiResult<Embeddings> compute_embeddings(ServerContext& context, const EmbeddingInputs& inputs,
                                         const std::string& field) {
  if (context.draining())
    return ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"};
  context.begin_in_flight();  // shutdown waits for it, and a front keeps the model loaded while it runs
  auto result = context.loop().embed(inputs.tokens);
  context.end_in_flight();
  if (!result) return ApiError{503, "the engine has stopped", "server_error", {}, "server_shutting_down"};
  if (!*result) {
    ApiError error = api_error(result->error(), Endpoint::kCompletion);
    if (error.param == "prompt") error.param = field;
    return error;
  }
  return std::move(**result);
}

std::string embedding_base64(const std::vector<float>& vector) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(vector.size() * sizeof(float), '\0');
  for (size_t i = 0; i < vector.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &vector[i], sizeof bits);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = bytes.size() - i;
    uint32_t chunk = static_cast<uint8_t>(bytes[i]) << 16;
    if (left > 1) chunk |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (left > 2) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += left > 1 ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += left > 2 ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

}  // namespace hearth::server
