#include "engine/engine_loop.h"

#include "engine/engine.h"

namespace hearth {

RequestHandle::~RequestHandle() {
  bool finished = false;
  {
    std::lock_guard lock(channel_->mutex);
    finished = channel_->finished;
  }
  if (!finished) abort();
}

void RequestHandle::abort() {
  loop_.abort(channel_);
}

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

std::optional<RequestOutput> RequestHandle::try_next() {
  std::lock_guard lock(channel_->mutex);
  if (channel_->outputs.empty()) return std::nullopt;
  RequestOutput out = std::move(channel_->outputs.front());
  channel_->outputs.pop_front();
  if (out.finished) channel_->drained = true;
  return out;
}

void RequestHandle::set_notify(std::function<void()> notify) {
  bool pending = false;
  {
    std::lock_guard lock(channel_->mutex);
    channel_->notify = notify;
    pending = !channel_->outputs.empty();
  }
  if (pending && notify) notify();
}

EngineLoop::EngineLoop(Engine& engine) : engine_(engine) {
  publish_limits();
  thread_ = std::thread([this] { thread_main(); });
}

EngineLoop::~EngineLoop() {
  stop(false);
}

const EngineInfo& EngineLoop::info() const {
  return engine_.info();
}

void EngineLoop::post(Command command) {
  {
    std::lock_guard lock(mutex_);
    if (exited_) return;
    commands_.push_back(std::move(command));
  }
  wake_.notify_one();
}

void EngineLoop::publish_limits() {
  const AdmissionLimits limits = engine_.scheduler().admission_limits();
  const int32_t waiting = engine_.scheduler().num_waiting();
  std::lock_guard lock(mutex_);
  limits_ = limits;
  num_waiting_ = waiting;
}

SubmitResult<std::unique_ptr<RequestHandle>> EngineLoop::submit(RequestSpec spec) {
  auto channel = std::make_shared<RequestHandle::Channel>();
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || exited_) return submit_error(SubmitErrorCode::kShuttingDown, "the server is shutting down");
    HEARTH_TRY(check_request(spec, engine_.info(), limits_, num_waiting_ + num_submitted_));
    num_submitted_++;
    commands_.push_back([this, channel, spec = std::move(spec)]() mutable { add_request(channel, std::move(spec)); });
  }
  wake_.notify_one();
  return std::unique_ptr<RequestHandle>(new RequestHandle(*this, std::move(channel)));
}

void EngineLoop::add_request(const std::shared_ptr<RequestHandle::Channel>& channel, RequestSpec spec) {
  {
    std::lock_guard lock(mutex_);
    num_submitted_--;
  }
  auto id = engine_.add_request(std::move(spec));
  if (!id) {
    RequestOutput refused;
    refused.finished = true;
    refused.error = id.error();
    deliver_to(*channel, std::move(refused));
    return;
  }
  channel->id = *id;
  channels_.emplace(*id, channel);
}

void EngineLoop::abort(const std::shared_ptr<RequestHandle::Channel>& channel) {
  post([this, channel] {
    if (channel->id) engine_.abort(*channel->id);
  });
}

std::optional<EngineStats> EngineLoop::stats() {
  std::optional<EngineStats> out;
  run_on_loop([&](Engine& engine) {
    engine.expire_retention();  // the evictable blocks by priority band count an expired block as priority 0
    out = engine.stats();
  });
  return out;
}

std::optional<CacheReport> EngineLoop::explain_prompt(std::span<const TokenId> prompt, const std::string& cache_salt,
                                                      bool use_cache) {
  std::optional<CacheReport> out;
  run_on_loop([&](Engine& engine) { out = engine.explain_prompt(prompt, cache_salt, use_cache); });
  return out;
}

std::optional<CachedPrefixes> EngineLoop::cached_prefixes(const CachedPrefixQuery& query) {
  std::optional<CachedPrefixes> out;
  run_on_loop([&](Engine& engine) { out = engine.cached_prefixes(query); });
  return out;
}

std::optional<SubmitResult<Embeddings>> EngineLoop::embed(std::span<const std::vector<TokenId>> inputs) {
  std::optional<SubmitResult<Embeddings>> out;
  run_on_loop([&](Engine& engine) { out = engine.embed(inputs); });
  return out;
}

std::optional<Result<PinInfo>> EngineLoop::pin_prefix(std::span<const TokenId> prompt, const std::string& cache_salt) {
  std::optional<Result<PinInfo>> out;
  run_on_loop([&](Engine& engine) { out = engine.pin_prefix(prompt, cache_salt); });
  return out;
}

std::optional<bool> EngineLoop::unpin(const std::string& key_hex, const std::optional<std::string>& cache_salt) {
  std::optional<bool> out;
  run_on_loop([&](Engine& engine) {
    out = false;
    const std::optional<BlockHash> ns =
        cache_salt ? std::optional<BlockHash>(engine.cache_namespace(*cache_salt)) : std::nullopt;
    for (const PinInfo& pin : engine.pins()) {
      if (pin.key.hex() == key_hex && (!ns || pin.ns == *ns)) out = engine.unpin(pin.key);
    }
  });
  return out;
}

bool EngineLoop::run_on_loop(const std::function<void(Engine&)>& fn) {
  std::mutex done_mutex;
  std::condition_variable done_cv;
  bool done = false;
  {
    std::lock_guard lock(mutex_);
    if (exited_) return false;
    commands_.push_back([&] {
      fn(engine_);
      std::lock_guard done_lock(done_mutex);
      done = true;
      done_cv.notify_one();
    });
  }
  wake_.notify_one();
  std::unique_lock done_lock(done_mutex);
  done_cv.wait(done_lock, [&] { return done; });
  return true;
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

void EngineLoop::deliver_to(RequestHandle::Channel& channel, RequestOutput out) {
  std::function<void()> notify;
  {
    std::lock_guard lock(channel.mutex);
    channel.finished |= out.finished;
    channel.outputs.push_back(std::move(out));
    notify = channel.notify;
  }
  channel.ready.notify_all();
  if (notify) notify();
}

void EngineLoop::deliver(std::vector<RequestOutput> outputs) {
  for (RequestOutput& out : outputs) {
    auto it = channels_.find(out.id);
    if (it == channels_.end()) continue;
    const bool finished = out.finished;
    deliver_to(*it->second, std::move(out));
    if (finished) channels_.erase(it);
  }
}

void EngineLoop::thread_main() {
  for (;;) {
    run_commands();
    bool stopping = false, drain = false;
    {
      std::unique_lock lock(mutex_);
      if (!engine_.has_unfinished() && commands_.empty() && !stopping_) {
        wake_.wait(lock, [&] { return !commands_.empty() || stopping_; });
      }
      stopping = stopping_;
      drain = drain_;
    }
    run_commands();
    if (stopping && !drain) {
      for (auto& [id, channel] : channels_) {
        engine_.abort(id, RuntimeError{RuntimeErrorCode::kShuttingDown, "the server is shutting down"});
      }
    }
    if (engine_.has_unfinished()) deliver(engine_.step());
#ifndef NDEBUG
    engine_.check_invariants();  // STYLE rule 8: after every step in debug builds
#endif
    publish_limits();
    if (stopping && !engine_.has_unfinished()) {
      std::lock_guard lock(mutex_);
      if (commands_.empty()) {
        exited_ = true;
        break;
      }
    }
  }
}

}  // namespace hearth
