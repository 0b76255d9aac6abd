#pragma once
// One streaming chat request against an OpenAI-compatible server, timed from the client's side. Whatever the
// server does (refuses the connection, stalls, answers 500, sends broken SSE, hangs up mid-stream), the call
// returns a RequestResult that says what happened; it never throws and never waits past its timeout.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "util/result.h"

namespace hearth::bench {

// How a request failed. Reported by name (error_kind_name), so a new kind shows up in every report.
enum class ErrorKind {
  kNone,
  kConnect,       // the connection could not be made (refused, unreachable, bad host)
  kTimeout,       // no complete answer within the timeout
  kHttp,          // a non-2xx status; the status is in http_status
  kMalformedSse,  // an event whose data is not JSON (or not a chat chunk), or a body that is neither SSE nor JSON
  kTruncated,     // the stream ended (or the connection dropped) before a finish reason or [DONE]
  kStreamError,   // the server sent an error object inside the stream
};

[[nodiscard]] const char* error_kind_name(ErrorKind kind);

struct Endpoint {
  std::string host;  // "127.0.0.1"
  int port = 80;
  std::string base_path;  // "" or e.g. "/api" when the URL was http://host:port/api (without a trailing /v1)
};

// Parses "http://host[:port][/path]" (a trailing "/v1" is dropped: the client adds the /v1/... routes).
[[nodiscard]] Result<Endpoint> parse_url(const std::string& url);

struct RequestOptions {
  std::string api_key;  // sent as "Authorization: Bearer ..." when not empty
  double timeout_s = 600;
};

struct RequestResult {
  ErrorKind error = ErrorKind::kNone;
  std::string error_detail;  // a short human-readable reason
  int http_status = 0;
  double ttft_s = -1;  // request sent to first content token; -1 when none came
  double e2e_s = 0;    // request sent to the end of the answer (or the failure)
  std::string text;    // the assistant's answer (the concatenated content deltas)
  int num_content_chunks = 0;
  // From the server's usage object; -1 when the server did not report it.
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  int64_t cached_tokens = -1;
  [[nodiscard]] bool ok() const { return error == ErrorKind::kNone; }
};

// POSTs `body` (a chat completion request with "stream": true) to <endpoint>/v1/chat/completions and reads the
// SSE answer. TTFT is taken at the first chunk whose delta has a "content" string, even an empty one (servers
// send the first such chunk with the first token; a role-only chunk does not count).
[[nodiscard]] RequestResult stream_chat(const Endpoint& endpoint, const nlohmann::json& body,
                                        const RequestOptions& options);

// GET <endpoint>/<path> with a short timeout; the body on a 200, nullopt otherwise (e.g. a server without
// /metrics).
[[nodiscard]] std::optional<std::string> fetch_text(const Endpoint& endpoint, const std::string& path,
                                                    const RequestOptions& options, double timeout_s);

}  // namespace hearth::bench
