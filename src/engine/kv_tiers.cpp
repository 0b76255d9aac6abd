#include "engine/kv_tiers.h"

#include <algorithm>

#include "model/kv_storage.h"

namespace hearth {
namespace {

constexpr double kAverageWeight = 0.3;  // weight of the newest prefill measurement
constexpr int64_t kMinMeasuredTokens = 8;

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

KvTiers::KvTiers(DiskTier* disk, KvStorage& storage, KvCacheManager& kv, int64_t n_params, TierLoadPolicy policy,
                 RedisLink redis)
    : disk_(disk),
      redis_(redis.tier),
      model_(std::move(redis.model)),
      storage_(storage),
      kv_(kv),
      layout_(storage.block_layout()),
      prior_prefill_tokens_per_s_(kPriorFlops / (2.0 * static_cast<double>(std::max<int64_t>(n_params, 1)))),
      policy_(policy) {
  if (disk_ != nullptr) links_.push_back({disk_, TierKind::kDisk, policy});
  if (redis_ != nullptr) links_.push_back({redis_, TierKind::kRedis, redis.policy});
  kv_.set_track_newly_cached(!links_.empty());
}

double KvTiers::prefill_tokens_per_s() const {
  return measured_prefill_tokens_per_s_ > 0 ? measured_prefill_tokens_per_s_ : prior_prefill_tokens_per_s_;
}

double KvTiers::seconds_per_block(size_t link) const {
  const double measured = links_[link].tier->seconds_per_block();
  if (measured > 0) return measured;
  return kPriorBlockSeconds + static_cast<double>(storage_.bytes_per_block()) / kPriorReadBytesPerS;
}

void KvTiers::observe_prefill(int64_t tokens, double seconds) {
  if (tokens < kMinMeasuredTokens || seconds <= 0) return;
  const double tps = static_cast<double>(tokens) / seconds;
  measured_prefill_tokens_per_s_ = measured_prefill_tokens_per_s_ == 0
                                       ? tps
                                       : (1 - kAverageWeight) * measured_prefill_tokens_per_s_ + kAverageWeight * tps;
}

std::vector<BlockHash> KvTiers::tier_keys(size_t link, const BlockHash& ns, std::span<const TokenId> tokens,
                                          int32_t limit) const {
  std::vector<BlockHash> keys;
  const int32_t bs = kv_.block_size();
  limit = std::min(limit, static_cast<int32_t>(tokens.size()));
  const PrefixMatch match = kv_.find_longest_prefix(ns, tokens, limit);
  BlockHash parent = match.blocks.empty() ? ns : match.keys.back();
  for (auto i = static_cast<int32_t>(match.blocks.size()); (i + 1) * bs <= limit; ++i) {
    const BlockHash key = hash_block(parent, ns, tokens.subspan(static_cast<size_t>(i) * bs, bs));
    if (!links_[link].tier->contains(key)) break;
    keys.push_back(key);
    parent = key;
  }
  return keys;
}

int32_t KvTiers::tokens_in_tier(const BlockHash& ns, std::span<const TokenId> prompt) const {
  if (disk_ == nullptr) return 0;
  return static_cast<int32_t>(tier_keys(0, ns, prompt, static_cast<int32_t>(prompt.size())).size()) * kv_.block_size();
}

void KvTiers::plan_load(Request& r) {
  if (links_.empty() || !r.use_cache || r.tier.waiting) return;
  const int32_t bs = kv_.block_size();
  TierReuse& t = r.tier;
  const std::span<const TokenId> prompt(r.tokens.data(), r.num_prompt_tokens);
  // The first tier not tried yet that holds the block right after the pool's prefix. The last prompt token is
  // always computed, so blocks up to the one before it.
  for (size_t link = 0; link < links_.size(); ++link) {
    const auto bit = static_cast<uint8_t>(1u << static_cast<unsigned>(links_[link].kind));
    if ((t.planned_tiers & bit) != 0) continue;
    std::vector<BlockHash> keys = tier_keys(link, r.cache_namespace, prompt, r.num_prompt_tokens - 1);
    if (keys.empty()) continue;
    t.planned_tiers |= bit;
    const auto found = static_cast<int32_t>(keys.size()) * bs;
    const double est_load_ms = 1e3 * static_cast<double>(keys.size()) * seconds_per_block(link);
    const double est_recompute_ms = 1e3 * found / prefill_tokens_per_s();
    const bool always = links_[link].policy == TierLoadPolicy::kAlways;
    const bool load = always || est_load_ms < est_recompute_ms;
    t.found_tokens += found;
    if (links_[link].kind == TierKind::kRedis) t.found_tokens_redis += found;
    t.est_load_ms += est_load_ms;
    t.est_recompute_ms += est_recompute_ms;
    t.load = t.load || load;
    // The decision and timeout counters are the disk tier's (hearth_kv_tier_*{tier="disk"}); Redis's decisions are
    // in each response's usage.hearth.tier_load, its timeouts in hearth_kv_redis_timeouts_total.
    const bool disk = links_[link].kind == TierKind::kDisk;
    if (!load) {
      counters_.num_recompute_decisions += disk ? 1 : 0;
      return;
    }
    counters_.num_load_decisions += disk ? 1 : 0;
    const double wait_ms = 2 * std::max(est_recompute_ms, always ? est_load_ms : 0.0);
    const auto wait = std::max<std::chrono::steady_clock::duration>(
        always ? std::chrono::milliseconds(kMinAlwaysLoadWait) : std::chrono::milliseconds(kMinLoadWait),
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double, std::milli>(wait_ms)));
    t.waiting = true;
    t.deadline = std::chrono::steady_clock::now() + wait;
    t.job = links_[link].tier->load(std::move(keys), layout_, owner());
    jobs_.emplace(std::make_pair(link, t.job), r.id);
    return;
  }
}

void KvTiers::persist_new_blocks() {
  if (links_.empty()) return;
  const int64_t now = unix_ms_now();
  for (const NewlyCachedBlock& b : kv_.take_newly_cached()) {
    const BlockMeta& meta = kv_.pool().meta(b.block);
    if (!meta.has_key || meta.key != b.key) continue;  // evicted already (cannot happen within a step)
    TierEntryHeader header;
    header.key = b.key;
    header.parent_key = b.parent_key;
    header.ns = b.ns;
    header.depth = b.depth;
    header.tokens = meta.tokens;
    // The block's retention travels down with it (an expiry as unix ms; 0 on disk means none).
    header.retention = {meta.priority, meta.expires_at == kNoExpiry ? 0 : meta.expires_at};
    header.written_at_ms = now;
    header.payload_bytes = storage_.bytes_per_block();
    header.layout = layout_;
    // With window slabs a tier entry is a whole block: it needs the block's slab (held until the next step).
    const std::optional<BlockId> slab = kv_.pool().window_slab(b.block);
    if (storage_.num_window_slabs() > 0 && !slab) continue;
    std::vector<uint8_t> payload(storage_.bytes_per_block());
    storage_.read_block(b.block, payload, slab.value_or(BlockId{-1}));
    for (size_t link = 0; link < links_.size(); ++link) {
      const bool last = link + 1 == links_.size();
      const bool queued =
          links_[link].tier->write(last ? std::move(header) : header, last ? std::move(payload) : payload, model_);
      if (queued && links_[link].kind == TierKind::kDisk) counters_.num_blocks_persisted++;
      if (queued && links_[link].kind == TierKind::kRedis) counters_.num_blocks_persisted_redis++;
    }
  }
}

void KvTiers::apply_load(Scheduler& scheduler, size_t link, TierLoadDone& done) {
  auto job = jobs_.find({link, done.job});
  if (job == jobs_.end()) return;
  Request* r = scheduler.find(job->second);
  jobs_.erase(job);
  if (r == nullptr || r->tier.job != done.job) return;  // finished meanwhile
  r->tier.waiting = false;
  if (done.blocks.empty()) return;
  const int32_t bs = kv_.block_size();
  // The loaded blocks continue the prompt at the block whose parent is the first one's parent.
  const std::span<const TokenId> tokens(r->tokens.data(), r->num_prompt_tokens);
  const int32_t first = done.blocks.front().header.depth;
  const auto n_blocks = first + static_cast<int32_t>(done.blocks.size());
  const auto fill = [&](int32_t i, BlockId block, uint8_t* priority, int64_t* expires_at) {
    if (i < first) return false;  // the pool lost a block before the loaded ones
    const TierBlock& loaded = done.blocks[static_cast<size_t>(i - first)];
    const auto expected = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    if (loaded.payload.size() != storage_.bytes_per_block() ||
        !std::equal(expected.begin(), expected.end(), loaded.header.tokens.begin(), loaded.header.tokens.end())) {
      return false;
    }
    storage_.write_block(block, loaded.payload, kv_.pool().window_slab(block).value_or(BlockId{-1}));
    // Pins stay pins only in the pool; on disk they were the highest priority, which they keep.
    *priority = loaded.header.retention.priority;
    if (loaded.header.retention.expires_at_ms != 0) *expires_at = loaded.header.retention.expires_at_ms;
    return true;
  };
  const int32_t inserted = kv_.insert_chain(r->cache_namespace, tokens, n_blocks, fill);
  r->tier.loaded_tokens += inserted * bs;
  counters_.num_loaded_tokens += static_cast<uint64_t>(inserted) * bs;
  if (links_[link].kind == TierKind::kRedis) {
    r->tier.loaded_tokens_redis += inserted * bs;
    counters_.num_loaded_tokens_redis += static_cast<uint64_t>(inserted) * bs;
  }
  if (!r->tier.timed_out) plan_load(*r);  // the next tier may hold the blocks after these
}

void KvTiers::apply_loads(Scheduler& scheduler) {
  if (links_.empty()) return;
  for (size_t link = 0; link < links_.size(); ++link) {
    for (TierLoadDone& done : links_[link].tier->take_loaded(owner())) apply_load(scheduler, link, done);
  }
  // Loads past their deadline are given up: the request recomputes (a late load still lands in the pool).
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [job, id] : jobs_) {
    Request* r = scheduler.find(id);
    if (r != nullptr && r->tier.waiting && r->tier.job == job.second && now >= r->tier.deadline) {
      r->tier.waiting = false;
      r->tier.timed_out = true;
      counters_.num_load_timeouts += links_[job.first].kind == TierKind::kDisk ? 1 : 0;
    }
  }
}

