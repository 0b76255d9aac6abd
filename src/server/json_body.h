#pragma once
// Request bodies as JSON, parsed with a nesting limit that is enforced while parsing: a body that nests deeper
// than the limit is refused as soon as the parser reaches the level past it, so no deep tree is ever built and
// nothing later (a copy, the chat template's conversion, destruction) recurses deeper than the limit. Every
// endpoint that reads a JSON body goes through parse_json_body.

#include <nlohmann/json.hpp>

#include <string_view>

#include "server/openai_json.h"

namespace hearth::server {

// Arrays and objects nested inside one another; the top-level value is level 1. The chat template applies the same
// limit to the values it converts (template/value.h kMaxJsonDepth).
inline constexpr int kMaxJsonBodyDepth = 256;

// Parses `body` as one JSON value. Fails with a 400: "invalid_json" for malformed JSON, "json_too_deep" (message
// "the request body nests deeper than 256 levels ...") past `max_depth`. Never throws; memory stays proportional to
// the body (depth included), and recursion depth of later tree operations is bounded by `max_depth`.
[[nodiscard]] ApiResult<nlohmann::json> parse_json_body(std::string_view body, int max_depth = kMaxJsonBodyDepth);

}  // namespace hearth::server
