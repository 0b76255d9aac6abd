#include "bench_client/sse.h"

namespace hearth::bench {

std::vector<SseEvent> SseParser::feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  for (char c : bytes) {
    if (pending_cr_) {
      pending_cr_ = false;
      if (c == '\n') continue;  // the "\n" of a "\r\n" split across pieces
    }
    if (c == '\r' || c == '\n') {
      pending_cr_ = c == '\r';
      take_line(line_, out);
      line_.clear();
    } else {
      line_ += c;
    }
  }
  return out;
}

void SseParser::take_line(std::string_view line, std::vector<SseEvent>& out) {
  if (line.empty()) {
    if (has_fields_) out.push_back(std::move(current_));
    current_ = SseEvent{};
    has_fields_ = false;
    return;
  }
  if (line.front() == ':') return;  // a comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_fields_ && !current_.data.empty()) current_.data += '\n';
    current_.data += value;
    has_fields_ = true;
  } else if (field == "event") {
    current_.event = value;
    has_fields_ = true;
  }
}

}  // namespace hearth::bench
