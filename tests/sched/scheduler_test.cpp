// Scheduler against the real KvCacheManager and no model at all: exact chunks, budgets, admission and preemption.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

namespace hearth {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void TearDown() override { kv_.check_invariants(); }

  RequestId add(int32_t n_prompt, int32_t max_tokens = 8) {
    auto r = std::make_unique<Request>();
    r->id = RequestId{next_id_++};
    for (int32_t i = 0; i < n_prompt; ++i) r->tokens.push_back(TokenId{static_cast<int32_t>(r->id.value * 1000 + i)});
    r->num_prompt_tokens = n_prompt;
    r->max_tokens = max_tokens;
    r->stop_token_ids = {TokenId{2}};
    const RequestId id = r->id;
    auto added = sched_.add_request(std::move(r));
    EXPECT_TRUE(added.ok()) << added.error().message;
    return id;
  }

  // Plays the model and the engine: every chunk that needs logits "samples" token 7, and a request finishes by
  // its token limits (token_finish_reason) or, when the pool stopped it, with length.
  std::vector<std::unique_ptr<Request>> step(SchedulerOutput* plan_out = nullptr) {
    SchedulerOutput plan = sched_.schedule();
    std::vector<std::unique_ptr<Request>> finished;
    for (RequestId id : plan.stopped_by_kv_pool) finished.push_back(sched_.finish(id, FinishReason::kLength));
    std::vector<TokenId> sampled;
    for (const auto& c : plan.chunks) {
      if (c.needs_logits) sampled.push_back(TokenId{7});
    }
    sched_.update(plan, sampled);
    for (const auto& c : plan.chunks) {
      if (!c.needs_logits) continue;
      const FinishReason reason = token_finish_reason(*c.request, TokenId{7});
      if (reason != FinishReason::kNone) finished.push_back(sched_.finish(c.request->id, reason));
    }
    if (plan_out) *plan_out = plan;
    kv_.check_invariants();
    return finished;
  }

  KvCacheManager kv_{{.num_blocks = 10, .block_size = 4, .max_pinned_blocks = 5}};
  Scheduler sched_{{.max_batch_tokens = 8, .max_running = 4, .max_waiting = 3, .max_model_len = 64}, kv_};
  uint64_t next_id_ = 1;
};

std::vector<std::pair<uint64_t, int32_t>> chunks_of(const SchedulerOutput& plan) {
  std::vector<std::pair<uint64_t, int32_t>> out;
  for (const auto& c : plan.chunks) out.push_back({c.request->id.value, c.num_tokens});
  return out;
}

TEST_F(SchedulerTest, LongPromptIsChunkedUnderTheBudget) {
  add(20, 2);
  SchedulerOutput plan;
  step(&plan);
  EXPECT_EQ(chunks_of(plan), (std::vector<std::pair<uint64_t, int32_t>>{{1, 8}}));
  EXPECT_FALSE(plan.chunks[0].needs_logits);
  step(&plan);
  EXPECT_EQ(chunks_of(plan), (std::vector<std::pair<uint64_t, int32_t>>{{1, 8}}));
  step(&plan);
  EXPECT_EQ(chunks_of(plan), (std::vector<std::pair<uint64_t, int32_t>>{{1, 4}}));
  EXPECT_TRUE(plan.chunks[0].needs_logits);
  auto finished = step(&plan);  // decode the second token: max_tokens reached
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]->finish_reason, FinishReason::kLength);
  EXPECT_EQ(finished[0]->num_output_tokens(), 2);
  EXPECT_EQ(kv_.pool().num_blocks_in_use(), 0);
}

TEST_F(SchedulerTest, DecodesGoFirstSoAPrefillNeverStallsThem) {
  add(3, 8);
  step();  // request 1 prefilled, now decoding
  add(30, 2);
  SchedulerOutput plan;
  step(&plan);
  EXPECT_EQ(chunks_of(plan), (std::vector<std::pair<uint64_t, int32_t>>{{1, 1}, {2, 7}}));
  step(&plan);
  EXPECT_EQ(chunks_of(plan), (std::vector<std::pair<uint64_t, int32_t>>{{1, 1}, {2, 7}}));
}

TEST_F(SchedulerTest, StopTokenFinishesWithoutEmitting) {
  auto r = std::make_unique<Request>();
  r->id = RequestId{42};
  r->tokens = {TokenId{1}, TokenId{5}};
  r->num_prompt_tokens = 2;
  r->max_tokens = 5;
  r->stop_token_ids = {TokenId{7}};
  ASSERT_TRUE(sched_.add_request(std::move(r)).ok());
  auto finished = step();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]->finish_reason, FinishReason::kStop);
  EXPECT_EQ(finished[0]->num_output_tokens(), 0);
}

