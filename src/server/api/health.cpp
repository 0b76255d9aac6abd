// GET /health: the liveness probe, 503 once the server is shutting down. A constant of the server's state, so the
// transport answers it on its I/O thread (HttpTransportConfig::answer_inline, is_health_probe).

#include "server/api/routes.h"

namespace hearth::server {

void add_health_routes(Routes& routes, ServerContext& context) {
  routes.add("GET", "/health", [&context](const HttpRequest&) {
    HttpResponse res;
    if (context.draining()) {
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.body = R"({"status":"shutting_down"})";
      return res;
    }
    res.body = R"({"status":"ok"})";
    return res;
  });
}

}  // namespace hearth::server
