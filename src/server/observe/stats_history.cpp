#include "server/observe/stats_history.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace hearth::server {
namespace {

using nlohmann::json;

double per_second(uint64_t later, uint64_t earlier, double dt) {
  return dt > 0 && later >= earlier ? static_cast<double>(later - earlier) / dt : 0.0;
}

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

void StatsHistory::drop_old(double now) {
  while (samples_.size() > kMaxSamples || (!samples_.empty() && samples_.front().t < now - kWindowS)) {
    samples_.pop_front();
  }
  while (ttfts_.size() > kMaxTtfts || (!ttfts_.empty() && ttfts_.front().t < now - kWindowS)) ttfts_.pop_front();
}

void StatsHistory::add_sample(double t, const EngineStats& stats) {
  std::lock_guard lock(mutex_);
  samples_.push_back({t, stats});
  drop_old(t);
}

void StatsHistory::record_ttft(double t, double ttft_s) {
  std::lock_guard lock(mutex_);
  ttfts_.push_back({t, ttft_s * 1000.0});
  drop_old(t);
}

void StatsHistory::record_warning(VolatileWarning warning) {
  std::lock_guard lock(mutex_);
  warnings_.push_back(std::move(warning));
  if (warnings_.size() > kMaxWarnings) warnings_.pop_front();
}

json StatsHistory::series_json(double now) const {
  json series = json::array();
  for (size_t i = 1; i < samples_.size(); ++i) {
    const Sample& a = samples_[i - 1];
    const Sample& b = samples_[i];
    const double dt = b.t - a.t;
    const uint64_t queried = b.stats.num_cache_query_tokens - a.stats.num_cache_query_tokens;
    const uint64_t hit = b.stats.num_cache_hit_tokens - a.stats.num_cache_hit_tokens;
    series.push_back({
        {"t", b.t - now},
        {"hit_rate", queried > 0 ? json(static_cast<double>(hit) / static_cast<double>(queried)) : json(nullptr)},
        {"prefill_tps", per_second(b.stats.num_prefill_tokens, a.stats.num_prefill_tokens, dt)},
        {"decode_tps", per_second(b.stats.num_decode_tokens, a.stats.num_decode_tokens, dt)},
        {"blocks_in_use", b.stats.num_blocks_in_use},
        {"blocks_cached_free", b.stats.num_blocks_cached_free},
    });
  }
  return series;
}

json StatsHistory::throughput_json(double now, const EngineStats& current) const {
  json out{{"window_s", 0.0}, {"prefill_tokens_per_s", 0.0}, {"decode_tokens_per_s", 0.0}};
  if (samples_.empty()) return out;
  const Sample* base = &samples_.front();
  for (const Sample& s : samples_) {
    if (s.t <= now - kThroughputWindowS) base = &s;
  }
  const double dt = now - base->t;
  out["window_s"] = dt;
  out["prefill_tokens_per_s"] = per_second(current.num_prefill_tokens, base->stats.num_prefill_tokens, dt);
  out["decode_tokens_per_s"] = per_second(current.num_decode_tokens, base->stats.num_decode_tokens, dt);
  return out;
}

json StatsHistory::ttft_json(double now) const {
  std::vector<double> values;
  for (const Ttft& v : ttfts_) {
    if (v.t >= now - kWindowS) values.push_back(v.ms);
  }
  std::sort(values.begin(), values.end());
  json buckets = json::array();
  size_t below = 0;
  for (double bound : kTtftBoundsMs) {
    const size_t upto = std::upper_bound(values.begin(), values.end(), bound) - values.begin();
    buckets.push_back({{"le_ms", bound}, {"count", upto - below}});
    below = upto;
  }
  buckets.push_back({{"le_ms", nullptr}, {"count", values.size() - below}});
  const bool any = !values.empty();
  return {{"window_s", kWindowS},
          {"count", values.size()},
          {"p50_ms", any ? json(percentile(values, 50)) : json(nullptr)},
          {"p95_ms", any ? json(percentile(values, 95)) : json(nullptr)},
          {"buckets", std::move(buckets)}};
}

json StatsHistory::to_json(double now, const EngineStats& current, const std::string& scope) const {
  std::lock_guard lock(mutex_);
  json warnings = json::array();
  for (auto it = warnings_.rbegin(); it != warnings_.rend(); ++it) {
    if (it->scope != scope) continue;
    warnings.push_back({{"age_s", now - it->t},
                        {"begin", it->region.begin},
                        {"end", it->region.end},
                        {"tokens_lost", it->region.tokens_lost},
                        {"num_requests", it->region.num_requests},
                        {"text", it->text}});
  }
  return {{"series", series_json(now)},
          {"throughput", throughput_json(now, current)},
          {"ttft", ttft_json(now)},
          {"volatile_warnings", std::move(warnings)}};
}

StatsSampler::StatsSampler(std::chrono::milliseconds period, std::function<void()> tick) {
  thread_ = std::thread([this, period, tick = std::move(tick)] {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      lock.unlock();
      tick();
      lock.lock();
      wake_.wait_for(lock, period, [&] { return stop_; });
    }
  });
}

StatsSampler::~StatsSampler() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

}  // namespace hearth::server