TEST_F(SchedulerTest, NewestRequestIsPreemptedAndResumesFromTheCache) {
  add(8, 30);  // 2 blocks now, grows to 10 blocks' worth
  add(8, 30);
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(sched_.num_running(), 2);
  uint64_t preemptions = 0;
  for (int i = 0; i < 40 && sched_.has_unfinished(); ++i) {
    SchedulerOutput plan;
    step(&plan);
    for (RequestId p : plan.preempted) {
      EXPECT_EQ(p, RequestId{2}) << "the newest request is the victim";
      preemptions++;
    }
  }
  EXPECT_GT(preemptions, 0u);
  EXPECT_GT(sched_.find(RequestId{2})->num_preemptions, 0);
}

TEST_F(SchedulerTest, AdmissionWaitsForBlocks) {
  add(24, 8);  // 6 blocks for the prompt
  add(20, 8);  // 5 more: does not fit beside the first
  SchedulerOutput plan;
  step(&plan);
  EXPECT_EQ(sched_.num_running(), 1);
  EXPECT_EQ(sched_.num_waiting(), 1);
}

TEST_F(SchedulerTest, RejectsWhatCanNeverRunWithTheNumbers) {
  auto make = [&](int32_t n_prompt, int32_t max_tokens) {
    auto r = std::make_unique<Request>();
    r->id = RequestId{next_id_++};
    r->tokens.assign(n_prompt, TokenId{3});
    r->num_prompt_tokens = n_prompt;
    r->max_tokens = max_tokens;
    return sched_.add_request(std::move(r));
  };
  auto too_long = make(65, 1);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("65 tokens"), std::string::npos) << too_long.error().message;
  auto beyond = make(40, 30);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.error().message.find("70 tokens"), std::string::npos) << beyond.error().message;
  auto pool = make(40, 1);  // the prompt and one generated token: 41 tokens = 11 blocks > 10
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.error().message.find("need 11 KV blocks"), std::string::npos) << pool.error().message;
  EXPECT_EQ(pool.error().code, SubmitErrorCode::kExceedsKvPool);
  EXPECT_TRUE(make(39, 25).ok()) << "40 tokens fit; max_tokens reserves nothing";
  EXPECT_FALSE(make(0, 1).ok());
  EXPECT_FALSE(make(4, 0).ok());
}

// KV grows on demand: a prompt that fits is admitted whatever max_tokens says, and a request alone at the pool's
// end is stopped (length, stopped_by_kv_pool) instead of preempting itself and coming back for ever.
TEST_F(SchedulerTest, MaxTokensIsALimitNotAReservation) {
  const RequestId id = add(30, 20);  // 50 tokens would be 13 blocks; the pool has 10 (40 tokens)
  std::vector<std::unique_ptr<Request>> finished;
  for (int i = 0; i < 100 && sched_.has_unfinished(); ++i) {
    SchedulerOutput plan;
    for (auto& r : step(&plan)) finished.push_back(std::move(r));
    EXPECT_TRUE(plan.preempted.empty()) << "a request alone never preempts itself";
  }
  ASSERT_FALSE(sched_.has_unfinished());
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]->id, id);
  EXPECT_EQ(finished[0]->finish_reason, FinishReason::kLength);
  EXPECT_TRUE(finished[0]->stopped_by_kv_pool);
  // 40 tokens have K/V (the whole pool); the 41st was sampled from the 40th's logits.
  EXPECT_EQ(finished[0]->num_tokens(), 41);
  EXPECT_EQ(finished[0]->num_output_tokens(), 11);
  EXPECT_EQ(finished[0]->num_preemptions, 0);
  EXPECT_EQ(kv_.pool().num_blocks_in_use(), 0);
}

TEST_F(SchedulerTest, MaxTokensWithinThePoolIsNotStopped) {
  add(30, 10);  // 40 tokens: exactly the pool
  auto finished = step();
  while (finished.empty()) finished = step();
  EXPECT_EQ(finished[0]->finish_reason, FinishReason::kLength);
  EXPECT_FALSE(finished[0]->stopped_by_kv_pool);
  EXPECT_EQ(finished[0]->num_output_tokens(), 10);
}

// Two requests that each fit the pool alone but not together: the older preempts the newer, runs to the pool's
// end alone and is stopped; the newer resumes and does the same. Both finish; nothing cycles.
TEST_F(SchedulerTest, TwoRequestsCompetingForThePoolBothFinish) {
  add(12, 30);  // 42 tokens each: 11 blocks, the pool has 10
  add(12, 30);
  std::vector<std::unique_ptr<Request>> finished;
  int steps = 0;
  for (; steps < 200 && sched_.has_unfinished(); ++steps) {
    SchedulerOutput plan;
    for (auto& r : step(&plan)) finished.push_back(std::move(r));
    for (RequestId p : plan.preempted) EXPECT_EQ(p, RequestId{2}) << "only the newest is preempted";
  }
  ASSERT_FALSE(sched_.has_unfinished()) << "no progress after " << steps << " steps";
  ASSERT_EQ(finished.size(), 2u);
  for (const auto& r : finished) {
    EXPECT_EQ(r->finish_reason, FinishReason::kLength) << r->id.value;
    EXPECT_TRUE(r->stopped_by_kv_pool) << r->id.value;
    EXPECT_EQ(r->num_tokens(), 41) << r->id.value;
  }
  EXPECT_EQ(finished[0]->id, RequestId{1});
  EXPECT_EQ(finished[0]->num_preemptions, 0);
  EXPECT_EQ(finished[1]->num_preemptions, 1);
  EXPECT_EQ(sched_.num_preemptions(), 1u);
  EXPECT_EQ(kv_.pool().num_blocks_in_use(), 0);
}

