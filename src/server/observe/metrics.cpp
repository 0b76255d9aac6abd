#include "server/observe/metrics.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/http/tenant_keys.h"

namespace hearth::server {
namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <class T>
void sample(std::string& out, const char* name, T value) {
  out += fmt::format("{} {}\n", name, value);
}

void gauge(std::string& out, const char* name, const char* help, int64_t value) {
  header(out, name, "gauge", help);
  sample(out, name, value);
}

void counter(std::string& out, const char* name, const char* help, uint64_t value) {
  header(out, name, "counter", help);
  sample(out, name, value);
}

// Prometheus prints floats without exponent surprises; "+Inf" for the last bucket.
std::string format_bound(double v) {
  return fmt::format("{}", v);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, format_bound(bounds_[i]), cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      e2e_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}) {}

void Metrics::record_request(const std::string& endpoint, const std::string& finish_reason, double ttft_s,
                             double e2e_s) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, finish_reason}];
  ttft_.observe(ttft_s);
  e2e_.observe(e2e_s);
}

void Metrics::record_error(int status) {
  std::lock_guard lock(mutex_);
  ++errors_[status];
}

void Metrics::record_disconnect() {
  std::lock_guard lock(mutex_);
  ++disconnects_;
}

std::string Metrics::render(const EngineStats& e, const KvPlan& plan, std::string_view tenant) const {
  std::string out;
  out.reserve(8192);
  render_engine(e, plan, out);
  render_tiers(e, out);
  render_server(out);
  render_keyed_tenants(tenant, out);
  return out;
}

void Metrics::render_keyed_tenants(std::string_view tenant, std::string& out) const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::string_view, TenantCounts>> shown;
  if (!tenant.empty()) {
    auto it = keyed_tenants_.find(tenant);
    shown.emplace_back(tenant, it == keyed_tenants_.end() ? TenantCounts{} : it->second);
  } else {
    for (const auto& [name, counts] : keyed_tenants_) shown.emplace_back(name, counts);
  }
  if (shown.empty()) return;
  struct Family {
    const char* name;
    const char* help;
    int64_t (*value)(const TenantCounts&);
  };
  static constexpr Family kFamilies[] = {
      {"hearth_tenant_requests_total", "Finished requests of each API key's tenant (--api-keys).",
       [](const TenantCounts& c) { return static_cast<int64_t>(c.num_requests); }},
      {"hearth_tenant_prompt_tokens_total", "Prompt tokens of each tenant's finished requests.",
       [](const TenantCounts& c) { return c.prompt_tokens; }},
      {"hearth_tenant_cached_tokens_total", "Prompt tokens of each tenant's requests reused from its prefix cache.",
       [](const TenantCounts& c) { return c.cached_tokens; }},
      {"hearth_tenant_completion_tokens_total", "Generated tokens of each tenant's finished requests.",
       [](const TenantCounts& c) { return c.completion_tokens; }},
  };
  for (const Family& f : kFamilies) {
    header(out, f.name, "counter", f.help);
    for (const auto& [name, counts] : shown)
      out += fmt::format("{}{{tenant=\"{}\"}} {}\n", f.name, name, f.value(counts));
  }
}

