#pragma once
// A real redis-server for tests: on a free loopback port, in a fresh directory, with no persistence (--save ''
// --appendonly no), so a restart comes back empty. Tests skip (GTEST_SKIP in the fixture) only when redis-server is
// not installed; scripts/install-deps.sh installs it, so CI always runs them.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace hearth::testing {

inline std::string find_redis_server() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
    const std::string path = std::string(dir) + "/redis-server";
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return {};
}

inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

class RedisTestServer {
 public:
  // `extra`: more redis-server arguments (e.g. {"--requirepass", "secret"}).
  explicit RedisTestServer(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
    binary_ = find_redis_server();
    if (binary_.empty()) return;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(HEARTH_TEST_TMP_DIR) /
           fmt::format("redis-{}-{}-{}", info->test_suite_name(), info->name(), ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    port_ = free_loopback_port();
    start();
  }
  ~RedisTestServer() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisTestServer(const RedisTestServer&) = delete;
  RedisTestServer& operator=(const RedisTestServer&) = delete;

  bool installed() const { return !binary_.empty(); }
  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string url() const { return fmt::format("redis://127.0.0.1:{}", port_); }

  // Starts it (on the same port, empty) and waits until it answers PING.
  void start() {
    if (pid_ > 0 || binary_.empty()) return;
    std::vector<std::string> args = {binary_,
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir_.string(),
                                     "--logfile",
                                     (dir_ / "redis.log").string()};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary_.c_str(), argv.data());
      std::_Exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ping()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a process starting: nothing to wait on
    }
    ADD_FAILURE() << "redis-server did not answer on port " << port_;
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // Runs one command (binary-safe arguments) and returns its reply as a string ("(nil)", an integer in decimal, or
  // the string); empty on a failure.
  std::string command(const std::vector<std::string>& args, const std::string& password = "") const {
    std::vector<std::string> out = run(args, password);
    return out.empty() ? std::string() : out[0];
  }
  // The same for a command that answers an array (KEYS): its elements.
  std::vector<std::string> command_list(const std::vector<std::string>& args) const { return run(args, "", true); }

 private:
  std::vector<std::string> run(const std::vector<std::string>& args, const std::string& password,
                               bool list = false) const {
    redisContext* c = redisConnect("127.0.0.1", port_);
    if (c == nullptr || c->err != 0) {
      if (c != nullptr) redisFree(c);
      return {};
    }
    const auto text = [](const redisReply* r) -> std::string {
      if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
      if (r->type == REDIS_REPLY_NIL) return "(nil)";
      return r->str != nullptr ? std::string(r->str, r->len) : std::string();
    };
    if (!password.empty()) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %s", password.c_str()));
      if (r != nullptr) freeReplyObject(r);
    }
    std::vector<const char*> argv;
    std::vector<size_t> argvlen;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      argvlen.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), argvlen.data()));
    std::vector<std::string> out;
    if (r != nullptr) {
      if (list && r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements; ++i) out.push_back(text(r->element[i]));
      } else if (!list) {
        out.push_back(text(r));
      }
      freeReplyObject(r);
    }
    redisFree(c);
    return out;
  }

  bool ping() const {
    redisContext* c = redisConnect("127.0.0.1", port_);
    bool ok = false;
    if (c != nullptr && c->err == 0) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      ok = r != nullptr && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR);  // NOAUTH is alive too
      if (r != nullptr) freeReplyObject(r);
    }
    if (c != nullptr) redisFree(c);
    return ok;
  }

  std::vector<std::string> extra_;
  std::string binary_;
  std::filesystem::path dir_;
  int port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace hearth::testing
