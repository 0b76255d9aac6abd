#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

namespace hearth {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};

// The radix sort gives exactly the comparison sort's order: logit descending, id ascending on ties, -0 tying +0,
// infinities at the ends; with many ties (few distinct values) and with none, at vocabulary sizes.
TEST(Sampler, SortByLogitIsTheComparisonSortsOrder) {
  std::mt19937 rng(5);
  for (int distinct : {3, 50, 0}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{40000}}) {
      std::vector<float> logits(n);
      std::normal_distribution<float> gauss(0.0f, 4.0f);
      for (float& x : logits) {
        x = distinct > 0 ? static_cast<float>(static_cast<int>(rng() % distinct) - distinct / 2) * 0.5f : gauss(rng);
      }
      if (n >= 7) {
        logits[1] = -0.0f;
        logits[2] = 0.0f;
        logits[3] = INFINITY;
        logits[4] = -INFINITY;
        logits[5] = -0.0f;
      }
      std::vector<std::pair<float, int32_t>> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = {logits[i], static_cast<int32_t>(i)};
      std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
      });
      std::vector<std::pair<float, int32_t>> got;
      std::vector<LogitKey> scratch;
      sort_by_logit(logits, got, scratch);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i].second, want[i].second) << "n " << n << " distinct " << distinct << " at " << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i].first), std::bit_cast<uint32_t>(want[i].first));
      }
    }
  }
}

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  Sampler s({.temperature = 0.0f});
  EXPECT_EQ(s.sample(kLogits), TokenId{1});
}

TEST(Sampler, TopKOneIsGreedy) {
  Sampler s({.temperature = 1.5f, .top_k = 1, .top_p = 1.0f, .seed = 42});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(kLogits), TokenId{1});
}

TEST(Sampler, TinyTopPKeepsOnlyTheBest) {
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 0.01f, .seed = 7});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(kLogits), TokenId{1});
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  auto draw = [](uint64_t seed) {
    Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(kLogits).value);
    return out;
  };
  EXPECT_EQ(draw(1), draw(1));
  EXPECT_NE(draw(1), draw(2));
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 3});
  std::vector<int> counts(kLogits.size());
  const int n = 40000;
  for (int i = 0; i < n; ++i) counts[s.sample(kLogits).value]++;
  double z = 0;
  for (float l : kLogits) z += std::exp(l);
  for (size_t i = 0; i < kLogits.size(); ++i) {
    const double p = std::exp(kLogits[i]) / z;
    EXPECT_NEAR(counts[i] / static_cast<double>(n), p, 4 * std::sqrt(p * (1 - p) / n) + 1e-3) << "token " << i;
  }
}

TEST(Sampler, TopKRestrictsToTheKBest) {
  Sampler s({.temperature = 5.0f, .top_k = 3, .top_p = 1.0f, .seed = 5});
  for (int i = 0; i < 500; ++i) {
    const int32_t id = s.sample(kLogits).value;
    EXPECT_TRUE(id == 1 || id == 3 || id == 2) << id;
  }
}

TEST(Sampler, LogitBiasShiftsTheChoice) {
  Sampler s({.temperature = 0.0f, .logit_bias = {{4, 10.0f}}});
  EXPECT_EQ(s.sample(kLogits), TokenId{4});  // -1 + 10 beats 3
  Sampler ban({.temperature = 0.0f, .logit_bias = {{1, -100.0f}}});
  EXPECT_EQ(ban.sample(kLogits), TokenId{3});  // 1 banned: the other 3.0 wins
}

