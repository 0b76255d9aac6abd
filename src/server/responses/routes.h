#pragma once
// The routes of OpenAI's Responses API, for HttpServer's constructor (server.cpp) to add.

#include "server/api/route_table.h"
#include "server/api/server_context.h"
#include "server/responses/response_store.h"

namespace hearth::server {

// POST /v1/responses, GET and DELETE /v1/responses/{id} (responses.cpp), over one ResponseStore with `limits`.
void add_responses_routes(Routes& routes, ServerContext& context, ResponseStore::Limits limits);

}  // namespace hearth::server
