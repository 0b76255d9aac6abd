#pragma once
// EngineLoop: runs Engine::step() on its own thread. Callers submit requests from any thread and read each
// request's outputs through a RequestHandle. Only the loop thread touches the Engine.
//
// A handle's destructor aborts its request if it has not finished, so a dropped HTTP connection frees the
// request's blocks within one step.

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace hearth {

class EngineLoop;

class RequestHandle {
 public:
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;
  ~RequestHandle();  // aborts the request unless it finished

  RequestId id() const { return id_; }

  // Blocks until the request has news. Returns nullopt once the final output (finished == true) was returned.
  std::optional<RequestOutput> next();
  // Like next(), but gives up after `timeout` and returns nullopt with *timed_out set (for disconnect checks).
  std::optional<RequestOutput> next_for(std::chrono::milliseconds timeout, bool* timed_out);

  void abort();

 private:
  friend class EngineLoop;
  struct Channel {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<RequestOutput> outputs;
    bool finished = false;  // the final output was queued
    bool drained = false;   // the final output was taken
  };
  RequestHandle(EngineLoop& loop, RequestId id, std::shared_ptr<Channel> channel)
      : loop_(loop), id_(id), channel_(std::move(channel)) {}

  EngineLoop& loop_;
  RequestId id_;
  std::shared_ptr<Channel> channel_;
};

class EngineLoop {
 public:
  // Starts the loop thread. `engine` must outlive the loop.
  explicit EngineLoop(Engine& engine);
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;
  ~EngineLoop();  // aborts everything still running and joins

  // Queues a request. Fails at once, with the engine's message, when the request can never run or the server is
  // overloaded.
  [[nodiscard]] Result<std::unique_ptr<RequestHandle>> submit(RequestSpec spec);

  void abort(RequestId id);

  // Runs `fn` on the loop thread between steps and waits for it (metrics snapshots, pins, admin calls).
  void run_on_loop(const std::function<void(Engine&)>& fn);

  // Stops the loop: with drain, finishes every request first; without, aborts them. Idempotent.
  void stop(bool drain);

 private:
  using Command = std::function<void()>;
  void post(Command command);
  void thread_main();
  void run_commands();
  void deliver(std::vector<RequestOutput> outputs);

  Engine& engine_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Command> commands_;
  bool stopping_ = false;
  bool drain_ = false;
  std::unordered_map<RequestId, std::shared_ptr<RequestHandle::Channel>> channels_;  // loop thread only
  std::thread thread_;
};

}  // namespace hearth
