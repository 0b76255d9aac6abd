#include "engine/recurrent_states.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>

#include "kv/block_tier.h"
#include "model/kv_storage.h"
#include "sched/request.h"
#include "util/result.h"

namespace hearth {

BlockHash state_namespace(const BlockHash& ns) {
  static constexpr TokenId kStateTag[] = {TokenId{0x53544154}, TokenId{0x45}};  // "STATE": a chain no prompt makes
  return hash_block(ns, ns, kStateTag);
}

RecurrentStates::RecurrentStates(int32_t n_running, int32_t n_checkpoints, int32_t block_size,
                                 std::vector<BlockTier*> tiers, std::string layout)
    : n_running_(n_running),
      n_checkpoints_(n_checkpoints),
      block_size_(block_size),
      tiers_(std::move(tiers)),
      layout_(std::move(layout)) {
  HEARTH_CHECK(n_running >= 1 && n_checkpoints >= 0 && block_size >= 1, "recurrent states: {} running, {} checkpoints",
               n_running, n_checkpoints);
  for (int32_t s = n_running - 1; s >= 0; --s) free_running_.push_back(s);
  for (int32_t s = n_running + n_checkpoints - 1; s >= n_running; --s) free_checkpoints_.push_back(s);
}

const BlockHash& RecurrentStates::block_key(Running& run, const Request& r, int32_t index) {
  while (static_cast<int32_t>(run.keys.size()) <= index) {
    const auto i = static_cast<int32_t>(run.keys.size());
    const BlockHash& parent = i == 0 ? r.cache_namespace : run.keys.back();
    const std::span<const TokenId> tokens(r.tokens.data() + static_cast<size_t>(i) * block_size_, block_size_);
    run.keys.push_back(hash_block(parent, r.cache_namespace, tokens));
  }
  return run.keys[index];
}

int32_t RecurrentStates::take_checkpoint_slot(int64_t now_ms) {
  if (!free_checkpoints_.empty()) {
    const int32_t slot = free_checkpoints_.back();
    free_checkpoints_.pop_back();
    return slot;
  }
  const auto worth = [now_ms](const Checkpoint& c) {
    const uint8_t priority = c.expires_at <= now_ms ? 0 : c.priority;
    return std::tuple(priority, c.kind, c.last_used);
  };
  auto victim = checkpoints_.end();
  for (auto it = checkpoints_.begin(); it != checkpoints_.end(); ++it) {
    if (std::find(planned_slots_.begin(), planned_slots_.end(), it->second.slot) != planned_slots_.end()) continue;
    if (it->second.pins == 0 && (victim == checkpoints_.end() || worth(it->second) < worth(victim->second))) {
      victim = it;
    }
  }
  if (victim == checkpoints_.end()) return -1;  // none, or every one pinned or planned
  const int32_t slot = victim->second.slot;
  checkpoints_.erase(victim);
  return slot;
}

std::pair<uint8_t, int64_t> RecurrentStates::retention_at(const Request& r, int32_t boundary, int32_t block_size,
                                                          int64_t now_ms) {
  uint8_t priority = kDefaultRetentionPriority;
  int64_t expires_at = kNoExpiry;
  bool covered = false;
  for (const RetentionSpan& span : r.retention) {
    if (span.num_tokens <= boundary - block_size) continue;  // the block holds none of its tokens
    const int64_t until = span.ttl_ms > 0 ? now_ms + span.ttl_ms : kNoExpiry;
    if (!covered || span.priority > priority) {
      priority = span.priority;
      expires_at = until;
    }
    covered = true;
  }
  return {priority, expires_at};
}

int32_t RecurrentStates::acquire(const Request& r, int32_t pos_begin, int32_t n_tokens, KvStorage& kv) {
  auto it = running_.find(r.id);
  if (it == running_.end()) {
    HEARTH_CHECK(!free_running_.empty(), "no recurrent state slot for request {} ({} running slots)", r.id.value,
                 n_running_);
    Running run;
    run.slot = free_running_.back();
    free_running_.pop_back();
    run.num_tokens = -1;
    it = running_.emplace(r.id, std::move(run)).first;
  }
  Running& run = it->second;
  if (run.num_tokens != pos_begin && pos_begin > 0) {
    HEARTH_CHECK(pos_begin % block_size_ == 0, "request {} resumes at {}, inside a block", r.id.value, pos_begin);
    const auto found = checkpoints_.find(block_key(run, r, pos_begin / block_size_ - 1));
    HEARTH_CHECK(found != checkpoints_.end(), "request {} resumes at {} without a state checkpoint", r.id.value,
                 pos_begin);
    found->second.last_used = ++clock_;
    std::memcpy(kv.state_slot(run.slot), kv.state_slot(found->second.slot),
                sizeof(float) * static_cast<size_t>(kv.state_floats_per_slot()));
    num_resumes_++;
  }
  run.num_tokens = pos_begin + n_tokens;
  return run.slot;
}

RecurrentStates::CheckpointPlans RecurrentStates::plan_checkpoints(const Request& r, int32_t pos_begin,
                                                                   int32_t n_tokens, int64_t now_ms) {
  CheckpointPlans plans;
  auto it = running_.find(r.id);
  if (!r.use_cache || n_checkpoints_ == 0 || it == running_.end()) return plans;
  // The chunk's last block boundary, the branch point, then the hints, latest first; each once, inside the chunk.
  const int32_t end = (pos_begin + n_tokens) / block_size_ * block_size_;
  const int32_t branch = r.num_branch_tokens / block_size_ * block_size_;
  std::vector<int32_t> boundaries{end, branch};
  std::vector<int32_t> hints;
  for (const int32_t hint : r.checkpoint_hints) hints.push_back(hint / block_size_ * block_size_);
  std::sort(hints.rbegin(), hints.rend());
  boundaries.insert(boundaries.end(), hints.begin(), hints.end());
  std::vector<int32_t> chosen;
  for (const int32_t b : boundaries) {
    if (b > pos_begin && b <= end && std::find(chosen.begin(), chosen.end(), b) == chosen.end()) chosen.push_back(b);
  }
  size_t n = 0;
  for (const int32_t boundary : chosen) {
    if (n == plans.size()) break;
    const BlockHash key = block_key(it->second, r, boundary / block_size_ - 1);
    if (auto found = checkpoints_.find(key); found != checkpoints_.end()) {
      found->second.last_used = ++clock_;  // the same tokens' state, already kept
      continue;
    }
    const int32_t slot = take_checkpoint_slot(now_ms);
    if (slot < 0) continue;
    Kind kind = Kind::kPassing;
    if (boundary == r.num_prompt_tokens / block_size_ * block_size_) kind = Kind::kPromptEnd;
    if (boundary == branch || std::find(hints.begin(), hints.end(), boundary) != hints.end()) kind = Kind::kBranch;
    const auto [priority, expires_at] = retention_at(r, boundary, block_size_, now_ms);
    checkpoints_[key] = Checkpoint{slot, ++clock_, 0, priority, kind, expires_at};
    num_checkpoints_written_++;
    planned_slots_.push_back(slot);
    plans[n++] = {boundary, slot};
  }
  return plans;
}

std::vector<BlockHash> RecurrentStates::chain_keys(const Request& r, const BlockHash& ns, int32_t n_blocks,
                                                   int32_t block_size) {
  std::vector<BlockHash> keys;
  BlockHash parent = ns;
  for (int32_t i = 0; i < n_blocks; ++i) {
    parent = hash_block(parent, ns, std::span<const TokenId>(r.tokens.data() + static_cast<size_t>(i) * block_size,
                                                             block_size));
    keys.push_back(parent);
  }
  return keys;
}

void RecurrentStates::persist(const Request& r, const CheckpointPlan& plan, const KvStorage& kv) {
  if (plan.slot < 0) return;
  std::erase(planned_slots_, plan.slot);
  if (tiers_.empty()) return;
  const int32_t n_blocks = plan.pos / block_size_;
  const BlockHash sns = state_namespace(r.cache_namespace);
  const std::vector<BlockHash> keys = chain_keys(r, sns, n_blocks, block_size_);
  TierEntryHeader header;
  header.key = keys.back();
  header.parent_key = n_blocks > 1 ? keys[keys.size() - 2] : sns;
  header.ns = sns;
  header.depth = n_blocks - 1;
  header.tokens.assign(r.tokens.begin() + static_cast<ptrdiff_t>(n_blocks - 1) * block_size_,
                       r.tokens.begin() + static_cast<ptrdiff_t>(n_blocks) * block_size_);
  header.written_at_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  header.layout = layout_;
  const float* state = kv.state_slot(plan.slot);
  std::vector<uint8_t> payload(sizeof(float) * static_cast<size_t>(kv.state_floats_per_slot()));
  std::memcpy(payload.data(), state, payload.size());
  header.payload_bytes = payload.size();
  for (BlockTier* tier : tiers_) (void)tier->write(header, payload, {});  // a full queue drops it: it recomputes
}

int32_t RecurrentStates::load_from_tier(const Request& r, KvStorage& kv, int64_t now_ms) {
  if (tiers_.empty() || !r.use_cache || n_checkpoints_ == 0) return 0;
  const int32_t n_blocks = (r.num_prompt_tokens - 1) / block_size_;
  if (n_blocks == 0) return 0;
  const std::vector<BlockHash> keys = chain_keys(r, r.cache_namespace, n_blocks, block_size_);
  for (const BlockHash& key : keys) {
    if (checkpoints_.contains(key)) return 0;  // RAM holds one: the pool's own hit decides
  }
  const std::vector<BlockHash> state_keys = chain_keys(r, state_namespace(r.cache_namespace), n_blocks, block_size_);
  const size_t bytes = sizeof(float) * static_cast<size_t>(kv.state_floats_per_slot());
  const auto owner = reinterpret_cast<uintptr_t>(this);
  for (int32_t i = n_blocks - 1; i >= 0; --i) {
    for (BlockTier* tier : tiers_) {
      if (!tier->contains(state_keys[i])) continue;
      const uint64_t job = tier->load({state_keys[i]}, layout_, owner);
      const auto deadline = std::chrono::steady_clock::now() + kTierLoadWait;
      std::vector<TierLoadDone> done;
      while (done.empty() && std::chrono::steady_clock::now() < deadline) {
        tier->wait_loaded(deadline, owner);
        for (TierLoadDone& d : tier->take_loaded(owner)) {
          if (d.job == job) done.push_back(std::move(d));
        }
      }
      if (done.empty() || done[0].blocks.size() != 1 || done[0].blocks[0].payload.size() != bytes) continue;
      const int32_t slot = take_checkpoint_slot(now_ms);
      if (slot < 0) return 0;
      std::memcpy(kv.state_slot(slot), done[0].blocks[0].payload.data(), bytes);
      checkpoints_[keys[i]] = Checkpoint{slot, ++clock_, 0, kDefaultRetentionPriority, Kind::kPromptEnd, kNoExpiry};
      num_tier_loads_++;
      return (i + 1) * block_size_;
    }
  }
  return 0;
}

int32_t RecurrentStates::pin(const BlockHash& pin_key, const BlockHash& ns, std::span<const TokenId> tokens,
                             int32_t num_tokens) {
  if (pinned_.contains(pin_key)) return 0;
  BlockHash parent = ns;
  std::optional<std::pair<BlockHash, int32_t>> deepest;
  for (int32_t i = 0; (i + 1) * block_size_ <= std::min<int32_t>(num_tokens, static_cast<int32_t>(tokens.size())); ++i) {
    parent = hash_block(parent, ns, tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_));
    if (checkpoints_.contains(parent)) deepest = {{parent, (i + 1) * block_size_}};
  }
  if (!deepest) return 0;
  Checkpoint& c = checkpoints_.at(deepest->first);
  if (c.pins == 0 && 2 * (num_pinned_ + 1) > n_checkpoints_) return 0;
  if (c.pins++ == 0) num_pinned_++;
  pinned_[pin_key] = deepest->first;
  return deepest->second;
}

void RecurrentStates::unpin(const BlockHash& pin_key) {
  auto it = pinned_.find(pin_key);
  if (it == pinned_.end()) return;
  auto c = checkpoints_.find(it->second);
  if (c != checkpoints_.end() && --c->second.pins == 0) num_pinned_--;
  pinned_.erase(it);
}

void RecurrentStates::forget(RequestId id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  free_running_.push_back(it->second.slot);
  running_.erase(it);
}

}  // namespace hearth
