#pragma once
// An incremental parser for Server-Sent Events (the WHATWG event-stream format): bytes arrive in arbitrary
// pieces (a network read can split a line, or even a "\r\n"), events come out whole.

#include <string>
#include <string_view>
#include <vector>

namespace hearth::bench {

struct SseEvent {
  std::string event;  // the "event:" field; empty for the default "message"
  std::string data;   // "data:" lines joined with "\n"
};

class SseParser {
 public:
  // Consumes a piece of the stream; returns the events it completed (a blank line ends an event).
  // Comment lines (": keep-alive") and unknown fields are ignored, as the format requires.
  std::vector<SseEvent> feed(std::string_view bytes);

  // True when bytes of an unfinished event (or line) are buffered: a stream that ends here was cut short.
  [[nodiscard]] bool has_partial() const { return !line_.empty() || has_fields_; }

 private:
  void take_line(std::string_view line, std::vector<SseEvent>& out);

  std::string line_;
  bool pending_cr_ = false;  // the last byte was '\r': a following '\n' belongs to the same line end
  SseEvent current_;
  bool has_fields_ = false;
};

}  // namespace hearth::bench
