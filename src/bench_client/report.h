#pragma once
// Turns a run's request records into per-turn and overall summaries, and writes them as a table, as JSON, and
// (for --compare and --compare-url) as ratios of one run to another.

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_client/runner.h"
#include "bench_client/stats.h"

namespace hearth::bench {

struct Summary {
  int num_requests = 0;
  int num_ok = 0;
  std::map<std::string, int> errors;                  // by kind; HTTP errors as "http_<status>"
  std::map<std::string, std::string> error_examples;  // kind -> the first such error's detail
  Distribution ttft_s;                                // successful requests with a first token
  Distribution e2e_s;
  int64_t prompt_tokens = 0;            // summed over requests that reported usage
  int64_t cached_tokens = 0;            // summed over requests that reported cached_tokens
  int64_t cached_of_prompt_tokens = 0;  // prompt tokens of those same requests (the hit rate's denominator)
  int64_t completion_tokens = 0;
  int num_usage_reported = 0;
  double decode_tokens_per_s = 0;  // sum of (completion tokens - 1) over the sum of (e2e - ttft)

  // Share of prompt tokens served from the server's prefix cache; nullopt when it never reported cached_tokens.
  [[nodiscard]] std::optional<double> hit_rate() const;
};

// Summarizes the records with `turn` (from 0), or all records when turn is nullopt.
[[nodiscard]] Summary summarize_records(const std::vector<TurnRecord>& records, std::optional<int> turn);

struct Report {
  RunResult run;
  std::vector<Summary> turns;  // [turn]
  Summary overall;
};

[[nodiscard]] Report make_report(RunResult run, int num_turns);

// A fixed-width table, one row per turn plus "all", then errors and server metrics.
[[nodiscard]] std::string format_table(const Report& report);

// What a comparison's two runs are: `base` is the denominator of every ratio, `test` the numerator; the names
// are short (they head 12-character columns).
struct ComparisonNames {
  std::string base = "off";  // --compare: cache off
  std::string test = "on";   // --compare: cache on
  std::string title = "cache on / cache off";
};

// test / base for the numbers a comparison cares about (TTFT and end-to-end p50/p95 per turn and overall, wall).
[[nodiscard]] std::string format_comparison(const Report& base, const Report& test, const ComparisonNames& names = {});

[[nodiscard]] nlohmann::json to_json(const Summary& s);
[[nodiscard]] nlohmann::json to_json(const Report& report);
[[nodiscard]] nlohmann::json comparison_json(const Report& base, const Report& test, const ComparisonNames& names = {});

}  // namespace hearth::bench
