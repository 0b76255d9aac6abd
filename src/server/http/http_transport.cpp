#include "server/http/http_transport.h"

#include <fmt/format.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "util/log.h"

namespace hearth::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding of a query component; '+' is a space. Malformed escapes are kept as they are.
std::string url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void split_target(std::string_view target, HttpRequest& req) {
  const size_t q = target.find('?');
  req.path = std::string(target.substr(0, q));
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (!pair.empty()) {
      req.query.emplace_back(url_decode(pair.substr(0, eq)),
                             eq == std::string_view::npos ? std::string() : url_decode(pair.substr(eq + 1)));
    }
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
}

// The status line and headers of `res`; `length` is the body size, or nullopt for chunked transfer.
// `cors_origin`: the Access-Control-Allow-Origin to add (empty: none), unless the response has its own.
std::string render_head(const HttpResponse& res, std::optional<size_t> length, bool keep_alive,
                        std::string_view cors_origin) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(res.status));
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\n", res.status,
                                std::string_view(reason.data(), reason.size()), res.content_type);
  bool has_cors = false;
  for (const auto& [name, value] : res.headers) {
    out += fmt::format("{}: {}\r\n", name, value);
    has_cors = has_cors || beast::iequals(name, "Access-Control-Allow-Origin");
  }
  if (!cors_origin.empty() && !has_cors) {
    out += fmt::format("Access-Control-Allow-Origin: {}\r\n", cors_origin);
    if (cors_origin != "*") out += "Vary: Origin\r\n";
  }
  out += length ? fmt::format("Content-Length: {}\r\n", *length) : std::string("Transfer-Encoding: chunked\r\n");
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

std::string render_chunk(std::string_view data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

}  // namespace

class Session;

struct HttpTransport::Impl {
  Impl(HttpTransportConfig c, Handler h, ErrorRenderer e)
      : config(std::move(c)),
        handler(std::move(h)),
        render_error(std::move(e)),
        workers(config.worker_threads),
        heavy_workers(config.heavy_worker_threads) {}

  // One listening socket: the main port, or one of extra_ports. Each retries a failed accept on its own timer.
  struct Listener {
    explicit Listener(net::io_context& ioc) : acceptor(ioc), retry(ioc) {}
    tcp::acceptor acceptor;
    net::steady_timer retry;
    int port = 0;
  };
  void accept(Listener& listener);
  void on_accept(Listener& listener, beast::error_code ec, tcp::socket socket);
  void close_all();

  HttpTransportConfig config;
  Handler handler;
  ErrorRenderer render_error;
  net::io_context ioc;
  std::vector<std::unique_ptr<Listener>> listeners;  // [0]: config.port, then config.extra_ports; set by bind()
  net::thread_pool workers;
  net::thread_pool heavy_workers;  // requests with a body of at least config.heavy_body_bytes
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
  std::atomic<int> num_connections{0};
  std::atomic<bool> stopped{false};
  std::mutex sessions_mutex;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;  // guarded by sessions_mutex
};

namespace {

// The handler's response; a route that throws becomes a 500.
HttpResponse handle(HttpTransport::Impl& impl, const HttpRequest& req) {
  try {
    return impl.handler(req);
  } catch (const std::exception& e) {
    return impl.render_error(500, std::string("internal error: ") + e.what(), req.path);
  } catch (...) {
    return impl.render_error(500, "internal error", req.path);
  }
}

}  // namespace

// One connection. Every member is touched only on the connection's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpTransport::Impl& impl, bool counted)
      : stream_(std::move(socket)), impl_(impl), counted_(counted), keep_alive_timer_(stream_.get_executor()) {}
  ~Session() {
    if (counted_) impl_.num_connections--;
    std::lock_guard lock(impl_.sessions_mutex);
    impl_.sessions.erase(this);
  }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }
  // Too many connections: a 503 and the end.
  void reject() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->respond_whole(
          self->impl_.render_error(
              503, fmt::format("too many open connections (at most {})", self->impl_.config.max_connections), {}),
          false);
    });
  }
  void close_from_any_thread() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
  }

 private:
  void read_header();
  void on_header(beast::error_code ec);
  void read_body();
  void on_body(beast::error_code ec);
  bool refuse_on_read_error(beast::error_code ec);
  void dispatch();
  void respond(HttpResponse res);
  void respond_whole(const HttpResponse& res, bool keep_alive);
  void start_source(std::shared_ptr<ResponseSource> source);
  void pull();
  void watch();
  void arm_keep_alive();
  void enqueue(std::string bytes);
  void flush();
  void cancel_source();
  void linger_close();
  void linger_close_drain();
  void close();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpTransport::Impl& impl_;
  bool counted_;
  bool first_request_ = true;
  bool keep_alive_ = false;  // after the pending writes, read the next request
  bool closed_ = false;
  std::shared_ptr<ResponseSource> source_;
  bool streamed_ = false;
  bool source_done_ = false;
  bool cancelled_ = false;
  std::deque<std::string> pending_;
  size_t pending_bytes_ = 0;
  bool writing_ = false;
  Clock::time_point last_write_ = Clock::now();
  net::steady_timer keep_alive_timer_;
  std::array<char, 512> watch_buf_{};
  std::string cors_origin_;  // the current request's Access-Control-Allow-Origin (empty: none)
};

