#pragma once
// The routes of the Ollama dialect, for HttpServer's constructor (server.cpp) to add, and the error shape of the
// paths under them.

#include <string_view>

#include "server/api/api_error.h"
#include "server/api/route_table.h"
#include "server/api/server_context.h"
#include "server/http/http_types.h"

namespace hearth::server {

// Every Ollama route is under /api/; errors there use Ollama's shape {"error": "..."}.
[[nodiscard]] inline bool is_ollama_path(std::string_view path) {
  return path.starts_with("/api/");
}

// POST /api/chat, /api/generate, /api/show; GET /api/tags, /api/ps, /api/version (ollama_routes.cpp), and POST
// /api/embed and the legacy /api/embeddings (ollama_embed.cpp).
void add_ollama_routes(Routes& routes, ServerContext& context);
void add_ollama_embed_routes(Routes& routes, ServerContext& context);

// The error in Ollama's shape with its status, counted in the metrics; 429 and 503 carry Retry-After.
[[nodiscard]] HttpResponse ollama_error_response(ServerContext& context, const ApiError& error);

}  // namespace hearth::server
