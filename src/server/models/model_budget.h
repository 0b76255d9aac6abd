#pragma once
// ModelBudget: which models are in memory under one byte budget, and which to unload to make room. Pure
// bookkeeping by index (no model, no thread, no clock of its own), so tests drive it with exact numbers.
//
//   cost of a model  = weights (resident: packed copies and the mapped tensors read in place, model/model_memory.h)
//                      + its KV pool (the bytes the engine allocates, KvPlan::pool_bytes) + its runtime (the
//                      forward scratch at the largest step, the tokenizer's tables)
//   used             = the process's own memory (measured at start, before any model) + the cost of every model
//                      loaded, loading or unloading (an unloading model's pages are freed only when it is gone; a
//                      loading one has reserved its room)
//   room for model m = budget - used + the cost of the idle loaded models chosen as victims, least recently used
//                      first, until m fits
//
//   plan_load(m):  kFits   room is there now
//                  kEvict  room is there once `victims` (idle, least recently used first) are unloaded
//                  kWait   the models that would have to go are busy (running or waiting requests) or still loading
//                  kNever  m alone is larger than the budget less the process's own memory: the message has the
//                          numbers

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hearth::server {

enum class ModelState { kUnloaded, kLoading, kLoaded, kUnloading };
[[nodiscard]] const char* model_state_name(ModelState state);

struct ModelCost {
  int64_t weights_bytes = 0;
  int64_t kv_bytes = 0;
  int64_t runtime_bytes = 0;  // the forward scratch at the largest step and the tokenizer's tables
  int64_t total() const { return weights_bytes + kv_bytes + runtime_bytes; }
};

class ModelBudget {
 public:
  using Clock = std::chrono::steady_clock;
  // Tells whether model i has requests (running, waiting, or a route using it now); only asked of loaded models.
  using BusyFn = std::function<bool(size_t)>;

  // process_bytes: what the process holds with no model (binary, libraries, HTTP): always counted as used.
  explicit ModelBudget(int64_t budget_bytes, int64_t process_bytes = 0)
      : budget_bytes_(budget_bytes), process_bytes_(process_bytes) {}

  // Adds a model, unloaded; returns its index (0, 1, ... in order).
  size_t add(std::string id, ModelCost cost);

  struct Plan {
    enum class Kind { kFits, kEvict, kWait, kNever } kind = Kind::kFits;
    std::vector<size_t> victims;  // kEvict: to unload, least recently used first
    int64_t needed_bytes = 0;     // the model's cost
    int64_t free_bytes = 0;       // budget - used, now
    int64_t budget_bytes = 0;
    std::string message;  // kWait, kNever: why, with the numbers
  };
  // What loading unloaded model i takes. Requires state(i) == kUnloaded. Read-only.
  [[nodiscard]] Plan plan_load(size_t i, const BusyFn& busy) const;

  // Changes model i's state (the caller's load and unload drive it); kLoaded also counts a load.
  void set_state(size_t i, ModelState state);
  // The measured cost once loaded (the engine's pool may round the KV budget down to whole blocks).
  void set_cost(size_t i, ModelCost cost) { models_[i].cost = cost; }
  // Model i was used now (a request took it or let it go): it moves to the back of the LRU order.
  void touch(size_t i, Clock::time_point now);

  // Model i's own keep-alive, replacing the default passed to expired() and next_expiry() (a request's Ollama
  // keep_alive): 0 unloads it as soon as it is idle, kKeepForever never for time alone; nullopt: the default again.
  // Unloading clears it.
  static constexpr Clock::duration kKeepForever = Clock::duration::max();
  void set_keep_alive(size_t i, std::optional<Clock::duration> keep_alive) { models_[i].keep_alive = keep_alive; }
  // Model i's keep-alive: its own, or `fallback`.
  [[nodiscard]] Clock::duration keep_alive(size_t i, Clock::duration fallback) const {
    return models_[i].keep_alive.value_or(fallback);
  }

  // Loaded idle models unused for at least their keep-alive (keep_alive(i, `keep_alive`)) at `now`, least recently
  // used first.
  [[nodiscard]] std::vector<size_t> expired(Clock::time_point now, Clock::duration keep_alive,
                                            const BusyFn& busy) const;
  // When the next idle loaded model's keep-alive ends if nothing touches it (Clock::time_point::max() if none). A busy
  // model is touched when it goes idle, so it has no expiry until then.
  [[nodiscard]] Clock::time_point next_expiry(Clock::duration keep_alive, const BusyFn& busy) const;

  int64_t budget_bytes() const { return budget_bytes_; }
  int64_t process_bytes() const { return process_bytes_; }
  int64_t used_bytes() const;
  size_t size() const { return models_.size(); }
  const std::string& id(size_t i) const { return models_[i].id; }
  ModelState state(size_t i) const { return models_[i].state; }
  const ModelCost& cost(size_t i) const { return models_[i].cost; }
  uint64_t num_loads(size_t i) const { return models_[i].num_loads; }
  Clock::time_point last_used(size_t i) const { return models_[i].last_used; }

 private:
  struct Entry {
    std::string id;
    ModelCost cost;
    ModelState state = ModelState::kUnloaded;
    Clock::time_point last_used{};
    uint64_t use_order = 0;  // ties in last_used (same clock tick) break by the order of touches
    uint64_t num_loads = 0;
    std::optional<Clock::duration> keep_alive;  // set_keep_alive
  };
  int64_t budget_bytes_;
  int64_t process_bytes_;
  uint64_t next_use_ = 1;
  std::vector<Entry> models_;
};

}  // namespace hearth::server
