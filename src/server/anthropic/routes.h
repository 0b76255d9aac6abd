#pragma once
// The routes of the Anthropic dialect, for HttpServer's constructor (server.cpp) to add, and the error shape of the
// paths under them.

#include <string_view>

#include "server/api/api_error.h"
#include "server/api/route_table.h"
#include "server/api/server_context.h"
#include "server/http/http_types.h"

namespace hearth::server {

// The Anthropic Messages route (messages.cpp); errors on it and under it use Anthropic's shape.
inline constexpr std::string_view kMessagesPath = "/v1/messages";
[[nodiscard]] inline bool is_anthropic_path(std::string_view path) {
  return path == kMessagesPath ||
         (path.starts_with(kMessagesPath) && path.substr(kMessagesPath.size()).starts_with("/"));
}

// POST /v1/messages and /v1/messages/count_tokens (messages.cpp).
void add_messages_routes(Routes& routes, ServerContext& context);

// The error in Anthropic's shape (anthropic_error_json) with its status, counted in the metrics; 429 and 503 carry
// Retry-After.
[[nodiscard]] HttpResponse anthropic_error_response(ServerContext& context, const ApiError& error);

}  // namespace hearth::server
