#pragma once
// Cross-origin requests (CORS) for a browser app on another origin (--allow-origin): which origins may call the
// server, the Access-Control-Allow-Origin a response carries for a request's Origin, and the answer to a preflight.
// The transport applies it to every response, streamed or not, and answers preflights itself, before the routes and
// the API key (a browser sends no credentials on a preflight). Without allowed origins nothing changes: no CORS
// header, and an OPTIONS request reaches the routes (a 405).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_types.h"
#include "util/result.h"

namespace hearth::server {

// How long a browser may cache a preflight's answer, in seconds (Access-Control-Max-Age).
inline constexpr int kCorsMaxAgeSeconds = 86400;

// One --allow-origin value: "*", or an origin "scheme://host[:port]" (http or https, no path, query or userinfo; a
// trailing '/' is dropped). Error naming the value otherwise.
[[nodiscard]] Result<std::string> parse_allowed_origin(std::string_view value);

struct CorsPolicy {
  std::vector<std::string> allowed_origins;  // parsed by parse_allowed_origin; empty: CORS off

  // The Access-Control-Allow-Origin value for a request carrying `origin` ("*" when "*" is allowed, else the origin
  // itself when it is listed), or nullopt: no CORS headers.
  [[nodiscard]] std::optional<std::string> allow_origin(std::optional<std::string_view> origin) const;

  // The 204 answer to a preflight (OPTIONS with Origin and Access-Control-Request-Method) from an allowed origin:
  // Allow-Origin, Allow-Methods, Allow-Headers (the requested ones, when they are a valid header list), Max-Age.
  // nullopt for any other request, which the routes answer.
  [[nodiscard]] std::optional<HttpResponse> preflight(const HttpRequest& req) const;
};

}  // namespace hearth::server
