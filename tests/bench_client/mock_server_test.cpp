// The client against an in-process mock OpenAI server that misbehaves on request: the request's "model" field
// picks the behaviour. Every failure must come back as a counted error kind, within the timeout, never a crash.

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "bench_client/client.h"
#include "bench_client/report.h"
#include "bench_client/runner.h"

namespace hearth::bench {
namespace {

using nlohmann::json;

std::string chunk(const std::string& content, const char* finish = nullptr) {
  json c = {{"object", "chat.completion.chunk"},
            {"choices", json::array({{{"index", 0},
                                      {"delta", content.empty() ? json::object() : json{{"content", content}}},
                                      {"finish_reason", finish ? json(finish) : json()}}})}};
  return "data: " + c.dump() + "\n\n";
}

std::string usage_chunk(int prompt, int completion, int cached) {
  json c = {{"choices", json::array()},
            {"usage",
             {{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}}}}}};
  return "data: " + c.dump() + "\n\n";
}

class MockServer {
 public:
  MockServer() {
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      {
        std::lock_guard lock(mutex_);
        bodies_.push_back(body);
      }
      respond(body.value("model", std::string("ok")), body, res);
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      const int n = ++num_scrapes_;
      res.set_content(fmt::format("hearth_kv_blocks_total 100\nhearth_kv_blocks{{state=\"used\"}} {}\n"
                                  "hearth_kv_blocks{{state=\"pinned\"}} 0\nhearth_kv_evictions_total {}\n"
                                  "hearth_preemptions_total 1\n",
                                  n == 2 ? 60 : 10, n * 2),
                      "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }

  ~MockServer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    server_.stop();
    thread_.join();
  }

  Endpoint endpoint() const { return Endpoint{"127.0.0.1", port_, ""}; }
  std::vector<json> bodies() {
    std::lock_guard lock(mutex_);
    return bodies_;
  }

 private:
  // Blocks a handler for up to `seconds`, or until the server stops (so no test waits for a sleeping handler).
  void stall(double seconds) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stopping_; });
  }

  void stream(httplib::Response& res, std::function<bool(httplib::DataSink&)> body) {
    res.set_chunked_content_provider("text/event-stream",
                                     [body = std::move(body)](size_t, httplib::DataSink& sink) { return body(sink); });
  }

  void respond(const std::string& mode, const json& body, httplib::Response& res) {
    auto write = [](httplib::DataSink& sink, const std::string& s) { return sink.write(s.data(), s.size()); };
    if (mode == "ok") {
      // The answer names the turn, so the runner test can find it in the next request's messages.
      const std::string answer = "answer-" + std::to_string(body["messages"].size());
      stream(res, [=](httplib::DataSink& sink) {
        const std::string opening = R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})";
        write(sink, ": keep-alive\n\n" + opening + "\n\n" + chunk(answer) + chunk(" more") + chunk("", "length") +
                        usage_chunk(100, 2, 60) + "data: [DONE]\n\n");
        sink.done();
        return true;
      });
    } else if (mode == "slow") {
      stall(10);
      res.set_content("{}", "application/json");
    } else if (mode == "stall-mid-stream") {
      stream(res, [this, write](httplib::DataSink& sink) {
        write(sink, chunk("first"));
        stall(10);
        return false;
      });
    } else if (mode == "500") {
      res.status = 500;
      res.set_content(R"({"error":{"message":"boom","type":"server_error"}})", "application/json");
    } else if (mode == "broken-sse") {
      stream(res, [write](httplib::DataSink& sink) {
        write(sink, chunk("ok") + "data: {\"choices\": [tru\n\n");
        sink.done();
        return true;
      });
    } else if (mode == "truncated") {
      stream(res, [write](httplib::DataSink& sink) {
        write(sink, chunk("partial") + "data: {\"choi");
        sink.done();
        return true;
      });
    } else if (mode == "hang-up") {
      stream(res, [write](httplib::DataSink& sink) {
        write(sink, chunk("partial"));
        return false;  // httplib drops the connection mid-body
      });
    } else if (mode == "stream-error") {
      stream(res, [write](httplib::DataSink& sink) {
        write(sink, "data: {\"error\": {\"message\": \"engine failed\"}}\n\n");
        sink.done();
        return true;
      });
    } else if (mode == "not-streamed") {
      res.set_content(
          json{{"choices",
                json::array({{{"message", {{"role", "assistant"}, {"content", "whole"}}}, {"finish_reason", "stop"}}})},
               {"usage", {{"prompt_tokens", 9}, {"completion_tokens", 1}}}}
              .dump(),
          "application/json");
    }
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<json> bodies_;
  std::atomic<int> num_scrapes_{0};
};

