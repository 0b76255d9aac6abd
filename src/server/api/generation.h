#pragma once
// Generation: what both dialects' generations share (openai/completion_generation.h, anthropic/messages.cpp). A
// generation is one HTTP request from submit to its last byte, a ResponseSource the transport pulls whenever the
// engine delivers news, so no thread waits for it. It counts as in flight (ServerContext) from its construction
// until after its derived class and that class's request handles are gone (their destruction aborts what still
// runs), so shutdown waits for it and a front unloads the model only once it is over. A streamed answer starts
// with sse_head() and gets a keep-alive every second while the engine is silent.

#include <chrono>

#include "server/api/server_context.h"
#include "server/http/http_types.h"

namespace hearth::server {

class Generation : public ResponseSource {
 public:
  ~Generation() override;
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // 1 s for a streamed answer, none for one JSON object.
  std::chrono::milliseconds keep_alive_interval() const override;

 protected:
  Generation(ServerContext& context, bool stream);

  // The head of an SSE stream: text/event-stream, neither cached nor buffered by a proxy.
  [[nodiscard]] static HttpResponse sse_head();

  // Counts a request that ran (not one the engine refused) in the metrics and the dashboard's history: its
  // endpoint and finish reason, where its reuse stopped, its tenant's tokens, its TTFT, and the prompt ids it took
  // from a remembered answer.
  void record_finished(const std::string& endpoint, const std::string& cache_salt, const RequestOutput& out,
                       int32_t answer_tokens_reused);

  ServerContext& context_;

 private:
  const bool stream_;
};

}  // namespace hearth::server
