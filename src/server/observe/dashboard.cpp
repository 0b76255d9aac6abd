// The dashboard: GET / and /dashboard (the embedded page), GET /v1/stats (pool, counters, throughput, TTFT, the KV
// plan, why requests missed, volatile-prefix warnings: one JSON snapshot) and GET /v1/cache (one salt's cached
// prefixes as a tree). Every figure is read from the engine on its loop thread between steps (EngineLoop::stats,
// EngineLoop::cached_prefixes), so a poll costs the engine one short command, never a lock it steps under.

#include <algorithm>
#include <vector>

#include "server/cache/kv_plan_json.h"
#include "server/http/tenant_keys.h"
#include "server/observe/dashboard_page.h"
#include "server/observe/routes.h"

namespace hearth::server {
namespace {

using nlohmann::json;

// The pool split into states that add up to the total: running (held by requests: in use less pins), pinned,
// cached (unreferenced, still findable), free (empty). `cached_total` also counts cached blocks that are in use.
json kv_state_json(const EngineStats& s, const KvPlan& plan) {
  const int64_t running = s.num_blocks_in_use - s.num_blocks_pinned;
  const int64_t cached = s.num_blocks_cached_free;
  const int64_t empty = s.num_blocks_free - s.num_blocks_cached_free;
  auto by = [&](int64_t per_block) {
    return json{{"running", running * per_block},
                {"pinned", s.num_blocks_pinned * per_block},
                {"cached", cached * per_block},
                {"free", empty * per_block},
                {"total", s.num_blocks_total * per_block}};
  };
  return {{"blocks", by(1)},
          {"tokens", by(plan.block_size)},
          {"bytes", by(plan.bytes_per_block)},
          {"blocks_indexed", s.num_blocks_cached},
          {"budget_bytes", plan.budget_bytes},
          {"block_size", plan.block_size},
          {"bytes_per_block", plan.bytes_per_block},
          // Sliding-window models: the slabs of their sliding-window layers' K/V (bytes_per_block excludes them).
          {"window_slabs",
           {{"total", s.num_window_slabs_total},
            {"used", s.num_window_slabs_in_use},
            {"idle", s.num_window_slabs_idle},
            {"evictions", s.num_window_slab_evictions},
            {"bytes_per_slab", plan.bytes_per_window_slab}}}};
}

json counters_json(const EngineStats& s, const ServerCounts& c) {
  const uint64_t queried = s.num_cache_query_tokens, hit = s.num_cache_hit_tokens;
  return {{"requests", c.num_requests},
          {"cache_queries", s.num_cache_queries},
          {"prefix_query_tokens", queried},
          {"prefix_hit_tokens", hit},
          {"hit_rate", queried > 0 ? json(static_cast<double>(hit) / static_cast<double>(queried)) : json(nullptr)},
          {"reused_tokens", hit},
          {"copied_tokens", s.num_cache_copied_tokens},
          {"computed_prompt_tokens", s.num_prefill_tokens},
          {"decode_tokens", s.num_decode_tokens},
          {"evictions", s.num_evictions},
          {"preemptions", s.num_preemptions},
          {"running", s.num_running},
          {"waiting", s.num_waiting},
          {"client_disconnects", c.num_disconnects}};
}

// Why finished requests' prefix reuse stopped, most frequent first (end_of_prompt: the whole prompt was reused).
json misses_json(const std::map<std::string, uint64_t>& reuse_stops) {
  std::vector<std::pair<std::string, uint64_t>> reasons(reuse_stops.begin(), reuse_stops.end());
  std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  json out = json::array();
  for (const auto& [reason, n] : reasons) out.push_back({{"reason", reason}, {"requests", n}});
  return out;
}

json plan_json(const KvPlan& plan, int32_t n_ctx) {
  json j = kv_pool_json(plan);
  json users = json::array();
  std::vector<int64_t> contexts{n_ctx, 4096, 16384, 32768};
  std::sort(contexts.begin(), contexts.end());
  contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
  for (int64_t ctx : contexts) users.push_back({{"context", ctx}, {"users", plan.users_at(ctx)}});
  j["users_at"] = std::move(users);
  j["model_context"] = n_ctx;
  return j;
}

json cache_entry_json(const CachedPrefixEntry& e) {
  return {{"parent", e.parent},
          {"text", e.text},
          {"text_truncated", e.text_truncated},
          {"tokens", e.num_tokens},
          {"depth_tokens", e.depth_tokens},
          {"blocks", e.num_blocks},
          {"pinned_blocks", e.num_blocks_pinned},
          {"pinned", e.num_blocks_pinned > 0},
          {"in_use_blocks", e.num_blocks_in_use},
          {"hits", e.num_hits},
          {"idle_s", e.idle_s ? json(*e.idle_s) : json(nullptr)},
          {"tiers", e.tiers}};
}

void no_store(HttpResponse& res) {
  res.set_header("Cache-Control", "no-store");
}

HttpResponse handle_dashboard_page(const std::string& csp) {
  HttpResponse res;
  res.content_type = "text/html; charset=utf-8";
  res.body = std::string(dashboard_html());
  res.set_header("Content-Security-Policy", csp);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
  no_store(res);
  return res;
}

// GET /v1/stats[?cache_salt=S]: the salt (within the caller's tenant, --api-keys) only chooses whose volatile-prefix
// warnings (which quote prompt text) and tenant counters are listed; every other figure is the whole server's, as
// /metrics shows it.
HttpResponse handle_stats(ServerContext& context, const HttpRequest& req) {
  const std::optional<EngineStats> stats = context.loop().stats();
  if (!stats) {
    return context.error_response(
        ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  const EngineInfo& info = context.loop().info();
  const ServerCounts counts = context.metrics().counts();
  const std::string scope = scoped_cache_salt(req, req.param("cache_salt").value_or(""));
  const double now = context.seconds_since_start();
  json out = context.history().to_json(now, *stats, scope);
  out["object"] = "hearth.stats";
  out["model"] = info.model_id;
  out["uptime_s"] = now;
  out["kv"] = kv_state_json(*stats, info.kv_plan);
  out["counters"] = counters_json(*stats, counts);
  out["misses"] = misses_json(counts.reuse_stops);
  // The tenant the salt names, alone: its own requests, tokens and misses (the sections above are the whole
  // server's: the operator's view, which whoever holds the API key reads).
  const TenantCounts tenant = context.metrics().tenant_counts(scope);
  out["tenant"] = {{"requests", tenant.num_requests},
                   {"prompt_tokens", tenant.prompt_tokens},
                   {"cached_tokens", tenant.cached_tokens},
                   {"hit_rate", tenant.prompt_tokens > 0 ? json(static_cast<double>(tenant.cached_tokens) /
                                                                static_cast<double>(tenant.prompt_tokens))
                                                         : json(nullptr)},
                   {"completion_tokens", tenant.completion_tokens},
                   {"misses", misses_json(tenant.reuse_stops)}};
  out["volatile"] = {{"requests", counts.num_volatile_requests},
                     {"warnings", counts.num_volatile_warnings},
                     {"tokens_lost_last", counts.volatile_tokens_lost}};
  out["plan"] = plan_json(info.kv_plan, info.n_ctx);
  out["tiers"] = json::object();
  if (stats->disk) {
    const DiskTierStats& d = *stats->disk;
    const TierLinkCounters& l = stats->tier_link;
    out["tiers"]["disk"] = {{"bytes_used", d.bytes_used},
                            {"capacity_bytes", d.capacity_bytes},
                            {"blocks", d.num_entries},
                            {"queued_writes", d.num_queued_writes},
                            {"hits", d.num_loaded_blocks},
                            {"reused_tokens", l.num_loaded_tokens},
                            {"writes", d.num_writes},
                            {"evictions", d.num_evictions},
                            {"corrupt_removed", d.num_corrupt_removed},
                            {"load_decisions", l.num_load_decisions},
                            {"recompute_decisions", l.num_recompute_decisions}};
  }
  HttpResponse res = ServerContext::json_response(out);
  no_store(res);
  return res;
}

// GET /v1/cache[?cache_salt=S]: the cached prefixes of that salt's namespace (none: the unsalted one), never any
// other's, so a caller sees only what its own requests could reuse.
HttpResponse handle_cache(ServerContext& context, const HttpRequest& req) {
  CachedPrefixQuery query;
  const std::string_view client_salt = req.param("cache_salt").value_or("");
  query.cache_salt = scoped_cache_salt(req, client_salt);
  const std::optional<CachedPrefixes> listing = context.loop().cached_prefixes(query);
  if (!listing) {
    return context.error_response(
        ApiError{503, "the server is shutting down", "server_error", {}, "server_shutting_down"});
  }
  json entries = json::array();
  for (const CachedPrefixEntry& e : listing->entries) entries.push_back(cache_entry_json(e));
  json disk = json::array();
  for (const DiskPrefixEntry& d : listing->disk) {
    disk.push_back({{"text", d.text},
                    {"text_truncated", d.text_truncated},
                    {"tokens", d.num_tokens},
                    {"blocks", d.num_blocks},
                    {"tiers", d.in_ram ? json::array({"ram", "disk"}) : json::array({"disk"})},
                    {"priority", d.priority},
                    {"hits", d.hits},
                    {"idle_s", d.idle_s}});
  }
  json out = {{"object", "hearth.cache"},
              {"salted", !client_salt.empty()},
              {"blocks", listing->num_blocks},
              {"tokens_per_block", context.loop().info().block_size},
              {"truncated", listing->truncated},
              {"engine_ms", listing->engine_ms},
              {"max_nodes", query.limits.max_nodes},
              {"max_text_bytes", query.max_text_bytes},
              {"prefixes", std::move(entries)},
              {"disk_prefixes", std::move(disk)}};
  HttpResponse res = ServerContext::json_response(out);
  no_store(res);
  return res;
}

}  // namespace

void sample_stats(ServerContext& context) {
  if (auto stats = context.loop().stats()) context.history().add_sample(context.seconds_since_start(), *stats);
}

void add_dashboard_routes(Routes& routes, ServerContext& context) {
  // The page never changes, nor does its policy (the hashes of its inline script and style).
  const std::string csp = dashboard_csp(dashboard_html());
  routes.add("GET", "/", [csp](const HttpRequest&) { return handle_dashboard_page(csp); });
  routes.add("GET", "/dashboard", [csp](const HttpRequest&) { return handle_dashboard_page(csp); });
  routes.add("GET", "/v1/stats", [&context](const HttpRequest& req) { return handle_stats(context, req); });
  routes.add("GET", "/v1/cache", [&context](const HttpRequest& req) { return handle_cache(context, req); });
}

}  // namespace hearth::server
