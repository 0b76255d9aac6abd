#pragma once
// Runs the household workload against a server: one thread per user walks its turns in order (each turn's
// prompt holds the previous answers), under a closed loop (at most `concurrency` users in flight) or an open loop
// (requests start at Poisson arrival times). While it runs, a sampler scrapes /metrics, when the server has one.

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_client/client.h"
#include "bench_client/prometheus.h"
#include "bench_client/workload.h"

namespace hearth::bench {

struct RunConfig {
  Endpoint endpoint;
  RequestOptions request;
  std::string model;  // the "model" field; empty leaves it out
  int max_tokens = 32;
  int concurrency = 0;                              // closed loop: users in flight (0: all users)
  double rate = 0;                                  // open loop when > 0: Poisson arrivals, requests per second
  double duration_s = 0;                            // when > 0, no request starts after this many seconds
  nlohmann::json extra = nlohmann::json::object();  // merged into every request body (last word)
  std::string nonce;                // written at the top of the shared prefix; see Workload::system_message
  double metrics_interval_s = 0.5;  // /metrics sampling period (0: before and after only)
};

struct TurnRecord {
  int user = 0;
  int turn = 0;
  double start_s = 0;  // since the run started
  RequestResult result;
};

// What /metrics said, when the server has Hearth's metric names.
struct ServerMetrics {
  bool available = false;
  double kv_blocks_total = 0;
  double kv_blocks_used_max = 0;  // used + pinned, the largest seen while sampling
  double kv_bytes_used_max = 0;   // hearth_kv_bytes{state="used"} (blocks and window slabs), the largest seen
  double evictions = 0;           // deltas over the run
  double preemptions = 0;
  double cache_hit_tokens = 0;
  double cache_queried_tokens = 0;
  double prefill_tokens = 0;
  double decode_tokens = 0;
};

struct RunResult {
  std::string label;  // e.g. "cache off"
  double wall_s = 0;
  int num_not_started = 0;          // turns skipped because --duration ran out
  std::vector<TurnRecord> records;  // in completion order
  ServerMetrics metrics;
};

// The body of one request: model, messages, max_tokens, temperature 0 (so answers, and therefore later turns'
// prompts, repeat between runs on a deterministic server), stream with usage, then `extra` merged over it.
[[nodiscard]] nlohmann::json request_body(const RunConfig& config, const nlohmann::json& messages);

// Deltas and peaks of Hearth's counters between two scrapes (and the peak over `samples`).
[[nodiscard]] ServerMetrics metrics_delta(const PromSamples& before, const PromSamples& after,
                                          const std::vector<PromSamples>& samples);

// Runs every user's turns and returns what each request saw. Never throws for server misbehaviour.
[[nodiscard]] RunResult run_workload(const Workload& workload, const RunConfig& config, const std::string& label);

}  // namespace hearth::bench
