#pragma once
// Request bodies as JSON, parsed with a nesting limit that is enforced while parsing: a body that nests deeper
// than the limit is refused as soon as the parser reaches the level past it, so no deep tree is ever built and
// nothing later (a copy, the chat template's conversion, destruction) recurses deeper than the limit. Every
// endpoint that reads a JSON body goes through parse_json_body.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "util/result.h"

namespace hearth::server {

// Arrays and objects nested inside one another; the top-level value is level 1. The chat template applies the same
// limit to the values it converts (template/value.h kMaxJsonDepth).
inline constexpr int kMaxJsonBodyDepth = 256;

// Why a body is no JSON value: `code` is "invalid_json" (malformed) or "json_too_deep" (message "the request body
// nests deeper than 256 levels ..."). The routes answer it as a 400 with that code (api_error in openai_json.h).
struct JsonBodyError {
  std::string message;
  std::string code;
};

// Parses `body` as one JSON value; fails with "invalid_json" for malformed JSON, "json_too_deep" past `max_depth`.
// Never throws; memory stays proportional to the body (depth included), and recursion depth of later tree
// operations is bounded by `max_depth`.
[[nodiscard]] Result<nlohmann::json, JsonBodyError> parse_json_body(std::string_view body,
                                                                    int max_depth = kMaxJsonBodyDepth);

}  // namespace hearth::server
