#pragma once
// The routes every served model answers whatever its dialects, for HttpServer's constructor (server.cpp) to add.

#include "server/api/route_table.h"
#include "server/api/server_context.h"

namespace hearth::server {

// GET /health (health.cpp).
void add_health_routes(Routes& routes, ServerContext& context);
// POST /tokenize (tokenize.cpp).
void add_tokenize_routes(Routes& routes, ServerContext& context);

}  // namespace hearth::server
