#include "server/api/tokenize_request.h"

#include <fmt/format.h>

#include "server/http/json_body.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::optional<ApiError> read_flag(const json& body, const char* key, bool& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) {
    return invalid_request(fmt::format("'{}' must be a boolean, got {}", key, it->type_name()), key, "invalid_type");
  }
  out = it->get<bool>();
  return std::nullopt;
}

}  // namespace

ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body_text) {
  auto parsed = parse_json_body(body_text);
  if (!parsed) return api_error(parsed.error());
  const json& body = *parsed;
  if (!body.is_object()) return invalid_request("the request body must be a JSON object", {}, "invalid_json");
  TokenizeRequest r;
  auto content = body.find("content");
  if (content == body.end() || !content->is_string()) {
    return invalid_request("'content' is required and must be a string", "content",
                           content == body.end() ? "missing_required_parameter" : "invalid_type");
  }
  r.content = content->get<std::string>();
  if (auto err = read_flag(body, "add_special", r.add_special)) return *err;
  if (auto err = read_flag(body, "parse_special", r.parse_special)) return *err;
  return r;
}

}  // namespace hearth::server
