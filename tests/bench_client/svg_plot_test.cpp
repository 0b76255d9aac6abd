// The TTFT chart: a well-formed SVG document with one bar per series and turn, labelled axes, a legend, and the
// on/off ratio over the "cache on" bars.

#include <gtest/gtest.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "bench_client/svg_plot.h"

namespace hearth::bench {
namespace {

// Checks that every element is closed in order (a small XML well-formedness check: tags, not entities).
bool tags_balance(const std::string& xml, std::string* why) {
  std::vector<std::string> open;
  size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string::npos) {
    const size_t end = xml.find('>', pos);
    if (end == std::string::npos) return *why = "unterminated tag", false;
    const std::string tag = xml.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.empty()) return *why = "empty tag", false;
    if (tag.back() == '/') continue;  // self-closing
    const std::string name = tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" \n", 1) - (tag[0] == '/'));
    if (tag[0] != '/') {
      open.push_back(name);
    } else if (open.empty() || open.back() != name) {
      return *why = "mismatched </" + name + ">", false;
    } else {
      open.pop_back();
    }
  }
  if (!open.empty()) return *why = "unclosed <" + open.back() + ">", false;
  return true;
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

TEST(SvgPlot, CompareChartIsWellFormedWithBothSeries) {
  const std::vector<PlotSeries> series = {{"cache off", {20.0, 24.0, 26.0}, {22.0, 25.0, 30.0}},
                                          {"cache on", {5.0, 1.2, 0.9}, {6.0, 1.5, 1.0}}};
  const std::string svg = render_ttft_svg("TTFT <per turn>", "4 users & 3 turns", series);
  std::string why;
  EXPECT_TRUE(tags_balance(svg, &why)) << why;
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("TTFT &lt;per turn&gt;"), std::string::npos);  // text is escaped
  EXPECT_NE(svg.find("4 users &amp; 3 turns"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"bar\" data-series=\"cache off\""), 3u);
  EXPECT_EQ(count(svg, "class=\"bar\" data-series=\"cache on\""), 3u);
  EXPECT_NE(svg.find("data-series=\"cache on\" data-turn=\"2\" data-p50=\"1.2000\""), std::string::npos);
  EXPECT_NE(svg.find(">25% of off<"), std::string::npos);  // 5 / 20
  EXPECT_NE(svg.find(">5% of off<"), std::string::npos);   // 1.2 / 24
  EXPECT_NE(svg.find("time to first token (s)"), std::string::npos);
  EXPECT_NE(svg.find("conversation turn"), std::string::npos);
  EXPECT_NE(svg.find("cache off (p50)"), std::string::npos);  // legend
  EXPECT_NE(svg.find("cache on (p50)"), std::string::npos);
}

TEST(SvgPlot, TurnsWithoutDataHaveNoBar) {
  const std::string svg = render_ttft_svg("t", "s", {{"run", {0.2, -1}, {0.3, -1}}});
  std::string why;
  EXPECT_TRUE(tags_balance(svg, &why)) << why;
  EXPECT_EQ(count(svg, "class=\"bar\""), 1u);
  EXPECT_NE(svg.find(">200 ms<"), std::string::npos);
  EXPECT_NE(svg.find(">no successful request<"), std::string::npos);  // turn 2 says why it is empty
}

TEST(SvgPlot, ResultsFileGivesOneSeriesPerRunAndTheServersPromptCount) {
  const nlohmann::json results = {
      {"config", {{"users", 4}, {"turns", 2}, {"prefix_tokens", 1700}, {"max_tokens", 32}, {"concurrency", 0}}},
      {"runs",
       {{{"label", "cache off"},
         {"turns",
          {{{"turn", 1},
            {"usage_reported", 4},
            {"prompt_tokens", 8164},
            {"ttft_s", {{"count", 4}, {"p50", 250.0}, {"p95", 400.0}}}},
           {{"turn", 2},
            {"usage_reported", 4},
            {"prompt_tokens", 8400},
            {"ttft_s", {{"count", 4}, {"p50", 147.0}, {"p95", 160.0}}}}}}},
        {{"label", "cache on"},
         {"turns",
          {{{"turn", 1},
            {"usage_reported", 4},
            {"prompt_tokens", 8164},
            {"ttft_s", {{"count", 4}, {"p50", 56.0}, {"p95", 56.0}}}},
           {{"turn", 2}, {"usage_reported", 0}, {"prompt_tokens", 0}, {"ttft_s", {{"count", 0}}}}}}}}}};
  const std::string svg = render_results_svg(results);
  std::string why;
  EXPECT_TRUE(tags_balance(svg, &why)) << why;
  EXPECT_NE(svg.find("4 users x 2 turns, turn-1 prompt 2041 tokens, max_tokens 32, 4 in flight"), std::string::npos);
  EXPECT_EQ(count(svg, "data-series=\"cache off\""), 2u);
  EXPECT_EQ(count(svg, "data-series=\"cache on\""), 1u);   // turn 2 had no successful request
  EXPECT_NE(svg.find(">22% of off<"), std::string::npos);  // 56 / 250
}

TEST(NiceTickStep, OneTwoFiveTimesPowersOfTen) {
  EXPECT_DOUBLE_EQ(nice_tick_step(30), 10);
  EXPECT_DOUBLE_EQ(nice_tick_step(9), 2);
  EXPECT_NEAR(nice_tick_step(0.4), 0.1, 1e-12);
  EXPECT_NEAR(nice_tick_step(1), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(nice_tick_step(0), 1);
}

}  // namespace
}  // namespace hearth::bench
