#pragma once
// An SVG chart of time to first token per conversation turn: grouped bars (p50) with whiskers (p95), one colour
// per run, so `--compare` shows cache off beside cache on, with the on/off ratio written over each "on" bar.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hearth::bench {

struct PlotSeries {
  std::string name;           // the legend entry, e.g. "cache off"
  std::vector<double> p50_s;  // [turn] TTFT p50 in seconds; < 0 when the turn has no successful request
  std::vector<double> p95_s;  // [turn]
};

// Renders a standalone SVG document. With two series the second's bars are labelled with their share of the
// first's p50 ("12% of off").
[[nodiscard]] std::string render_ttft_svg(const std::string& title, const std::string& subtitle,
                                          const std::vector<PlotSeries>& series);

// The chart of a results document (what `hearth bench household --json` writes: config, runs[].turns[].ttft_s):
// one series per run, and a subtitle with the workload and the server's count of turn-1 prompt tokens.
[[nodiscard]] std::string render_results_svg(const nlohmann::json& results);

// The tick step for an axis from 0 to `max_value`: 1, 2 or 5 times a power of ten, giving about five ticks.
[[nodiscard]] double nice_tick_step(double max_value);

}  // namespace hearth::bench
