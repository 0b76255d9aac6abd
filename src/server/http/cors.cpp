#include "server/http/cors.h"

#include <algorithm>
#include <cctype>

namespace hearth::server {
namespace {

// RFC 9110 token characters, plus the ", " separators of a header list.
bool is_header_list(std::string_view s) {
  return !s.empty() && std::ranges::all_of(s, [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return std::isalnum(u) || std::string_view("!#$%&'*+-.^_`|~, \t").find(c) != std::string_view::npos;
  });
}

}  // namespace

Result<std::string> parse_allowed_origin(std::string_view value) {
  if (value == "*") return std::string(value);
  // A trailing '/' after the host is dropped (browsers send the origin without it).
  if (value.size() > 1 && value.back() == '/' && !value.ends_with("://")) value.remove_suffix(1);
  const auto bad = [&](std::string_view why) {
    return make_error("--allow-origin '{}': {}; give '*' or an origin such as http://localhost:5173", value, why);
  };
  const size_t sep = value.find("://");
  if (sep == std::string_view::npos) return bad("no scheme");
  const std::string_view scheme = value.substr(0, sep);
  if (scheme != "http" && scheme != "https") return bad("the scheme must be http or https");
  const std::string_view rest = value.substr(sep + 3);
  if (rest.empty()) return bad("no host");
  if (rest.find_first_of("/?#@ ") != std::string_view::npos) return bad("an origin has no path, query or user");
  return std::string(value);
}

std::optional<std::string> CorsPolicy::allow_origin(std::optional<std::string_view> origin) const {
  if (!origin || allowed_origins.empty()) return std::nullopt;
  for (const std::string& allowed : allowed_origins) {
    if (allowed == "*") return allowed;
    if (allowed == *origin) return allowed;
  }
  return std::nullopt;
}

std::optional<HttpResponse> CorsPolicy::preflight(const HttpRequest& req) const {
  if (req.method != "OPTIONS" || !req.header("Access-Control-Request-Method")) return std::nullopt;
  const std::optional<std::string> allowed = allow_origin(req.header("Origin"));
  if (!allowed) return std::nullopt;
  HttpResponse res;
  res.status = 204;
  res.content_type = "text/plain";
  res.set_header("Access-Control-Allow-Origin", *allowed);
  res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  const auto requested = req.header("Access-Control-Request-Headers");
  // Echoing the list the browser asks for lets any client library's own headers (x-stainless-*, anthropic-version)
  // through; Authorization is never covered by a "*" wildcard, so the names are sent back, not "*".
  res.set_header("Access-Control-Allow-Headers", requested && is_header_list(*requested)
                                                     ? std::string(*requested)
                                                     : std::string("Authorization, Content-Type, x-api-key"));
  res.set_header("Access-Control-Max-Age", std::to_string(kCorsMaxAgeSeconds));
  if (*allowed != "*") res.set_header("Vary", "Origin");
  return res;
}

}  // namespace hearth::server
