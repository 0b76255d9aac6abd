#include "server/models/model_host.h"

#include <fmt/format.h>

#include <set>

#include "server/server.h"
#include "util/log.h"
#include "util/process_memory.h"
#include "util/units.h"

namespace hearth::server {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int ServedModel::num_in_flight() {
  return http().num_in_flight();
}

ModelLease::~ModelLease() {
  if (host_ != nullptr) host_->release(index_, use_);
}

ModelHost::ModelHost(ModelHostConfig config, std::vector<ModelSpec> specs, Loader loader)
    : config_(config), specs_(std::move(specs)), loader_(std::move(loader)), budget_(config.budget_bytes, config.process_bytes) {
  HEARTH_CHECK(!specs_.empty(), "a model host needs at least one model");
  for (const ModelSpec& s : specs_) budget_.add(s.id, s.cost);
  loaded_.resize(specs_.size());
  digests_.resize(specs_.size());
  leases_.assign(specs_.size(), 0);
  claims_.resize(specs_.size());
  keep_alive_thread_ = std::thread([this] { keep_alive_main(); });
}

ModelHost::~ModelHost() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  draining_ = true;
  changed_.notify_all();
  lock.unlock();
  keep_alive_thread_.join();
  lock.lock();
  std::vector<size_t> all;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (budget_.state(i) == ModelState::kLoaded) {
      budget_.set_state(i, ModelState::kUnloading);
      all.push_back(i);
    }
  }
  unload_all(lock, all);
}

bool ModelHost::busy_locked(size_t i) const {
  return leases_[i] > 0 || (loaded_[i] && loaded_[i]->num_in_flight() > 0);
}

ApiResult<ModelLease> ModelHost::acquire(size_t i) {
  const auto deadline = Clock::now() + config_.load_timeout;
  const ModelBudget::BusyFn busy = [this](size_t j) { return busy_locked(j); };
  std::unique_lock lock(mutex_);
  // The loaded models this request waits to see unloaded (kWait): while it waits, requests that arrived after it
  // take no new leases on them, so they go idle and a model in steady use cannot starve another of memory; requests
  // that arrived earlier go first (arrival order across models). Cleared on every way out.
  const uint64_t arrival = next_arrival_++;
  struct Claims {
    std::vector<std::set<uint64_t>>& claims;
    uint64_t arrival;
    std::vector<size_t> mine;
    ~Claims() {
      for (size_t v : mine) claims[v].erase(arrival);
    }
  } claims{claims_, arrival, {}};
  while (true) {
    if (draining_) return ApiError{503, "the server is shutting down", "server_error", {}, {}};
    switch (budget_.state(i)) {
      case ModelState::kLoaded:
        if (!claims_[i].empty() && *claims_[i].begin() < arrival) {
          // Another model waits for this one's room: let it have its turn (this request loads the model again).
          if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
            return ApiError{
                503,
                fmt::format("the model '{}' is giving its memory to another model; still waiting after {} s",
                            specs_[i].id, config_.load_timeout.count() / 1000),
                "server_error", "model", "model_memory_busy"};
          }
          continue;
        }
        leases_[i]++;
        budget_.touch(i, Clock::now());
        return ModelLease(this, i, loaded_[i].get(), /*use=*/true);
      case ModelState::kLoading:
      case ModelState::kUnloading:
        if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
          return ApiError{503,
                          fmt::format("the model '{}' is still {} after {} s", specs_[i].id,
                                      model_state_name(budget_.state(i)), config_.load_timeout.count() / 1000),
                          "server_error", "model", "model_loading"};
        }
        continue;
      case ModelState::kUnloaded:
        break;
    }
    const ModelBudget::Plan plan = budget_.plan_load(i, busy);
    switch (plan.kind) {
      case ModelBudget::Plan::Kind::kNever:
        return ApiError{413, plan.message, "invalid_request_error", "model", "model_too_large"};
      case ModelBudget::Plan::Kind::kWait: {
        const ModelBudget::Plan wanted = budget_.plan_load(i, [](size_t) { return false; });
        bool claimed = false;
        for (size_t v : wanted.victims) {
          if (!claims_[v].insert(arrival).second) continue;
          claims.mine.push_back(v);
          claimed = true;
        }
        if (claimed) changed_.notify_all();  // requests queued for a claimed model learn of it (once per claim)
        if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
          return ApiError{503, fmt::format("{} (waited {} s)", plan.message, config_.load_timeout.count() / 1000),
                          "server_error", "model", "model_memory_busy"};
        }
        continue;
      }
      case ModelBudget::Plan::Kind::kFits:
      case ModelBudget::Plan::Kind::kEvict:
        break;
    }
    for (size_t v : plan.victims) budget_.set_state(v, ModelState::kUnloading);
    budget_.set_state(i, ModelState::kLoading);
    unload_all(lock, plan.victims);
    spdlog::info("loading model '{}' ({}; with it {} of the {} budget are in use)", specs_[i].id,
                 format_bytes(specs_[i].cost.total()), format_bytes(budget_.used_bytes()),
                 format_bytes(budget_.budget_bytes()));
    lock.unlock();
    const auto t0 = Clock::now();
    auto made = loader_(specs_[i], i);
    lock.lock();
    if (!made) {
      budget_.set_state(i, ModelState::kUnloaded);
      changed_.notify_all();
      spdlog::error("loading model '{}' failed: {}", specs_[i].id, made.error().message);
      return ApiError{500, fmt::format("loading the model '{}' failed: {}", specs_[i].id, made.error().message),
                      "server_error", "model", "model_load_failed"};
    }
    loaded_[i] = std::move(*made);
    digests_[i] = loaded_[i]->digest();
    budget_.set_state(i, ModelState::kLoaded);
    const double seconds = seconds_since(t0);
    counters_.num_loads++;
    counters_.load_seconds += seconds;
    counters_.last_load_seconds = seconds;
    spdlog::info("loaded model '{}' in {:.3f} s", specs_[i].id, seconds);
    changed_.notify_all();
  }
}

