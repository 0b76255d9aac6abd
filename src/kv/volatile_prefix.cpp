#include "kv/volatile_prefix.h"

#include <algorithm>

#include "kv/prefix_diff.h"

namespace hearth {

VolatilePrefixDetector::VolatilePrefixDetector(VolatilePrefixConfig config, Clock clock)
    : config_(config), clock_(std::move(clock)) {}

std::optional<VolatilePrefixDetector::Finding> VolatilePrefixDetector::observe(const std::string& scope,
                                                                              std::span<const TokenId> prompt) {
  prompt = prompt.first(std::min<size_t>(prompt.size(), static_cast<size_t>(config_.max_stored_tokens)));
  std::optional<Finding> finding;
  VolatileRegion region;
  std::vector<int32_t> runs;
  for (const Recent& r : recent_) {
    if (r.scope != scope) continue;
    const int32_t d = common_prefix_length(prompt, r.tokens);
    if (d >= static_cast<int32_t>(std::min(prompt.size(), r.tokens.size()))) continue;  // one extends the other
    const auto realigned = find_realignment(prompt, r.tokens, d, config_.max_window, config_.min_run);
    if (!realigned) continue;
    region.begin = runs.empty() ? d : std::min(region.begin, d);
    region.end = std::max(region.end, std::max(realigned->a_begin, d + 1));
    runs.push_back(realigned->run);
  }
  if (static_cast<int32_t>(runs.size()) + 1 >= config_.min_requests) {
    std::nth_element(runs.begin(), runs.begin() + static_cast<ptrdiff_t>(runs.size() / 2), runs.end());
    region.tokens_lost = runs[runs.size() / 2];
    region.num_requests = static_cast<int32_t>(runs.size()) + 1;
    const auto now = clock_();
    const bool warn = !last_warning_ || now - *last_warning_ >= config_.warn_interval;
    if (warn) {
      last_warning_ = now;
      ++num_warnings_;
    }
    ++num_volatile_requests_;
    finding = Finding{region, warn};
  }
  recent_.push_back({scope, std::vector<TokenId>(prompt.begin(), prompt.end())});
  if (static_cast<int32_t>(recent_.size()) > config_.history) recent_.pop_front();
  return finding;
}

}  // namespace hearth
