#pragma once
// The HTTP request and response as the routes see them, independent of the transport (http_transport.h): the
// route code reads a parsed, size-checked request and returns a response, or a ResponseSource whose body (and, for
// a response decided at the end, whose status) arrives over time. Nothing here knows sockets.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hearth::server {

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string path;                                          // the target before '?', as sent
  std::vector<std::pair<std::string, std::string>> query;    // percent-decoded, in order
  std::vector<std::pair<std::string, std::string>> headers;  // as sent
  std::string body;  // complete (the transport enforces the size limit for every framing)
  // The caller's tenant (--api-keys), set by authentication, never from the wire; empty without tenants. Routes
  // scope every cache_salt with it (tenant_keys.h).
  std::string tenant;

  // The first header named `name` (case-insensitive), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const;
  // The first query parameter named `name`, or nullopt.
  std::optional<std::string_view> param(std::string_view name) const;
};

// GET /health: the liveness probe both fronts answer on the I/O thread (HttpTransportConfig::answer_inline).
[[nodiscard]] inline bool is_health_probe(const HttpRequest& req) { return req.method == "GET" && req.path == "/health"; }

class ResponseSource;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // A streamed response (SSE): the head (status, headers) is sent, then every piece of body as it comes, with
  // chunked transfer encoding; the connection closes at the end.
  bool streamed = false;
  // When set, the response comes from this source instead (ResponseSource::pull gives the head, then the body).
  std::shared_ptr<ResponseSource> source;

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

// A response produced over time, driven by the transport on the connection's own executor: start() once, then
// pull() whenever the source has called `wake` (from any thread) or a keep-alive is due, until a chunk is `done`.
// The transport also watches the connection: a client that leaves, or stops reading, gets cancel() (once), and
// pull() is not called again. The source must not block in any of these calls.
class ResponseSource {
 public:
  virtual ~ResponseSource() = default;

  struct Chunk {
    std::optional<HttpResponse> head;  // first: the status and headers (a whole response: its body too)
    std::string data;                  // more body of a streamed response
    bool done = false;                 // nothing follows
  };

  virtual void start(std::function<void()> wake) = 0;
  [[nodiscard]] virtual Chunk pull() = 0;
  virtual void cancel() = 0;
  // A streamed source idle this long gets keep_alive() written (0: never).
  virtual std::chrono::milliseconds keep_alive_interval() const { return std::chrono::milliseconds(0); }
  virtual std::string keep_alive() { return {}; }
};

}  // namespace hearth::server
