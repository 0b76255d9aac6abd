#pragma once
// ModelHost: several models under one memory budget (model_budget.h). A model is loaded on first use and unloaded
// least recently used when another needs its room, or after --keep-alive without use; never while it has
// requests (a route holding a ModelLease, or generations in flight: HttpServer::num_in_flight).
//
//   acquire(m)   loaded            → a lease at once
//                loading/unloading → waits (a condition variable, bounded by load_timeout) for it to finish
//                unloaded          → plan_load: unload the idle victims, load m on this thread, then the lease;
//                                    kWait waits for a model to go idle (bounded); kNever fails at once (the
//                                    numbers: bytes needed, budget)
//                loaded, but a request that arrived earlier waits for its room → waits until that one had its turn
//                (so a model in steady use cannot starve another: they take turns, in order of arrival)
//
// Loading and unloading run outside the host's lock, so other models serve meanwhile. The app supplies the loader
// (it knows GGUF, models, engines); what it returns owns everything of one model, and destroying it unloads the
// model (it stops the engine loop and waits until the disk tier has the model's blocks: the cache survives).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_types.h"
#include "kv/kv_plan.h"
#include "server/api/api_error.h"
#include "server/models/model_budget.h"

namespace hearth::server {

class HttpServer;

// What the app knows of a model before loading it (from its GGUF header).
struct ModelSpec {
  std::string id;                    // file stem, or --model-id
  std::vector<std::string> aliases;  // --model-alias ID=NAME
  std::string path;
  ModelCost cost;  // weights resident, the KV pool the engine will allocate, the forward scratch (model_budget.h)
  int32_t n_ctx = 0;
  KvPlan kv_plan;
  ModelListing listing;  // for /api/tags; its digest is known once the model has loaded (ModelHost keeps it)
};

// One loaded model: owns its weights, engine, loop and routes. Destroying it unloads the model.
class ServedModel {
 public:
  virtual ~ServedModel() = default;
  virtual HttpServer& http() = 0;
  // Generations not finished yet (HttpServer::num_in_flight); the host unloads a model only at 0.
  virtual int num_in_flight();
  // The model's fingerprint (EngineInfo::listing.digest); empty when unknown.
  virtual std::string digest() { return {}; }
};

struct ModelHostConfig {
  int64_t budget_bytes = 0;
  int64_t process_bytes = 0;  // the server's own resident memory with no model: counted as used (model_budget.h)
  std::chrono::milliseconds keep_alive{5 * 60 * 1000};  // 0: never unload an idle model for time alone
  std::chrono::milliseconds load_timeout{120 * 1000};   // longest a request waits for a load or for room
};

struct ModelHostCounters {
  uint64_t num_loads = 0;
  uint64_t num_unloads = 0;
  double load_seconds = 0;    // total
  double unload_seconds = 0;  // total (engine stop and disk-tier flush included)
  double last_load_seconds = 0;
  double last_unload_seconds = 0;
};

class ModelHost;

// A loaded model in use by one route; while any lease is held the model is not unloaded. Movable.
class ModelLease {
 public:
  ModelLease(ModelLease&& other) noexcept
      : host_(other.host_), index_(other.index_), model_(other.model_), use_(other.use_) {
    other.host_ = nullptr;
  }
  ModelLease(const ModelLease&) = delete;
  ModelLease& operator=(const ModelLease&) = delete;
  ModelLease& operator=(ModelLease&&) = delete;
  ~ModelLease();

  size_t index() const { return index_; }
  HttpServer& http() const { return model_->http(); }

 private:
  friend class ModelHost;
  ModelLease(ModelHost* host, size_t index, ServedModel* model, bool use)
      : host_(host), index_(index), model_(model), use_(use) {}
  ModelHost* host_;
  size_t index_;
  ServedModel* model_;
  bool use_;  // acquire(): letting go counts as use (the LRU order); peek(): it does not
};

class ModelHost {
 public:
  // Loads model `index` (specs()[index]); its HttpServer's on_idle must call notify_idle(index).
  using Loader = std::function<Result<std::unique_ptr<ServedModel>>(const ModelSpec&, size_t index)>;

