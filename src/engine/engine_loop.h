#pragma once
// EngineLoop: runs Engine::step() on its own thread. Callers submit requests from any thread and read each
// request's outputs through a RequestHandle. Only the loop thread touches the Engine; this header does not even
// show it (callers see engine_types.h only).
//
// submit() never waits for the engine: it validates on the caller's thread against the limits the loop published
// after its last step (check_request), queues the request and returns its handle. The engine validates again when
// it takes the request; if that fails (the pins grew in between), the handle's only output is a final one with
// `error` set. A handle's destructor aborts its request if it has not finished, so a dropped connection frees the
// request's blocks within one step.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine_types.h"
#include "kv/kv_cache_manager.h"
#include "sched/admission.h"

namespace hearth {

class Engine;
class EngineLoop;

class RequestHandle {
 public:
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;
  ~RequestHandle();  // aborts the request unless it finished

  // Blocks until the request has news. Returns nullopt once the final output (finished == true) was returned.
  std::optional<RequestOutput> next();
  // Like next(), but gives up after `timeout` and returns nullopt with *timed_out set (an SSE keep-alive is due).
  std::optional<RequestOutput> next_for(std::chrono::milliseconds timeout, bool* timed_out);
  // Never blocks: the next output if one is queued.
  std::optional<RequestOutput> try_next();
  // Calls `notify` (on the loop thread, never under a lock the caller holds) whenever outputs are queued, and once
  // now if some already are: for callers that wait on events instead of a thread (the HTTP transport). Replaces
  // any earlier callback; an empty function removes it.
  void set_notify(std::function<void()> notify);

  // Asks the loop to end the request; its final output (aborted) follows within one step.
  void abort();

 private:
  friend class EngineLoop;
  struct Channel {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<RequestOutput> outputs;
    bool finished = false;         // the final output was queued
    bool drained = false;          // the final output was taken
    std::function<void()> notify;  // see set_notify
    std::optional<RequestId> id;   // the engine's id once it took the request (loop thread only)
  };
  RequestHandle(EngineLoop& loop, std::shared_ptr<Channel> channel) : loop_(loop), channel_(std::move(channel)) {}

  EngineLoop& loop_;
  std::shared_ptr<Channel> channel_;
};

class EngineLoop {
 public:
  // Starts the loop thread. `engine` must outlive the loop.
  explicit EngineLoop(Engine& engine);
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;
  ~EngineLoop();  // aborts everything still running and joins

  // The engine's fixed facts (context, block size, KV plan, model id); any thread.
  const EngineInfo& info() const;

  // Validates and queues a request without waiting for the engine. Fails at once with the kind and the numbers
  // when the request can never run, the queue is full (kOverloaded) or the loop has stopped (kShuttingDown).
  [[nodiscard]] SubmitResult<std::unique_ptr<RequestHandle>> submit(RequestSpec spec);

  // Engine state, read on the loop thread between steps (waits for the current step); nullopt once stopped.
  std::optional<EngineStats> stats();
  std::optional<CacheReport> explain_prompt(std::span<const TokenId> prompt, const std::string& cache_salt,
                                            bool use_cache);

  // The cached prefixes of one namespace (query.cache_salt), read between steps; nullopt once stopped.
  std::optional<CachedPrefixes> cached_prefixes(const CachedPrefixQuery& query);

  // Pins the cached full blocks of `prompt` under `cache_salt` (Engine::pin_prefix), or removes a pin by the hex of
  // its key (Engine::unpin: false when no pin has it; with `cache_salt`, also when the pin is of another
  // namespace, so one tenant cannot remove another's). nullopt once the loop has stopped.
  std::optional<Result<PinInfo>> pin_prefix(std::span<const TokenId> prompt, const std::string& cache_salt);
  std::optional<bool> unpin(const std::string& key_hex, const std::optional<std::string>& cache_salt = std::nullopt);
  // Embeddings of `inputs` (Engine::embed), computed on the loop thread between steps, so running requests wait one
  // such turn; nullopt once the loop has stopped. Requires: info().embedding_refusal empty.
  std::optional<SubmitResult<Embeddings>> embed(std::span<const std::vector<TokenId>> inputs);
  // Runs `fn` on the loop thread between steps and waits for it (tests, admin calls). False, without running it,
  // once the loop has stopped.
  bool run_on_loop(const std::function<void(Engine&)>& fn);

  // Stops the loop: with drain, finishes every request first; without, aborts them: each final output has
  // finish_reason aborted and runtime_error kShuttingDown (a client's own abort has none). Idempotent.
  void stop(bool drain);

 private:
  friend class RequestHandle;
  using Command = std::function<void()>;
  void post(Command command);
  void abort(const std::shared_ptr<RequestHandle::Channel>& channel);
  void thread_main();
  void run_commands();
  void add_request(const std::shared_ptr<RequestHandle::Channel>& channel, RequestSpec spec);
  void deliver(std::vector<RequestOutput> outputs);
  static void deliver_to(RequestHandle::Channel& channel, RequestOutput out);
  void publish_limits();

  Engine& engine_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Command> commands_;
  bool stopping_ = false;
  bool drain_ = false;
  bool exited_ = false;  // the thread left its loop: commands would never run
  // What submit() validates against (guarded by mutex_): the engine's admission limits after its last step, and
  // requests waiting there plus those submitted but not yet taken.
  AdmissionLimits limits_;
  int32_t num_waiting_ = 0;
  int32_t num_submitted_ = 0;
  std::unordered_map<RequestId, std::shared_ptr<RequestHandle::Channel>> channels_;  // loop thread only
  std::thread thread_;
};

}  // namespace hearth
