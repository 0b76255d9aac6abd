// Cache-miss explanations end to end through the engine on stories260K: the reason and token index in each
// request's usage, the text around a divergence, Engine::explain_prompt (POST /v1/cache/explain) and
// compare_prompts (hearth explain).
#include "engine/explain.h"

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine

namespace hearth {
namespace {

using testing::load_model;
using testing::run_to_completion;
using testing::story_tokens;

std::vector<TokenId> concat(std::initializer_list<std::span<const TokenId>> parts) {
  std::vector<TokenId> out;
  for (auto p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class ExplainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig c;
    c.block_size = 16;
    c.kv_memory_bytes = 8ll << 20;
    c.max_batch_tokens = 512;
    engine_ = *Engine::create(*m_.model, tok_, c, pool_);
  }
  void TearDown() override { engine_->check_invariants(); }

  RequestUsage run(std::vector<TokenId> prompt, const std::string& salt = "", bool use_cache = true) {
    RequestSpec spec;
    spec.prompt = std::move(prompt);
    spec.sampling.temperature = 0.0f;
    spec.max_tokens = 1;
    spec.ignore_eos = true;
    spec.cache_salt = salt;
    spec.use_cache = use_cache;
    auto id = engine_->add_request(std::move(spec));
    EXPECT_TRUE(id.ok()) << id.error().message;
    return run_to_completion(*engine_)[id->value].usage;
  }
  std::string text(std::span<const TokenId> t, int64_t begin, int64_t end) {
    return token_excerpt(tok_, t, begin, end);
  }

  LoadedModel& m_ = load_model(testing::kStories);
  const Tokenizer& tok_ = *m_.tokenizer;
  ThreadPool pool_{2};
  std::unique_ptr<Engine> engine_;
};

TEST_F(ExplainTest, TimestampAtToken5IsReportedAsDivergenceAtToken5WithTheText) {
  const auto base = story_tokens(tok_, 500, "Once upon a time");
  EXPECT_EQ(run(base).reuse.reason, ReuseStop::kNoCachedPrefix);
  const auto stamp = tok_.encode(" 2024-05-01 08:00:13", /*add_special=*/false);
  auto stamped = concat({std::span(base).first(5), stamp, std::span(base).subspan(5)});
  stamped.resize(505);
  // Before it runs, explain_prompt (POST /v1/cache/explain) already sees the divergence.
  const CacheReport stamped_report = engine_->explain_prompt(stamped, "");
  EXPECT_EQ(stamped_report.explanation.reason, ReuseStop::kDiverged);
  EXPECT_EQ(stamped_report.cached_tokens, 5);
  EXPECT_EQ(stamped_report.explanation.stopped_at, 5);
  const RequestUsage u = run(stamped);
  EXPECT_EQ(u.reuse.reason, ReuseStop::kDiverged);
  EXPECT_EQ(u.reuse.stopped_at, 5);
  EXPECT_EQ(u.reuse.stopped_block, 0);
  EXPECT_EQ(u.cached_tokens, 5);
  EXPECT_EQ(u.reuse.context_text, text(base, 0, 5));
  EXPECT_EQ(u.reuse.prompt_text, text(stamped, 5, 5 + kExcerptTokens));
  // The new text starts with the timestamp (after the space(s) the tokenizer puts before a text).
  EXPECT_EQ(u.reuse.prompt_text.find("2024-05-01"), u.reuse.prompt_text.find_first_not_of(' ')) << u.reuse.prompt_text;
  EXPECT_EQ(u.reuse.cached_text, text(base, 5, 5 + kExcerptTokens));
  EXPECT_EQ(u.reuse.cached_text.find("2024"), std::string::npos);

  // The whole cached base.
  const CacheReport base_report = engine_->explain_prompt(base, "");
  EXPECT_EQ(base_report.cached_tokens, 500);  // 31 full blocks and the partly filled last one (4 tokens)
  EXPECT_EQ(base_report.cached_tokens_ram, 500);
  EXPECT_EQ(base_report.reusable_tokens, 499);  // the last prompt token is always computed
  EXPECT_EQ(base_report.explanation.reason, ReuseStop::kEndOfPrompt);
  EXPECT_EQ(engine_->explain_prompt(std::span(base).first(480), "").explanation.reason, ReuseStop::kEndOfPrompt);
  EXPECT_EQ(engine_->explain_prompt(base, "", /*use_cache=*/false).explanation.reason, ReuseStop::kCacheDisabled);

  // Offline, the same two prompts: divergence at 5, and they realign right after the timestamp.
  const PromptComparison c = compare_prompts(tok_, base, stamped, 16);
  EXPECT_EQ(c.divergence, 5);
  EXPECT_EQ(c.reusable_tokens, 5);
  EXPECT_EQ(c.shared_full_blocks, 0);
  EXPECT_EQ(c.shared_partial_tokens, 5);
  ASSERT_TRUE(c.realignment.has_value());
  EXPECT_EQ(c.realignment->a_begin, 5 + static_cast<int32_t>(stamp.size()));
  EXPECT_EQ(c.realignment->b_begin, 5);
  EXPECT_EQ(c.realignment->run, 505 - c.realignment->a_begin);
}

TEST_F(ExplainTest, ReorderedToolListIsReportedAtTheFirstDifferingTool) {
  const std::string preamble = "You help a family. Tools:\n";
  const std::string weather = "- get_weather: the forecast for a town.\n";
  const std::string lights = "- set_lights: dim the lights in a room.\n";
  const std::string calendar = "- add_event: put a day out on the calendar.\n";
  const std::string question = "Question: can we go to the park?";
  const auto a = tok_.encode(preamble + weather + lights + calendar + question, true);
  const auto b = tok_.encode(preamble + weather + calendar + lights + question, true);
  run(a);
  const RequestUsage u = run(b);
  EXPECT_EQ(u.reuse.reason, ReuseStop::kDiverged);
  const int32_t stop = u.reuse.stopped_at;
  const std::string reused = tok_.decode(std::span(b).first(stop));
  EXPECT_NE(reused.find("get_weather: the forecast for a town."), std::string::npos) << reused;
  EXPECT_EQ(reused.find("add_event"), std::string::npos) << reused;
  EXPECT_EQ(reused.find("set_lights"), std::string::npos) << reused;
  EXPECT_NE(u.reuse.prompt_text.find("add_event"), std::string::npos) << u.reuse.prompt_text;
  EXPECT_NE(u.reuse.cached_text.find("set_lights"), std::string::npos) << u.reuse.cached_text;
}

// Tenant isolation: what one salt has cached is invisible to every other request, salted or not, in usage and in
// explain_prompt alike (a salt once recovered another salt's PIN from other_salt_tokens, one digit at a time).
TEST_F(ExplainTest, NoRequestLearnsWhatAnotherSaltCached) {
  const auto secret = story_tokens(tok_, 97, "The PIN is 4711.");
  run(secret, "tenant-a");
  for (const std::string salt : {"tenant-b", ""}) {  // explained before anything else caches the prompt
    const CacheReport r = engine_->explain_prompt(secret, salt);
    EXPECT_EQ(r.cached_tokens, 0) << salt;
    EXPECT_EQ(r.explanation.reason, ReuseStop::kNoCachedPrefix) << salt;
    EXPECT_EQ(r.explanation.other_salt_tokens, 0) << salt;
  }
  for (const std::string salt : {"tenant-b", ""}) {
    const RequestUsage u = run(secret, salt);
    EXPECT_EQ(u.cached_tokens, 0) << salt;
    EXPECT_EQ(u.reuse.reason, ReuseStop::kNoCachedPrefix) << salt;
    EXPECT_EQ(u.reuse.other_salt_tokens, 0) << salt;
  }
  EXPECT_EQ(run(secret, "tenant-a").cached_tokens, 96);  // its own salt still hits
}

TEST_F(ExplainTest, SaltCacheDisabledAndEndOfPromptReasons) {
  const auto prompt = story_tokens(tok_, 97, "Once upon a time");  // 6 full blocks, then the last token
  run(prompt);
  // The unsalted namespace is public (anyone can probe it without a salt), so a salted miss may point to it.
  const RequestUsage other_salt = run(prompt, "tenant-b");
  EXPECT_EQ(other_salt.reuse.reason, ReuseStop::kDifferentSalt);
  EXPECT_EQ(other_salt.reuse.other_salt_tokens, 96);
  EXPECT_EQ(other_salt.cached_tokens, 0);
  const RequestUsage again = run(prompt);
  EXPECT_EQ(again.reuse.reason, ReuseStop::kEndOfPrompt);
  EXPECT_EQ(again.reuse.stopped_at, 96);
  const RequestUsage disabled = run(prompt, "", /*use_cache=*/false);
  EXPECT_EQ(disabled.reuse.reason, ReuseStop::kCacheDisabled);
  EXPECT_EQ(disabled.cached_tokens, 0);
}

TEST(ExplainEviction, EvictedPrefixIsReportedAsEvicted) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  EngineConfig c;
  c.block_size = 16;
  // stories260K at f32: 5 layers x 32 kv dims x 4 bytes x 2 (K and V) = 1280 bytes per token; 12 blocks of 16.
  c.kv_format = {KvDtype::kF32, KvDtype::kF32};
  c.kv_memory_bytes = 12ll * 16 * 1280;
  c.max_batch_tokens = 256;
  auto engine = *Engine::create(*m.model, *m.tokenizer, c, pool);
  auto run = [&](std::vector<TokenId> prompt) {
    RequestSpec spec;
    spec.prompt = std::move(prompt);
    spec.sampling.temperature = 0.0f;
    spec.max_tokens = 1;
    spec.ignore_eos = true;
    auto id = *engine->add_request(std::move(spec));
    return run_to_completion(*engine)[id.value].usage;
  };
  const auto first = story_tokens(*m.tokenizer, 96, "Once upon a time");  // 6 blocks
  run(first);
  run(story_tokens(*m.tokenizer, 160, "Lily had a red ball"));  // 10 blocks: evicts first's tail
  engine->check_invariants();
  const RequestUsage u = run(first);
  EXPECT_EQ(u.reuse.reason, ReuseStop::kEvicted);
  EXPECT_EQ(u.reuse.evicted_block, u.reuse.stopped_block);
  EXPECT_EQ(u.reuse.stopped_at % 16, 0);
  EXPECT_LT(u.reuse.stopped_at, 95);
  engine->check_invariants();
}

}  // namespace
}  // namespace hearth