void Session::read_header() {
  cors_origin_.clear();
  source_.reset();
  source_done_ = false;
  streamed_ = false;
  cancelled_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(impl_.config.max_header_bytes));
  parser_->body_limit(impl_.config.max_body_bytes);
  // The first request's head must arrive within the header deadline; a kept-alive connection may idle for the
  // keep-alive time before its next head is complete.
  stream_.expires_after(first_request_ ? impl_.config.header_timeout : impl_.config.keep_alive_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

// Answers a read error that deserves a response (413, 431, 400); closes quietly on the rest. True when handled.
bool Session::refuse_on_read_error(beast::error_code ec) {
  if (!ec) return false;
  // A browser reads the error only with CORS headers. A body too large: the head, Origin included, was read. A
  // head too large or malformed: its Origin may be unread, which an allowed "*" still answers (only "*" matches
  // the empty origin).
  const auto origin = parser_->get()[http::field::origin];
  if (!origin.empty() || ec != http::error::body_limit) {
    cors_origin_ = impl_.config.cors.allow_origin(std::string_view(origin.data(), origin.size())).value_or("");
  }
  if (ec == http::error::body_limit) {
    const auto target_view = parser_->get().target();
    const std::string_view target(target_view.data(), target_view.size());
    respond_whole(impl_.render_error(413,
                                     fmt::format("the request body exceeds the limit of {} bytes (--max-body-bytes)",
                                                 impl_.config.max_body_bytes),
                                     target.substr(0, target.find('?'))),
                  false);
  } else if (ec == http::error::header_limit) {
    respond_whole(
        impl_.render_error(431, fmt::format("the request head exceeds {} bytes", impl_.config.max_header_bytes), {}),
        false);
  } else if (ec.category() == http::make_error_code(http::error::bad_version).category() &&
             ec != http::error::end_of_stream && ec != http::error::partial_message) {
    respond_whole(impl_.render_error(400, "malformed HTTP request: " + ec.message(), {}), false);
  } else {
    close();  // the peer left, reset, or was too slow (timeout): nobody to answer
  }
  return true;
}

void Session::on_header(beast::error_code ec) {
  if (refuse_on_read_error(ec)) return;
  first_request_ = false;
  auto& msg = parser_->get();
  if (beast::iequals(msg[http::field::expect], "100-continue")) {
    enqueue("HTTP/1.1 100 Continue\r\n\r\n");
    flush();
  }
  read_body();
}

void Session::read_body() {
  if (parser_->is_done()) return dispatch();
  stream_.expires_after(impl_.config.body_idle_timeout);
  http::async_read_some(stream_, buffer_, *parser_,
                        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void Session::on_body(beast::error_code ec) {
  if (refuse_on_read_error(ec)) return;
  read_body();
}

void Session::dispatch() {
  stream_.expires_never();
  auto& msg = parser_->get();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  split_target(std::string_view(msg.target().data(), msg.target().size()), req);
  for (const auto& field : msg) {
    req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  req.body = std::move(msg.body());
  keep_alive_ = msg.keep_alive();
  if (impl_.config.alias_path) {
    if (auto canonical = impl_.config.alias_path(req.path)) req.path = std::move(*canonical);
  }
  cors_origin_ = impl_.config.cors.allow_origin(req.header("Origin")).value_or("");
  if (auto preflight = impl_.config.cors.preflight(req)) return respond(std::move(*preflight));
  if (impl_.config.answer_inline && impl_.config.answer_inline(req)) return respond(handle(impl_, req));
  auto& pool = req.body.size() >= impl_.config.heavy_body_bytes ? impl_.heavy_workers : impl_.workers;
  net::post(pool, [self = shared_from_this(), req = std::move(req)] {
    HttpResponse res = handle(self->impl_, req);
    net::post(self->stream_.get_executor(), [self, res = std::move(res)]() mutable { self->respond(std::move(res)); });
  });
}

void Session::respond(HttpResponse res) {
  if (closed_) {
    if (res.source) res.source->cancel();
    return;
  }
  if (res.source) return start_source(std::move(res.source));
  respond_whole(res, keep_alive_ && !impl_.stopped);
}

void Session::respond_whole(const HttpResponse& res, bool keep_alive) {
  keep_alive_ = keep_alive;
  enqueue(render_head(res, res.body.size(), keep_alive, cors_origin_) + res.body);
  source_done_ = true;
  flush();
}

void Session::start_source(std::shared_ptr<ResponseSource> source) {
  source_ = std::move(source);
  source_done_ = false;
  keep_alive_ = false;  // a produced response ends the connection
  std::weak_ptr<Session> weak = weak_from_this();
  auto executor = stream_.get_executor();
  source_->start([weak, executor] {
    net::post(executor, [weak] {
      if (auto self = weak.lock()) self->pull();
    });
  });
  watch();
  arm_keep_alive();
  pull();
}

void Session::pull() {
  if (!source_ || source_done_ || cancelled_ || closed_) return;
  for (;;) {
    ResponseSource::Chunk chunk = source_->pull();
    const bool empty = !chunk.head && chunk.data.empty();
    if (chunk.head) {
      streamed_ = chunk.head->streamed;
      enqueue(streamed_ ? render_head(*chunk.head, std::nullopt, false, cors_origin_)
                        : render_head(*chunk.head, chunk.head->body.size(), false, cors_origin_) + chunk.head->body);
    }
    if (!chunk.data.empty() && streamed_) enqueue(render_chunk(chunk.data));
    if (chunk.done) {
      if (streamed_) enqueue("0\r\n\r\n");
      source_done_ = true;
      break;
    }
    if (empty || closed_) break;
  }
  flush();
}

// Reads the socket while a response is produced: the only way to learn that the client closed or reset it.
void Session::watch() {
  stream_.socket().async_read_some(net::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
    if (self->source_done_ || self->closed_) return;
    if (ec) {
      self->cancel_source();
      self->close();
      return;
    }
    self->watch();  // bytes after the request (pipelining) are ignored
  });
}

void Session::arm_keep_alive() {
  const auto interval = source_->keep_alive_interval();
  if (interval.count() <= 0) return;
  keep_alive_timer_.expires_after(interval);
  keep_alive_timer_.async_wait([self = shared_from_this(), interval](beast::error_code ec) {
    if (ec || self->source_done_ || self->cancelled_ || self->closed_) return;
    if (Clock::now() - self->last_write_ >= interval && self->streamed_) {
      const std::string ping = self->source_->keep_alive();
      if (!ping.empty()) self->enqueue(render_chunk(ping));
      self->flush();
    }
    self->arm_keep_alive();
  });
}

void Session::enqueue(std::string bytes) {
  pending_bytes_ += bytes.size();
  pending_.push_back(std::move(bytes));
  if (pending_bytes_ > impl_.config.max_pending_bytes && source_ && !source_done_) {
    cancel_source();  // the client does not read what it asked for
    close();
  }
}

void Session::flush() {
  if (closed_ || writing_) return;
  if (pending_.empty()) {
    if (!source_done_) return;
    source_.reset();  // the response is out: what produced it (a generation, in flight until now) can go
    return keep_alive_ ? read_header() : linger_close();
  }
  writing_ = true;
  stream_.expires_after(impl_.config.write_timeout);
  net::async_write(stream_, net::buffer(pending_.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_ = false;
    self->last_write_ = Clock::now();
    if (self->pending_.empty()) return;
    self->pending_bytes_ -= self->pending_.front().size();
    self->pending_.pop_front();
    if (ec) {
      self->cancel_source();
      self->close();
      return;
    }
    self->flush();
  });
}

void Session::cancel_source() {
  if (!source_ || source_done_ || cancelled_) return;
  cancelled_ = true;
  source_->cancel();
}

// Ends the response, then reads (and drops) what the client still sends for a moment before closing: closing with
// unread input would reset the connection and could destroy the response (a 413 to a client still sending).
void Session::linger_close() {
  if (closed_) return;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::seconds(1));
  stream_.async_read_some(net::buffer(watch_buf_), [self = shared_from_this()](beast::error_code e, size_t) {
    if (e) return self->close();
    self->linger_close_drain();
  });
}

void Session::linger_close_drain() {
  if (closed_) return;
  stream_.async_read_some(net::buffer(watch_buf_), [self = shared_from_this()](beast::error_code e, size_t) {
    if (e) return self->close();
    self->linger_close_drain();
  });
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  cancel_source();
  keep_alive_timer_.cancel();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.socket().close(ec);
}

void HttpTransport::Impl::accept(Listener& listener) {
  listener.acceptor.async_accept(net::make_strand(ioc), [this, &listener](beast::error_code ec, tcp::socket socket) {
    on_accept(listener, ec, std::move(socket));
  });
}

void HttpTransport::Impl::on_accept(Listener& listener, beast::error_code ec, tcp::socket socket) {
  if (stopped || ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors or a transient failure: try again shortly instead of spinning.
    spdlog::warn("accept failed: {}", ec.message());
    listener.retry.expires_after(std::chrono::milliseconds(50));
    listener.retry.async_wait([this, &listener](beast::error_code e) {
      if (!e) accept(listener);
    });
    return;
  }
  const bool room = num_connections.fetch_add(1) < config.max_connections;
  if (!room) num_connections--;
  auto session = std::make_shared<Session>(std::move(socket), *this, room);
  {
    std::lock_guard lock(sessions_mutex);
    sessions.emplace(session.get(), session);
  }
  if (room) {
    session->start();
  } else {
    session->reject();
  }
  accept(listener);
}

void HttpTransport::Impl::close_all() {
  std::vector<std::shared_ptr<Session>> open;
  {
    std::lock_guard lock(sessions_mutex);
    for (auto& [ptr, weak] : sessions) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
  }
  for (auto& s : open) s->close_from_any_thread();
}

HttpTransport::HttpTransport(HttpTransportConfig config, Handler handler, ErrorRenderer render_error)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(handler), std::move(render_error))) {}

