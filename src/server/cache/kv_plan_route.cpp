// GET /v1/kv/plan: the pool the server runs with, and the memory plan for ?ctx=&users=&memory= (default: the
// model's context, one user, no budget) at the server's KV dtype, with every other dtype for comparison.

#include <optional>

#include "server/cache/kv_plan_json.h"
#include "server/cache/routes.h"
#include "util/units.h"

namespace hearth::server {
namespace {

using nlohmann::json;

HttpResponse handle_kv_plan(ServerContext& context, const HttpRequest& req) {
  const EngineInfo& info = context.loop().info();
  const KvPlan& pool = info.kv_plan;
  MemoryPlanRequest request;
  request.shape = pool.shape;
  request.weights_bytes = info.weights_bytes;
  request.block_size = pool.block_size;
  request.context = info.n_ctx;
  request.costs = info.kv_dtype_costs;
  request.dtype = pool.cost.dtype;
  request.window = pool.window;  // what the pool keeps of sliding-window layers
  std::optional<ApiError> error;
  auto read_count = [&](const char* name, int64_t max, int64_t& out) {
    const auto text = req.param(name);
    if (!text || error) return;
    auto v = parse_plan_count(name, std::string(*text), max);
    if (!v) {
      error = v.error();
    } else {
      out = *v;
    }
  };
  read_count("ctx", kMaxPlanContext, request.context);
  read_count("users", kMaxPlanUsers, request.users);
  if (error) return context.error_response(*error);
  if (const auto memory_text = req.param("memory")) {
    auto memory = parse_bytes(*memory_text);
    if (!memory) return context.error_response(invalid_request(memory.error().message, "memory"));
    request.memory_bytes = *memory;
  }
  auto plan = plan_memory(request);
  if (!plan) return context.error_response(invalid_request(plan.error().message, "ctx"));
  return ServerContext::json_response(
      json{{"object", "kv.plan"}, {"pool", kv_pool_json(pool)}, {"plan", memory_plan_json(*plan)}});
}

}  // namespace

void add_kv_plan_routes(Routes& routes, ServerContext& context) {
  routes.add("GET", "/v1/kv/plan", [&context](const HttpRequest& req) { return handle_kv_plan(context, req); });
}

}  // namespace hearth::server
