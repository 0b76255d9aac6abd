#pragma once
// The routes about the served model, for HttpServer's constructor (server.cpp) to add.

#include "server/api/route_table.h"
#include "server/api/server_context.h"

namespace hearth::server {

// GET /v1/models and /v1/models/{id} (model_list.cpp).
void add_model_list_routes(Routes& routes, ServerContext& context);

}  // namespace hearth::server
