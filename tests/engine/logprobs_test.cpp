// Logprobs on stories260K: computed only when asked, one per emitted token, from the raw logits the token was
// sampled from (log-softmax before temperature and truncation).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine

namespace hearth {
namespace {

using testing::kStories;
using testing::load_model;

EngineConfig logprobs_config() {
  EngineConfig c;
  c.block_size = 16;
  c.kv_memory_bytes = 8ll << 20;
  c.max_batch_tokens = 64;
  return c;
}

struct LogprobsRun {
  std::vector<TokenId> tokens;
  std::vector<TokenLogprobs> logprobs;
  std::vector<std::vector<float>> logits;  // the rows the tokens were sampled from
};

LogprobsRun run_logged(Engine& engine, RequestSpec spec) {
  LogprobsRun r;
  engine.set_logits_observer(
      [&](RequestId, std::span<const float> row) { r.logits.emplace_back(row.begin(), row.end()); });
  auto id = engine.add_request(std::move(spec));
  EXPECT_TRUE(id.ok());
  while (engine.has_unfinished()) {
    for (RequestOutput& out : engine.step()) {
      EXPECT_EQ(out.logprobs.size(), out.logprobs.empty() ? 0 : out.new_tokens.size());
      r.tokens.insert(r.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      r.logprobs.insert(r.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
    }
  }
  engine.set_logits_observer({});
  return r;
}

RequestSpec story(float temperature, std::optional<int32_t> top_logprobs) {
  auto& m = load_model(kStories);
  RequestSpec spec;
  spec.prompt = m.tokenizer->encode("Once upon a time", true, false);
  spec.sampling.temperature = temperature;
  spec.sampling.seed = 5;
  spec.max_tokens = 12;
  spec.ignore_eos = true;
  spec.top_logprobs = top_logprobs;
  return spec;
}

TEST(Logprobs, GreedyTokensLeadTheirTopAndEveryNumberIsALogProbability) {
  auto& m = load_model(kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, logprobs_config(), pool);
  const LogprobsRun r = run_logged(*engine, story(0.0f, 5));
  ASSERT_EQ(r.logprobs.size(), r.tokens.size());
  ASSERT_EQ(r.logits.size(), r.tokens.size());
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const TokenLogprobs& lp = r.logprobs[i];
    EXPECT_EQ(lp.token, r.tokens[i]);
    ASSERT_EQ(lp.top.size(), 5u);
    EXPECT_EQ(lp.top[0].token, lp.token) << "greedy picks the most likely token";
    EXPECT_EQ(lp.top[0].logprob, lp.logprob);
    double sum = 0;
    for (const TokenLogprob& t : lp.top) {
      EXPECT_LE(t.logprob, 0.0f);
      sum += std::exp(t.logprob);
    }
    EXPECT_LE(sum, 1.0 + 1e-6);
    double z = 0;  // the raw row's log-softmax, recomputed here
    for (float x : r.logits[i]) z += std::exp(static_cast<double>(x));
    EXPECT_NEAR(lp.logprob, r.logits[i][lp.token.value] - std::log(z), 1e-4);
  }
}

TEST(Logprobs, AreOfTheRawLogitsWhateverTheTemperatureAndOnlyWhenAsked) {
  auto& m = load_model(kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, logprobs_config(), pool);
  const LogprobsRun hot = run_logged(*engine, story(1.5f, 0));
  ASSERT_EQ(hot.logprobs.size(), hot.tokens.size());
  for (size_t i = 0; i < hot.tokens.size(); ++i) {
    double z = 0;
    for (float x : hot.logits[i]) z += std::exp(static_cast<double>(x));
    EXPECT_NEAR(hot.logprobs[i].logprob, hot.logits[i][hot.tokens[i].value] - std::log(z), 1e-4);
    EXPECT_TRUE(hot.logprobs[i].top.empty());
  }
  EXPECT_TRUE(run_logged(*engine, story(1.5f, std::nullopt)).logprobs.empty());
  RequestSpec bad = story(0.0f, kMaxTopLogprobs + 1);
  auto refused = engine->add_request(std::move(bad));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, SubmitErrorCode::kInvalidSampling);
  EXPECT_NE(refused.error().message.find("top_logprobs"), std::string::npos);
}

}  // namespace
}  // namespace hearth
