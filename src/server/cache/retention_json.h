#pragma once
// Retention fields of the request bodies: Hearth's `cache_retention` object and the TTL strings it shares with
// Anthropic's cache_control ("5m", "1h"). Pure functions (tests/server cover them without a model).
//
//   "cache_retention": {"priority": 0..100 (default 50), "ttl": "<n>s|m|h|d" (at most 30 days; absent: none),
//                       "tokens": N (only the prompt's first N tokens; absent: the whole prompt)}

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kv/retention_queue.h"
#include "server/api/api_error.h"

namespace hearth::server {

// "90s", "5m", "1h", "7d" as milliseconds in [1 s, kMaxRetentionTtlMs]; nullopt for anything else.
[[nodiscard]] std::optional<int64_t> parse_ttl(std::string_view text);

// The cache_retention object at `value` (named `param` in errors) as one span; a 400 naming the bad member.
[[nodiscard]] ApiResult<RetentionSpan> parse_cache_retention(const nlohmann::json& value, const std::string& param);

}  // namespace hearth::server
