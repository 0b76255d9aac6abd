#pragma once
// HttpTransport: HTTP/1.1 over TCP with Boost.Beast and Asio, event-driven: a few I/O threads serve every
// connection (no thread per connection or per stream), and route handlers run on a small worker pool.
//
// What it promises, for every connection:
//   - the request head must arrive within header_timeout and be at most max_header_bytes;
//   - the body, Content-Length or chunked (Transfer-Encoding compared case-insensitively), is at most
//     max_body_bytes: a declared length beyond it is refused at once, a chunked one as soon as it crosses it (413);
//     while it arrives, each read must make progress within body_idle_timeout;
//   - an idle keep-alive connection closes after keep_alive_timeout;
//   - at most max_connections are open; one more is answered 503 and closed;
//   - a request with a large body is handled on a small pool of its own, so large bodies never delay small ones;
//   - while a ResponseSource produces a response, the socket is watched: a client that closes or resets it, or
//     does not read what was written within write_timeout (or lets max_pending_bytes pile up), cancels the source.
// Errors the transport finds itself (400, 413, 431, 503) are rendered by the server's error callback, so they look
// like every other error.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/cors.h"
#include "server/http/http_types.h"
#include "util/result.h"

namespace hearth::server {

struct HttpTransportConfig {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 picks a free one
  // More ports serving the same handler (e.g. --ollama-port 11434, so an app configured for a local Ollama finds the
  // server): one listening socket each on `host`, sharing the threads, limits and connection cap (0 picks a free one).
  std::vector<int> extra_ports;
  size_t max_body_bytes = 4u << 20;
  size_t max_header_bytes = 16u << 10;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_idle_timeout{10'000};
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::chrono::milliseconds write_timeout{30'000};
  size_t max_pending_bytes = 4u << 20;  // written but not yet taken by a slow client
  int max_connections = 1024;
  int listen_backlog = 1024;
  int io_threads = 2;
  int worker_threads = 8;  // route handlers (they may wait for an engine step: /metrics, /v1/cache/explain)
  // Requests with a body of at least heavy_body_bytes run on a pool of their own, heavy_worker_threads strong.
  // Preparing a request is linear in its body (every validation and compile step is, or refuses by count first), so
  // the size says what it may cost: a burst of 4 MiB bodies then holds at most those threads (and that many cores),
  // and a normal request never queues behind them.
  size_t heavy_body_bytes = 64u << 10;
  int heavy_worker_threads = 2;
  // Requests this accepts are answered on the connection's I/O thread, never queued behind the workers, so a
  // liveness probe answers while every worker is busy. It and the handler must be cheap and never block on such a
  // request (GET /health). Empty: every request goes to the workers.
  std::function<bool(const HttpRequest&)> answer_inline;
  // Browser origins allowed to call (--allow-origin): every response to a request from one carries
  // Access-Control-Allow-Origin, and their preflights are answered here (cors.h). Empty: no CORS.
  CorsPolicy cors;
  // The path a request's path stands for (an alias such as /chat/completions for /v1/chat/completions), or nullopt
  // to keep it; applied before anything else looks at the request. Empty: paths are kept as sent.
  std::function<std::optional<std::string>(std::string_view path)> alias_path;
};

class HttpTransport {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  // The response for an error the transport detects (status and a message for the client); `path` is the
  // request's path when its head was read (so a route can keep its own error shape), else empty.
  using ErrorRenderer = std::function<HttpResponse(int status, const std::string& message, std::string_view path)>;

  HttpTransport(HttpTransportConfig config, Handler handler, ErrorRenderer render_error);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds and listens; fails with the reason (address in use, bad host).
  [[nodiscard]] Result<void> bind();
  int bound_port() const;
  // The extra_ports as bound (a 0 resolved), in order. Requires bind().
  std::vector<int> bound_extra_ports() const;
  // Serves until stop(). Requires bind().
  void run();
  // Stops accepting new connections; open ones carry on. Any thread; idempotent.
  void stop_accepting();
  // Closes every connection and makes run() return. Any thread; idempotent.
  void stop();
  int num_connections() const;

  struct Impl;  // opaque: defined, with the connections, in http_transport.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::server
