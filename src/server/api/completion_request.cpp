#include "server/api/completion_request.h"

#include <fmt/format.h>

namespace hearth::server {

std::optional<ApiError> check_stop_lengths(const std::vector<std::string>& stops, const char* param) {
  for (const std::string& s : stops) {
    if (s.size() > kMaxStopBytes) {
      return invalid_request(
          fmt::format("'{}' holds a string of {} bytes; at most {} bytes are allowed", param, s.size(), kMaxStopBytes),
          param, "invalid_value");
    }
  }
  return std::nullopt;
}

const char* finish_reason_text(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAborted:
      return "abort";
    case FinishReason::kNone:
      return "stop";
  }
  return "stop";
}

}  // namespace hearth::server
