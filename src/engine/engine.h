#pragma once
// Engine: one scheduling step at a time, deterministic and single-threaded (the caller's thread; kernels use
// the pool). EngineLoop runs it on its own thread; tests drive step() directly.
//
//   step():  schedule (requests the KV pool stopped are finished at once, length) → copy partially reused blocks → run
//   the batch (decode rows of every request share one
//            matmul per weight) → sample → Scheduler.update → process outputs (text, stop strings, finish
//            decisions: OutputProcessor) → finish (Scheduler.finish, the one release path, then pins and usage).

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/engine_types.h"
#include "engine/kv_prefault.h"
#include "engine/kv_tiers.h"
#include "engine/output_processor.h"
#include "engine/recurrent_states.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_plan.h"
#include "model/pooling.h"
#include "sched/scheduler.h"
#include "tensor/kv_dtype.h"

namespace hearth {

class DiskTier;
class RedisTier;
class KvStorage;
struct ModelConfig;
class Model;
class ThreadPool;
class Tokenizer;
struct BatchSequence;

struct EngineConfig {
  std::string model_id;  // the name EngineInfo publishes (hearth serve: --model-id or the file's stem)
  ModelListing listing;  // published in EngineInfo, with the digest the engine computes
  int32_t block_size = 16;
  int64_t kv_memory_bytes = 256ll << 20;  // the whole KV pool, scales included; turned into a block count
  KvFormat kv_format{KvDtype::kF16, KvDtype::kF16};
  int32_t max_batch_tokens = 512;
  int32_t max_running = 64;
  int32_t max_waiting = 256;
  double max_pinned_fraction = 0.5;  // pins may hold at most this share of the pool
  // One cache_salt's pins (the unsalted namespace's too) at most this share: half the shared cap, so no tenant alone
  // can fill it and block another's pins.
  double max_pinned_fraction_per_salt = 0.25;
  std::string adapter_id;
  // The tier below the pool (README "Tiers"); not owned, may be shared by engines; null: none.
  DiskTier* disk_tier = nullptr;
  // Load blocks the tier holds when the measured costs say loading is faster (kMeasured), or always (tests,
  // hearth serve --kv-disk-load always).
  TierLoadPolicy tier_load_policy = TierLoadPolicy::kMeasured;
  // The tier below the disk that several servers share (kv/redis_tier.h); not owned, may be shared; null: none.
  RedisTier* redis_tier = nullptr;
  TierLoadPolicy redis_load_policy = TierLoadPolicy::kMeasured;  // hearth serve --kv-redis-load
  RetentionClock retention_clock = unix_time_ms;  // retention TTLs are measured against it (tests inject one)
  // Sliding-window models: keep the sliding-window layers' K/V only for the blocks a window reads (window slabs,
  // kv/kv_cache_manager.h), the pool split for users at kv_window_plan_context tokens. Off: every layer keeps its
  // full KV and the window is only a mask.
  bool kv_window_slabs = true;
  int64_t kv_window_plan_context = 1024;
  // Commit the pool's pages just ahead of the blocks in use on an idle-priority thread (engine/kv_prefault.h);
  // off: pages commit as blocks are first written.
  bool kv_prefault = true;
  // Hybrid models: recurrent-state checkpoints kept for the prefix cache (engine/recurrent_states.h), each
  // state_bytes_per_sequence of the budget; -1: as many as a quarter of kv_memory_bytes holds. 0 turns prefix
  // caching off for the model (every request recomputes its prompt; the log says so).
  int32_t state_checkpoints = -1;
  // How embeddings pool the hidden states: unset, the file's <arch>.pooling_type (none for chat models: they serve
  // no embeddings); set, this one whatever the file says (hearth serve --pooling).
  std::optional<PoolingType> pooling;
  // Speculative decoding for requests that do not choose (RequestSpec::speculative): off, prompt lookup, or auto
  // (hearth serve --speculative). Hybrid models never speculate.
  SpeculativeParams speculative;
  // The draft model's drafter (engine/model_drafter.h; not owned, outlives the engine): requests in
  // SpeculativeMode::kDraftModel draft with it. Null: such requests are refused at submit.
  Drafter* drafter = nullptr;
};

// How a hybrid model's budget is split (EngineInfo's state fields): running slots (at most max_running, at most half
// the budget), checkpoints, and the KV pool's budget, the rest. Error with the numbers when nothing is left for KV.
struct StateSplit {
  int64_t state_bytes = 0;
  int32_t running_slots = 0;
  int32_t checkpoint_slots = 0;
  int64_t kv_budget_bytes = 0;
};
[[nodiscard]] Result<StateSplit> split_state_budget(const ModelConfig& model, const EngineConfig& config);

// How a model's KV pool is split under `config` (kv/kv_plan.h): its sliding-window layers when they are kept in
// window slabs, with the slabs one request's window and batch need at least; n_window_layers 0 otherwise.
KvWindowSplit kv_window_split(const ModelConfig& model, const EngineConfig& config);

// Why `model` serves no embeddings with `pooling` under `plan` (a sentence naming `file_name` and the way out), or
// empty when it does: a pooling that embeds (mean, cls, last), no recurrent layers, no sliding-window slabs.
std::string embedding_refusal(const ModelConfig& model, PoolingType pooling, const KvPlan& plan,
                              const std::string& file_name);

struct EngineCounters {
  uint64_t num_steps = 0;
  uint64_t num_prefill_tokens = 0;  // prompt tokens computed (not reused)
  uint64_t num_decode_tokens = 0;
  uint64_t num_finished = 0;
  uint64_t num_drafted_tokens = 0;   // speculative decoding: tokens drafted and verified
  uint64_t num_accepted_tokens = 0;  // of them, equal to the tokens decoding picked
};

class Engine {
 public:
  // The pool is sized from config.kv_memory_bytes; fails with the numbers when not even one block fits.
  [[nodiscard]] static Result<std::unique_ptr<Engine>> create(Model& model, const Tokenizer& tokenizer,
                                                              const EngineConfig& config, ThreadPool& pool);

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Validates (check_request) and queues a request; the error says which limit, with the numbers.
  [[nodiscard]] SubmitResult<RequestId> add_request(RequestSpec spec);

