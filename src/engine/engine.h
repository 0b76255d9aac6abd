#pragma once
// Engine: one scheduling step at a time, deterministic and single-threaded (the caller's thread; kernels use
// the pool). EngineLoop runs it on its own thread; tests drive step() directly.
//
//   step():  Scheduler.schedule()  → copy partially reused blocks → build the batch (tokens, positions, block
//            tables, logit rows) → Model.forward (decode rows of every request share one matmul per weight)
//            → sample → Scheduler.update() → text pieces, stop strings, finish events.

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/explain.h"
#include "engine/sampler.h"
#include "kv/kv_cache_manager.h"
#include "model/kv_storage.h"
#include "kv/kv_plan.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "sched/scheduler.h"
#include "util/thread_pool.h"

namespace hearth {

struct EngineConfig {
  int32_t block_size = 16;
  int64_t kv_memory_bytes = 256ll << 20;  // the whole KV pool, scales included; turned into a block count
  KvFormat kv_format{KvDtype::kF16, KvDtype::kF16};
  int32_t max_batch_tokens = 512;
  int32_t max_running = 64;
  int32_t max_waiting = 256;
  double max_pinned_fraction = 0.5;  // pins may hold at most this share of the pool
  std::string adapter_id;
};

struct RequestSpec {
  std::vector<TokenId> prompt;
  SamplingParams sampling;
  int32_t max_tokens = 16;
  std::vector<std::string> stop;  // stop strings: matched across token boundaries, never emitted
  bool ignore_eos = false;
  bool use_cache = true;
  std::string cache_salt;
  bool pin_prefix = false;  // when done, pin the prompt's cached full blocks (see Engine::pin_prefix)
};

// What a request spent and saved; reported with every finished request.
struct RequestUsage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens reused from the prefix cache (shared + copied)
  int32_t copied_tokens = 0;  // of which were copied from a partially matching block
  int32_t preemptions = 0;
  double ttft_ms = 0;     // arrival to first token
  double prefill_ms = 0;  // first admission to first token
  double total_ms = 0;
  int32_t pinned_tokens = 0;  // with pin_prefix: tokens of the prompt now pinned
  std::string pin_error;      // with pin_prefix: why pinning failed (e.g. the pin cap)
  ReuseExplanation reuse;     // where prefix reuse stopped and why (reason empty if never admitted)
  int32_t answer_tokens = 0;  // prompt ids that were a remembered answer's generated ids (set by the server)
};

// What the cache holds of a prompt right now (Engine::explain_prompt); nothing is computed or changed.
struct CacheReport {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;    // leading prompt tokens whose K/V is cached now (whole blocks + a partial match)
  int32_t reusable_tokens = 0;  // of those, what a request would reuse (its last prompt token is always computed)
  int32_t cached_tokens_ram = 0;  // per tier; RAM (the block pool) is the only tier so far
  ReuseExplanation explanation;   // over the whole prompt: end_of_prompt means all of it is cached
};

// One request's news from a step.
struct RequestOutput {
  RequestId id;
  std::vector<TokenId> new_tokens;
  std::string new_text;  // complete UTF-8 only; text that may start a stop string is held back
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  RequestUsage usage;  // filled when finished
};

struct EngineCounters {
  uint64_t num_steps = 0;
  uint64_t num_prefill_tokens = 0;  // prompt tokens computed (not reused)
  uint64_t num_decode_tokens = 0;
  uint64_t num_finished = 0;
};

class Engine {
 public:
  // The pool is sized from config.kv_memory_bytes; fails with the numbers when not even one sequence's
  // worth of blocks fits.
  [[nodiscard]] static Result<std::unique_ptr<Engine>> create(Model& model, const Tokenizer& tokenizer,
                                                              const EngineConfig& config, ThreadPool& pool);

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Validates and queues a request; the error says what is wrong, with the numbers.
  [[nodiscard]] Result<RequestId> add_request(RequestSpec spec);

  // Ends a request at once and frees its blocks; its final output (finish_reason aborted) comes from the next
  // step(). No-op for unknown or finished ids.
  void abort(RequestId id);

  // Runs one step and returns every request's news. Empty when there is nothing to do.
  std::vector<RequestOutput> step();

  // Pins the cached full blocks of `prompt` (in the namespace of `cache_salt`) so they are never evicted.
  // Fails when nothing of it is cached or the pin cap (max_pinned_fraction of the pool) would be exceeded.
  [[nodiscard]] Result<PinInfo> pin_prefix(std::span<const TokenId> prompt, const std::string& cache_salt);
  // What the cache holds of `prompt` under `cache_salt`, and why reuse would stop where it does. Read-only; call
  // it on the engine's thread (EngineLoop::run_on_loop).
  [[nodiscard]] CacheReport explain_prompt(std::span<const TokenId> prompt, const std::string& cache_salt,
                                           bool use_cache = true) const;
  // Removes a pin; false when no pin has this key.
  bool unpin(const BlockHash& key) { return kv_->unpin(key); }

  bool has_unfinished() const { return scheduler_->has_unfinished() || !pending_outputs_.empty(); }
  const KvCacheManager& kv() const { return *kv_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  const EngineCounters& counters() const { return counters_; }
  const KvStorage& storage() const { return *storage_; }
  const KvPlan& kv_plan() const { return plan_; }
  int32_t max_model_len() const { return model_.config().n_ctx_train; }

  // Test hook: called with each logits row before sampling.
  void set_logits_observer(std::function<void(RequestId, std::span<const float>)> observer) {
    logits_observer_ = std::move(observer);
  }

  // Aborts unless every block is accounted for (see KvCacheManager::check_invariants); when idle, also that no
  // block is in use except by pins.
  void check_invariants() const;

 private:
  struct Stream;
  Engine(Model& model, const Tokenizer& tokenizer, const EngineConfig& config, ThreadPool& pool, const KvPlan& plan,
         std::unique_ptr<KvStorage> storage);

  void apply_block_copies();
  std::span<const float> run_batch(const SchedulerOutput& out);
  std::vector<TokenId> sample(const SchedulerOutput& out, std::span<const float> logits);
  void emit_token(Stream& stream, TokenId token, RequestOutput& output);
  RequestOutput finish_output(std::unique_ptr<Request> request);
  BlockHash cache_namespace(const std::string& cache_salt) const;
  // Namespaces other than `ns` worth trying to explain a miss as different_salt: the unsalted one and recent ones.
  std::vector<BlockHash> other_namespaces(const BlockHash& ns) const;
  void remember_namespace(const BlockHash& ns);

  Model& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  ThreadPool& pool_;
  std::string fingerprint_;
  std::vector<TokenId> eog_ids_;  // tokens that end generation unless ignore_eos
  KvPlan plan_;
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<Stream>> streams_;
  std::vector<RequestOutput> pending_outputs_;  // aborts and stop-string finishes, reported by the next step
  std::function<void(RequestId, std::span<const float>)> logits_observer_;
  EngineCounters counters_;
  uint64_t next_request_id_ = 1;
  std::deque<BlockHash> recent_namespaces_;  // distinct, most recent last; bounded by kRecentNamespaces
  static constexpr size_t kRecentNamespaces = 8;
  // Batch buffers, reused every step.
  std::vector<TokenId> batch_tokens_;
  std::vector<BatchSequence> batch_seqs_;
};

}  // namespace hearth
