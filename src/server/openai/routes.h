#pragma once
// The routes of the OpenAI dialect, for HttpServer's constructor (server.cpp) to add.

#include "server/api/route_table.h"
#include "server/api/server_context.h"

namespace hearth::server {

// POST /v1/chat/completions and /v1/completions (completions.cpp).
void add_completion_routes(Routes& routes, ServerContext& context);
// POST /v1/embeddings (embeddings.cpp).
void add_embedding_routes(Routes& routes, ServerContext& context);

}  // namespace hearth::server
