#pragma once
// The errors every route answers with, whatever its dialect: ApiError (an HTTP status and the fields of an error
// object), ApiResult (a value or an ApiError: util/result.h's Result, so HEARTH_TRY propagates it), and the
// mapping of the engine's refusals and the body parser's failures to them. Each dialect renders an ApiError in its
// own shape (error_json here for OpenAI's and every other route; anthropic_error_json for the Messages route).

#include <nlohmann/json.hpp>

#include <string>

#include "engine/engine_types.h"
#include "server/http/json_body.h"
#include "util/result.h"

namespace hearth::server {

// An OpenAI error object with its HTTP status: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty renders as null
  std::string code;   // empty renders as null
};

[[nodiscard]] ApiError invalid_request(std::string message, std::string param = {}, std::string code = {});
// The error object every route but Anthropic's answers with (OpenAI's shape): {"error": {"message", "type",
// "param", "code"}}.
[[nodiscard]] nlohmann::json error_json(const ApiError& error);
// The OpenAI error type for a status without a more specific one (401 authentication_error, 404 not_found_error,
// 429 rate_limit_error, 5xx server_error, else invalid_request_error).
[[nodiscard]] const char* error_type_for_status(int status);

// A value or the error object to answer with: Result (util/result.h), so HEARTH_TRY propagates it.
template <class T>
using ApiResult = Result<T, ApiError>;

enum class Endpoint { kChat, kCompletion };

// The error object for a request the engine refused: 400 naming the field at fault (the prompt or messages, or
// max_tokens, with code context_length_exceeded for the context), 429 when overloaded, 503 when shutting down.
[[nodiscard]] ApiError api_error(const SubmitError& error, Endpoint endpoint);
// The error object for a request the engine ended while it ran: 500 for non-finite logits, 503 when shutting down.
[[nodiscard]] ApiError api_error(const RuntimeError& error);
// The error object for a body that is no JSON value (json_body.h): a 400 with its code.
[[nodiscard]] ApiError api_error(const JsonBodyError& error);

}  // namespace hearth::server