  // Ends a request at once and frees its blocks; its final output (finish_reason aborted) comes from the next
  // step(). Without `cause` it is the client's cancel; with one, the engine's own end of it (e.g. kShuttingDown),
  // reported as the final output's runtime_error. No-op for unknown or finished ids.
  void abort(RequestId id, std::optional<RuntimeError> cause = std::nullopt);

  // Runs one step and returns every request's news. Empty when there is nothing to do.
  std::vector<RequestOutput> step();

  // One embedding per input, in order (EngineInfo::embedding_pooling; model/pooling.h), computed at once between
  // steps with blocks borrowed from the pool and given back before it returns. Nothing is cached or reused: a
  // prefix hit would not give the hidden states mean pooling reads. Inputs are packed into forwards of at most
  // max_batch_tokens rows; a longer one spans several. The borrowed blocks are allocated like any request's, so
  // they may evict unreferenced cached blocks (least valuable first, as retention orders them). Fails, before any
  // forward, with kEmptyPrompt, kInvalidToken, kPromptTooLong (an input beyond the context) or kExceedsKvPool (one
  // that needs more blocks than the pool less its pins), and with kOverloaded when the running requests hold the
  // blocks an input needs now; it holds no block afterwards either way.
  // Requires: EngineInfo::embedding_refusal empty.
  [[nodiscard]] SubmitResult<Embeddings> embed(std::span<const std::vector<TokenId>> inputs);

  // Pins the cached full blocks of `prompt` (in the namespace of `cache_salt`) so they are never evicted.
  // Fails when nothing of it is cached or the pin cap (max_pinned_fraction of the pool) would be exceeded.
  [[nodiscard]] Result<PinInfo> pin_prefix(std::span<const TokenId> prompt, const std::string& cache_salt);
  // What the cache holds of `prompt` under `cache_salt`, and why reuse would stop where it does. Read-only.
  [[nodiscard]] CacheReport explain_prompt(std::span<const TokenId> prompt, const std::string& cache_salt,
                                           bool use_cache = true) const;
  // The cached prefixes of query.cache_salt's namespace only, as a bounded tree with text. Read-only.
  [[nodiscard]] CachedPrefixes cached_prefixes(const CachedPrefixQuery& query) const;
  // Removes a pin; false when no pin has this key.
  bool unpin(const BlockHash& key) {
    if (states_) states_->unpin(key);
    return kv_->unpin(key);
  }
  // Applies retention expiries now (KvCacheManager::expire_retention), before stats are read.
  void expire_retention() { kv_->expire_retention(); }
  // Every pin now, in no particular order.
  [[nodiscard]] std::vector<PinInfo> pins() const { return kv_->pins(); }
  // The namespace digest of `cache_salt` under this engine's model, KV format and block size.
  [[nodiscard]] BlockHash cache_namespace(const std::string& cache_salt) const;

