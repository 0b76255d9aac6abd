// Token-sequence diffing and the volatile-prefix detector, with a fake clock.
#include "kv/volatile_prefix.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kv/prefix_diff.h"

#include "token_seq.h"  // tests/kv

namespace hearth {
namespace {

using testing::concat;
using testing::seq;

TEST(PrefixDiffTest, CommonPrefixAndRealignmentAfterAnInsertion) {
  const auto base = seq(1000, 300);
  const auto stamped = concat({seq(1000, 5), seq(7000, 6), seq(1005, 295)});
  EXPECT_EQ(common_prefix_length(base, stamped), 5);
  EXPECT_EQ(common_prefix_length(base, base), 300);
  const auto r = find_realignment(stamped, base, 5, 64, 64);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->a_begin, 11);
  EXPECT_EQ(r->b_begin, 5);
  EXPECT_EQ(r->run, 295);
}

TEST(PrefixDiffTest, RealignmentAfterAReplacementOfDifferentLength) {
  const auto a = concat({seq(1, 5), seq(7000, 3), seq(100, 80)});
  const auto b = concat({seq(1, 5), seq(8000, 5), seq(100, 80)});
  const auto r = find_realignment(a, b, 5, 64, 64);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->a_begin, 8);
  EXPECT_EQ(r->b_begin, 10);
  EXPECT_EQ(r->run, 80);
}

TEST(PrefixDiffTest, NoRealignmentWhenTheSharedStretchIsShortOrBeyondTheWindow) {
  const auto a = concat({seq(1, 5), seq(7000, 3), seq(100, 40)});
  const auto b = concat({seq(1, 5), seq(8000, 5), seq(100, 40)});
  EXPECT_FALSE(find_realignment(a, b, 5, 64, 64).has_value());  // 40 < 64
  const auto c = concat({seq(1, 5), seq(7000, 100), seq(100, 80)});
  const auto d = concat({seq(1, 5), seq(100, 80)});
  EXPECT_FALSE(find_realignment(c, d, 5, 64, 64).has_value());  // the region is 100 tokens, over the window
  EXPECT_TRUE(find_realignment(c, d, 5, 128, 64).has_value());
}

class VolatilePrefixTest : public ::testing::Test {
 protected:
  VolatilePrefixDetector detector_{VolatilePrefixConfig{}, [this] { return now_; }};
  std::chrono::steady_clock::time_point now_{};

  // 5 stable tokens, a 4-token "timestamp" that differs per request, 300 stable tokens, a different question.
  static std::vector<TokenId> stamped_request(int32_t i) {
    return concat({seq(1, 5), seq(10000 + 10 * i, 4), seq(100, 300), seq(20000 + 20 * i, 12)});
  }
};

TEST_F(VolatilePrefixTest, TimestampStreamWarnsOncePerIntervalNamingTheRegion) {
  for (int32_t i = 0; i < 3; ++i) EXPECT_FALSE(detector_.observe("", stamped_request(i)).has_value()) << i;
  auto finding = detector_.observe("", stamped_request(3));
  ASSERT_TRUE(finding.has_value());
  EXPECT_TRUE(finding->warn);
  EXPECT_EQ(finding->region.begin, 5);
  EXPECT_EQ(finding->region.end, 9);
  EXPECT_EQ(finding->region.tokens_lost, 300);
  EXPECT_EQ(finding->region.num_requests, 4);
  for (int32_t i = 4; i < 10; ++i) {
    now_ += std::chrono::seconds(5);
    finding = detector_.observe("", stamped_request(i));
    ASSERT_TRUE(finding.has_value());
    EXPECT_FALSE(finding->warn) << "rate limited, request " << i;
  }
  EXPECT_EQ(detector_.num_warnings(), 1u);
  EXPECT_EQ(detector_.num_volatile_requests(), 7u);
  now_ += std::chrono::minutes(1);
  finding = detector_.observe("", stamped_request(10));
  ASSERT_TRUE(finding.has_value());
  EXPECT_TRUE(finding->warn);
  EXPECT_EQ(detector_.num_warnings(), 2u);
}

TEST_F(VolatilePrefixTest, ShuffledToolListIsAVolatileRegion) {
  std::vector<std::vector<TokenId>> tools;
  for (int32_t t = 0; t < 5; ++t) tools.push_back(seq(3000 + 100 * t, 12));
  std::mt19937 rng(7);
  std::optional<VolatilePrefixDetector::Finding> last;
  for (int32_t i = 0; i < 8; ++i) {
    std::shuffle(tools.begin(), tools.end(), rng);
    std::vector<TokenId> prompt = seq(1, 10);
    for (const auto& t : tools) prompt.insert(prompt.end(), t.begin(), t.end());
    const auto rest = concat({seq(100, 200), seq(20000 + 20 * i, 10)});
    prompt.insert(prompt.end(), rest.begin(), rest.end());
    last = detector_.observe("", prompt);
  }
  ASSERT_TRUE(last.has_value());
  EXPECT_GE(last->region.begin, 10);
  EXPECT_LE(last->region.end, 70);
  EXPECT_GE(last->region.tokens_lost, 200);
}

TEST_F(VolatilePrefixTest, GenuinelyDifferentPromptsNeverWarn) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(3, 511);
  for (int32_t i = 0; i < 60; ++i) {
    std::vector<TokenId> prompt{TokenId{1}};
    for (int32_t k = 0; k < 400; ++k) prompt.push_back(TokenId{token(rng)});
    EXPECT_FALSE(detector_.observe("", prompt).has_value()) << i;
  }
  EXPECT_EQ(detector_.num_warnings(), 0u);
}

TEST_F(VolatilePrefixTest, SharedPrefixThenDifferentQuestionsNeverWarn) {
  for (int32_t i = 0; i < 40; ++i) {
    // A stable 400-token prefix (the cache reuses it), then a question that differs to the end, and a short
    // common chat suffix.
    const auto prompt = concat({seq(1, 400), seq(20000 + 50 * i, 30), seq(600, 6)});
    EXPECT_FALSE(detector_.observe("", prompt).has_value()) << i;
  }
  for (int32_t i = 0; i < 10; ++i) EXPECT_FALSE(detector_.observe("", seq(1, 400)).has_value());  // identical
  EXPECT_EQ(detector_.num_volatile_requests(), 0u);
}

TEST_F(VolatilePrefixTest, PromptsOfDifferentScopesAreNotCompared) {
  for (int32_t i = 0; i < 8; ++i) {
    EXPECT_FALSE(detector_.observe("tenant-" + std::to_string(i), stamped_request(i)).has_value());
  }
}

}  // namespace
}  // namespace hearth