json body_for(const std::string& mode) {
  return {{"model", mode}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"stream", true}};
}

RequestResult ask(MockServer& server, const std::string& mode, double timeout_s = 5) {
  return stream_chat(server.endpoint(), body_for(mode), RequestOptions{"", timeout_s});
}

TEST(MockServer, AGoodStreamIsTimedAndItsUsageRead) {
  MockServer server;
  const RequestResult r = ask(server, "ok");
  ASSERT_TRUE(r.ok()) << r.error_detail;
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.text, "answer-1 more");
  EXPECT_EQ(r.num_content_chunks, 2);  // the opening chunk's empty content marks TTFT but is no token text
  EXPECT_EQ(r.prompt_tokens, 100);
  EXPECT_EQ(r.completion_tokens, 2);
  EXPECT_EQ(r.cached_tokens, 60);
  EXPECT_GE(r.ttft_s, 0);
  EXPECT_LE(r.ttft_s, r.e2e_s);
}

TEST(MockServer, ASilentServerTimesOut) {
  MockServer server;
  const RequestResult r = ask(server, "slow", 0.3);
  EXPECT_EQ(r.error, ErrorKind::kTimeout) << r.error_detail;
  EXPECT_LT(r.e2e_s, 3);
}

TEST(MockServer, AStreamThatStallsTimesOut) {
  MockServer server;
  const RequestResult r = ask(server, "stall-mid-stream", 0.3);
  EXPECT_EQ(r.error, ErrorKind::kTimeout) << r.error_detail;
  EXPECT_EQ(r.text, "first");
  EXPECT_GE(r.ttft_s, 0);
}

TEST(MockServer, HttpErrorsKeepTheirStatus) {
  MockServer server;
  const RequestResult r = ask(server, "500");
  EXPECT_EQ(r.error, ErrorKind::kHttp);
  EXPECT_EQ(r.http_status, 500);
  EXPECT_NE(r.error_detail.find("boom"), std::string::npos);
}

TEST(MockServer, BrokenSseIsMalformed) {
  MockServer server;
  const RequestResult r = ask(server, "broken-sse");
  EXPECT_EQ(r.error, ErrorKind::kMalformedSse) << r.error_detail;
}

TEST(MockServer, AStreamWithoutAnEndIsTruncated) {
  MockServer server;
  const RequestResult r = ask(server, "truncated");
  EXPECT_EQ(r.error, ErrorKind::kTruncated) << r.error_detail;
  EXPECT_EQ(r.text, "partial");
}

TEST(MockServer, AHangUpMidStreamIsTruncated) {
  MockServer server;
  const RequestResult r = ask(server, "hang-up");
  EXPECT_EQ(r.error, ErrorKind::kTruncated) << r.error_detail;
}

TEST(MockServer, AnErrorEventInTheStreamIsCounted) {
  MockServer server;
  const RequestResult r = ask(server, "stream-error");
  EXPECT_EQ(r.error, ErrorKind::kStreamError);
  EXPECT_NE(r.error_detail.find("engine failed"), std::string::npos);
}

TEST(MockServer, AWholeAnswerIsAcceptedWithTtftAtTheEnd) {
  MockServer server;
  const RequestResult r = ask(server, "not-streamed");
  ASSERT_TRUE(r.ok()) << r.error_detail;
  EXPECT_EQ(r.text, "whole");
  EXPECT_EQ(r.prompt_tokens, 9);
  EXPECT_EQ(r.cached_tokens, -1);  // not reported
  EXPECT_DOUBLE_EQ(r.ttft_s, r.e2e_s);
}

// A loopback socket bound to a free port; listening when asked. Closing it frees the port again.
int loopback_socket(bool listening, int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  if (listening && listen(fd, 1) != 0) return -1;
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

TEST(MockServer, ARefusedConnectionIsAConnectError) {
  int port = 0;
  const int fd = loopback_socket(/*listening=*/false, &port);
  ASSERT_GE(fd, 0);
  close(fd);  // nothing listens on the port now: connections are refused
  const RequestResult r = stream_chat(Endpoint{"127.0.0.1", port, ""}, body_for("ok"), RequestOptions{"", 2});
  EXPECT_EQ(r.error, ErrorKind::kConnect) << r.error_detail;
}

TEST(MockServer, AServerThatClosesBeforeAnsweringIsCounted) {
  int port = 0;
  const int listener = loopback_socket(/*listening=*/true, &port);
  ASSERT_GE(listener, 0);
  std::thread closer([listener] {
    const int conn = accept(listener, nullptr, nullptr);
    if (conn >= 0) close(conn);
  });
  const RequestResult r = stream_chat(Endpoint{"127.0.0.1", port, ""}, body_for("ok"), RequestOptions{"", 2});
  closer.join();
  close(listener);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.error == ErrorKind::kTruncated || r.error == ErrorKind::kConnect) << r.error_detail;
  EXPECT_LT(r.e2e_s, 2);
}

