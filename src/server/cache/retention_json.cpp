#include "server/cache/retention_json.h"

#include <fmt/format.h>

#include <charconv>

namespace hearth::server {

using nlohmann::json;

std::optional<int64_t> parse_ttl(std::string_view text) {
  if (text.size() < 2 || text.size() > 12) return std::nullopt;
  int64_t n = 0;
  const char* end = text.data() + text.size() - 1;
  const auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || ptr != end || n <= 0) return std::nullopt;
  int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1000;
      break;
    case 'm':
      unit = 60'000;
      break;
    case 'h':
      unit = 3'600'000;
      break;
    case 'd':
      unit = 86'400'000;
      break;
    default:
      return std::nullopt;
  }
  if (n > kMaxRetentionTtlMs / unit) return std::nullopt;
  return n * unit;
}

ApiResult<RetentionSpan> parse_cache_retention(const json& value, const std::string& param) {
  if (!value.is_object()) return invalid_request(fmt::format("'{}' must be an object", param), param, "invalid_type");
  RetentionSpan span;
  for (const auto& [key, member] : value.items()) {
    const std::string name = param + "." + key;
    if (key == "priority") {
      if (!member.is_number_integer() || member.get<int64_t>() < 0 || member.get<int64_t>() > kMaxRetentionPriority) {
        return invalid_request(fmt::format("'{}' must be an integer in [0, {}]", name, kMaxRetentionPriority), name,
                               "invalid_value");
      }
      span.priority = static_cast<uint8_t>(member.get<int64_t>());
    } else if (key == "ttl") {
      const auto ttl = member.is_string() ? parse_ttl(member.get<std::string>()) : std::nullopt;
      if (!ttl) {
        return invalid_request(
            fmt::format("'{}' must be a duration like \"90s\", \"5m\", \"1h\" or \"7d\", from 1s to 30d", name), name,
            "invalid_value");
      }
      span.ttl_ms = *ttl;
    } else if (key == "tokens") {
      if (!member.is_number_integer() || member.get<int64_t>() < 1 || member.get<int64_t>() > INT32_MAX) {
        return invalid_request(fmt::format("'{}' must be a positive integer", name), name, "invalid_value");
      }
      span.num_tokens = static_cast<int32_t>(member.get<int64_t>());
    } else {
      return invalid_request(fmt::format("'{}' is not a retention field (priority, ttl, tokens)", name), name,
                             "unknown_parameter");
    }
  }
  return span;
}

}  // namespace hearth::server