std::optional<ModelLease> ModelHost::peek(size_t i) {
  std::lock_guard lock(mutex_);
  if (budget_.state(i) != ModelState::kLoaded) return std::nullopt;
  leases_[i]++;
  return ModelLease(this, i, loaded_[i].get(), /*use=*/false);
}

void ModelHost::release(size_t i, bool use) {
  std::lock_guard lock(mutex_);
  leases_[i]--;
  if (use) budget_.touch(i, Clock::now());
  changed_.notify_all();
}

void ModelHost::notify_idle(size_t i) {
  std::lock_guard lock(mutex_);
  budget_.touch(i, Clock::now());
  changed_.notify_all();
}

void ModelHost::unload_all(std::unique_lock<std::mutex>& lock, const std::vector<size_t>& victims) {
  for (size_t v : victims) {
    std::unique_ptr<ServedModel> gone = std::move(loaded_[v]);
    lock.unlock();
    const auto t0 = Clock::now();
    gone.reset();
    return_freed_memory();  // else the allocator keeps the model's freed memory resident (process_memory.h)
    const double seconds = seconds_since(t0);
    spdlog::info("unloaded model '{}' in {:.3f} s (its cached blocks are in the disk tier, if one is on); RSS now {}",
                 specs_[v].id, seconds, format_bytes(resident_bytes()));
    lock.lock();
    budget_.set_state(v, ModelState::kUnloaded);
    claims_[v].clear();  // the requests that waited for its room have it now
    counters_.num_unloads++;
    counters_.unload_seconds += seconds;
    counters_.last_unload_seconds = seconds;
    changed_.notify_all();
  }
}

ModelBudget::Clock::duration ModelHost::default_keep_alive() const {
  return config_.keep_alive.count() <= 0 ? ModelBudget::kKeepForever : Clock::duration(config_.keep_alive);
}

void ModelHost::set_keep_alive(size_t i, ModelBudget::Clock::duration keep_alive) {
  {
    std::lock_guard lock(mutex_);
    budget_.set_keep_alive(i, keep_alive);
  }
  changed_.notify_all();
}

void ModelHost::keep_alive_main() {
  const ModelBudget::BusyFn busy = [this](size_t j) { return busy_locked(j); };
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (draining_) {  // nothing to time (shutdown unloads everything)
      changed_.wait(lock, [&] { return stopping_; });
      break;
    }
    const auto now = Clock::now();
    std::vector<size_t> expired = budget_.expired(now, default_keep_alive(), busy);
    if (!expired.empty()) {
      for (size_t v : expired) {
        spdlog::info("model '{}' idle for {} s (its keep-alive): unloading", specs_[v].id,
                     std::chrono::duration<double>(budget_.keep_alive(v, default_keep_alive())).count());
        budget_.set_state(v, ModelState::kUnloading);
      }
      unload_all(lock, expired);
      continue;
    }
    // Wakes at the next idle model's expiry, or when something changes (a release or a model going idle touches it
    // and notifies; a load or an unload notifies).
    const auto next = budget_.next_expiry(default_keep_alive(), busy);
    if (next == Clock::time_point::max()) {
      changed_.wait(lock);
    } else {
      changed_.wait_until(lock, next);
    }
  }
}

bool ModelHost::drain(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  changed_.notify_all();
  auto idle = [&] {
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (busy_locked(i)) return false;
    }
    return true;
  };
  changed_.wait_for(lock, grace, [&] { return drain_cut_ || idle(); });
  return idle();
}

void ModelHost::cut_drain() {
  {
    std::lock_guard lock(mutex_);
    drain_cut_ = true;
  }
  changed_.notify_all();
}

void ModelHost::for_each_loaded(const std::function<void(HttpServer&)>& fn) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    auto lease = peek(i);
    if (lease) fn(lease->http());
  }
}

ModelHost::ModelStatus ModelHost::status(size_t i) {
  std::lock_guard lock(mutex_);
  ModelStatus s;
  s.state = budget_.state(i);
  s.cost = budget_.cost(i);
  s.num_loads = budget_.num_loads(i);
  if (budget_.last_used(i) != Clock::time_point{}) s.idle_seconds = seconds_since(budget_.last_used(i));
  const Clock::duration keep_alive = budget_.keep_alive(i, default_keep_alive());
  if (keep_alive != ModelBudget::kKeepForever) s.keep_alive_seconds = std::chrono::duration<double>(keep_alive).count();
  s.digest = digests_[i];
  return s;
}

int64_t ModelHost::used_bytes() {
  std::lock_guard lock(mutex_);
  return budget_.used_bytes();
}

ModelHostCounters ModelHost::counters() {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace hearth::server
