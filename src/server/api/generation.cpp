#include "server/api/generation.h"

namespace hearth::server {
namespace {

constexpr auto kKeepAliveInterval = std::chrono::milliseconds(1000);

}  // namespace

Generation::Generation(ServerContext& context, bool stream) : context_(context), stream_(stream) {
  context_.begin_in_flight();
}

Generation::~Generation() {
  context_.end_in_flight();
}

std::chrono::milliseconds Generation::keep_alive_interval() const {
  return stream_ ? kKeepAliveInterval : std::chrono::milliseconds(0);
}

HttpResponse Generation::sse_head() {
  HttpResponse head;
  head.content_type = "text/event-stream";
  head.streamed = true;
  head.set_header("Cache-Control", "no-cache");
  head.set_header("X-Accel-Buffering", "no");
  return head;
}

}  // namespace hearth::server
