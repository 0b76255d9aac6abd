// hearth bench household: the household workload against any OpenAI-compatible server (flags only; the client
// lives in src/bench_client).

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "app/commands.h"
#include "bench_client/report.h"
#include "bench_client/runner.h"
#include "bench_client/svg_plot.h"
#include "bench_client/workload.h"

namespace hearth::app {
namespace {

using nlohmann::json;

struct HouseholdFlags {
  std::string url = "http://127.0.0.1:8080";
  std::string model;
  std::string api_key;
  int users = 4;
  int turns = 3;
  int concurrency = 0;
  double rate = 0;
  int prefix_tokens = 2000;
  int question_tokens = 16;
  int max_tokens = 32;
  uint64_t seed = 1;
  double duration_s = 0;
  std::string extra = "{}";
  double timeout_s = 300;
  std::string json_path;
  std::string plot_path;
  bool compare = false;
  std::string compare_url;  // a second server (e.g. the peer) to run the same workload against, as the base
  std::string compare_name = "peer";
  bool no_nonce = false;
  bool dry_run = false;
  std::string replot_path;
};

std::string fresh_nonce() {
  std::random_device rd;
  return fmt::format("{:08x}", rd());
}

bool write_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    return true;
  }
  std::ofstream out(path);
  out << text;
  if (!out) std::fprintf(stderr, "hearth bench household: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

bench::Report run_once(const bench::Workload& workload, bench::RunConfig config, const json& extra_on_top,
                       const std::string& label, bool nonce) {
  config.extra.merge_patch(extra_on_top);
  config.nonce = nonce ? fresh_nonce() : "";
  std::fprintf(stderr, "hearth bench household: %s: %d users x %d turns%s%s ...\n", label.c_str(),
               workload.config().users, workload.config().turns, nonce ? ", session nonce " : "", config.nonce.c_str());
  bench::RunResult run = bench::run_workload(workload, config, label);
  return bench::make_report(std::move(run), workload.config().turns);
}

// --replot: draws the chart of a results file written by --json, without running anything.
int replot(const HouseholdFlags& f) {
  std::ifstream in(f.replot_path);
  json results = json::parse(in, nullptr, false);
  if (!in || !results.is_object() || !results.contains("runs")) {
    std::fprintf(stderr, "hearth bench household: %s is not a results file written by --json\n", f.replot_path.c_str());
    return 2;
  }
  if (f.plot_path.empty()) {
    std::fprintf(stderr, "hearth bench household: --replot needs --plot FILE.svg\n");
    return 2;
  }
  return write_file(f.plot_path, bench::render_results_svg(results)) ? 0 : 1;
}

int run_household(const HouseholdFlags& f) {
  if (!f.replot_path.empty()) return replot(f);
  auto endpoint = bench::parse_url(f.url);
  if (!endpoint) {
    std::fprintf(stderr, "hearth bench household: %s\n", endpoint.error().message.c_str());
    return 2;
  }
  json extra = json::parse(f.extra, nullptr, false);
  if (!extra.is_object()) {
    std::fprintf(stderr, "hearth bench household: --extra must be a JSON object (got '%s')\n", f.extra.c_str());
    return 2;
  }
  const bench::Workload workload(bench::WorkloadConfig{f.users, f.turns, f.prefix_tokens, f.question_tokens, f.seed});
  bench::RunConfig config;
  config.endpoint = *endpoint;
  config.request = bench::RequestOptions{f.api_key, f.timeout_s};
  config.model = f.model;
  config.max_tokens = f.max_tokens;
  config.concurrency = f.concurrency;
  config.rate = f.rate;
  config.duration_s = f.duration_s;
  config.extra = extra;

  if (f.dry_run) {
    bench::Conversation chat(workload.system_message(f.no_nonce ? "" : "0123abcd"));
    chat.ask(workload.question(0, 0));
    std::printf("%s\n", bench::request_body(config, chat.messages()).dump(2).c_str());
    return 0;
  }

  std::vector<bench::Report> reports;
  bench::ComparisonNames names;
  if (f.compare) {
    reports.push_back(run_once(workload, config, {{"cache_prompt", false}}, "cache off", !f.no_nonce));
    reports.push_back(run_once(workload, config, {{"cache_prompt", true}}, "cache on", !f.no_nonce));
  } else if (!f.compare_url.empty()) {
    auto base = bench::parse_url(f.compare_url);
    if (!base) {
      std::fprintf(stderr, "hearth bench household: --compare-url: %s\n", base.error().message.c_str());
      return 2;
    }
    names = {f.compare_name, "this", "this (" + f.url + ") / " + f.compare_name + " (" + f.compare_url + ")"};
    bench::RunConfig base_config = config;
    base_config.endpoint = *base;
    reports.push_back(run_once(workload, base_config, json::object(), f.compare_name, !f.no_nonce));
    reports.push_back(run_once(workload, config, json::object(), f.url, !f.no_nonce));
  } else {
    reports.push_back(run_once(workload, config, json::object(), "run", !f.no_nonce));
  }
  const bool comparing = reports.size() == 2;

  std::string text;
  for (const bench::Report& r : reports) text += bench::format_table(r) + "\n";
  if (comparing) text += bench::format_comparison(reports[0], reports[1], names);
  std::fputs(text.c_str(), f.json_path == "-" ? stderr : stdout);

  json out = {{"config",
               {{"url", f.url},
                {"model", f.model},
                {"users", f.users},
                {"turns", f.turns},
                {"concurrency", f.concurrency},
                {"rate", f.rate},
                {"prefix_tokens", f.prefix_tokens},
                {"prefix_chars", workload.prefix().text().size()},
                {"max_tokens", f.max_tokens},
                {"seed", f.seed},
                {"compare_url", f.compare_url},
                {"extra", extra},
                {"nonce", !f.no_nonce}}},
              {"runs", json::array()}};
  for (const bench::Report& r : reports) out["runs"].push_back(bench::to_json(r));
  if (comparing) out["comparison"] = bench::comparison_json(reports[0], reports[1], names);
  bool ok = true;
  if (!f.json_path.empty()) ok &= write_file(f.json_path, out.dump(2) + "\n");
  if (!f.plot_path.empty()) ok &= write_file(f.plot_path, bench::render_results_svg(out));
  return ok ? 0 : 1;
}

}  // namespace

Command add_bench_household(CLI::App& app) {
  auto f = std::make_shared<HouseholdFlags>();
  app.add_option("--url", f->url, "Server base URL (any OpenAI-compatible server)")->capture_default_str();
  app.add_option("--model", f->model, "The request's \"model\" field (left out when empty)");
  app.add_option("--api-key", f->api_key, "Sent as Authorization: Bearer KEY")->envname("HEARTH_API_KEY");
  app.add_option("--users", f->users, "Users sharing the prefix")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--turns", f->turns, "Turns per user's conversation")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--concurrency", f->concurrency, "Closed loop: users in flight (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rate", f->rate, "Open loop: Poisson arrivals, requests/s (0: closed loop)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--prefix-tokens", f->prefix_tokens,
                 "Shared prefix size in tokens, estimated from text length at ~4 characters/token "
                 "(the server's usage reports the true count)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--question-tokens", f->question_tokens, "Size of each new question, ~4 characters/token")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-tokens", f->max_tokens, "max_tokens of every request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", f->seed, "Workload seed (text and arrivals)")->capture_default_str();
  app.add_option("--duration", f->duration_s, "Start no request after this many seconds (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--extra", f->extra, "JSON object merged into every request body, e.g. '{\"cache_prompt\": false}'")
      ->capture_default_str();
  app.add_option("--timeout", f->timeout_s, "Per-request limit in seconds (whole answer)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--json", f->json_path, "Write the results as JSON to FILE ('-': stdout, table to stderr)");
  app.add_option("--plot", f->plot_path, "Write an SVG chart of TTFT per turn to FILE");
  auto* compare = app.add_flag(
      "--compare", f->compare,
      "Run twice: with \"cache_prompt\": false in every request, then with caching on; print on/off ratios");
  app.add_option("--compare-url", f->compare_url,
                 "Run the same workload against this second server first (e.g. the peer, bench/peer/server.mjs), "
                 "then against --url; print --url's ratios to it")
      ->excludes(compare);
  app.add_option("--compare-name", f->compare_name, "The --compare-url server's short name in the table")
      ->capture_default_str();
  app.add_flag("--no-nonce", f->no_nonce,
               "Leave out the per-run session nonce at the top of the shared prefix (so a run can hit a cache that "
               "earlier runs left warm)");
  app.add_flag("--dry-run", f->dry_run, "Print the first request's body (user 1, turn 1) and exit without sending");
  app.add_option("--replot", f->replot_path, "Draw --plot from a results FILE.json written by --json, and exit");
  return [f] { return run_household(*f); };
}

}  // namespace hearth::app
