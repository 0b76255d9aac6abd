// The household workload: the same seed gives the same text, the prefix has the requested size and structure,
// and Poisson arrivals are reproducible with the requested rate.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench_client/runner.h"
#include "bench_client/workload.h"

namespace hearth::bench {
namespace {

WorkloadConfig config(uint64_t seed, int prefix_tokens = 2000) {
  return WorkloadConfig{/*users=*/4, /*turns=*/3, prefix_tokens, /*question_tokens=*/16, seed};
}

TEST(Workload, SameSeedSameText) {
  const Workload a(config(7));
  const Workload b(config(7));
  EXPECT_EQ(a.system_message(""), b.system_message(""));
  for (int u = 0; u < 4; ++u) {
    for (int t = 0; t < 3; ++t) EXPECT_EQ(a.question(u, t), b.question(u, t));
  }
}

TEST(Workload, OtherSeedOtherText) {
  const Workload a(config(7));
  const Workload b(config(8));
  EXPECT_NE(a.system_message(""), b.system_message(""));
  EXPECT_NE(a.question(0, 0), b.question(0, 0));
}

TEST(Workload, PrefixHasTheRequestedSizeAndParts) {
  for (int tokens : {500, 2000, 8000}) {
    const Workload w(config(1, tokens));
    const double chars = static_cast<double>(w.system_message("").size());
    EXPECT_NEAR(chars / kCharsPerTokenEstimate, tokens, tokens * 0.05) << tokens;
    EXPECT_FALSE(w.prefix().house_rules.empty());
    EXPECT_FALSE(w.prefix().household_document.empty());
    // The tool catalogue is a JSON array of function tools whose parameters are JSON-schema objects.
    const auto tools = nlohmann::json::parse(w.prefix().tool_catalogue);
    ASSERT_TRUE(tools.is_array());
    ASSERT_FALSE(tools.empty());
    for (const auto& tool : tools) {
      EXPECT_EQ(tool["type"], "function");
      EXPECT_EQ(tool["function"]["parameters"]["type"], "object");
      EXPECT_TRUE(tool["function"]["parameters"]["properties"].is_object());
    }
  }
}

TEST(Workload, QuestionsAreShortAndPrivate) {
  const Workload w(config(3));
  EXPECT_NE(w.question(0, 0), w.question(1, 0));
  EXPECT_NE(w.question(0, 0), w.question(0, 1));
  EXPECT_LT(w.question(0, 0).size(), 16u * kCharsPerTokenEstimate + 80);
  EXPECT_GE(w.question(0, 0).size(), 16u * kCharsPerTokenEstimate);
}

TEST(Workload, NonceComesFirstAndKeepsTheRest) {
  const Workload w(config(3));
  const std::string plain = w.system_message("");
  const std::string with = w.system_message("0badcafe");
  EXPECT_EQ(with.rfind("Session 0badcafe.\n", 0), 0u);
  EXPECT_EQ(with.substr(with.size() - plain.size()), plain);
}

TEST(Conversation, EachTurnAppendsTheAnswerAndTheNewQuestion) {
  Conversation chat("rules");
  chat.ask("q1");
  chat.answer("a1");
  chat.ask("q2");
  const auto& m = chat.messages();
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "a1");
  EXPECT_EQ(m[3]["content"], "q2");
}

TEST(PoissonArrivals, ReproducibleWithTheRequestedRate) {
  const auto a = poisson_arrivals(4000, 2.0, 11);
  EXPECT_EQ(a, poisson_arrivals(4000, 2.0, 11));
  EXPECT_NE(a, poisson_arrivals(4000, 2.0, 12));
  for (size_t i = 1; i < a.size(); ++i) ASSERT_GT(a[i], a[i - 1]);
  // Mean gap 1/rate = 0.5 s; with 4000 gaps the standard error is 0.5/sqrt(4000) ~ 0.008.
  EXPECT_NEAR(a.back() / 4000, 0.5, 0.04);
}

TEST(RequestBody, StreamsWithUsageAndMergesExtraLast) {
  RunConfig c;
  c.model = std::string("test-model");
  c.max_tokens = 8;
  c.extra = {{"cache_prompt", false}, {"temperature", 0.7}};
  const auto body = request_body(c, nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}}));
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["max_tokens"], 8);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["cache_prompt"], false);
  EXPECT_EQ(body["temperature"], 0.7);
}

}  // namespace
}  // namespace hearth::bench
