#include "bench_client/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace hearth::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Admission for the two arrival models: a closed loop hands out `concurrency` user slots; an open loop hands out
// the next Poisson arrival time to whichever user asks first.
class Arrivals {
 public:
  Arrivals(const RunConfig& config, int num_users, int num_requests, uint64_t seed, Clock::time_point start)
      : start_(start), slots_(config.concurrency > 0 ? config.concurrency : num_users) {
    if (config.rate > 0) times_ = poisson_arrivals(num_requests, config.rate, seed);
  }

  [[nodiscard]] bool open_loop() const { return !times_.empty(); }

  void acquire_user() {
    if (open_loop()) return;
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return slots_ > 0; });
    --slots_;
  }

  void release_user() {
    if (open_loop()) return;
    {
      std::lock_guard lock(mutex_);
      ++slots_;
    }
    cv_.notify_one();
  }

  // Open loop: waits until the next unclaimed arrival time.
  void wait_turn() {
    if (!open_loop()) return;
    double at = 0;
    {
      std::lock_guard lock(mutex_);
      at = times_[std::min(next_, times_.size() - 1)];
      ++next_;
    }
    std::this_thread::sleep_until(start_ +
                                  std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at)));
  }

 private:
  Clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int slots_;
  std::vector<double> times_;
  size_t next_ = 0;
};

// Scrapes /metrics every interval until stopped.
class MetricsSampler {
 public:
  MetricsSampler(const RunConfig& config) : config_(config) {  // NOLINT
    before_ = scrape();
    if (before_ && config.metrics_interval_s > 0) thread_ = std::thread([this] { loop(); });
  }

  ServerMetrics finish() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    const auto after = before_ ? scrape() : std::nullopt;
    if (!before_ || !after) return {};
    samples_.push_back(*after);
    return metrics_delta(*before_, *after, samples_);
  }

 private:
  std::optional<PromSamples> scrape() const {
    auto text = fetch_text(config_.endpoint, "/metrics", config_.request, 5.0);
    if (!text) return std::nullopt;
    PromSamples samples = PromSamples::parse(*text, config_.model);  // a server of several models: this one's
    // Not a Hearth server. (One of several models has no series before its first load; the budget's are there.)
    if (!samples.get("hearth_kv_blocks_total") && !samples.get("hearth_memory_budget_bytes")) return std::nullopt;
    return samples;
  }

  void loop() {
    std::unique_lock lock(mutex_);
    const auto period = std::chrono::duration<double>(config_.metrics_interval_s);
    while (!cv_.wait_for(lock, period, [&] { return stop_; })) {
      lock.unlock();
      auto s = scrape();
      lock.lock();
      if (s) samples_.push_back(std::move(*s));
    }
  }

  const RunConfig& config_;
  std::optional<PromSamples> before_;
  std::vector<PromSamples> samples_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

json request_body(const RunConfig& config, const json& messages) {
  json body = {{"messages", messages},
               {"max_tokens", config.max_tokens},
               {"temperature", 0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!config.model.empty()) body["model"] = config.model;
  if (config.extra.is_object()) body.merge_patch(config.extra);
  return body;
}

ServerMetrics metrics_delta(const PromSamples& before, const PromSamples& after,
                            const std::vector<PromSamples>& samples) {
  ServerMetrics m;
  m.available = true;
  auto delta = [&](const char* name) { return after.sum(name).value_or(0) - before.sum(name).value_or(0); };
  m.kv_blocks_total = after.get("hearth_kv_blocks_total").value_or(0);
  auto used = [](const PromSamples& s) {
    return s.get("hearth_kv_blocks", "state=\"used\"").value_or(0) +
           s.get("hearth_kv_blocks", "state=\"pinned\"").value_or(0);
  };
  m.kv_blocks_used_max = std::max(used(before), used(after));
  for (const PromSamples& s : samples) m.kv_blocks_used_max = std::max(m.kv_blocks_used_max, used(s));
  auto used_bytes = [](const PromSamples& s) { return s.get("hearth_kv_bytes", "state=\"used\"").value_or(0); };
  m.kv_bytes_used_max = std::max(used_bytes(before), used_bytes(after));
  for (const PromSamples& s : samples) m.kv_bytes_used_max = std::max(m.kv_bytes_used_max, used_bytes(s));
  m.evictions = delta("hearth_kv_evictions_total");
  m.preemptions = delta("hearth_preemptions_total");
  m.cache_hit_tokens = delta("hearth_prefix_cache_hit_tokens_total");
  m.cache_queried_tokens = delta("hearth_prefix_cache_queried_tokens_total");
  m.prefill_tokens = delta("hearth_prefill_tokens_total");
  m.decode_tokens = delta("hearth_decode_tokens_total");
  return m;
}

RunResult run_workload(const Workload& workload, const RunConfig& config, const std::string& label) {
  const WorkloadConfig& wc = workload.config();
  RunResult run;
  run.label = label;
  MetricsSampler sampler(config);
  const auto start = Clock::now();
  Arrivals arrivals(config, wc.users, wc.users * wc.turns, wc.seed, start);
  std::mutex mutex;
  std::atomic<int> not_started{0};
  const std::string system = workload.system_message(config.nonce);
  auto past_deadline = [&] {
    return config.duration_s > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= config.duration_s;
  };

  auto user_loop = [&](int user) {
    arrivals.acquire_user();
    Conversation chat(system);
    for (int turn = 0; turn < wc.turns; ++turn) {
      arrivals.wait_turn();
      if (past_deadline()) {
        not_started += wc.turns - turn;
        break;
      }
      chat.ask(workload.question(user, turn));
      TurnRecord rec{user, turn, std::chrono::duration<double>(Clock::now() - start).count(), {}};
      rec.result = stream_chat(config.endpoint, request_body(config, chat.messages()), config.request);
      // A failed turn leaves an empty answer, so the user's next question still follows the conversation.
      chat.answer(rec.result.text);
      std::lock_guard lock(mutex);
      run.records.push_back(std::move(rec));
    }
    arrivals.release_user();
  };

  std::vector<std::thread> threads;
  threads.reserve(wc.users);
  for (int u = 0; u < wc.users; ++u) threads.emplace_back(user_loop, u);
  for (auto& t : threads) t.join();
  run.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  run.num_not_started = not_started;
  run.metrics = sampler.finish();
  return run;
}

}  // namespace hearth::bench