void Metrics::render_engine(const EngineStats& e, const KvPlan& plan, std::string& out) {
  counter(out, "hearth_prefix_cache_queries_total", "Requests admitted with the prefix cache enabled.",
          e.num_cache_queries);
  counter(out, "hearth_prefix_cache_queried_tokens_total", "Prompt tokens looked up in the prefix cache.",
          e.num_cache_query_tokens);
  counter(out, "hearth_prefix_cache_hit_tokens_total", "Prompt tokens reused from the prefix cache (shared or copied).",
          e.num_cache_hit_tokens);
  counter(out, "hearth_prefix_cache_copied_tokens_total",
          "Prompt tokens reused by copying the matching slots of a partially matching block.",
          e.num_cache_copied_tokens);

  header(out, "hearth_kv_blocks", "gauge",
         "KV blocks by state: used (held by requests), pinned (held by pins), free (unreferenced, reusable; "
         "includes cached ones), cached (in the prefix index, in use or not).");
  out += fmt::format("hearth_kv_blocks{{state=\"used\"}} {}\n", e.num_blocks_in_use - e.num_blocks_pinned);
  out += fmt::format("hearth_kv_blocks{{state=\"pinned\"}} {}\n", e.num_blocks_pinned);
  out += fmt::format("hearth_kv_blocks{{state=\"free\"}} {}\n", e.num_blocks_free);
  out += fmt::format("hearth_kv_blocks{{state=\"cached\"}} {}\n", e.num_blocks_cached);
  header(out, "hearth_kv_blocks_evictable", "gauge",
         "Unreferenced cached KV blocks by retention priority band (0-24 evicted first; an expired block counts as "
         "priority 0). Pinned and running blocks are never evicted and are not counted.");
  constexpr const char* kBands[] = {"0-24", "25-49", "50-74", "75-100"};
  for (size_t b = 0; b < e.num_blocks_evictable_by_band.size(); ++b) {
    out +=
        fmt::format("hearth_kv_blocks_evictable{{priority=\"{}\"}} {}\n", kBands[b], e.num_blocks_evictable_by_band[b]);
  }
  gauge(out, "hearth_kv_blocks_total", "KV blocks in the pool.", e.num_blocks_total);
  gauge(out, "hearth_kv_block_size_tokens", "Tokens per KV block.", plan.block_size);
  header(out, "hearth_kv_bytes", "gauge", "KV memory in bytes: total pool and the part held by requests and pins.");
  out += fmt::format("hearth_kv_bytes{{state=\"total\"}} {}\n",
                     e.num_blocks_total * plan.bytes_per_block + e.num_window_slabs_total * plan.bytes_per_window_slab);
  out += fmt::format(
      "hearth_kv_bytes{{state=\"used\"}} {}\n",
      e.num_blocks_in_use * plan.bytes_per_block + e.num_window_slabs_in_use * plan.bytes_per_window_slab);
  header(out, "hearth_kv_window_slabs", "gauge",
         "Sliding-window models: slabs holding the sliding-window layers' K/V of one block each (0 without them); "
         "used = held by requests and pins, idle = still cached, evicted first when a slab is needed.");
  out += fmt::format("hearth_kv_window_slabs{{state=\"total\"}} {}\n", e.num_window_slabs_total);
  out += fmt::format("hearth_kv_window_slabs{{state=\"used\"}} {}\n", e.num_window_slabs_in_use);
  out += fmt::format("hearth_kv_window_slabs{{state=\"idle\"}} {}\n", e.num_window_slabs_idle);
  counter(out, "hearth_kv_window_slab_evictions_total", "Idle window slabs taken for another block.",
          e.num_window_slab_evictions);
  gauge(out, "hearth_state_checkpoints",
        "Hybrid models: recurrent-state checkpoints kept in RAM, each the state after one cached block, so a hit can "
        "resume there (0 for other models).",
        e.num_state_checkpoints);
  counter(out, "hearth_state_checkpoints_written_total", "Hybrid models: state checkpoints written by the forward.",
          e.num_state_checkpoints_written);
  counter(out, "hearth_state_resumes_total",
          "Hybrid models: requests whose recurrent state was copied in from a checkpoint (a hit, or a preempted "
          "request's resume).",
          e.num_state_resumes);
  counter(out, "hearth_state_tier_loads_total", "Hybrid models: state checkpoints read back from the disk tier.",
          e.num_state_tier_loads);

  header(out, "hearth_kv_bytes_per_token", "gauge", "KV bytes one token costs over all layers, block scales included.");
  out += fmt::format("hearth_kv_bytes_per_token{{kv_dtype=\"{}\"}} {}\n", plan.cost.dtype, plan.bytes_per_token);
  gauge(out, "hearth_kv_capacity_tokens", "Tokens the KV pool holds when full.", plan.capacity_tokens);

  counter(out, "hearth_kv_evictions_total", "Cached KV blocks evicted to make room.", e.num_evictions);
  counter(out, "hearth_preemptions_total", "Running requests preempted by recompute.", e.num_preemptions);
  gauge(out, "hearth_requests_running", "Requests being computed.", e.num_running);
  gauge(out, "hearth_requests_waiting", "Requests queued for admission.", e.num_waiting);
  counter(out, "hearth_prefill_tokens_total", "Prompt tokens computed (not reused).", e.num_prefill_tokens);
  counter(out, "hearth_decode_tokens_total", "Tokens generated.", e.num_decode_tokens);
  counter(out, "hearth_speculative_drafted_tokens_total", "Tokens drafted by speculative decoding and verified.",
          e.num_drafted_tokens);
  counter(out, "hearth_speculative_accepted_tokens_total",
          "Drafted tokens accepted (equal to the token plain decoding picked).", e.num_accepted_tokens);
  counter(out, "hearth_engine_steps_total", "Engine steps run.", e.num_steps);
}

