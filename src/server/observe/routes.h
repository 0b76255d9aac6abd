#pragma once
// The routes that observe the server, for HttpServer's constructor (server.cpp) to add, and what HttpServer calls
// beside them (the /metrics text for a front with several models, the stats sampler's tick).

#include <string>

#include "server/api/route_table.h"
#include "server/api/server_context.h"

namespace hearth::server {

// GET /metrics (metrics_route.cpp).
void add_metrics_routes(Routes& routes, ServerContext& context);
// GET / and /dashboard (the page, no key needed), /v1/stats (the page's JSON), /v1/cache (cached prefixes)
// (dashboard.cpp).
void add_dashboard_routes(Routes& routes, ServerContext& context);

// The GET /metrics text of the server and its engine.
[[nodiscard]] std::string metrics_text(ServerContext& context, std::string_view tenant = {});
// One sample of the engine's stats into the history /v1/stats draws: what the 1 s sampler calls.
void sample_stats(ServerContext& context);

}  // namespace hearth::server
