#pragma once
// OpenAI request fields Hearth does not implement. A field that would change what the answer means is refused
// with a 400 naming it, unless it holds its neutral value (suffix "", modalities ["text"], ...); the fields that cannot change the answer (user, metadata, store, ...) are
// ignored on purpose. README ("OpenAI request fields") lists every field and what happens to it.

#include <nlohmann/json.hpp>

#include <optional>

#include "server/api/api_error.h"

namespace hearth::server {

// The first refused field of `body` (an object), as a 400 with param naming it and code unsupported_parameter.
[[nodiscard]] std::optional<ApiError> check_unsupported_fields(const nlohmann::json& body, Endpoint endpoint);

}  // namespace hearth::server
