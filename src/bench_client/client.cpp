#include "bench_client/client.h"

#include <httplib.h>

#include <chrono>

#include "bench_client/sse.h"

namespace hearth::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void set_timeouts(httplib::Client& client, double timeout_s) {
  const auto us = std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  client.set_connection_timeout(us);
  client.set_read_timeout(us);
  client.set_write_timeout(us);
}

httplib::Headers auth_headers(const RequestOptions& options) {
  httplib::Headers headers;
  if (!options.api_key.empty()) headers.emplace("Authorization", "Bearer " + options.api_key);
  return headers;
}

// Reads one chat completion answer, streamed or whole, into a RequestResult as its pieces arrive.
class AnswerReader {
 public:
  AnswerReader(RequestResult& result, Clock::time_point start) : r_(result), start_(start) {}

  // Takes a piece of the body; false stops reading (the answer is already known to be bad or done).
  bool on_bytes(std::string_view bytes, bool event_stream) {
    if (!event_stream) {
      whole_body_ += bytes;
      return true;
    }
    for (const SseEvent& ev : sse_.feed(bytes)) {
      if (!on_event(ev)) return false;
    }
    return true;
  }

  // After the transfer: classify what was received. `transfer_failed` when the connection broke.
  void finish(bool event_stream, bool transfer_failed) {
    if (r_.error != ErrorKind::kNone) return;
    if (!event_stream) return read_whole_body();
    if (done_ || finished_) return;
    fail(ErrorKind::kTruncated, transfer_failed ? "the connection dropped mid-stream"
                                                : (sse_.has_partial() ? "the stream ended inside an event"
                                                                      : "the stream ended without [DONE]"));
  }

  void fail(ErrorKind kind, std::string detail) {
    if (r_.error != ErrorKind::kNone) return;
    r_.error = kind;
    r_.error_detail = std::move(detail);
  }

  std::string whole_body_;

 private:
  bool on_event(const SseEvent& ev) {
    if (done_) return true;  // anything after [DONE] is ignored
    if (ev.data == "[DONE]") {
      done_ = true;
      return true;
    }
    json chunk = json::parse(ev.data, nullptr, /*allow_exceptions=*/false);
    if (chunk.is_discarded() || !chunk.is_object()) {
      fail(ErrorKind::kMalformedSse, "an event's data is not a JSON object: " + ev.data.substr(0, 80));
      return false;
    }
    if (chunk.contains("error")) {
      fail(ErrorKind::kStreamError, chunk["error"].dump().substr(0, 200));
      return false;
    }
    read_usage(chunk);
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array()) {
      if (chunk.contains("usage")) return true;
      fail(ErrorKind::kMalformedSse, "a chunk without choices: " + ev.data.substr(0, 80));
      return false;
    }
    for (const json& choice : *choices) {
      if (!choice.is_object()) continue;
      const auto delta = choice.find("delta");
      if (delta != choice.end() && delta->is_object()) {
        const auto content = delta->find("content");
        // The first content field marks the first token, even when empty: a server sends "" there when the
        // token's text is not complete yet (part of a UTF-8 character) or as OpenAI's opening chunk.
        if (content != delta->end() && content->is_string()) {
          if (r_.ttft_s < 0) r_.ttft_s = seconds_since(start_);
          const auto& piece = content->get_ref<const std::string&>();
          r_.text += piece;
          r_.num_content_chunks += !piece.empty();
        }
      }
      const auto reason = choice.find("finish_reason");
      if (reason != choice.end() && reason->is_string()) finished_ = true;
    }
    return true;
  }

  void read_usage(const json& chunk) {
    const auto usage = chunk.find("usage");
    if (usage == chunk.end() || !usage->is_object()) return;
    auto number = [&](const json& obj, const char* key, int64_t& out) {
      const auto it = obj.find(key);
      if (it != obj.end() && it->is_number_integer()) out = it->get<int64_t>();
    };
    number(*usage, "prompt_tokens", r_.prompt_tokens);
    number(*usage, "completion_tokens", r_.completion_tokens);
    const auto details = usage->find("prompt_tokens_details");
    if (details != usage->end() && details->is_object()) number(*details, "cached_tokens", r_.cached_tokens);
  }

  // A server that ignored "stream": a whole chat.completion object; TTFT is then the full latency.
  void read_whole_body() {
    json body = json::parse(whole_body_, nullptr, false);
    const json* message = nullptr;
    if (body.is_object() && body.contains("choices") && body["choices"].is_array() && !body["choices"].empty()) {
      const json& choice = body["choices"][0];
      if (choice.is_object() && choice.contains("message") && choice["message"].is_object()) {
        message = &choice["message"];
      }
    }
    if (message == nullptr) {
      return fail(ErrorKind::kMalformedSse, "the answer is neither an event stream nor a chat completion");
    }
    if (message->contains("content") && (*message)["content"].is_string()) r_.text = (*message)["content"];
    r_.ttft_s = r_.e2e_s;  // the first token arrived with the last
    r_.num_content_chunks = 1;
    read_usage(body);
  }

  RequestResult& r_;
  Clock::time_point start_;
  SseParser sse_;
  bool done_ = false;
  bool finished_ = false;
};

