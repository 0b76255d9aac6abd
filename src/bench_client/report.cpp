#include "bench_client/report.h"

#include <fmt/format.h>

namespace hearth::bench {
namespace {

using nlohmann::json;

std::string ms(double seconds) {
  return fmt::format("{:.0f}", seconds * 1000);
}

std::string ratio_text(double on, double off) {
  if (off <= 0) return "-";
  return fmt::format("{:.1f}%", 100.0 * on / off);
}

json ratio_json(double on, double off) {
  if (off <= 0) return nullptr;
  return on / off;
}

json distribution_json(const Distribution& d) {
  return {{"count", d.count}, {"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99}, {"mean", d.mean}, {"max", d.max}};
}

std::string summary_row(const std::string& name, const Summary& s) {
  const auto hit = s.hit_rate();
  return fmt::format("{:<6}{:>5}{:>5}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>10}{:>9}{:>8}{:>10.1f}\n", name, s.num_requests,
                     s.num_ok, ms(s.ttft_s.p50), ms(s.ttft_s.p95), ms(s.ttft_s.p99), ms(s.e2e_s.p50), ms(s.e2e_s.p95),
                     ms(s.e2e_s.p99), s.prompt_tokens, s.cached_tokens,
                     hit ? fmt::format("{:.1f}%", *hit * 100) : std::string("-"), s.decode_tokens_per_s);
}

}  // namespace

std::optional<double> Summary::hit_rate() const {
  if (cached_of_prompt_tokens <= 0) return std::nullopt;
  return static_cast<double>(cached_tokens) / static_cast<double>(cached_of_prompt_tokens);
}

Summary summarize_records(const std::vector<TurnRecord>& records, std::optional<int> turn) {
  Summary s;
  std::vector<double> ttft;
  std::vector<double> e2e;
  double decode_s = 0;
  int64_t decode_tokens = 0;
  for (const TurnRecord& rec : records) {
    if (turn && rec.turn != *turn) continue;
    const RequestResult& r = rec.result;
    ++s.num_requests;
    if (!r.ok()) {
      const std::string kind =
          r.error == ErrorKind::kHttp ? fmt::format("http_{}", r.http_status) : std::string(error_kind_name(r.error));
      if (s.errors[kind]++ == 0) s.error_examples[kind] = r.error_detail;
      continue;
    }
    ++s.num_ok;
    e2e.push_back(r.e2e_s);
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s);
    if (r.prompt_tokens >= 0) {
      ++s.num_usage_reported;
      s.prompt_tokens += r.prompt_tokens;
      if (r.cached_tokens >= 0) {
        s.cached_tokens += r.cached_tokens;
        s.cached_of_prompt_tokens += r.prompt_tokens;
      }
    }
    // Without usage, the content chunks are the best count of generated tokens (one token per chunk on most
    // servers).
    const int64_t completion = r.completion_tokens >= 0 ? r.completion_tokens : r.num_content_chunks;
    s.completion_tokens += completion;
    if (completion > 1 && r.ttft_s >= 0 && r.e2e_s > r.ttft_s) {
      decode_tokens += completion - 1;
      decode_s += r.e2e_s - r.ttft_s;
    }
  }
  s.ttft_s = summarize(ttft);
  s.e2e_s = summarize(e2e);
  s.decode_tokens_per_s = decode_s > 0 ? static_cast<double>(decode_tokens) / decode_s : 0;
  return s;
}

Report make_report(RunResult run, int num_turns) {
  Report report;
  for (int t = 0; t < num_turns; ++t) report.turns.push_back(summarize_records(run.records, t));
  report.overall = summarize_records(run.records, std::nullopt);
  report.run = std::move(run);
  return report;
}

std::string format_table(const Report& report) {
  std::string out = fmt::format("== {} ({:.1f} s) ==\n", report.run.label, report.run.wall_s);
  out += fmt::format("{:<6}{:>5}{:>5}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>10}{:>9}{:>8}{:>10}\n", "turn", "req", "ok",
                     "ttft50", "ttft95", "ttft99", "e2e50", "e2e95", "e2e99", "prompt", "cached", "hit", "decode/s");
  out += fmt::format("{:<6}{:>5}{:>5}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>10}{:>9}{:>8}{:>10}\n", "", "", "", "ms", "ms",
                     "ms", "ms", "ms", "ms", "tokens", "tokens", "", "tok/s");
  for (size_t t = 0; t < report.turns.size(); ++t) out += summary_row(std::to_string(t + 1), report.turns[t]);
  out += summary_row("all", report.overall);
  if (report.overall.num_usage_reported < report.overall.num_ok) {
    out += fmt::format("usage reported by {} of {} successful requests (prompt/cached tokens count only those)\n",
                       report.overall.num_usage_reported, report.overall.num_ok);
  }
  if (!report.overall.errors.empty()) {
    out += "errors:";
    for (const auto& [kind, n] : report.overall.errors) out += fmt::format(" {} {}", kind, n);
    out += '\n';
    for (const auto& [kind, example] : report.overall.error_examples) {
      out += fmt::format("  first {}: {}\n", kind, example.substr(0, 160));
    }
  }
  if (report.run.num_not_started > 0) {
    out += fmt::format("{} turns not started (--duration ran out)\n", report.run.num_not_started);
  }
  const ServerMetrics& m = report.run.metrics;
  if (m.available) {
    out += fmt::format(
        "server /metrics: KV blocks used at most {:.0f} of {:.0f} ({:.1f}%), evictions {:.0f}, preemptions {:.0f}, "
        "prefill tokens {:.0f}, decode tokens {:.0f}, cache hit tokens {:.0f} of {:.0f} looked up\n",
        m.kv_blocks_used_max, m.kv_blocks_total,
        m.kv_blocks_total > 0 ? 100 * m.kv_blocks_used_max / m.kv_blocks_total : 0.0, m.evictions, m.preemptions,
        m.prefill_tokens, m.decode_tokens, m.cache_hit_tokens, m.cache_queried_tokens);
  } else {
    out += "server /metrics: not available (not a Hearth server, or no /metrics)\n";
  }
  return out;
}

std::string format_comparison(const Report& base, const Report& test, const ComparisonNames& names) {
  std::string out = "== " + names.title + " ==\n";
  const std::string b = names.base;
  const std::string t = names.test;
  out += fmt::format("{:<6}{:>12}{:>12}{:>10}{:>12}{:>12}{:>10}\n", "turn", "ttft50 " + b, "ttft50 " + t, "ratio",
                     "e2e50 " + b, "e2e50 " + t, "ratio");
  auto row = [&](const std::string& name, const Summary& x, const Summary& y) {
    out += fmt::format("{:<6}{:>12}{:>12}{:>10}{:>12}{:>12}{:>10}\n", name, ms(x.ttft_s.p50), ms(y.ttft_s.p50),
                       ratio_text(y.ttft_s.p50, x.ttft_s.p50), ms(x.e2e_s.p50), ms(y.e2e_s.p50),
                       ratio_text(y.e2e_s.p50, x.e2e_s.p50));
  };
  for (size_t i = 0; i < base.turns.size() && i < test.turns.size(); ++i) {
    row(std::to_string(i + 1), base.turns[i], test.turns[i]);
  }
  row("all", base.overall, test.overall);
  out += fmt::format("wall time: {} {:.1f} s, {} {:.1f} s ({})\n", b, base.run.wall_s, t, test.run.wall_s,
                     ratio_text(test.run.wall_s, base.run.wall_s));
  return out;
}

json to_json(const Summary& s) {
  const auto hit = s.hit_rate();
  return {{"requests", s.num_requests},
          {"ok", s.num_ok},
          {"errors", s.errors},
          {"error_examples", s.error_examples},
          {"ttft_s", distribution_json(s.ttft_s)},
          {"e2e_s", distribution_json(s.e2e_s)},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_tokens", s.cached_tokens},
          {"completion_tokens", s.completion_tokens},
          {"usage_reported", s.num_usage_reported},
          {"prefix_hit_rate", hit ? json(*hit) : json(nullptr)},
          {"decode_tokens_per_s", s.decode_tokens_per_s}};
}

json to_json(const Report& report) {
  json turns = json::array();
  for (size_t t = 0; t < report.turns.size(); ++t) {
    json j = to_json(report.turns[t]);
    j["turn"] = t + 1;
    turns.push_back(std::move(j));
  }
  const ServerMetrics& m = report.run.metrics;
  json metrics = nullptr;
  if (m.available) {
    metrics = {{"kv_blocks_total", m.kv_blocks_total},
               {"kv_blocks_used_max", m.kv_blocks_used_max},
               {"kv_bytes_used_max", m.kv_bytes_used_max},
               {"evictions", m.evictions},
               {"preemptions", m.preemptions},
               {"cache_hit_tokens", m.cache_hit_tokens},
               {"cache_queried_tokens", m.cache_queried_tokens},
               {"prefill_tokens", m.prefill_tokens},
               {"decode_tokens", m.decode_tokens}};
  }
  return {
      {"label", report.run.label}, {"wall_s", report.run.wall_s},        {"not_started", report.run.num_not_started},
      {"turns", std::move(turns)}, {"overall", to_json(report.overall)}, {"server_metrics", std::move(metrics)}};
}

json comparison_json(const Report& base, const Report& test, const ComparisonNames& names) {
  json turns = json::array();
  for (size_t t = 0; t < base.turns.size() && t < test.turns.size(); ++t) {
    turns.push_back({{"turn", t + 1},
                     {"ttft_p50_ratio", ratio_json(test.turns[t].ttft_s.p50, base.turns[t].ttft_s.p50)},
                     {"ttft_p95_ratio", ratio_json(test.turns[t].ttft_s.p95, base.turns[t].ttft_s.p95)},
                     {"e2e_p50_ratio", ratio_json(test.turns[t].e2e_s.p50, base.turns[t].e2e_s.p50)}});
  }
  return {{"ratio_of", names.test + " / " + names.base},
          {"turns", std::move(turns)},
          {"overall",
           {{"ttft_p50_ratio", ratio_json(test.overall.ttft_s.p50, base.overall.ttft_s.p50)},
            {"e2e_p50_ratio", ratio_json(test.overall.e2e_s.p50, base.overall.e2e_s.p50)},
            {"wall_ratio", ratio_json(test.run.wall_s, base.run.wall_s)}}}};
}

}  // namespace hearth::bench
