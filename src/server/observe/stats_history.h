#pragma once
// StatsHistory: what GET /v1/stats reports over time, bounded in memory: one engine snapshot per second for the
// last 5 minutes (hit rate and throughput over time), the TTFT of requests finished in the last 5 minutes (at most
// kMaxTtfts), and the last kMaxWarnings volatile-prefix warnings with their cache_salt scope. Times are seconds on
// the caller's clock (the server's steady clock; tests pass their own), so nothing here reads a clock or sleeps.
// Thread-safe.
//
// StatsSampler: the thread that feeds it, one tick per period until destroyed (RAII; it waits on a condition
// variable, so destruction does not wait out a period).

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine_types.h"
#include "kv/volatile_prefix.h"

namespace hearth::server {

// A volatile-prefix warning as the server logged it (see kv/volatile_prefix.h).
struct VolatileWarning {
  double t = 0;
  std::string scope;  // the prompts' cache_salt: only that salt's /v1/stats lists it (its text is a prompt's)
  VolatileRegion region;
  std::string text;  // the region's text
};

class StatsHistory {
 public:
  static constexpr double kWindowS = 300;     // 5 minutes
  static constexpr size_t kMaxSamples = 301;  // one per second over the window, both ends included
  static constexpr size_t kMaxTtfts = 4096;   // requests in the TTFT window, at most
  static constexpr size_t kMaxWarnings = 16;
  static constexpr double kThroughputWindowS = 10;  // prefill and decode tokens/s over the last 10 s
  // TTFT histogram upper bounds in milliseconds; a last bucket (+Inf) holds the rest.
  static constexpr double kTtftBoundsMs[] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};

  // An engine snapshot at time t (increasing). Samples older than kWindowS before t are dropped.
  void add_sample(double t, const EngineStats& stats);
  // A request that finished at time t with this TTFT.
  void record_ttft(double t, double ttft_s);
  void record_warning(VolatileWarning warning);

  // The history at time `now`, with `current` as the newest figures (they need not be a sample):
  //   series:     [{t (seconds before now, <= 0), hit_rate (null when no tokens were queried), prefill_tps,
  //                 decode_tps, blocks_in_use, blocks_cached_free}] per second of samples, oldest first
  //   throughput: {window_s, prefill_tokens_per_s, decode_tokens_per_s} from `current` and the newest sample at
  //               least kThroughputWindowS old (or the oldest one)
  //   ttft:       {window_s, count, p50_ms, p95_ms (nearest rank; null without requests), buckets [{le_ms, count}]}
  //   volatile_warnings: [{age_s, begin, end, tokens_lost, num_requests, text}] of `scope` only, newest first
  [[nodiscard]] nlohmann::json to_json(double now, const EngineStats& current, const std::string& scope) const;

 private:
  struct Sample {
    double t = 0;
    EngineStats stats;
  };
  struct Ttft {
    double t = 0;
    double ms = 0;
  };
  void drop_old(double now);
  nlohmann::json series_json(double now) const;
  nlohmann::json throughput_json(double now, const EngineStats& current) const;
  nlohmann::json ttft_json(double now) const;

  mutable std::mutex mutex_;
  std::deque<Sample> samples_;
  std::deque<Ttft> ttfts_;
  std::deque<VolatileWarning> warnings_;
};

class StatsSampler {
 public:
  // Calls `tick` every `period` on its own thread, the first time at once.
  StatsSampler(std::chrono::milliseconds period, std::function<void()> tick);
  ~StatsSampler();  // stops and joins
  StatsSampler(const StatsSampler&) = delete;
  StatsSampler& operator=(const StatsSampler&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hearth::server