ErrorKind kind_of(httplib::Error error, double elapsed_s, double timeout_s) {
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::BindIPAddress:
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return ErrorKind::kConnect;
    case httplib::Error::ConnectionTimeout:
      return ErrorKind::kTimeout;
    default:
      // httplib reports a read timeout and a dropped connection alike; the clock tells them apart.
      return elapsed_s >= timeout_s * 0.95 ? ErrorKind::kTimeout : ErrorKind::kTruncated;
  }
}

}  // namespace

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone:
      return "none";
    case ErrorKind::kConnect:
      return "connect";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kHttp:
      return "http";
    case ErrorKind::kMalformedSse:
      return "malformed_sse";
    case ErrorKind::kTruncated:
      return "truncated";
    case ErrorKind::kStreamError:
      return "stream_error";
  }
  return "unknown";
}

Result<Endpoint> parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return make_error("--url must start with http:// (got '{}')", url);
  std::string rest = url.substr(scheme.size());
  Endpoint ep;
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  ep.base_path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!ep.base_path.empty() && ep.base_path.back() == '/') ep.base_path.pop_back();
  if (ep.base_path.size() >= 3 && ep.base_path.compare(ep.base_path.size() - 3, 3, "/v1") == 0) {
    ep.base_path.resize(ep.base_path.size() - 3);
  }
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      ep.port = std::stoi(authority.substr(colon + 1), &used);
      if (used != authority.size() - colon - 1 || ep.port <= 0 || ep.port > 65535) throw std::out_of_range("port");
    } catch (const std::exception&) {
      return make_error("bad port in --url '{}'", url);
    }
    authority.resize(colon);
  }
  if (authority.empty()) return make_error("no host in --url '{}'", url);
  ep.host = authority;
  return ep;
}

RequestResult stream_chat(const Endpoint& endpoint, const json& body, const RequestOptions& options) {
  RequestResult result;
  httplib::Client client(endpoint.host, endpoint.port);
  set_timeouts(client, options.timeout_s);
  const auto start = Clock::now();
  AnswerReader reader(result, start);
  bool event_stream = false;
  bool timed_out = false;

  httplib::Request req;
  req.method = "POST";
  req.path = endpoint.base_path + "/v1/chat/completions";
  req.headers = auth_headers(options);
  req.headers.emplace("Accept", "text/event-stream");
  req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& res) {
    result.http_status = res.status;
    event_stream = res.get_header_value("Content-Type").find("text/event-stream") != std::string::npos;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    // A server that keeps the stream alive (comments, slow tokens) must still finish within the timeout.
    if (seconds_since(start) > options.timeout_s) {
      timed_out = true;
      return false;
    }
    if (result.http_status < 200 || result.http_status >= 300) {
      reader.whole_body_.append(data, n);
      return reader.whole_body_.size() < 64 * 1024;
    }
    return reader.on_bytes(std::string_view(data, n), event_stream);
  };

  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  result.e2e_s = seconds_since(start);
  const bool bad_status = result.http_status != 0 && (result.http_status < 200 || result.http_status >= 300);
  if (bad_status) {
    reader.fail(ErrorKind::kHttp, fmt::format("HTTP {}: {}", result.http_status, reader.whole_body_.substr(0, 200)));
  } else if (timed_out) {
    reader.fail(ErrorKind::kTimeout, fmt::format("no complete answer within {} s", options.timeout_s));
  } else if (!sent && result.http_status == 0) {
    const ErrorKind kind = kind_of(error, result.e2e_s, options.timeout_s);
    reader.fail(kind, fmt::format("{} before a response ({})", error_kind_name(kind), httplib::to_string(error)));
  } else if (!sent && error != httplib::Error::Canceled) {
    const ErrorKind kind = kind_of(error, result.e2e_s, options.timeout_s);
    if (kind == ErrorKind::kTimeout) reader.fail(kind, "the stream stalled past the timeout");
  }
  reader.finish(event_stream, !sent);  // after e2e_s is set: a whole (unstreamed) answer's TTFT is its e2e
  return result;
}

std::optional<std::string> fetch_text(const Endpoint& endpoint, const std::string& path, const RequestOptions& options,
                                      double timeout_s) {
  httplib::Client client(endpoint.host, endpoint.port);
  set_timeouts(client, timeout_s);
  auto res = client.Get((endpoint.base_path + path).c_str(), auth_headers(options));
  if (!res || res->status != 200) return std::nullopt;
  return res->body;
}

}  // namespace hearth::bench
