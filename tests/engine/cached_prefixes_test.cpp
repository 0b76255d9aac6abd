// Engine::cached_prefixes (GET /v1/cache) on stories260K: text of each run, token counts, pins, hits, tiers and
// seconds since use, and that a salted namespace is listed only by its own salt.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine
#include "engine/explain.h"

namespace hearth {
namespace {

using testing::load_model;
using testing::run_to_completion;
using testing::story_tokens;

class CachedPrefixesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig c;
    c.block_size = 16;
    c.kv_memory_bytes = 8ll << 20;
    engine_ = *Engine::create(*m_.model, tok_, c, pool_);
  }
  void TearDown() override { engine_->check_invariants(); }

  // Prompt of `n` tokens, one token generated; `pin` pins the prompt's full blocks afterwards.
  void run(const std::vector<TokenId>& prompt, const std::string& salt = "", bool pin = false) {
    RequestSpec spec;
    spec.prompt = prompt;
    spec.sampling.temperature = 0.0f;
    spec.max_tokens = 1;
    spec.ignore_eos = true;
    spec.cache_salt = salt;
    spec.pin_prefix = pin;
    ASSERT_TRUE(engine_->add_request(std::move(spec)).ok());
    run_to_completion(*engine_);
  }

  LoadedModel& m_ = load_model(testing::kStories);
  const Tokenizer& tok_ = *m_.tokenizer;
  ThreadPool pool_{2};
  std::unique_ptr<Engine> engine_;
};

TEST_F(CachedPrefixesTest, SharedStemAndTwoBranchesWithTextPinsAndHits) {
  const auto stem = story_tokens(tok_, 64, "Once upon a time");  // four blocks
  auto a = stem, b = stem;
  const auto tail_a = tok_.encode(" there was a little dog named Max who liked to run", false);
  const auto tail_b = tok_.encode(" a girl found a red ball in the park and she was happy", false);
  a.insert(a.end(), tail_a.begin(), tail_a.end());
  b.insert(b.end(), tail_b.begin(), tail_b.end());
  run(a, "", /*pin=*/true);
  run(b);
  CachedPrefixQuery query;
  query.limits.max_node_tokens = 8;
  const CachedPrefixes listing = engine_->cached_prefixes(query);
  ASSERT_EQ(listing.entries.size(), 3u);
  const CachedPrefixEntry& root = listing.entries[0];
  EXPECT_EQ(root.parent, -1);
  EXPECT_EQ(root.num_blocks, 4);
  EXPECT_EQ(root.num_tokens, 64);
  EXPECT_EQ(root.num_blocks_pinned, 4);
  EXPECT_EQ(root.num_hits, 1u);  // b shared it
  EXPECT_EQ(root.text, token_excerpt(tok_, stem, 0, 8));
  EXPECT_TRUE(root.text_truncated);
  EXPECT_EQ(root.tiers, std::vector<std::string>{"ram"});
  ASSERT_TRUE(root.idle_s.has_value());
  EXPECT_GE(*root.idle_s, 0.0);
  // b ran last: its branch first. Each branch holds every computed token of its prompt (the partly filled tail
  // block included); the generated token was never computed.
  EXPECT_EQ(listing.entries[1].parent, 0);
  EXPECT_EQ(listing.entries[1].depth_tokens, static_cast<int32_t>(b.size()));
  EXPECT_EQ(listing.entries[2].depth_tokens, static_cast<int32_t>(a.size()));
  EXPECT_EQ(listing.entries[1].text, token_excerpt(tok_, b, 64, 72));
  EXPECT_EQ(listing.entries[2].text, token_excerpt(tok_, a, 64, 72));
  EXPECT_EQ(listing.entries[1].num_blocks_pinned, 0);
  EXPECT_EQ(listing.entries[2].num_blocks_pinned, static_cast<int32_t>(a.size()) / 16 - 4);  // a's full blocks
  EXPECT_EQ(listing.num_blocks, root.num_blocks + listing.entries[1].num_blocks + listing.entries[2].num_blocks);
}

TEST_F(CachedPrefixesTest, ASaltIsListedOnlyByItself) {
  const auto plain = story_tokens(tok_, 40, "Once upon a time");
  const auto secret = story_tokens(tok_, 40, "The secret of the house");
  run(plain);
  run(secret, "tenant-a");
  CachedPrefixQuery query;
  const CachedPrefixes unsalted = engine_->cached_prefixes(query);
  ASSERT_EQ(unsalted.entries.size(), 1u);
  EXPECT_EQ(unsalted.entries[0].text.substr(0, 8), token_excerpt(tok_, plain, 0, 48).substr(0, 8));
  query.cache_salt = "tenant-a";
  const CachedPrefixes salted = engine_->cached_prefixes(query);
  ASSERT_EQ(salted.entries.size(), 1u);
  EXPECT_EQ(salted.entries[0].text, token_excerpt(tok_, secret, 0, 48));
  query.cache_salt = "tenant-b";
  EXPECT_TRUE(engine_->cached_prefixes(query).entries.empty());
}

TEST_F(CachedPrefixesTest, TextIsCutAtACharacterBoundary) {
  run(tok_.encode("Once upon a time there was a little girl named Lily who loved the sea", true));
  CachedPrefixQuery query;
  query.max_text_bytes = 5;
  const CachedPrefixes listing = engine_->cached_prefixes(query);
  ASSERT_EQ(listing.entries.size(), 1u);
  EXPECT_LE(listing.entries[0].text.size(), 5u);
  EXPECT_TRUE(listing.entries[0].text_truncated);
}

}  // namespace
}  // namespace hearth