void Metrics::render_tiers(const EngineStats& e, std::string& out) {
  if (e.redis) render_redis_tier(e, out);
  if (!e.disk && !e.redis) return;
  if (e.disk) render_disk_tier(e, out);
  header(out, "hearth_prefill_tokens_per_second", "gauge",
         "The engine's measured prefill speed, which the load-or-recompute decision compares with (0 until measured).");
  out += fmt::format("hearth_prefill_tokens_per_second {}\n", e.tier_link.prefill_tokens_per_s);
}

void Metrics::render_redis_tier(const EngineStats& e, std::string& out) {
  const RedisTierStats& r = *e.redis;
  const TierLinkCounters& l = e.tier_link;
  gauge(out, "hearth_kv_redis_connected", "1 when the last command on the Redis tier's connections succeeded.",
        r.connected ? 1 : 0);
  gauge(out, "hearth_kv_redis_known_keys", "Blocks this server knows Redis holds (its writes and the KV events).",
        r.num_known_keys);
  gauge(out, "hearth_kv_redis_queued_writes", "Blocks waiting to be written to Redis.", r.num_queued_writes);
  counter(out, "hearth_kv_redis_loads_total", "Blocks loaded back from Redis and verified.", r.num_loaded_blocks);
  counter(out, "hearth_kv_redis_loaded_bytes_total", "Bytes of the blocks loaded back from Redis.", r.num_loaded_bytes);
  counter(out, "hearth_kv_redis_reused_tokens_total", "Prompt tokens put back into the pool from Redis.",
          l.num_loaded_tokens_redis);
  counter(out, "hearth_kv_redis_writes_total", "Blocks Redis accepted (SET).", r.num_writes);
  counter(out, "hearth_kv_redis_written_bytes_total", "Bytes of the entries written to Redis.", r.num_written_bytes);
  counter(out, "hearth_kv_redis_dropped_total",
          "Blocks not written to Redis: queue full, too large, expired, or Redis down.", r.num_writes_dropped);
  counter(out, "hearth_kv_redis_loads_dropped_total", "Loads refused at once: the load queue was full.",
          r.num_loads_dropped);
  counter(out, "hearth_kv_redis_errors_total",
          "Redis connection failures and error replies (refused, OOM, NOAUTH, ...); the requests recomputed.",
          r.num_errors);
  counter(out, "hearth_kv_redis_timeouts_total", "Redis commands past the command timeout.", r.num_timeouts);
  counter(out, "hearth_kv_redis_corrupt_removed_total",
          "Values that failed verification (truncated, corrupt, foreign, too large) and were DELeted.",
          r.num_corrupt_removed);
  counter(out, "hearth_kv_redis_key_mismatch_removed_total",
          "Of the values removed: sealed with another --kv-disk-key, or not sealed as the key setting asks.",
          r.num_key_mismatch_removed);
  counter(out, "hearth_kv_redis_missing_total", "Blocks known to be in Redis that were gone when loaded.",
          r.num_missing);
  counter(out, "hearth_kv_redis_events_published_total", "KV events this server added to hearth:kv-events.",
          r.num_events_published);
  counter(out, "hearth_kv_redis_events_read_total", "KV events read from hearth:kv-events.", r.num_events_read);
  counter(out, "hearth_kv_redis_reconnects_total", "Connections to Redis re-established after a failure.",
          r.num_reconnects);
  counter(out, "hearth_kv_redis_restarts_seen_total",
          "Reconnects that found a restarted Redis (another run_id): the blocks known to be there were forgotten.",
          r.num_restarts_seen);
  header(out, "hearth_kv_redis_seconds_per_block", "gauge", "Measured Redis load time per block (0 until measured).");
  out += fmt::format("hearth_kv_redis_seconds_per_block {}\n", l.redis_seconds_per_block);
}