HttpTransport::~HttpTransport() {
  stop();
  impl_->workers.join();
  impl_->heavy_workers.join();
}

Result<void> HttpTransport::bind() {
  beast::error_code ec;
  const auto address = net::ip::make_address(impl_->config.host, ec);
  if (ec) return make_error("cannot listen on {}: not an IP address ({})", impl_->config.host, ec.message());
  std::vector<int> ports = {impl_->config.port};
  ports.insert(ports.end(), impl_->config.extra_ports.begin(), impl_->config.extra_ports.end());
  for (const int port : ports) {
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
    auto listener = std::make_unique<Impl::Listener>(impl_->ioc);
    auto& acceptor = listener->acceptor;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(impl_->config.listen_backlog, ec);
    if (ec) return make_error("cannot listen on {}:{}: {}", impl_->config.host, port, ec.message());
    listener->port = acceptor.local_endpoint().port();
    impl_->listeners.push_back(std::move(listener));
  }
  impl_->guard.emplace(impl_->ioc.get_executor());
  for (auto& listener : impl_->listeners) impl_->accept(*listener);
  return {};
}

int HttpTransport::bound_port() const {
  return impl_->listeners.empty() ? 0 : impl_->listeners.front()->port;
}

std::vector<int> HttpTransport::bound_extra_ports() const {
  std::vector<int> ports;
  for (size_t i = 1; i < impl_->listeners.size(); ++i) ports.push_back(impl_->listeners[i]->port);
  return ports;
}
int HttpTransport::num_connections() const {
  return impl_->num_connections.load();
}

void HttpTransport::run() {
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->config.io_threads; ++i) threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (auto& t : threads) t.join();
}

void HttpTransport::stop_accepting() {
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ec;
    for (auto& listener : impl->listeners) listener->acceptor.close(ec);
  });
}

void HttpTransport::stop() {
  if (impl_->stopped.exchange(true)) return;
  stop_accepting();
  impl_->close_all();
  // run() returns once the closed connections' pending operations have completed (with operation_aborted).
  net::post(impl_->ioc, [impl = impl_.get()] {
    impl->guard.reset();
    for (auto& listener : impl->listeners) listener->retry.cancel();
  });
}

}  // namespace hearth::server
