// Two engines on stories260K sharing one real redis-server (kv/redis_tier.h), as two Hearth servers would: engine B
// loads the prefix engine A computed and its logits are bit-identical to a cold run; Redis stopped mid-run, restarted
// empty, or holding a corrupted value never breaks a request (it recomputes, counted); two salts never read each
// other's blocks.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine
#include "kv/redis_test_server.h"     // tests/kv
#include "kv/redis_tier.h"
#include "model/kv_storage.h"
#include "util/thread_pool.h"

namespace hearth {
namespace {

using testing::load_model;
using testing::RedisTestServer;
using testing::run_to_completion;
using testing::story_tokens;

constexpr auto kWait = std::chrono::seconds(5);

std::unique_ptr<RedisTier> open_redis(const RedisTestServer& server, const std::string& id) {
  RedisTierConfig c;
  c.url = *parse_redis_url(server.url());
  c.server_id = id;
  return RedisTier::open(c);
}

EngineConfig redis_config(RedisTier* redis) {
  EngineConfig c;
  c.kv_memory_bytes = 8ll << 20;
  c.max_batch_tokens = 64;
  c.redis_tier = redis;
  c.redis_load_policy = TierLoadPolicy::kAlways;
  return c;
}

struct Served {
  std::vector<float> logits;  // of the last prompt token
  std::vector<TokenId> tokens;
  RequestUsage usage;
};

Served serve(Engine& engine, const std::vector<TokenId>& prompt, int32_t max_tokens = 8, const std::string& salt = "") {
  Served r;
  bool first = true;
  engine.set_logits_observer([&](RequestId, std::span<const float> row) {
    if (first) r.logits.assign(row.begin(), row.end());
    first = false;
  });
  RequestSpec spec;
  spec.prompt = prompt;
  spec.sampling.temperature = 0;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  spec.cache_salt = salt;
  auto id = engine.add_request(spec);
  EXPECT_TRUE(id.ok());
  auto done = run_to_completion(engine);
  r.tokens = done[id->value].tokens;
  r.usage = done[id->value].usage;
  engine.set_logits_observer({});
  return r;
}

bool same_logits(const Served& a, const Served& b) {
  return a.logits.size() == b.logits.size() &&
         std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0;
}

class RedisEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!server_.installed()) GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh installs it)";
    redis_a_ = open_redis(server_, "a:1");
    redis_b_ = open_redis(server_, "b:2");
  }

  // Engine A (server A) computes prefix_ under `salt`; B's tier hears of its 6 blocks.
  void compute_on_a(const std::string& salt = "") {
    auto a = Engine::create(*m_.model, *m_.tokenizer, redis_config(redis_a_.get()), pool_);
    serve(**a, prefix_, 1, salt);
    redis_a_->flush();
    EXPECT_EQ(redis_a_->stats().num_writes, 6u);  // 100 prompt tokens: 6 full blocks of 16
    EXPECT_TRUE(redis_b_->wait_num_known(6, std::chrono::steady_clock::now() + kWait));
  }

  Served cold(const std::string& salt = "") {
    auto engine = Engine::create(*m_.model, *m_.tokenizer, redis_config(nullptr), pool_);
    return serve(**engine, prompt_, 8, salt);
  }

  RedisTestServer server_;
  LoadedModel& m_ = load_model(testing::kStories);
  ThreadPool pool_{2};
  std::unique_ptr<RedisTier> redis_a_;
  std::unique_ptr<RedisTier> redis_b_;
  std::vector<TokenId> prefix_ = story_tokens(*m_.tokenizer, 100, "Once upon a time");
  std::vector<TokenId> prompt_ = [&] {
    auto p = prefix_;
    for (TokenId t : story_tokens(*m_.tokenizer, 12, "The cat sat on the mat.")) p.push_back(t);
    return p;
  }();
};

TEST_F(RedisEngineTest, EngineBLoadsWhatEngineAComputedBitIdenticalToACold) {
  compute_on_a();
  auto b = Engine::create(*m_.model, *m_.tokenizer, redis_config(redis_b_.get()), pool_);
  const Served warm = serve(**b, prompt_);
  const Served reference = cold();
  EXPECT_EQ(warm.usage.cached_tokens, 96);
  EXPECT_EQ(warm.usage.tier.found_tokens_redis, 96);
  EXPECT_EQ(warm.usage.tier.loaded_tokens, 96);
  EXPECT_EQ(warm.usage.tier.loaded_tokens_redis, 96);
  EXPECT_EQ(reference.usage.cached_tokens, 0);
  EXPECT_TRUE(same_logits(warm, reference));
  EXPECT_EQ(warm.tokens, reference.tokens);
  const EngineStats stats = (*b)->stats();
  ASSERT_TRUE(stats.redis.has_value());
  EXPECT_FALSE(stats.disk.has_value());
  EXPECT_EQ(stats.redis->num_loaded_blocks, 6u);
  EXPECT_EQ(stats.tier_link.num_loaded_tokens_redis, 96u);
  (*b)->check_invariants();
}

