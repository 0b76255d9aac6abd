#include "bench_client/svg_plot.h"

#include "util/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace hearth::bench {
namespace {

constexpr std::array kColors = {"#9aa5b1", "#e07a2f", "#3b7dd8", "#4caf50"};
constexpr double kWidth = 760;
constexpr double kHeight = 460;
constexpr double kLeft = 80;  // room for the y ticks and label
constexpr double kRight = 30;
constexpr double kTop = 84;     // title, subtitle, legend
constexpr double kBottom = 64;  // x ticks and label

std::string escape(const std::string& s) { return html_escape(s); }

std::string tick_label(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step)));
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace

std::string render_results_svg(const nlohmann::json& results) {
  using nlohmann::json;
  const json config = results.value("config", json::object());
  std::vector<PlotSeries> series;
  double turn1_prompt = -1;
  for (const json& run : results.value("runs", json::array())) {
    PlotSeries s{run.value("label", std::string("run")), {}, {}};
    for (const json& turn : run.value("turns", json::array())) {
      const json ttft = turn.value("ttft_s", json::object());
      const bool any = ttft.value("count", 0) > 0;
      s.p50_s.push_back(any ? ttft.value("p50", -1.0) : -1);
      s.p95_s.push_back(any ? ttft.value("p95", -1.0) : -1);
      if (turn1_prompt < 0 && turn.value("turn", 0) == 1 && turn.value("usage_reported", 0) > 0) {
        turn1_prompt = turn.value("prompt_tokens", 0.0) / turn.value("usage_reported", 1);
      }
    }
    series.push_back(std::move(s));
  }
  const int users = config.value("users", 0);
  const int concurrency = config.value("concurrency", 0);
  const double rate = config.value("rate", 0.0);
  const std::string prompt = turn1_prompt > 0
                                 ? fmt::format("turn-1 prompt {:.0f} tokens", turn1_prompt)
                                 : fmt::format("~{}-token shared prefix (estimated)", config.value("prefix_tokens", 0));
  const std::string arrivals = rate > 0 ? fmt::format("Poisson {} req/s", rate)
                                        : fmt::format("{} in flight", concurrency > 0 ? concurrency : users);
  const std::string subtitle = fmt::format("{} users x {} turns, {}, max_tokens {}, {}; bars p50, whiskers p95", users,
                                           config.value("turns", 0), prompt, config.value("max_tokens", 0), arrivals);
  return render_ttft_svg("Household benchmark: time to first token per turn", subtitle, series);
}