// A queued request that pins made too big for the pool (they grew after it was accepted) is stopped once nothing
// runs, instead of blocking the queue for ever.
TEST_F(SchedulerTest, QueuedRequestThatPinsOutgrewIsStoppedNotStuck) {
  const RequestId first = add(20, 1);   // 5 blocks
  const RequestId second = add(28, 4);  // 8 blocks for its prompt: waits beside the first
  auto finished = step();
  while (finished.empty()) finished = step();
  EXPECT_EQ(sched_.num_running(), 0);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]->id, first);
  std::vector<TokenId> prompt(finished[0]->tokens.begin(), finished[0]->tokens.begin() + 20);
  auto pin = kv_.pin_prefix(BlockHash{}, prompt);  // 5 blocks pinned: 5 usable, the second needs 8
  ASSERT_TRUE(pin.ok()) << pin.error().message;
  for (int i = 0; i < 10 && sched_.has_unfinished(); ++i) {
    for (auto& r : step()) finished.push_back(std::move(r));
  }
  ASSERT_FALSE(sched_.has_unfinished());
  ASSERT_EQ(finished.size(), 2u);
  EXPECT_EQ(finished[1]->id, second);
  EXPECT_EQ(finished[1]->finish_reason, FinishReason::kLength);
  EXPECT_TRUE(finished[1]->stopped_by_kv_pool);
  EXPECT_EQ(finished[1]->num_output_tokens(), 0);
  EXPECT_TRUE(kv_.unpin(pin->key));
}

TEST_F(SchedulerTest, FullWaitingQueueIsOverloaded) {
  for (int i = 0; i < 3; ++i) add(4);
  auto r = std::make_unique<Request>();
  r->id = RequestId{99};
  r->tokens = {TokenId{1}};
  r->num_prompt_tokens = 1;
  auto result = sched_.add_request(std::move(r));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("overloaded"), std::string::npos);
  while (sched_.has_unfinished()) step();
}

TEST(SchedulerSharedPrefix, SimultaneousArrivalsComputeTheSharedPrefixOnce) {
  for (const bool dedup_expected : {true, false}) {
    KvCacheManager kv({.num_blocks = 64, .block_size = 4});
    Scheduler sched({.max_batch_tokens = 8, .max_running = 8, .max_waiting = 8, .max_model_len = 64}, kv);
    for (uint64_t id = 1; id <= 4; ++id) {
      auto r = std::make_unique<Request>();
      r->id = RequestId{id};
      for (int32_t i = 0; i < 16; ++i) r->tokens.push_back(TokenId{500 + i});  // the shared "system prompt"
      for (int32_t i = 0; i < 3; ++i) r->tokens.push_back(TokenId{static_cast<int32_t>(id * 100 + i)});
      r->num_prompt_tokens = 19;
      r->max_tokens = 2;
      r->use_cache = dedup_expected;  // without the cache nothing is shared, so everything is computed
      ASSERT_TRUE(sched.add_request(std::move(r)).ok());
    }
    int32_t prompt_tokens_computed = 0;
    for (int step = 0; sched.has_unfinished() && step < 100; ++step) {
      SchedulerOutput plan = sched.schedule();
      std::vector<TokenId> sampled;
      for (const auto& c : plan.chunks) {
        const int32_t prompt_end = std::min(c.pos_begin + c.num_tokens, c.request->num_prompt_tokens);
        prompt_tokens_computed += std::max(0, prompt_end - c.pos_begin);
        if (c.needs_logits) sampled.push_back(TokenId{7});
      }
      sched.update(plan, sampled);
      for (const auto& c : plan.chunks) {
        const FinishReason reason = c.needs_logits ? token_finish_reason(*c.request, TokenId{7}) : FinishReason::kNone;
        if (reason != FinishReason::kNone) sched.finish(c.request->id, reason);
      }
      kv.check_invariants();
    }
    EXPECT_FALSE(sched.has_unfinished());
    // With the cache: the first request computes all 19 tokens, the other three only their 3-token suffixes.
    EXPECT_EQ(prompt_tokens_computed, dedup_expected ? 19 + 3 * 3 : 4 * 19);
  }
}

TEST_F(SchedulerTest, FinishReleasesAtOnce) {
  const RequestId id = add(12, 8);
  step();
  EXPECT_GT(kv_.pool().num_blocks_in_use(), 0);
  auto r = sched_.finish(id, FinishReason::kAborted);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(kv_.pool().num_blocks_in_use(), 0);
  EXPECT_EQ(sched_.finish(id, FinishReason::kAborted), nullptr);
  EXPECT_FALSE(sched_.has_unfinished());
}

}  // namespace
}  // namespace hearth