void Metrics::render_disk_tier(const EngineStats& e, std::string& out) {
  const DiskTierStats& d = *e.disk;
  const TierLinkCounters& l = e.tier_link;
  header(out, "hearth_kv_tier_bytes", "gauge", "KV tier bytes: used (entries, rounded to 4 KiB) and capacity.");
  out += fmt::format("hearth_kv_tier_bytes{{tier=\"disk\",state=\"used\"}} {}\n", d.bytes_used);
  out += fmt::format("hearth_kv_tier_bytes{{tier=\"disk\",state=\"capacity\"}} {}\n", d.capacity_bytes);
  auto tier_line = [&](const char* name, const char* type, const char* help, auto value) {
    header(out, name, type, help);
    out += fmt::format("{}{{tier=\"disk\"}} {}\n", name, value);
  };
  tier_line("hearth_kv_tier_entries", "gauge", "KV blocks stored in the tier.", d.num_entries);
  tier_line("hearth_kv_tier_queued_writes", "gauge", "Blocks waiting to be written to the tier.", d.num_queued_writes);
  tier_line("hearth_kv_tier_hits_total", "counter", "Blocks loaded back from the tier and verified.",
            d.num_loaded_blocks);
  tier_line("hearth_kv_tier_loaded_bytes_total", "counter", "Bytes loaded back from the tier.", d.num_loaded_bytes);
  tier_line("hearth_kv_tier_load_seconds_total", "counter", "Time the tier spent reading and verifying blocks.",
            d.load_seconds);
  tier_line("hearth_kv_tier_reused_tokens_total", "counter", "Prompt tokens put back into the pool from the tier.",
            l.num_loaded_tokens);
  tier_line("hearth_kv_tier_writes_total", "counter", "Blocks written to the tier.", d.num_writes);
  tier_line("hearth_kv_tier_written_bytes_total", "counter", "Bytes written to the tier.", d.num_written_bytes);
  tier_line("hearth_kv_tier_writes_dropped_total", "counter",
            "Blocks not written: the write queue was full or the block exceeds the budget.", d.num_writes_dropped);
  tier_line("hearth_kv_tier_write_errors_total", "counter", "Writes the filesystem refused (full, read-only).",
            d.num_write_errors);
  tier_line("hearth_kv_tier_evictions_total", "counter", "Blocks evicted from the tier to stay within its budget.",
            d.num_evictions);
  tier_line("hearth_kv_tier_corrupt_removed_total", "counter",
            "Entries that failed verification (truncated, bit-flipped, foreign) and were deleted.",
            d.num_corrupt_removed);
  tier_line("hearth_kv_tier_key_mismatch_removed_total", "counter",
            "Of the corrupt entries removed: those sealed with another --kv-disk-key, or not sealed as the key "
            "setting asks (plain with a key, encrypted without one).",
            d.num_key_mismatch_removed);
  tier_line("hearth_kv_tier_missing_total", "counter", "Indexed entries whose file was gone when loaded.",
            d.num_missing);
  tier_line("hearth_kv_tier_irregular_skipped_total", "counter",
            "Entry names that are not regular files (FIFO, socket, device, link), skipped at open.",
            d.num_irregular_skipped);
  tier_line("hearth_kv_tier_loose_modes", "gauge",
            "Tier directories (not 0700) and entries (not 0600) other local users may read, found at open.",
            d.num_loose_modes);
  header(out, "hearth_kv_tier_decisions_total", "counter",
         "Requests that found blocks in the tier, by the load-or-recompute decision (measured costs).");
  out += fmt::format("hearth_kv_tier_decisions_total{{tier=\"disk\",decision=\"load\"}} {}\n",
                     l.num_load_decisions);
  out += fmt::format("hearth_kv_tier_decisions_total{{tier=\"disk\",decision=\"recompute\"}} {}\n",
                     l.num_recompute_decisions);
  tier_line("hearth_kv_tier_load_timeouts_total", "counter",
            "Loads given up at their deadline (the request recomputed instead).", l.num_load_timeouts);
  tier_line("hearth_kv_tier_seconds_per_block", "gauge", "Measured load time per block (0 until measured).",
            l.tier_seconds_per_block);
}

