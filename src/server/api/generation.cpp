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

void Generation::record_finished(const std::string& endpoint, const std::string& cache_salt, const RequestOutput& out,
                                 int32_t answer_tokens_reused) {
  Metrics& metrics = context_.metrics();
  if (answer_tokens_reused > 0) metrics.record_answer_tokens_reused(answer_tokens_reused);
  const std::string reuse_stop = out.usage.reuse.reason ? reuse_stop_name(*out.usage.reuse.reason) : "";
  if (!reuse_stop.empty()) metrics.record_reuse_stop(reuse_stop);
  metrics.record_tenant(cache_salt, out.usage.prompt_tokens, out.usage.cached_tokens, out.usage.completion_tokens,
                        reuse_stop);
  context_.history().record_ttft(context_.seconds_since_start(), out.usage.ttft_ms / 1000.0);
  metrics.record_request(endpoint, finish_reason_text(out.finish_reason), out.usage.ttft_ms / 1000.0,
                         out.usage.total_ms / 1000.0);
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
