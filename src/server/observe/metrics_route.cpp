// GET /metrics: the server's series (metrics.h) and its engine's, as Prometheus text.

#include "server/http/tenant_keys.h"
#include "server/observe/routes.h"

namespace hearth::server {

std::string metrics_text(ServerContext& context, std::string_view tenant) {
  // After shutdown the engine's counters are gone; the server's own series still render.
  const EngineStats stats = context.loop().stats().value_or(EngineStats{});
  return context.metrics().render(stats, context.loop().info().kv_plan, tenant);
}

void add_metrics_routes(Routes& routes, ServerContext& context) {
  routes.add("GET", "/metrics", [&context](const HttpRequest& req) {
    HttpResponse res;
    res.content_type = "text/plain; version=0.0.4; charset=utf-8";
    res.body = metrics_text(context, req.tenant);  // a tenant's key: the server-wide series and its own
    return res;
  });
}

}  // namespace hearth::server
