#pragma once
// The routes of the prefix cache, for HttpServer's constructor (server.cpp) to add, and the warm-up they share with
// `hearth serve --warm`.

#include <nlohmann/json.hpp>

#include "server/api/api_error.h"
#include "server/api/route_table.h"
#include "server/api/server_context.h"

namespace hearth::server {

// POST /v1/cache/explain (cache_explain.cpp).
void add_cache_explain_routes(Routes& routes, ServerContext& context);
// POST /v1/cache/warm, at most 2 at a time (cache_warm.cpp).
void add_cache_warm_routes(Routes& routes, ServerContext& context);
// POST /v1/cache/pin and DELETE /v1/cache/pin/{key} (cache_pin.cpp).
void add_cache_pin_routes(Routes& routes, ServerContext& context);
// GET /v1/kv/plan (kv_plan_route.cpp).
void add_kv_plan_routes(Routes& routes, ServerContext& context);

// Prefills and (unless "pin": false) pins the prompt or chat of a completion-shaped body, waiting until done:
// POST /v1/cache/warm and --warm (HttpServer::warm). The result says what the prefix cache holds of it. `tenant`
// (--api-keys; empty: none) scopes the body's cache_salt (http/tenant_keys.h).
[[nodiscard]] ApiResult<nlohmann::json> warm_prefix(ServerContext& context, const nlohmann::json& body,
                                                    std::string_view tenant = {});

}  // namespace hearth::server