TEST(Sampler, PenaltiesCountTheTokensAlreadyReturned) {
  // Greedy with a presence penalty of 1.5: 1 (3.0), then 3 (3.0, 1 is now 1.5), then 2 (2.0 beats 1.5, 1.5),
  // then 1 (1.5 ties 3, lowest id), ...
  Sampler presence({.temperature = 0.0f, .presence_penalty = 1.5f});
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(presence.sample(kLogits).value);
  EXPECT_EQ(got, (std::vector<int32_t>{1, 3, 2, 1}));
  // A frequency penalty grows with the count: 1 then 3 then 2 (3 - 1.1 < 2), then 1 (3 - 1.1 = 1.9 > 2 - 1.1)...
  Sampler frequency({.temperature = 0.0f, .frequency_penalty = 1.1f});
  got.clear();
  for (int i = 0; i < 5; ++i) got.push_back(frequency.sample(kLogits).value);
  EXPECT_EQ(got, (std::vector<int32_t>{1, 3, 2, 1, 3}));
  // The row itself is never changed.
  Sampler again({.temperature = 0.0f});
  EXPECT_EQ(again.sample(kLogits), TokenId{1});
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesOtherLogitsInTheContextsTail) {
  // kLogits = {1, 3, 2, 3, -1, 0.5}. A prompt ending in 1 and 3: penalty 2 makes them 1.5 each, so 2 (2.0) wins.
  const std::vector<TokenId> prompt = {TokenId{0}, TokenId{1}, TokenId{3}};
  Sampler s({.temperature = 0.0f, .repeat_penalty = 2.0f, .repeat_last_n = 64}, prompt);
  EXPECT_EQ(s.sample(kLogits), TokenId{2});
  // Now 2 is in the window too (1.0): 1 and 3 (1.5) tie, the lowest id first; 0 (1 / 2) stays below.
  EXPECT_EQ(s.sample(kLogits), TokenId{1});
  // A negative logit is multiplied: with 4 (-1) the only other choice, penalizing it makes it -2, never better.
  const std::vector<float> row = {-1.0f, -1.5f};
  Sampler neg({.temperature = 0.0f, .repeat_penalty = 2.0f, .repeat_last_n = 8}, std::vector<TokenId>{TokenId{0}});
  EXPECT_EQ(neg.sample(row), TokenId{1});  // -1 * 2 = -2 < -1.5
  // A penalty of 1 or a window of 0 changes nothing.
  Sampler off({.temperature = 0.0f, .repeat_penalty = 1.0f}, prompt);
  EXPECT_EQ(off.sample(kLogits), TokenId{1});
  Sampler none({.temperature = 0.0f, .repeat_penalty = 2.0f, .repeat_last_n = 0}, prompt);
  EXPECT_EQ(none.sample(kLogits), TokenId{1});
}

TEST(Sampler, RepeatLastNKeepsOnlyTheLastTokens) {
  // A window of 1 over the prompt {1, 3}: only 3 is penalized, so 1 (3.0) wins; then 1 is the window, so 3 wins.
  const std::vector<TokenId> prompt = {TokenId{1}, TokenId{3}};
  Sampler s({.temperature = 0.0f, .repeat_penalty = 2.0f, .repeat_last_n = 1}, prompt);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(s.sample(kLogits).value);
  EXPECT_EQ(got, (std::vector<int32_t>{1, 3, 1, 3}));
  // -1: the whole context, however long.
  std::vector<TokenId> long_prompt(1000, TokenId{2});
  long_prompt.front() = TokenId{1};
  long_prompt.push_back(TokenId{3});
  Sampler all({.temperature = 0.0f, .repeat_penalty = 10.0f, .repeat_last_n = -1}, long_prompt);
  EXPECT_EQ(all.sample(kLogits), TokenId{0});  // 1 (first of 1,001 tokens), 2, 3 cut to 0.3, 0.2, 0.3: 0 (1.0) wins
}

TEST(Sampler, MinPDropsTokensFarBelowTheBest) {
  // At temperature 1, p(2) / p(1) = e^-1 = 0.37 and p(0) / p(1) = e^-2: min_p 0.5 keeps only the tied 1 and 3.
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 9, .min_p = 0.5f});
  int ones = 0;
  for (int i = 0; i < 2000; ++i) {
    const int32_t id = s.sample(kLogits).value;
    ASSERT_TRUE(id == 1 || id == 3) << id;
    ones += id == 1;
  }
  EXPECT_NEAR(ones / 2000.0, 0.5, 0.05);
  // min_p 0.3 keeps 2 as well (0.37), never 0 (0.14).
  Sampler wider({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 9, .min_p = 0.3f});
  bool saw_two = false;
  for (int i = 0; i < 2000; ++i) {
    const int32_t id = wider.sample(kLogits).value;
    ASSERT_TRUE(id == 1 || id == 2 || id == 3) << id;
    saw_two |= id == 2;
  }
  EXPECT_TRUE(saw_two);
  // Greedy ignores it.
  Sampler greedy({.temperature = 0.0f, .min_p = 0.9f});
  EXPECT_EQ(greedy.sample(kLogits), TokenId{1});
}