void Metrics::render_server(std::string& out) const {
  std::lock_guard lock(mutex_);
  header(out, "hearth_time_to_first_token_seconds", "histogram", "Arrival to first token, per finished request.");
  ttft_.render("hearth_time_to_first_token_seconds", out);
  header(out, "hearth_request_duration_seconds", "histogram", "Arrival to last token, per finished request.");
  e2e_.render("hearth_request_duration_seconds", out);
  header(out, "hearth_requests_total", "counter", "Finished requests by endpoint and finish reason.");
  for (const auto& [key, n] : requests_) {
    out += fmt::format("hearth_requests_total{{endpoint=\"{}\",finish_reason=\"{}\"}} {}\n", key.first, key.second, n);
  }
  header(out, "hearth_http_errors_total", "counter", "Error responses by HTTP status code.");
  for (const auto& [status, n] : errors_) {
    out += fmt::format("hearth_http_errors_total{{code=\"{}\"}} {}\n", status, n);
  }
  counter(out, "hearth_client_disconnects_total", "Streams whose client went away before the end (aborted).",
          disconnects_);
  header(out, "hearth_prefix_reuse_stops_total", "counter",
         "Finished requests by why prefix reuse stopped (end_of_prompt, diverged, evicted, different_salt, ...).");
  for (const auto& [reason, n] : reuse_stops_) {
    out += fmt::format("hearth_prefix_reuse_stops_total{{reason=\"{}\"}} {}\n", reason, n);
  }
  counter(out, "hearth_volatile_prefix_requests_total",
          "Prompts whose shared text follows a region that differs per request (a timestamp, an id), so it is "
          "recomputed.",
          volatile_requests_);
  counter(out, "hearth_volatile_prefix_warnings_total", "Volatile-prefix warnings logged (rate-limited).",
          volatile_warnings_);
  gauge(out, "hearth_volatile_prefix_tokens_lost",
        "Shared tokens recomputed per request behind the last volatile region.", volatile_tokens_lost_);
  counter(out, "hearth_answer_memory_prompts_total",
          "Prompts that quoted a recent answer and were built from its generated token ids.", answer_prompts_);
  counter(out, "hearth_answer_memory_tokens_total",
          "Generated token ids of recent answers reused in later prompts (instead of re-tokenized text).",
          answer_tokens_);
}

ServerCounts Metrics::counts() const {
  std::lock_guard lock(mutex_);
  ServerCounts c;
  for (const auto& [key, n] : requests_) c.num_requests += n;
  c.num_disconnects = disconnects_;
  c.reuse_stops = reuse_stops_;
  c.num_volatile_requests = volatile_requests_;
  c.num_volatile_warnings = volatile_warnings_;
  c.volatile_tokens_lost = volatile_tokens_lost_;
  return c;
}

void Metrics::record_tenant(const std::string& cache_salt, int64_t prompt_tokens, int64_t cached_tokens,
                            int64_t completion_tokens, const std::string& reuse_stop) {
  std::lock_guard lock(mutex_);
  auto it = tenants_.find(cache_salt);
  if (it == tenants_.end()) {
    if (tenants_.size() >= kMaxTenants) {
      auto oldest = std::min_element(tenants_.begin(), tenants_.end(), [](const auto& a, const auto& b) {
        return a.second.last_seen < b.second.last_seen;
      });
      tenants_.erase(oldest);
    }
    it = tenants_.emplace(cache_salt, Tenant{}).first;
  }
  Tenant& t = it->second;
  t.last_seen = ++tenant_clock_;
  t.counts.num_requests += 1;
  t.counts.prompt_tokens += prompt_tokens;
  t.counts.cached_tokens += cached_tokens;
  t.counts.completion_tokens += completion_tokens;
  if (!reuse_stop.empty()) t.counts.reuse_stops[reuse_stop] += 1;
  if (const std::string_view keyed = tenant_of_cache_salt(cache_salt); !keyed.empty()) {
    auto k = keyed_tenants_.find(keyed);
    if (k == keyed_tenants_.end()) k = keyed_tenants_.emplace(std::string(keyed), TenantCounts{}).first;
    k->second.num_requests += 1;
    k->second.prompt_tokens += prompt_tokens;
    k->second.cached_tokens += cached_tokens;
    k->second.completion_tokens += completion_tokens;
  }
}

TenantCounts Metrics::tenant_counts(const std::string& cache_salt) const {
  std::lock_guard lock(mutex_);
  auto it = tenants_.find(cache_salt);
  return it == tenants_.end() ? TenantCounts{} : it->second.counts;
}

void Metrics::record_reuse_stop(const std::string& reason) {
  std::lock_guard lock(mutex_);
  reuse_stops_[reason]++;
}

void Metrics::record_answer_tokens_reused(int64_t tokens) {
  std::lock_guard lock(mutex_);
  answer_prompts_++;
  answer_tokens_ += static_cast<uint64_t>(tokens);
}

void Metrics::record_volatile_prefix(int64_t tokens_lost, bool warned) {
  std::lock_guard lock(mutex_);
  volatile_requests_++;
  volatile_warnings_ += warned ? 1 : 0;
  volatile_tokens_lost_ = tokens_lost;
}

}  // namespace hearth::server
