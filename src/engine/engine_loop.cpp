#include "engine/engine_loop.h"

namespace hearth {

RequestHandle::~RequestHandle() {
  std::lock_guard lock(channel_->mutex);
  if (!channel_->finished) loop_.abort(id_);
}

void RequestHandle::abort() { loop_.abort(id_); }

std::optional<RequestOutput> RequestHandle::next() {
  bool timed_out = false;
  return next_for(std::chrono::milliseconds::max(), &timed_out);
}

std::optional<RequestOutput> RequestHandle::next_for(std::chrono::milliseconds timeout, bool* timed_out) {
  std::unique_lock lock(channel_->mutex);
  *timed_out = false;
  auto has_news = [&] { return !channel_->outputs.empty() || channel_->drained; };
  if (timeout == std::chrono::milliseconds::max()) {
    channel_->ready.wait(lock, has_news);
  } else if (!channel_->ready.wait_for(lock, timeout, has_news)) {
    *timed_out = true;
    return std::nullopt;
  }
  if (channel_->outputs.empty()) return std::nullopt;
  RequestOutput out = std::move(channel_->outputs.front());
  channel_->outputs.pop_front();
  if (out.finished) channel_->drained = true;
  return out;
}

EngineLoop::EngineLoop(Engine& engine) : engine_(engine), thread_([this] { thread_main(); }) {}

EngineLoop::~EngineLoop() { stop(false); }

void EngineLoop::post(Command command) {
  {
    std::lock_guard lock(mutex_);
    commands_.push_back(std::move(command));
  }
  wake_.notify_one();
}

Result<std::unique_ptr<RequestHandle>> EngineLoop::submit(RequestSpec spec) {
  auto channel = std::make_shared<RequestHandle::Channel>();
  std::promise<Result<RequestId>> promise;
  auto future = promise.get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return make_error("server is shutting down");
    commands_.push_back([&, channel] {
      auto id = engine_.add_request(std::move(spec));
      if (id) channels_.emplace(*id, channel);
      promise.set_value(std::move(id));
    });
  }
  wake_.notify_one();
  Result<RequestId> id = future.get();
  if (!id) return id.error();
  return std::unique_ptr<RequestHandle>(new RequestHandle(*this, *id, std::move(channel)));
}

void EngineLoop::abort(RequestId id) {
  post([this, id] { engine_.abort(id); });
}

void EngineLoop::run_on_loop(const std::function<void(Engine&)>& fn) {
  std::promise<void> done;
  auto future = done.get_future();
  post([&] {
    fn(engine_);
    done.set_value();
  });
  future.get();
}

void EngineLoop::stop(bool drain) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    drain_ = drain;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::run_commands() {
  std::vector<Command> commands;
  {
    std::lock_guard lock(mutex_);
    commands.swap(commands_);
  }
  for (auto& command : commands) command();
}

void EngineLoop::deliver(std::vector<RequestOutput> outputs) {
  for (RequestOutput& out : outputs) {
    auto it = channels_.find(out.id);
    if (it == channels_.end()) continue;
    const bool finished = out.finished;
    {
      std::lock_guard lock(it->second->mutex);
      it->second->outputs.push_back(std::move(out));
      it->second->finished |= finished;
    }
    it->second->ready.notify_all();
    if (finished) channels_.erase(it);
  }
}

void EngineLoop::thread_main() {
  for (;;) {
    run_commands();
    bool stopping, drain;
    {
      std::unique_lock lock(mutex_);
      if (!engine_.has_unfinished() && commands_.empty() && !stopping_) {
        wake_.wait(lock, [&] { return !commands_.empty() || stopping_; });
      }
      stopping = stopping_;
      drain = drain_;
    }
    if (stopping && !drain) {
      for (auto& [id, channel] : channels_) engine_.abort(id);
    }
    run_commands();
    if (engine_.has_unfinished()) deliver(engine_.step());
    if (stopping && !engine_.has_unfinished()) {
      std::lock_guard lock(mutex_);
      if (commands_.empty()) break;
    }
  }
}

}  // namespace hearth