  const EngineInfo& info() const { return info_; }
  EngineStats stats() const;
  bool has_unfinished() const { return scheduler_->has_unfinished() || !pending_outputs_.empty(); }
  const KvCacheManager& kv() const { return *kv_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  const EngineCounters& counters() const { return counters_; }
  const KvStorage& storage() const { return *storage_; }
  const KvPlan& kv_plan() const { return info_.kv_plan; }
  int32_t max_model_len() const { return info_.n_ctx; }

  // Test hook: called with each logits row before sampling.
  void set_logits_observer(std::function<void(RequestId, std::span<const float>)> observer) {
    logits_observer_ = std::move(observer);
  }

  // Aborts unless every block is accounted for (see KvCacheManager::check_invariants); when idle, also that no
  // block is in use except by pins.
  void check_invariants() const;

 private:
  Engine(Model& model, const Tokenizer& tokenizer, const EngineConfig& config, ThreadPool& pool, EngineInfo info,
         std::string fingerprint, std::unique_ptr<KvStorage> storage);

  // The phases of step(), in order.
  void mark_scheduled(const SchedulerOutput& plan);
  void apply_block_copies();
  std::span<const float> run_batch(const SchedulerOutput& plan);
  std::vector<TokenId> sample(const SchedulerOutput& plan, std::span<const float> logits);
  void process_outputs(const SchedulerOutput& plan, std::span<const TokenId> sampled, std::span<const float> logits,
                       std::vector<RequestOutput>& outputs);
  // One row of logits to a token, as plain decoding samples it: the observer, the finite check, the grammar's mask,
  // the sampler (one draw), the logprobs. kNoToken when nothing can be sampled.
  TokenId sample_row(const Request& r, std::span<const float> row_logits);
  // A draft chunk (ScheduledChunk::num_draft > 0): at each of its rows in order, the token plain decoding would pick
  // there is emitted (Scheduler::append_verified, OutputProcessor::process_token) while it equals the drafted one;
  // the first mismatch, or a finish, ends it. Then the rejected rows' K/V is dropped (Scheduler::end_verification).
  void verify_draft(const ScheduledChunk& chunk, std::span<const float> chunk_logits,
                    std::vector<RequestOutput>& outputs);
  // What a token that could not be sampled (kNoToken) means for r: the grammar stuck (length), else non-finite
  // logits (aborted with the runtime error).
  RequestOutput finish_unsampled(Request& r, RequestOutput news);
  // The one finish path: releases the request's blocks (Scheduler::finish), pins its prompt when asked (not for an
  // abort), and returns its final output with `news` (this step's tokens and text) in front and `runtime_error`.
  RequestOutput finish_request(RequestId id, FinishReason reason, RequestOutput news = {},
                               std::optional<RuntimeError> runtime_error = std::nullopt);

  // Engine::embed's phases (embed.cpp): the checks, then one forward over admitted inputs.
  SubmitResult<void> check_embedding_inputs(std::span<const std::vector<TokenId>> inputs) const;
  struct EmbedSequence {
    size_t input = 0;
    RequestId id;
    int32_t num_done = 0;
  };
  void embed_forward(std::span<const std::vector<TokenId>> inputs, std::vector<EmbedSequence>& active, Embeddings& out);

  // The disk tier's chains of query.cache_salt's namespace (cached_prefixes.cpp).
  std::vector<DiskPrefixEntry> disk_prefixes(const CachedPrefixQuery& query) const;
  // Records when the block pool's logical clock had which value (once per 0.25 s at most, the last 20 minutes), so
  // cached_prefixes can tell a block's last use in seconds. Called after every step and abort.
  void note_pool_clock();
  std::optional<double> seconds_since(uint64_t pool_clock) const;
  // The namespaces a miss in `ns` may be explained by (different_salt): the unsalted one, for a salted `ns`; never
  // another salt's (tenant isolation, README "Security and limits").
  std::vector<BlockHash> other_namespaces(const BlockHash& ns) const;

  Model& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  ThreadPool& pool_;
  EngineInfo info_;
  std::string fingerprint_;
  std::vector<TokenId> eog_ids_;  // tokens that end generation unless ignore_eos
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<RecurrentStates> states_;  // hybrid models only; before kv_, whose resumable_after asks it
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<KvTiers> tiers_;
  std::unique_ptr<KvPrefaulter> prefaulter_;  // null with kv_prefault off; destroyed before storage_
  OutputProcessor outputs_;
  std::unordered_set<RequestId> pin_on_finish_;  // requests with pin_prefix
  std::vector<RequestOutput> pending_outputs_;   // aborts, reported by the next step
  std::function<void(RequestId, std::span<const float>)> logits_observer_;
  EngineCounters counters_;
  uint64_t next_request_id_ = 1;
  struct ClockTime {
    uint64_t clock = 0;
    RequestTimes::Clock::time_point time;
  };
  std::deque<ClockTime> clock_times_;  // increasing in both; see note_pool_clock
  // Batch buffers, reused every step.
  std::vector<TokenId> batch_tokens_;
  std::vector<float> masked_logits_;  // one row, for a request with a grammar
  std::vector<BatchSequence> batch_seqs_;
  std::vector<const Request*> checkpoint_requests_;  // hybrid: each batch sequence's request, for persist
};

}  // namespace hearth
