#include "engine/recurrent_states.h"

#include <algorithm>
#include <cstring>

#include "model/kv_storage.h"
#include "sched/request.h"
#include "util/result.h"

namespace hearth {

RecurrentStates::RecurrentStates(int32_t n_running, int32_t n_checkpoints, int32_t block_size)
    : n_running_(n_running), n_checkpoints_(n_checkpoints), block_size_(block_size) {
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

int32_t RecurrentStates::take_checkpoint_slot() {
  if (!free_checkpoints_.empty()) {
    const int32_t slot = free_checkpoints_.back();
    free_checkpoints_.pop_back();
    return slot;
  }
  if (checkpoints_.empty()) return -1;
  auto oldest = std::min_element(checkpoints_.begin(), checkpoints_.end(),
                                 [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
  const int32_t slot = oldest->second.slot;
  checkpoints_.erase(oldest);
  return slot;
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

RecurrentStates::CheckpointPlan RecurrentStates::plan_checkpoint(const Request& r, int32_t pos_begin,
                                                                 int32_t n_tokens) {
  const int32_t boundary = (pos_begin + n_tokens) / block_size_ * block_size_;
  auto it = running_.find(r.id);
  if (!r.use_cache || boundary <= pos_begin || n_checkpoints_ == 0 || it == running_.end()) return {};
  const BlockHash key = block_key(it->second, r, boundary / block_size_ - 1);
  if (auto found = checkpoints_.find(key); found != checkpoints_.end()) {
    found->second.last_used = ++clock_;  // the same tokens' state, already kept
    return {};
  }
  const int32_t slot = take_checkpoint_slot();
  if (slot < 0) return {};
  checkpoints_[key] = Checkpoint{slot, ++clock_};
  num_checkpoints_written_++;
  return {boundary, slot};
}

void RecurrentStates::forget(RequestId id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  free_running_.push_back(it->second.slot);
  running_.erase(it);
}

}  // namespace hearth
