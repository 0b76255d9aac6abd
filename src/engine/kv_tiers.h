#pragma once
// KvTiers: the engine's link to the tiers below its block pool, in order: the disk tier (kv/disk_tier.h), then the
// Redis tier several servers share (kv/redis_tier.h). Either may be absent.
//
//   write-through      every full block the prefix cache registers is copied out at once and queued for the tier, so
//                      what was computed survives a SIGKILL, not only an orderly shutdown or eviction
//   write-through      to every tier (Redis skips blocks it is known to hold already)
//   load or recompute  a new request whose prompt continues, past the pool's cached prefix, in blocks a tier holds
//                      has them loaded back only when that is faster than computing them, one stage per tier: the
//                      blocks the disk holds right after the pool's prefix, then, once those are in the pool, the
//                      blocks Redis is known to hold right after them (each stage decided on its own tier's cost):
//                        est_load      = blocks × the tier's measured seconds per block (queueing included)
//                        est_recompute = tokens ÷ this engine's measured prefill tokens per second
//                      Before a measurement exists, the prefill speed is guessed from the model's size (kPriorFlops)
//                      and the tier's from its block size (kPriorReadBytesPerS plus kPriorBlockSeconds).
//   while loading      the request waits (Request::tier.waiting); a load not back by its deadline (twice the recompute
//                      estimate, at least kMinLoadWait; kMinAlwaysLoadWait under kAlways) is given up and the request
//                      recomputes: a slow disk costs at most that wait, never a stall or an error
//   promotion          loaded blocks go into the pool as cached blocks (KvCacheManager::insert_chain), so the
//                      request's admission reuses them like any hit, bit-identical to computing them.

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_types.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache_manager.h"
#include "kv/redis_tier.h"
#include "sched/request.h"
#include "sched/scheduler.h"

namespace hearth {

class KvStorage;

enum class TierLoadPolicy { kMeasured, kAlways };

// The shared tier below the disk (not owned; may be shared by engines).
struct KvRedisLink {
  RedisTier* tier = nullptr;
  TierLoadPolicy policy = TierLoadPolicy::kMeasured;
  std::string model;  // names the engine's model in the tier's events
};

class KvTiers {
 public:
  static constexpr double kPriorFlops = 80e9;  // prefill FLOP/s before the engine measured its own
  static constexpr double kPriorReadBytesPerS = 500e6;
  static constexpr double kPriorBlockSeconds = 50e-6;
  static constexpr std::chrono::milliseconds kMinLoadWait{20};
  // With TierLoadPolicy::kAlways the operator asked for loads whatever they cost: a load is waited for at least this
  // long (a loaded machine can take more than kMinLoadWait for one round trip), still bounded.
  static constexpr std::chrono::milliseconds kMinAlwaysLoadWait{1000};
  static constexpr std::chrono::milliseconds kWaitSlice{5};  // longest an idle step waits for a load

  using RedisLink = KvRedisLink;

  // `disk` may be null, and so may redis.tier (no tier at all: every call is a no-op). `n_params` gives the prior
  // prefill speed.
  KvTiers(DiskTier* disk, KvStorage& storage, KvCacheManager& kv, int64_t n_params,
          TierLoadPolicy policy = TierLoadPolicy::kMeasured, RedisLink redis = {});

  bool enabled() const { return !links_.empty(); }
  DiskTier* disk() const { return disk_; }
  RedisTier* redis() const { return redis_; }

  // For a request about to be queued: finds the blocks the first tier holds past the pool's prefix, decides load or
  // recompute, and starts the load (r.tier.waiting) when loading wins. Called again when a stage's load is in the
  // pool, for the next tier (each tier at most once per request).
  void plan_load(Request& r);
  // Queues the blocks registered since the last call for the tier (write-through).
  void persist_new_blocks();
  // Puts finished loads into the pool, and lets requests whose load is back or overdue be admitted.
  void apply_loads(Scheduler& scheduler);
  // A step with nothing to run while requests wait for loads: waits (at most kWaitSlice) for one to come back.
  void wait_for_loads() const;
  // Keeps the tier's copy of these prompt blocks at the highest retention (a pin).
  void mark_pinned(const BlockHash& ns, std::span<const TokenId> tokens, int32_t num_tokens);
  // Tokens of `prompt`'s full blocks the disk tier holds right after the pool's cached prefix (read-only;
  // explanations).
  int32_t tokens_in_tier(const BlockHash& ns, std::span<const TokenId> prompt) const;
  // A step computed `tokens` prompt tokens in `seconds` (the prefill speed estimate).
  void observe_prefill(int64_t tokens, double seconds);

  TierLinkCounters counters() const;

 private:
  struct Link {
    BlockTier* tier;
    TierKind kind;
    TierLoadPolicy policy;
  };
  double prefill_tokens_per_s() const;
  // This link's id among the tier's users (engines may share one tier).
  uint64_t owner() const { return reinterpret_cast<uintptr_t>(this); }
  // Keys of the blocks of tokens[0, limit) that links_[link] holds right after the pool's cached prefix, in order.
  std::vector<BlockHash> tier_keys(size_t link, const BlockHash& ns, std::span<const TokenId> tokens,
                                   int32_t limit) const;
  double seconds_per_block(size_t link) const;
  // Puts one finished load into the pool; then plans r's next stage.
  void apply_load(Scheduler& scheduler, size_t link, TierLoadDone& done);

  std::vector<Link> links_;  // disk first
  DiskTier* disk_;
  RedisTier* redis_;
  std::string model_;
  KvStorage& storage_;
  KvCacheManager& kv_;
  std::string layout_;
  double prior_prefill_tokens_per_s_;
  TierLoadPolicy policy_;
  double measured_prefill_tokens_per_s_ = 0;
  std::map<std::pair<size_t, uint64_t>, RequestId> jobs_;  // loads in flight (link, job) → the request that asked
  TierLinkCounters counters_;
};

}  // namespace hearth