double nice_tick_step(double max_value) {
  if (!(max_value > 0)) return 1;
  const double raw = max_value / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

std::string render_ttft_svg(const std::string& title, const std::string& subtitle,
                            const std::vector<PlotSeries>& series) {
  size_t num_turns = 0;
  double max_value = 0;
  for (const PlotSeries& s : series) {
    num_turns = std::max(num_turns, s.p50_s.size());
    for (double v : s.p50_s) max_value = std::max(max_value, v);
    for (double v : s.p95_s) max_value = std::max(max_value, v);
  }
  const double step = nice_tick_step(max_value);
  // Headroom above the tallest whisker for the two label lines.
  const double y_max = std::max(step, std::ceil(max_value * 1.18 / step) * step);
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  auto y_of = [&](double v) { return kTop + plot_h * (1 - v / y_max); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kWidth, kHeight);
  svg += fmt::format("<text x=\"{}\" y=\"28\" font-size=\"18\" font-weight=\"bold\">{}</text>\n", kLeft, escape(title));
  svg += fmt::format("<text x=\"{}\" y=\"48\" font-size=\"12\" fill=\"#555\">{}</text>\n", kLeft, escape(subtitle));

  // Grid and y axis.
  for (double v = 0; v <= y_max + step / 2; v += step) {
    const double y = y_of(v);
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e3e3e3\"/>\n", kLeft, y,
                       kWidth - kRight, y);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"end\">{}</text>\n", kLeft - 8, y + 4,
                       tick_label(v, step));
  }
  svg +=
      fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>\n", kLeft, kTop, kTop + plot_h);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>\n", kLeft, kTop + plot_h,
                     kWidth - kRight);
  svg += fmt::format(
      "<text transform=\"translate(22,{:.1f}) rotate(-90)\" font-size=\"13\" text-anchor=\"middle\">time to first "
      "token (s)</text>\n",
      kTop + plot_h / 2);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"13\" text-anchor=\"middle\">conversation turn</text>\n",
                     kLeft + plot_w / 2, kHeight - 16);

  // Bars: one group per turn, one bar per series.
  const double group_w = num_turns > 0 ? plot_w / static_cast<double>(num_turns) : plot_w;
  const double bar_w = std::min(70.0, group_w * 0.7 / std::max<size_t>(series.size(), 1));
  for (size_t t = 0; t < num_turns; ++t) {
    const double center = kLeft + group_w * (static_cast<double>(t) + 0.5);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", center,
                       kTop + plot_h + 18, t + 1);
    const double x0 = center - bar_w * static_cast<double>(series.size()) / 2;
    bool any_bar = false;
    for (size_t s = 0; s < series.size(); ++s) {
      if (t >= series[s].p50_s.size() || series[s].p50_s[t] < 0) continue;
      any_bar = true;
      const double v = series[s].p50_s[t];
      const double x = x0 + bar_w * static_cast<double>(s);
      const double p95 = t < series[s].p95_s.size() ? series[s].p95_s[t] : v;
      svg += fmt::format(
          "<rect class=\"bar\" data-series=\"{}\" data-turn=\"{}\" data-p50=\"{:.4f}\" x=\"{:.1f}\" y=\"{:.1f}\" "
          "width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
          escape(series[s].name), t + 1, v, x + 2, y_of(v), bar_w - 4, y_of(0) - y_of(v), kColors[s % kColors.size()]);
      const double xm = x + bar_w / 2;
      if (p95 > v) {
        svg += fmt::format(
            "<path d=\"M{0:.1f} {1:.1f} V{2:.1f} M{3:.1f} {2:.1f} H{4:.1f}\" stroke=\"#222\" fill=\"none\"/>\n", xm,
            y_of(v), y_of(p95), xm - 6, xm + 6);
      }
      // Labels sit above the whisker: the p50, and over a second series its share of the first's.
      double label_y = y_of(std::max(v, p95)) - 6;
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", xm,
                         label_y, v >= 1 ? fmt::format("{:.1f} s", v) : fmt::format("{:.0f} ms", v * 1000));
      if (series.size() == 2 && s == 1 && t < series[0].p50_s.size() && series[0].p50_s[t] > 0) {
        label_y -= 14;
        svg += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" font-weight=\"bold\" text-anchor=\"middle\">"
            "{:.0f}% of off</text>\n",
            xm, label_y, 100 * v / series[0].p50_s[t]);
      }
    }
    if (!any_bar) {
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" fill=\"#999\" text-anchor=\"middle\">no successful "
          "request</text>\n",
          center, y_of(0) - 8);
    }
  }

  // Legend, top right, with the whisker explained.
  double lx = kWidth - kRight - 150.0 * static_cast<double>(series.size()) - 120;
  for (size_t s = 0; s < series.size(); ++s) {
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"60\" width=\"14\" height=\"14\" fill=\"{}\"/>\n", lx,
                       kColors[s % kColors.size()]);
    svg +=
        fmt::format("<text x=\"{:.1f}\" y=\"72\" font-size=\"12\">{} (p50)</text>\n", lx + 20, escape(series[s].name));
    lx += 150;
  }
  svg += fmt::format("<path d=\"M{0:.1f} 60 V74 M{1:.1f} 60 H{2:.1f}\" stroke=\"#222\"/>\n", lx + 7, lx + 1, lx + 13);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"72\" font-size=\"12\">p95</text>\n", lx + 20);
  svg += "</svg>\n";
  return svg;
}

}  // namespace hearth::bench
