#include "server/api/api_error.h"

namespace hearth::server {

using nlohmann::json;

ApiError invalid_request(std::string message, std::string param, std::string code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

const char* error_type_for_status(int status) {
  if (status == 401) return "authentication_error";
  if (status == 403) return "permission_error";
  if (status == 404) return "not_found_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

nlohmann::json error_json(const ApiError& e) {
  json error = {{"message", e.message}, {"type", e.type}};
  error["param"] = e.param.empty() ? json() : json(e.param);
  error["code"] = e.code.empty() ? json() : json(e.code);
  return json{{"error", std::move(error)}};
}

ApiError api_error(const SubmitError& e, Endpoint endpoint) {
  const std::string prompt_param = endpoint == Endpoint::kChat ? "messages" : "prompt";
  switch (e.code) {
    case SubmitErrorCode::kEmptyPrompt:
      return invalid_request(e.message, prompt_param);
    case SubmitErrorCode::kInvalidToken:
      return invalid_request(e.message, "prompt", "invalid_value");
    case SubmitErrorCode::kInvalidSampling:
      return invalid_request(e.message, {}, "invalid_value");
    case SubmitErrorCode::kInvalidStop:
      return invalid_request(e.message, "stop", "invalid_value");
    case SubmitErrorCode::kInvalidRetention:
      return invalid_request(e.message, "cache_retention", "invalid_value");
    case SubmitErrorCode::kInvalidMaxTokens:
      return invalid_request(e.message, "max_tokens", "invalid_value");
    case SubmitErrorCode::kPromptTooLong:
      return invalid_request(e.message, prompt_param, "context_length_exceeded");
    case SubmitErrorCode::kContextExceeded:
      return invalid_request(e.message, "max_tokens", "context_length_exceeded");
    case SubmitErrorCode::kExceedsKvPool:
      return invalid_request(e.message, prompt_param, "kv_pool_exceeded");
    case SubmitErrorCode::kOverloaded:
      return ApiError{429, e.message, "rate_limit_error", {}, "server_overloaded"};
    case SubmitErrorCode::kShuttingDown:
      return ApiError{503, e.message, "server_error", {}, "server_shutting_down"};
    case SubmitErrorCode::kNotGenerative:
      return invalid_request(e.message, "model", "model_not_generative");
  }
  return ApiError{500, e.message, "server_error", {}, {}};  // unreachable: every code is mapped above
}

ApiError api_error(const JsonBodyError& e) {
  return invalid_request(e.message, {}, e.code);
}

ApiError api_error(const RuntimeError& e) {
  switch (e.code) {
    case RuntimeErrorCode::kNonFiniteLogits:
      return ApiError{500, e.message, "server_error", {}, "non_finite_logits"};
    case RuntimeErrorCode::kShuttingDown:
      return ApiError{503, e.message, "server_error", {}, "server_shutting_down"};
  }
  return ApiError{500, e.message, "server_error", {}, {}};  // unreachable: every code is mapped above
}

}  // namespace hearth::server
