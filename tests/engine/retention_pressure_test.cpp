// Retention under pressure, on a tiny synthetic model (1 layer, dim 64, 2,048-token context, stories260K's
// vocabulary): house rules at priority 90 survive a stream of 50 one-off 1,500-token documents at the default
// priority through a pool that holds three of them, and an entry whose TTL ran out (injected clock) is the first to
// go. The same stream without retention evicts the house rules (the control).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine
#include "model/synth.h"

namespace hearth {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kRulesTokens = 192;  // 12 blocks
constexpr int32_t kDocTokens = 1500;   // 94 blocks with its one generated token
constexpr int32_t kPoolBlocks = kRulesTokens / kBlockSize + 3 * 94 + 4;

// Distinct pseudo-random ids per seed (never 0..2: unknown, BOS, EOS in stories260K's vocabulary).
std::vector<TokenId> tokens(uint32_t seed, int32_t n) {
  std::vector<TokenId> out;
  uint32_t x = seed * 2654435761u + 12345u;
  for (int32_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    out.push_back(TokenId{3 + static_cast<int32_t>((x >> 8) % 509)});
  }
  return out;
}

class RetentionPressureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(::testing::TempDir() + "retention_pressure_" + std::to_string(getpid()) + ".gguf");
    SynthConfig c;
    c.out_path = *path_;
    c.vocab_from = testing::kStories;
    c.dim = 64;
    c.n_layers = 1;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.ffn_dim = 128;
    c.context_length = 2048;
    c.weight_type = DType::F32;
    c.num_threads = 2;
    auto written = write_synthetic_model(c);
    ASSERT_TRUE(written.ok()) << written.error().message;
  }
  static void TearDownTestSuite() {
    std::remove(path_->c_str());
    delete path_;
  }

  void make_engine() {
    LoadedModel& m = testing::load_model(*path_);
    EngineConfig c;
    c.block_size = kBlockSize;
    c.kv_memory_bytes = int64_t{kPoolBlocks} * kBlockSize * *kv_bytes_per_token({1, 2, 16}, c.kv_format);
    c.max_batch_tokens = 512;
    c.retention_clock = [this] { return now_ms_; };
    auto engine = Engine::create(*m.model, *m.tokenizer, c, threads_);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    engine_ = std::move(*engine);
    ASSERT_EQ(engine_->info().kv_plan.num_blocks, kPoolBlocks);
  }

  RequestUsage run(std::vector<TokenId> prompt, std::vector<RetentionSpan> retention = {}) {
    RequestSpec spec;
    spec.prompt = std::move(prompt);
    spec.sampling.temperature = 0.0f;
    spec.max_tokens = 1;
    spec.ignore_eos = true;
    spec.retention = std::move(retention);
    auto id = engine_->add_request(std::move(spec));
    EXPECT_TRUE(id.ok()) << id.error().message;
    return testing::run_to_completion(*engine_)[id->value].usage;
  }

  int32_t cached(const std::vector<TokenId>& prompt) const {
    return engine_->explain_prompt(prompt, "", true).cached_tokens;
  }

  // The house rules followed by a question of the user's.
  std::vector<TokenId> rules_then(uint32_t question) const {
    auto prompt = rules_;
    const auto q = tokens(question, 20);
    prompt.insert(prompt.end(), q.begin(), q.end());
    return prompt;
  }

  static std::string* path_;
  ThreadPool threads_{2};
  int64_t now_ms_ = 1'000'000;
  std::unique_ptr<Engine> engine_;
  const std::vector<TokenId> rules_ = tokens(1, kRulesTokens);
};

std::string* RetentionPressureTest::path_ = nullptr;

TEST_F(RetentionPressureTest, HouseRulesAtPriority90OutliveFiftyDocumentsAndAnExpiredEntryGoesFirst) {
  make_engine();
  run(rules_then(2), {RetentionSpan{kRulesTokens, 90, 0}});
  for (uint32_t doc = 0; doc < 50; ++doc) run(tokens(100 + doc, kDocTokens));
  EXPECT_GE(engine_->stats().num_evictions, 45u * 94);  // the pool really turned over: 45 documents evicted
  EXPECT_EQ(cached(rules_), kRulesTokens);
  const RequestUsage next = run(rules_then(3));
  EXPECT_GE(next.cached_tokens, kRulesTokens);

  // A pasted document kept for an hour at priority 90; two hours later it is the first to go, before the two
  // default-priority documents cached before it.
  const auto pdf = tokens(999, kDocTokens);
  run(pdf, {RetentionSpan{INT32_MAX, 90, 3'600'000}});
  EXPECT_EQ(cached(pdf), kDocTokens);
  const int64_t high_band = engine_->stats().num_blocks_evictable_by_band[3];
  EXPECT_GE(high_band, 94 + kRulesTokens / kBlockSize);  // the document and the house rules, at 75-100
  now_ms_ += 2 * 3'600'000;
  engine_->expire_retention();
  EXPECT_EQ(engine_->stats().num_blocks_evictable_by_band[3], high_band - 94);  // the document expired to 0-24
  EXPECT_GE(engine_->stats().num_blocks_evictable_by_band[0], 94);
  run(tokens(1000, kDocTokens));
  EXPECT_EQ(cached(pdf), 0);
  EXPECT_EQ(cached(tokens(148, kDocTokens)), kDocTokens);
  EXPECT_EQ(cached(tokens(149, kDocTokens)), kDocTokens);
  EXPECT_EQ(cached(rules_), kRulesTokens);
  engine_->check_invariants();
}

TEST_F(RetentionPressureTest, WithoutRetentionTheDocumentsEvictTheHouseRules) {
  make_engine();
  run(rules_then(2));
  for (uint32_t doc = 0; doc < 5; ++doc) run(tokens(100 + doc, kDocTokens));
  EXPECT_LT(cached(rules_), kRulesTokens);
  EXPECT_LT(run(rules_then(3)).cached_tokens, kRulesTokens);
  engine_->check_invariants();
}

TEST_F(RetentionPressureTest, TheEngineRefusesRetentionOutOfBounds) {
  make_engine();
  const RetentionSpan bad[] = {{16, 101, 0}, {16, 50, -1}, {16, 50, kMaxRetentionTtlMs + 1}, {-1, 50, 0}};
  for (const RetentionSpan& span : bad) {
    RequestSpec spec;
    spec.prompt = tokens(5, 20);
    spec.max_tokens = 1;
    spec.retention = {span};
    auto id = engine_->add_request(std::move(spec));
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.error().code, SubmitErrorCode::kInvalidRetention) << id.error().message;
  }
  RequestSpec many;
  many.prompt = tokens(5, 20);
  many.max_tokens = 1;
  many.retention.assign(kMaxRetentionSpans + 1, RetentionSpan{});
  auto id = engine_->add_request(std::move(many));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, SubmitErrorCode::kInvalidRetention);
}

}  // namespace
}  // namespace hearth
