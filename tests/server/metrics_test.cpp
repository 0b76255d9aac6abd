// Prometheus text exposition: exact lines for gauges, counters, labels and cumulative histogram buckets.

#include <gtest/gtest.h>

#include <sstream>

#include "server/observe/metrics.h"

namespace hearth::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l == line) return true;
  }
  return false;
}

TEST(Histogram, BucketsAreCumulative) {
  Histogram h({0.1, 1});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7);
  std::string out;
  h.render("x", out);
  EXPECT_EQ(out,
            "x_bucket{le=\"0.1\"} 2\n"
            "x_bucket{le=\"1\"} 3\n"
            "x_bucket{le=\"+Inf\"} 4\n"
            "x_sum 7.65\n"
            "x_count 4\n");
}

TEST(Metrics, RendersEngineSnapshotAndServerSeries) {
  Metrics m;
  m.record_request("chat", "stop", 0.02, 0.3);
  m.record_request("chat", "stop", 0.02, 0.3);
  m.record_request("completions", "length", 0.004, 0.05);
  m.record_error(400);
  m.record_error(400);
  m.record_error(429);
  m.record_disconnect();
  EngineStats e;
  e.num_blocks_total = 100;
  e.num_blocks_in_use = 12;
  e.num_blocks_pinned = 2;
  e.num_blocks_cached = 30;
  e.num_blocks_free = 88;
  KvPlan plan;
  plan.block_size = 16;
  plan.bytes_per_block = 1024;
  plan.pool_bytes = 102400;
  plan.bytes_per_token = 64;
  plan.capacity_tokens = 1600;
  plan.cost.dtype = "q8_0";
  e.num_cache_query_tokens = 500;
  e.num_cache_hit_tokens = 320;
  e.num_running = 3;
  e.num_waiting = 1;
  e.num_evictions = 4;
  e.num_preemptions = 5;
  e.num_prefill_tokens = 180;
  e.num_decode_tokens = 64;
  const std::string text = m.render(e, plan);

  for (const char* line : {
           "# TYPE hearth_prefix_cache_queried_tokens_total counter",
           "hearth_prefix_cache_queried_tokens_total 500",
           "hearth_prefix_cache_hit_tokens_total 320",
           "# TYPE hearth_kv_blocks gauge",
           "hearth_kv_blocks{state=\"used\"} 10",
           "hearth_kv_blocks{state=\"pinned\"} 2",
           "hearth_kv_blocks{state=\"free\"} 88",
           "hearth_kv_blocks{state=\"cached\"} 30",
           "hearth_kv_bytes{state=\"total\"} 102400",
           "hearth_kv_bytes{state=\"used\"} 12288",
           "hearth_kv_bytes_per_token{kv_dtype=\"q8_0\"} 64",
           "hearth_kv_capacity_tokens 1600",
           "hearth_kv_evictions_total 4",
           "hearth_preemptions_total 5",
           "hearth_requests_running 3",
           "hearth_requests_waiting 1",
           "hearth_prefill_tokens_total 180",
           "hearth_decode_tokens_total 64",
           "# TYPE hearth_time_to_first_token_seconds histogram",
           "hearth_time_to_first_token_seconds_bucket{le=\"0.005\"} 1",
           "hearth_time_to_first_token_seconds_bucket{le=\"0.025\"} 3",
           "hearth_time_to_first_token_seconds_count 3",
           "hearth_request_duration_seconds_bucket{le=\"+Inf\"} 3",
           "hearth_requests_total{endpoint=\"chat\",finish_reason=\"stop\"} 2",
           "hearth_requests_total{endpoint=\"completions\",finish_reason=\"length\"} 1",
           "hearth_http_errors_total{code=\"400\"} 2",
           "hearth_http_errors_total{code=\"429\"} 1",
           "hearth_client_disconnects_total 1",
       }) {
    EXPECT_TRUE(has_line(text, line)) << "missing: " << line << "\n" << text;
  }
  // Every sample's metric has HELP and TYPE lines before it.
  std::istringstream in(text);
  std::string typed;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("# TYPE ", 0) == 0) typed = l.substr(7, l.find(' ', 7) - 7);
    if (l.empty() || l[0] == '#') continue;
    EXPECT_EQ(l.rfind(typed, 0), 0u) << l;
  }
}

}  // namespace
}  // namespace hearth::server

