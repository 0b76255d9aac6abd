#pragma once
// VolatilePrefixDetector: notices when recent prompts share a long stretch that the prefix cache cannot reuse
// because a short region before it differs every time (a timestamp near the top, a request id, a shuffled tool
// list). Token ids only; the server turns a finding into a log line with text and a metric.
//
// For each new prompt P and each recent prompt R of the same scope: d = first differing token; if P and R line
// up again within max_window tokens after d for at least min_run tokens, R "shows" the volatile region
// [d, realignment) of P. When at least min_requests prompts (P included) show one, P has a volatile prefix. A
// warning is due at most once per warn_interval (the clock is injectable for tests).
//
// Stays quiet on genuinely different prompts (no realignment) and on prompts that share a prefix and then
// differ to the end (the cache already reuses the prefix).

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/ids.h"

namespace hearth {

struct VolatilePrefixConfig {
  int32_t history = 32;          // recent prompts remembered
  int32_t max_window = 256;      // longest differing region considered volatile
  int32_t min_run = 64;          // shared tokens after it, at least
  int32_t min_requests = 4;      // prompts showing it (the new one included) before it counts
  int32_t max_stored_tokens = 8192;  // each remembered prompt's leading tokens
  std::chrono::steady_clock::duration warn_interval = std::chrono::minutes(1);
};

struct VolatileRegion {
  int32_t begin = 0;        // [begin, end): tokens of the new prompt that differ from request to request
  int32_t end = 0;
  int32_t tokens_lost = 0;  // shared tokens after the region that are recomputed per request (median over matches)
  int32_t num_requests = 0; // recent prompts (the new one included) showing the region
};

class VolatilePrefixDetector {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit VolatilePrefixDetector(VolatilePrefixConfig config = {}, Clock clock = std::chrono::steady_clock::now);

  struct Finding {
    VolatileRegion region;
    bool warn = false;  // true at most once per warn_interval
  };

  // Compares `prompt` with the recent prompts of `scope` (prompts of different scopes, e.g. cache salts, never
  // share a cache and are not compared), then remembers it. Returns the region when `prompt` has a volatile prefix.
  std::optional<Finding> observe(const std::string& scope, std::span<const TokenId> prompt);

  uint64_t num_warnings() const { return num_warnings_; }
  uint64_t num_volatile_requests() const { return num_volatile_requests_; }

 private:
  struct Recent {
    std::string scope;
    std::vector<TokenId> tokens;
  };

  VolatilePrefixConfig config_;
  Clock clock_;
  std::deque<Recent> recent_;
  std::optional<std::chrono::steady_clock::time_point> last_warning_;
  uint64_t num_warnings_ = 0;
  uint64_t num_volatile_requests_ = 0;
};

}  // namespace hearth