TEST_F(RedisEngineTest, RedisStoppedMidRunAndRestartedEmptyOnlyMakesRequestsRecompute) {
  compute_on_a();
  auto b = Engine::create(*m_.model, *m_.tokenizer, redis_config(redis_b_.get()), pool_);
  const Served reference = cold();
  server_.stop();
  const Served down = serve(**b, prompt_);
  EXPECT_EQ(down.usage.cached_tokens, 0);
  EXPECT_EQ(down.usage.tier.loaded_tokens_redis, 0);
  EXPECT_TRUE(same_logits(down, reference));
  EXPECT_EQ(down.tokens, reference.tokens);
  const RedisTierStats st = redis_b_->stats();
  EXPECT_GE(st.num_errors + st.num_timeouts, 1u);

  // Restarted empty: B's tier sees another run_id at its reconnect and forgets the keys, or a load finds them gone
  // (counted); either way the request recomputes. (Within the reconnect backoff a load comes back empty at once.)
  server_.start();
  Served empty;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  const auto noticed = [&] {
    const RedisTierStats s = redis_b_->stats();
    return s.num_missing > 0 || s.num_restarts_seen > 0;
  };
  while (!noticed() && std::chrono::steady_clock::now() < deadline) {
    auto fresh = Engine::create(*m_.model, *m_.tokenizer, redis_config(redis_b_.get()), pool_);
    empty = serve(**fresh, prompt_);
    EXPECT_EQ(empty.usage.tier.loaded_tokens_redis, 0);
    EXPECT_TRUE(same_logits(empty, reference));
    (*fresh)->check_invariants();
  }
  EXPECT_TRUE(noticed());
  // The recompute wrote the chain again: another engine loads it from the restarted Redis.
  redis_b_->flush();
  Served refilled;
  const auto refill_deadline = std::chrono::steady_clock::now() + kWait;
  do {
    auto fresh = Engine::create(*m_.model, *m_.tokenizer, redis_config(redis_b_.get()), pool_);
    refilled = serve(**fresh, prompt_);
    redis_b_->flush();
  } while (refilled.usage.tier.loaded_tokens_redis == 0 && std::chrono::steady_clock::now() < refill_deadline);
  EXPECT_EQ(refilled.usage.tier.loaded_tokens_redis, 96);
  EXPECT_TRUE(same_logits(refilled, reference));
}

TEST_F(RedisEngineTest, ACorruptedValueIsNeverLoadedAndTheAnswerIsUnchanged) {
  compute_on_a();
  // Block 3 of the chain (the 4th: depth 3, a u32 at offset 112 of the entry): one bit of its K/V flipped.
  auto b = Engine::create(*m_.model, *m_.tokenizer, redis_config(redis_b_.get()), pool_);
  int flipped = 0;
  for (const std::string& key : server_.command_list({"KEYS", "hearth:kv:*"})) {
    std::string value = server_.command({"GET", key});
    if (value.size() < 120 || value[112] != 3) continue;
    value[value.size() - 100] ^= 0x10;
    server_.command({"SET", key, value});
    flipped++;
  }
  ASSERT_EQ(flipped, 1);
  const Served warm = serve(**b, prompt_);
  const Served reference = cold();
  EXPECT_EQ(warm.usage.tier.loaded_tokens_redis, 48);  // blocks 0-2; the corrupt 3rd ends the chain
  EXPECT_EQ(redis_b_->stats().num_corrupt_removed, 1u);
  EXPECT_TRUE(same_logits(warm, reference));
  EXPECT_EQ(warm.tokens, reference.tokens);
}

TEST_F(RedisEngineTest, TwoSaltsSharingRedisNeverReadEachOthersBlocks) {
  compute_on_a("alice");
  auto b = Engine::create(*m_.model, *m_.tokenizer, redis_config(redis_b_.get()), pool_);
  const Served bob = serve(**b, prompt_, 8, "bob");
  EXPECT_EQ(bob.usage.tier.found_tokens, 0);
  EXPECT_EQ(bob.usage.cached_tokens, 0);
  EXPECT_EQ(redis_b_->stats().num_loaded_blocks, 0u);
  const Served alice = serve(**b, prompt_, 8, "alice");
  EXPECT_EQ(alice.usage.tier.loaded_tokens_redis, 96);
  EXPECT_TRUE(same_logits(alice, cold("alice")));
}

}  // namespace
}  // namespace hearth