TEST(Sampler, ValidateNamesTheBadField) {
  EXPECT_FALSE(SamplingParams{.temperature = -1.0f}.validate().ok());
  auto bad_p = SamplingParams{.top_p = 0.0f}.validate();
  ASSERT_FALSE(bad_p.ok());
  EXPECT_NE(bad_p.error().message.find("top_p"), std::string::npos);
  EXPECT_FALSE(SamplingParams{.top_k = -3}.validate().ok());
  auto bad_penalty = SamplingParams{.frequency_penalty = 2.5f}.validate();
  ASSERT_FALSE(bad_penalty.ok());
  EXPECT_NE(bad_penalty.error().message.find("frequency_penalty"), std::string::npos);
  EXPECT_FALSE(SamplingParams{.presence_penalty = -3.0f}.validate().ok());
  EXPECT_FALSE((SamplingParams{.logit_bias = {{1, 101.0f}}}.validate().ok()));
  auto bad_min_p = SamplingParams{.min_p = 1.5f}.validate();
  ASSERT_FALSE(bad_min_p.ok());
  EXPECT_NE(bad_min_p.error().message.find("min_p"), std::string::npos);
  auto bad_repeat = SamplingParams{.repeat_penalty = 0.0f}.validate();
  ASSERT_FALSE(bad_repeat.ok());
  EXPECT_NE(bad_repeat.error().message.find("repeat_penalty"), std::string::npos);
  auto bad_last_n = SamplingParams{.repeat_last_n = -2}.validate();
  ASSERT_FALSE(bad_last_n.ok());
  EXPECT_NE(bad_last_n.error().message.find("repeat_last_n"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.validate().ok());
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

double log_sum_exp(const std::vector<float>& logits) {
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x));
  return std::log(sum);
}

TEST(TokenLogprobs, AreTheLogSoftmaxOfTheRawLogitsWithTheTopInOrder) {
  const TokenLogprobs lp = token_logprobs(kLogits, TokenId{2}, 3);
  const double log_z = log_sum_exp(kLogits);
  EXPECT_EQ(lp.token, TokenId{2});
  EXPECT_NEAR(lp.logprob, 2.0 - log_z, 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  // 3.0 at ids 1 and 3 (lowest id first on the tie), then 2.0 at id 2.
  EXPECT_EQ(lp.top[0].token, TokenId{1});
  EXPECT_EQ(lp.top[1].token, TokenId{3});
  EXPECT_EQ(lp.top[2].token, TokenId{2});
  EXPECT_NEAR(lp.top[0].logprob, 3.0 - log_z, 1e-6);
  EXPECT_EQ(lp.top[0].logprob, lp.top[1].logprob);
  EXPECT_EQ(lp.top[2].logprob, lp.logprob);
}

TEST(TokenLogprobs, TheGreedyTokenLeadsAndProbabilitiesSumToAtMostOne) {
  const TokenLogprobs all = token_logprobs(kLogits, argmax(kLogits), static_cast<int32_t>(kLogits.size()));
  EXPECT_EQ(all.top.front().token, argmax(kLogits));
  double sum = 0;
  for (const TokenLogprob& t : all.top) {
    EXPECT_LE(t.logprob, 0.0f);
    sum += std::exp(t.logprob);
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_TRUE(token_logprobs(kLogits, TokenId{0}, 0).top.empty());
  EXPECT_EQ(token_logprobs(kLogits, TokenId{0}, 100).top.size(), kLogits.size());  // capped at the vocabulary
}

TEST(TokenLogprobs, IgnoreTemperatureAndTruncation) {
  // The same logits give the same logprobs whatever the sampler does with them; a dominant logit gives ~0.
  const std::vector<float> peaked = {100.0f, 0.0f, -100.0f};
  const TokenLogprobs lp = token_logprobs(peaked, TokenId{0}, 2);
  EXPECT_LE(lp.logprob, 0.0f);
  EXPECT_GT(lp.logprob, -1e-6f);
  EXPECT_NEAR(lp.top[1].logprob, -100.0, 1e-3);
}

}  // namespace
}  // namespace hearth
