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

#include "engine/engine_types.h"

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

// The server's own counters at one instant (GET /v1/stats).
struct ServerCounts {
  uint64_t num_requests = 0;  // finished requests, every endpoint and finish reason (sum of hearth_requests_total)
  uint64_t num_disconnects = 0;
  std::map<std::string, uint64_t> reuse_stops;  // reason -> finished requests
  uint64_t num_volatile_requests = 0;
  uint64_t num_volatile_warnings = 0;
  int64_t volatile_tokens_lost = 0;
};

// One tenant's own counters (a tenant is a cache_salt namespace; the unsalted one is ""): what its requests
// cost and reused, and why their reuse stopped. GET /v1/stats shows a caller only the tenant it names.
struct TenantCounts {
  uint64_t num_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  std::map<std::string, uint64_t> reuse_stops;  // reason -> finished requests
};

class Metrics {
 public:
  // Tenants whose counters are kept; past it the least recently seen tenant's are dropped (they start again at 0).
  static constexpr size_t kMaxTenants = 4096;

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

  // A finished request of the tenant `cache_salt` (its usage; reuse_stop empty when none was recorded).
  void record_tenant(const std::string& cache_salt, int64_t prompt_tokens, int64_t cached_tokens,
                     int64_t completion_tokens, const std::string& reuse_stop);

  [[nodiscard]] ServerCounts counts() const;
  // The counters of the tenant `cache_salt` (zero when it has none).
  [[nodiscard]] TenantCounts tenant_counts(const std::string& cache_salt) const;

  // The whole exposition: the engine's counters and pool (`stats`, read on the loop thread) and its KV plan first,
  // then the server's own series, then the per-tenant series (--api-keys, label tenant="NAME"): only those of
  // `tenant` when it is not empty (a tenant's key reads its own), else every tenant's.
  [[nodiscard]] std::string render(const EngineStats& stats, const KvPlan& plan, std::string_view tenant = {}) const;

 private:
  static void render_engine(const EngineStats& stats, const KvPlan& plan, std::string& out);
  static void render_tiers(const EngineStats& stats, std::string& out);
  static void render_disk_tier(const EngineStats& stats, std::string& out);
  static void render_redis_tier(const EngineStats& stats, std::string& out);
  void render_server(std::string& out) const;
  void render_keyed_tenants(std::string_view tenant, std::string& out) const;

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
  struct Tenant {
    TenantCounts counts;
    uint64_t last_seen = 0;
  };
  std::map<std::string, Tenant> tenants_;  // at most kMaxTenants
  // By the tenant of an API key (--api-keys; tenant_of_cache_salt), every salt of it together: the tenant="NAME"
  // series. Bounded by the keys file, not by clients.
  std::map<std::string, TenantCounts, std::less<>> keyed_tenants_;
  uint64_t tenant_clock_ = 0;
  uint64_t answer_tokens_ = 0;
};

}  // namespace hearth::server