  // Starts the keep-alive thread. Requires at least one spec, unique ids.
  ModelHost(ModelHostConfig config, std::vector<ModelSpec> specs, Loader loader);
  ~ModelHost();  // unloads every model (the disk tier gets their blocks)
  ModelHost(const ModelHost&) = delete;
  ModelHost& operator=(const ModelHost&) = delete;

  const std::vector<ModelSpec>& specs() const { return specs_; }
  const ModelHostConfig& config() const { return config_; }

  // A lease on model i, loading it first when needed (see the top of this file). Errors: 413 model_too_large
  // (never fits), 503 (still busy or loading after load_timeout; shutting down), 500 (the load failed).
  [[nodiscard]] ApiResult<ModelLease> acquire(size_t i);
  // A lease on model i only if it is loaded now; does not count as use (dashboards, /metrics do not keep a model).
  [[nodiscard]] std::optional<ModelLease> peek(size_t i);

  // Model i's keep-alive from now until it unloads, replacing --keep-alive for it (Ollama's per-request keep_alive):
  // 0 unloads it as soon as it is idle, ModelBudget::kKeepForever never for time alone. Any thread.
  void set_keep_alive(size_t i, ModelBudget::Clock::duration keep_alive);
  // Model i's last generation ended (its HttpServer's on_idle): counts as use, wakes waiters. Any thread.
  void notify_idle(size_t i);
  // Refuses new leases from now on (503) and waits up to `grace` until no model has requests; true if none has.
  bool drain(std::chrono::milliseconds grace);
  // Makes drain() return now (false when a model still has requests). Any thread.
  void cut_drain();
  // Every loaded model's server, for shutdown: each gets `fn` (under no lock of the host).
  void for_each_loaded(const std::function<void(HttpServer&)>& fn);

  struct ModelStatus {
    ModelState state = ModelState::kUnloaded;
    ModelCost cost;
    uint64_t num_loads = 0;
    double idle_seconds = -1;  // since last use; -1 when never used
    double keep_alive_seconds = -1;  // its keep-alive (set_keep_alive, else --keep-alive); -1: never for time alone
    std::string digest;              // the model fingerprint, once it has loaded (ServedModel::digest)
  };
  ModelStatus status(size_t i);
  int64_t used_bytes();
  ModelHostCounters counters();

 private:
  friend class ModelLease;
  void release(size_t i, bool use);
  bool busy_locked(size_t i) const;
  // Unloads `victims` (marked kUnloading by the caller); takes and returns with the lock held.
  void unload_all(std::unique_lock<std::mutex>& lock, const std::vector<size_t>& victims);
  void keep_alive_main();
  // --keep-alive as the budget counts it (0 there means "never for time alone": kKeepForever).
  ModelBudget::Clock::duration default_keep_alive() const;

  ModelHostConfig config_;
  std::vector<ModelSpec> specs_;
  Loader loader_;
  std::mutex mutex_;
  std::condition_variable changed_;                   // a state, a lease or a generation count changed
  ModelBudget budget_;                                // guarded by mutex_
  std::vector<std::string> digests_;                  // [i]: its digest since its first load
  std::vector<std::unique_ptr<ServedModel>> loaded_;  // [i]: set while kLoaded (and kUnloading until destroyed)
  std::vector<int> leases_;                           // guarded by mutex_
  // [i]: the arrival numbers of requests waiting for model i's room (acquire); guarded by mutex_
  std::vector<std::set<uint64_t>> claims_;
  uint64_t next_arrival_ = 0;   // guarded by mutex_
  ModelHostCounters counters_;  // guarded by mutex_
  bool draining_ = false;
  bool drain_cut_ = false;
  bool stopping_ = false;
  std::thread keep_alive_thread_;
};

}  // namespace hearth::server