TEST(Runner, TurnsCarryTheConversationAndMetricsAreScraped) {
  MockServer server;
  const Workload workload(WorkloadConfig{/*users=*/3, /*turns=*/2, /*prefix_tokens=*/100, 8, /*seed=*/5});
  RunConfig config;
  config.endpoint = server.endpoint();
  config.request.timeout_s = 5;
  config.model = "ok";
  config.concurrency = 2;
  config.nonce = "n1";
  config.metrics_interval_s = 0;  // before and after only, so the scrape count is known
  const RunResult run = run_workload(workload, config, "test");
  ASSERT_EQ(run.records.size(), 6u);
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  int second_turns = 0;
  for (const json& b : bodies) {
    EXPECT_EQ(b["messages"][0]["content"].get<std::string>().rfind("Session n1.\n", 0), 0u);
    if (b["messages"].size() == 4) {
      ++second_turns;
      EXPECT_EQ(b["messages"][2]["role"], "assistant");
      EXPECT_EQ(b["messages"][2]["content"], "answer-2 more");  // the first turn's answer (2 messages then)
    }
  }
  EXPECT_EQ(second_turns, 3);
  const Report report = make_report(run, 2);
  EXPECT_EQ(report.overall.num_ok, 6);
  EXPECT_EQ(report.overall.prompt_tokens, 600);
  EXPECT_DOUBLE_EQ(*report.overall.hit_rate(), 0.6);
  ASSERT_TRUE(run.metrics.available);
  EXPECT_EQ(run.metrics.kv_blocks_used_max, 60);  // the scrape after the run saw 60 used blocks
  EXPECT_EQ(run.metrics.evictions, 2);
}

TEST(Runner, AMisbehavingServerIsReportedByKind) {
  MockServer server;
  const Workload workload(WorkloadConfig{/*users=*/2, /*turns=*/2, /*prefix_tokens=*/50, 8, /*seed=*/5});
  RunConfig config;
  config.endpoint = server.endpoint();
  config.request.timeout_s = 5;
  config.extra = {{"model", "500"}};
  const RunResult run = run_workload(workload, config, "bad");
  const Report report = make_report(run, 2);
  EXPECT_EQ(report.overall.num_requests, 4);
  EXPECT_EQ(report.overall.num_ok, 0);
  EXPECT_EQ(report.overall.errors.at("http_500"), 4);
  EXPECT_EQ(report.turns[1].errors.at("http_500"), 2);
  const std::string table = format_table(report);
  EXPECT_NE(table.find("errors: http_500 4"), std::string::npos) << table;
}

}  // namespace
}  // namespace hearth::bench

namespace hearth::bench {
namespace {

TEST(Runner, OpenLoopStartsRequestsNoEarlierThanTheirArrivals) {
  MockServer server;
  const Workload workload(WorkloadConfig{/*users=*/2, /*turns=*/3, /*prefix_tokens=*/50, 8, /*seed=*/9});
  RunConfig config;
  config.endpoint = server.endpoint();
  config.request.timeout_s = 5;
  config.model = "ok";
  config.rate = 200;  // requests/s: arrivals a few ms apart
  config.metrics_interval_s = 0;
  const RunResult run = run_workload(workload, config, "open");
  ASSERT_EQ(run.records.size(), 6u);
  std::vector<double> starts;
  for (const TurnRecord& r : run.records) {
    EXPECT_TRUE(r.result.ok()) << r.result.error_detail;
    starts.push_back(r.start_s);
  }
  std::sort(starts.begin(), starts.end());
  const auto arrivals = poisson_arrivals(6, 200, 9);
  for (size_t i = 0; i < starts.size(); ++i) EXPECT_GE(starts[i], arrivals[i]) << i;
}

TEST(Runner, NoRequestStartsAfterTheDuration) {
  MockServer server;
  const Workload workload(WorkloadConfig{/*users=*/2, /*turns=*/2, /*prefix_tokens=*/50, 8, /*seed=*/9});
  RunConfig config;
  config.endpoint = server.endpoint();
  config.request.timeout_s = 5;
  config.model = "ok";
  config.duration_s = 1e-9;  // over before the first request
  config.metrics_interval_s = 0;
  const RunResult run = run_workload(workload, config, "short");
  EXPECT_TRUE(run.records.empty());
  EXPECT_EQ(run.num_not_started, 4);
  EXPECT_TRUE(server.bodies().empty());
}

}  // namespace
}  // namespace hearth::bench
