#pragma once
// Metrics: the server's own counters and histograms plus an engine snapshot, rendered in the Prometheus text
// exposition format (version 0.0.4) by hand: "# HELP", "# TYPE", then samples. Thread-safe: handlers record from
// any thread; render() reads a consistent copy.

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace hearth::server {

// Cumulative histogram with fixed upper bounds (seconds); +Inf is implicit.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket{le=...}, _sum and _count samples of `name`.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The engine's state at one instant, taken on the loop thread (EngineLoop::run_on_loop).
struct EngineSnapshot {
  int64_t num_blocks_total = 0;
  int64_t num_blocks_in_use = 0;  // referenced by running requests or pins
  int64_t num_blocks_pinned = 0;  // of which held by pins
  int64_t num_blocks_cached = 0;  // in the prefix index (in use or not)
  int64_t num_blocks_free = 0;    // unreferenced: empty or cached, reusable
  int64_t kv_bytes_total = 0;
  int64_t kv_bytes_per_block = 0;
  int64_t kv_bytes_per_token = 0;  // scales included
  int64_t kv_capacity_tokens = 0;
  std::string kv_dtype;
  int32_t block_size = 0;
  uint64_t num_evictions = 0;
  uint64_t num_preemptions = 0;
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  uint64_t num_cache_queries = 0;
  uint64_t num_cache_query_tokens = 0;
  uint64_t num_cache_hit_tokens = 0;
  uint64_t num_cache_copied_tokens = 0;
  uint64_t num_prefill_tokens = 0;
  uint64_t num_decode_tokens = 0;
  uint64_t num_steps = 0;
};

class Metrics {
 public:
  Metrics();

  // A finished request: its endpoint ("chat" or "completions"), finish reason, TTFT and end-to-end seconds.
  void record_request(const std::string& endpoint, const std::string& finish_reason, double ttft_s, double e2e_s);
  // An error response with this HTTP status.
  void record_error(int status);
  // A stream whose client went away before the end.
  void record_disconnect();
  // Why a finished request's prefix reuse stopped (a reuse_stop_name).
  void record_reuse_stop(const std::string& reason);
  // A prompt with a volatile prefix region costing `tokens_lost` recomputed tokens; `warned` when it was logged.
  void record_volatile_prefix(int64_t tokens_lost, bool warned);
  // A prompt built with `tokens` generated ids of a remembered answer (see answer_memory.h).
  void record_answer_tokens_reused(int64_t tokens);

  // The whole exposition: engine snapshot first, then the server's own series.
  [[nodiscard]] std::string render(const EngineSnapshot& engine) const;

 private:
  mutable std::mutex mutex_;
  Histogram ttft_;
  Histogram e2e_;
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;  // (endpoint, finish_reason) -> count
  std::map<int, uint64_t> errors_;                                    // status -> count
  uint64_t disconnects_ = 0;
  std::map<std::string, uint64_t> reuse_stops_;  // reason -> count
  uint64_t volatile_requests_ = 0;
  uint64_t volatile_warnings_ = 0;
  int64_t volatile_tokens_lost_ = 0;  // of the last volatile prompt
  uint64_t answer_prompts_ = 0;
  uint64_t answer_tokens_ = 0;
};

}  // namespace hearth::server