namespace hearth::server {
namespace {

// Sliding-window models: the window slabs are counted in hearth_kv_bytes and shown by state.
TEST(Metrics, CountsWindowSlabs) {
  Metrics m;
  EngineStats e;
  e.num_blocks_total = 100;
  e.num_blocks_in_use = 12;
  e.num_window_slabs_total = 20;
  e.num_window_slabs_in_use = 3;
  e.num_window_slabs_idle = 15;
  e.num_window_slab_evictions = 7;
  KvPlan plan;
  plan.block_size = 16;
  plan.bytes_per_block = 1024;
  plan.bytes_per_window_slab = 5120;
  plan.cost.dtype = "f16";
  const std::string text = m.render(e, plan);
  for (const char* line : {
           "hearth_kv_bytes{state=\"total\"} 204800",  // 100 × 1024 + 20 × 5120
           "hearth_kv_bytes{state=\"used\"} 27648",    // 12 × 1024 + 3 × 5120
           "# TYPE hearth_kv_window_slabs gauge",
           "hearth_kv_window_slabs{state=\"total\"} 20",
           "hearth_kv_window_slabs{state=\"used\"} 3",
           "hearth_kv_window_slabs{state=\"idle\"} 15",
           "# TYPE hearth_kv_window_slab_evictions_total counter",
           "hearth_kv_window_slab_evictions_total 7",
       }) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << "missing line: " << line << "\n" << text;
  }
}

// Hybrid models: the recurrent-state checkpoints kept, written, resumed from and read back from the disk tier.
TEST(Metrics, CountsStateCheckpoints) {
  Metrics m;
  EngineStats e;
  e.num_state_checkpoints = 9;
  e.num_state_checkpoints_written = 31;
  e.num_state_resumes = 12;
  e.num_state_tier_loads = 2;
  KvPlan plan;
  plan.block_size = 16;
  plan.cost.dtype = "f16";
  const std::string text = m.render(e, plan);
  for (const char* line : {
           "# TYPE hearth_state_checkpoints gauge",
           "hearth_state_checkpoints 9",
           "# TYPE hearth_state_checkpoints_written_total counter",
           "hearth_state_checkpoints_written_total 31",
           "hearth_state_resumes_total 12",
           "hearth_state_tier_loads_total 2",
       }) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << "missing line: " << line << "\n" << text;
  }
}

// The Redis tier (docs/cluster.md): its own series beside the disk tier's, and no disk series without a disk tier.
TEST(Metrics, RendersTheRedisTier) {
  Metrics m;
  EngineStats e;
  RedisTierStats r;
  r.connected = true;
  r.num_known_keys = 12;
  r.num_loaded_blocks = 6;
  r.num_loaded_bytes = 6144;
  r.num_writes = 7;
  r.num_writes_dropped = 2;
  r.num_errors = 3;
  r.num_timeouts = 1;
  r.num_corrupt_removed = 4;
  e.redis = r;
  e.tier_link.num_loaded_tokens_redis = 96;
  KvPlan plan;
  plan.block_size = 16;
  plan.cost.dtype = "f16";
  const std::string text = m.render(e, plan);
  for (const char* line : {
           "# TYPE hearth_kv_redis_connected gauge",
           "hearth_kv_redis_connected 1",
           "hearth_kv_redis_known_keys 12",
           "# TYPE hearth_kv_redis_loads_total counter",
           "hearth_kv_redis_loads_total 6",
           "hearth_kv_redis_loaded_bytes_total 6144",
           "hearth_kv_redis_reused_tokens_total 96",
           "hearth_kv_redis_writes_total 7",
           "hearth_kv_redis_dropped_total 2",
           "hearth_kv_redis_errors_total 3",
           "hearth_kv_redis_timeouts_total 1",
           "hearth_kv_redis_corrupt_removed_total 4",
       }) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << "missing line: " << line << "\n" << text;
  }
  EXPECT_EQ(text.find("hearth_kv_tier_entries"), std::string::npos);
}

TEST(Metrics, RendersReuseStopsAndVolatilePrefixSeries) {
  Metrics m;
  m.record_reuse_stop("diverged");
  m.record_reuse_stop("diverged");
  m.record_reuse_stop("end_of_prompt");
  m.record_volatile_prefix(300, true);
  m.record_volatile_prefix(280, false);
  const std::string text = m.render(EngineStats{}, KvPlan{});
  for (const char* line : {
           "# TYPE hearth_prefix_reuse_stops_total counter",
           "hearth_prefix_reuse_stops_total{reason=\"diverged\"} 2",
           "hearth_prefix_reuse_stops_total{reason=\"end_of_prompt\"} 1",
           "hearth_volatile_prefix_requests_total 2",
           "hearth_volatile_prefix_warnings_total 1",
           "# TYPE hearth_volatile_prefix_tokens_lost gauge",
           "hearth_volatile_prefix_tokens_lost 280",
       }) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace hearth::server