void KvTiers::wait_for_loads() const {
  if (jobs_.empty()) return;
  links_[jobs_.begin()->first.first].tier->wait_loaded(std::chrono::steady_clock::now() + kWaitSlice, owner());
}

void KvTiers::mark_pinned(const BlockHash& ns, std::span<const TokenId> tokens, int32_t num_tokens) {
  if (links_.empty()) return;
  const int32_t bs = kv_.block_size();
  BlockHash parent = ns;
  for (int32_t i = 0; (i + 1) * bs <= num_tokens && (i + 1) * bs <= static_cast<int32_t>(tokens.size()); ++i) {
    const BlockHash key = hash_block(parent, ns, tokens.subspan(static_cast<size_t>(i) * bs, bs));
    for (const Link& link : links_) link.tier->set_retention(key, TierRetention{kPinnedRetentionPriority, 0});
    parent = key;
  }
}

TierLinkCounters KvTiers::counters() const {
  TierLinkCounters c = counters_;
  c.prefill_tokens_per_s = measured_prefill_tokens_per_s_;
  c.tier_seconds_per_block = disk_ != nullptr ? disk_->seconds_per_block() : 0;
  c.redis_seconds_per_block = redis_ != nullptr ? redis_->seconds_per_block() : 0;
  return c;
}

}  // namespace hearth
