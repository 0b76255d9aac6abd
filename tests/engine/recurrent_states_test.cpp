// RecurrentStates' checkpoint eviction (engine/recurrent_states.h): when a new checkpoint needs a slot, the one
// taken is the least worth keeping: lowest retention priority (0 once its TTL has passed), then a passing boundary
// before a prompt's end before a branch point, then the least recently used.

#include <gtest/gtest.h>

#include "engine/recurrent_states.h"
#include "model/kv_storage.h"
#include "sched/request.h"

namespace hearth {
namespace {

constexpr int32_t kBlock = 4;

// A request of `n` prompt tokens starting at `first`, in the default namespace.
Request prompt(uint64_t id, int32_t first, int32_t n) {
  Request r;
  r.id = RequestId{id};
  for (int32_t i = 0; i < n; ++i) r.tokens.push_back(TokenId{first + i});
  r.num_prompt_tokens = n;
  return r;
}

// The key of the block ending at token `end` of r's prompt, as the pool keys it.
BlockHash key_at(const Request& r, int32_t end) {
  BlockHash parent = r.cache_namespace;
  for (int32_t b = 0; b < end / kBlock; ++b) {
    parent = hash_block(parent, r.cache_namespace,
                        std::span<const TokenId>(r.tokens.data() + static_cast<size_t>(b) * kBlock, kBlock));
  }
  return parent;
}

class CheckpointEviction : public ::testing::Test {
 protected:
  void SetUp() override { kv_.reserve_state_slots(kRunning + kCheckpoints, 8); }

  // Runs r's whole prompt as one chunk and keeps the checkpoints it plans; frees its running slot after.
  void run(const Request& r, int64_t now_ms = 0) {
    states_.acquire(r, 0, r.num_prompt_tokens, kv_);
    for (const auto& plan : states_.plan_checkpoints(r, 0, r.num_prompt_tokens, now_ms)) {
      if (plan.pos >= 0) states_.persist(r, plan, kv_);
    }
    states_.forget(r.id);
  }

  static constexpr int32_t kRunning = 2;
  static constexpr int32_t kCheckpoints = 2;
  KvStorage kv_{1, 1, 4, kBlock, 8};
  RecurrentStates states_{kRunning, kCheckpoints, kBlock};
};

TEST_F(CheckpointEviction, LeastRecentlyUsedAmongEquals) {
  const Request a = prompt(1, 100, 8), b = prompt(2, 200, 8), c = prompt(3, 300, 8);
  run(a);
  run(b);
  run(c);
  EXPECT_FALSE(states_.has_checkpoint(key_at(a, 8)));
  EXPECT_TRUE(states_.has_checkpoint(key_at(b, 8)));
  EXPECT_TRUE(states_.has_checkpoint(key_at(c, 8)));
}

TEST_F(CheckpointEviction, HigherRetentionPriorityOutlivesNewerOnes) {
  Request a = prompt(1, 100, 8);
  a.retention = {RetentionSpan{8, 90, 0}};  // a cache_control'd prompt
  const Request b = prompt(2, 200, 8), c = prompt(3, 300, 8);
  run(a);
  run(b);
  run(c);  // evicts b, not the older a
  EXPECT_TRUE(states_.has_checkpoint(key_at(a, 8)));
  EXPECT_FALSE(states_.has_checkpoint(key_at(b, 8)));
  EXPECT_TRUE(states_.has_checkpoint(key_at(c, 8)));
}

TEST_F(CheckpointEviction, AnExpiredSpanCountsAsPriorityZero) {
  Request a = prompt(1, 100, 8);
  a.retention = {RetentionSpan{8, 90, 1000}};  // kept high for one second
  const Request b = prompt(2, 200, 8), c = prompt(3, 300, 8);
  run(a, 0);
  run(b, 10);
  run(c, 5000);  // a's TTL has passed: it goes first
  EXPECT_FALSE(states_.has_checkpoint(key_at(a, 8)));
  EXPECT_TRUE(states_.has_checkpoint(key_at(b, 8)));
}

TEST_F(CheckpointEviction, ABranchPointOutlivesAPromptEndWhichOutlivesAPassingBoundary) {
  // a: a checkpoint hint (a system prompt ending at 4) and its prompt's end (8).
  Request a = prompt(1, 100, 8);
  a.checkpoint_hints = {4};
  run(a);
  ASSERT_TRUE(states_.has_checkpoint(key_at(a, 4)));
  ASSERT_TRUE(states_.has_checkpoint(key_at(a, 8)));
  // b's first chunk ends inside its prompt: a passing boundary, newest of all.
  const Request b = prompt(2, 200, 12);
  states_.acquire(b, 0, 8, kv_);
  for (const auto& plan : states_.plan_checkpoints(b, 0, 8)) {
    if (plan.pos >= 0) states_.persist(b, plan, kv_);
  }
  // a's prompt end went (below the hint); b's passing boundary took its slot.
  EXPECT_TRUE(states_.has_checkpoint(key_at(a, 4)));
  EXPECT_FALSE(states_.has_checkpoint(key_at(a, 8)));
  EXPECT_TRUE(states_.has_checkpoint(key_at(b, 8)));
  // b's second chunk ends its prompt: its own passing boundary goes before a's hint.
  states_.acquire(b, 8, 4, kv_);
  for (const auto& plan : states_.plan_checkpoints(b, 8, 4)) {
    if (plan.pos >= 0) states_.persist(b, plan, kv_);
  }
  EXPECT_TRUE(states_.has_checkpoint(key_at(a, 4)));
  EXPECT_FALSE(states_.has_checkpoint(key_at(b, 8)));
  EXPECT_TRUE(states_.has_checkpoint(key_at(b, 12)));
}

}  // namespace
}  // namespace hearth
