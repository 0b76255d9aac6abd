#pragma once
// KvTiers: the engine's link to the tier below its block pool (the disk tier, kv/disk_tier.h).
//
//   write-through      every full block the prefix cache registers is copied out at once and queued for the tier, so
//                      what was computed survives a SIGKILL, not only an orderly shutdown or eviction
//   load or recompute  a new request whose prompt continues, past the pool's cached prefix, in blocks the tier holds
//                      has them loaded back only when that is faster than computing them:
//                        est_load      = blocks × the tier's measured seconds per block (queueing included)
//                        est_recompute = tokens ÷ this engine's measured prefill tokens per second
//                      Before a measurement exists, the prefill speed is guessed from the model's size (kPriorFlops)
//                      and the tier's from its block size (kPriorReadBytesPerS plus kPriorBlockSeconds).
//   while loading      the request waits (Request::tier.waiting); a load not back by its deadline (twice the recompute
//                      estimate, at least kMinLoadWait) is given up and the request recomputes: a slow disk costs at
//                      most that wait, never a stall or an error
//   promotion          loaded blocks go into the pool as cached blocks (KvCacheManager::insert_chain), so the
//                      request's admission reuses them like any hit, bit-identical to computing them.

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

#include "engine/engine_types.h"
#include "kv/disk_tier.h"
#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/scheduler.h"

namespace hearth {

class KvStorage;

enum class TierLoadPolicy { kMeasured, kAlways };

class KvTiers {
 public:
  static constexpr double kPriorFlops = 80e9;  // prefill FLOP/s before the engine measured its own
  static constexpr double kPriorReadBytesPerS = 500e6;
  static constexpr double kPriorBlockSeconds = 50e-6;
  static constexpr std::chrono::milliseconds kMinLoadWait{20};
  static constexpr std::chrono::milliseconds kWaitSlice{5};  // longest an idle step waits for a load

  // `disk` may be null (no tier: every call is a no-op). `n_params` gives the prior prefill speed.
  KvTiers(DiskTier* disk, KvStorage& storage, KvCacheManager& kv, int64_t n_params,
          TierLoadPolicy policy = TierLoadPolicy::kMeasured);

  bool enabled() const { return disk_ != nullptr; }
  DiskTier* disk() const { return disk_; }

  // For a request about to be queued: finds the blocks the tier holds past the pool's prefix, decides load or
  // recompute, and starts the load (r.tier.waiting) when loading wins.
  void plan_load(Request& r);
  // Queues the blocks registered since the last call for the tier (write-through).
  void persist_new_blocks();
  // Puts finished loads into the pool, and lets requests whose load is back or overdue be admitted.
  void apply_loads(Scheduler& scheduler);
  // A step with nothing to run while requests wait for loads: waits (at most kWaitSlice) for one to come back.
  void wait_for_loads() const;
  // Keeps the tier's copy of these prompt blocks at the highest retention (a pin).
  void mark_pinned(const BlockHash& ns, std::span<const TokenId> tokens, int32_t num_tokens);
  // Tokens of `prompt`'s full blocks the tier holds right after the pool's cached prefix (read-only; explanations).
  int32_t tokens_in_tier(const BlockHash& ns, std::span<const TokenId> prompt) const;
  // A step computed `tokens` prompt tokens in `seconds` (the prefill speed estimate).
  void observe_prefill(int64_t tokens, double seconds);

  TierLinkCounters counters() const;

 private:
  double prefill_tokens_per_s() const;
  // This link's id among the tier's users (engines may share one tier).
  uint64_t owner() const { return reinterpret_cast<uintptr_t>(this); }
  // Keys of the blocks of tokens[0, limit) the tier holds right after the pool's cached prefix, in order.
  std::vector<BlockHash> tier_keys(const BlockHash& ns, std::span<const TokenId> tokens, int32_t limit) const;
  double seconds_per_block() const;

  DiskTier* disk_;
  KvStorage& storage_;
  KvCacheManager& kv_;
  std::string layout_;
  double prior_prefill_tokens_per_s_;
  TierLoadPolicy policy_;
  double measured_prefill_tokens_per_s_ = 0;
  std::unordered_map<uint64_t, RequestId> jobs_;  // loads in flight → the request that asked
  TierLinkCounters counters_;
};

}  // namespace hearth
