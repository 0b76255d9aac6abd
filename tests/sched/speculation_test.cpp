// The prompt-lookup drafter and auto mode's bookkeeping: exact drafts on tiny token lists.
#include <gtest/gtest.h>

#include "sched/speculation.h"

namespace hearth {
namespace {

std::vector<TokenId> ids(std::initializer_list<int32_t> values) {
  std::vector<TokenId> out;
  for (int32_t v : values) out.push_back(TokenId{v});
  return out;
}

TEST(PromptLookup, DraftsWhatFollowedTheLongestRecentSuffix) {
  struct Case {
    std::vector<TokenId> tokens;
    int32_t min_ngram, max_ngram, max_draft;
    std::vector<TokenId> want;
  };
  const std::vector<Case> cases = {
      // The trigram 1 2 3 was followed by 4 5 6 7.
      {ids({1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3}), 1, 3, 8, ids({4, 5, 6, 7, 9, 1, 2, 3})},
      {ids({1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3}), 1, 3, 2, ids({4, 5})},
      // The trigram 8 2 3 never occurred; the bigram 2 3 did, most recently before 6.
      {ids({2, 3, 5, 2, 3, 6, 8, 2, 3}), 1, 3, 3, ids({6, 8, 2})},
      // Only the unigram matches.
      {ids({7, 1, 9, 4, 7}), 1, 3, 2, ids({1, 9})},
      // min_ngram 2 rules the unigram out.
      {ids({7, 1, 9, 4, 7}), 2, 3, 2, {}},
      // The most recent occurrence wins, even when it is short of max_draft.
      {ids({5, 1, 2, 5, 3, 5}), 1, 1, 4, ids({3, 5})},
      // Nothing to look in.
      {ids({5}), 1, 3, 4, {}},
      {{}, 1, 3, 4, {}},
      {ids({1, 1, 1}), 1, 3, 0, {}},
      // A run of one token drafts the run.
      {ids({4, 4, 4, 4}), 1, 3, 5, ids({4})},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<TokenId> draft = ids({99});
    const int32_t n = prompt_lookup_draft(c.tokens, c.min_ngram, c.max_ngram, c.max_draft, draft);
    EXPECT_EQ(draft, c.want) << "case " << i;
    EXPECT_EQ(n, static_cast<int32_t>(c.want.size())) << "case " << i;
  }
}

TEST(PromptLookup, SearchesOnlyTheLastLookbackTokens) {
  std::vector<TokenId> tokens = ids({1, 2, 3, 42});
  tokens.resize(kMaxLookback + 10, TokenId{0});
  for (size_t i = 4; i < tokens.size(); ++i) tokens[i] = TokenId{static_cast<int32_t>(1000 + i)};
  tokens.push_back(TokenId{1});
  tokens.push_back(TokenId{2});
  tokens.push_back(TokenId{3});
  std::vector<TokenId> draft;
  EXPECT_EQ(prompt_lookup_draft(tokens, 1, 3, 4, draft), 0) << "the match lies before the window";
}

TEST(SpeculativeParams, ValidatesRangesAndParsesModes) {
  EXPECT_TRUE(SpeculativeParams{}.validate().ok());
  EXPECT_FALSE((SpeculativeParams{.max_draft = 0}).validate().ok());
  EXPECT_FALSE((SpeculativeParams{.max_draft = SpeculativeParams::kMaxDraftLimit + 1}).validate().ok());
  EXPECT_FALSE((SpeculativeParams{.max_ngram = 1, .min_ngram = 2}).validate().ok());
  EXPECT_FALSE((SpeculativeParams{.min_ngram = 0}).validate().ok());
  EXPECT_EQ(parse_speculative_mode("prompt_lookup"), SpeculativeMode::kPromptLookup);
  EXPECT_EQ(parse_speculative_mode("prompt-lookup"), SpeculativeMode::kPromptLookup);
  EXPECT_EQ(parse_speculative_mode("auto"), SpeculativeMode::kAuto);
  EXPECT_EQ(parse_speculative_mode("off"), SpeculativeMode::kOff);
  EXPECT_EQ(parse_speculative_mode("draft_model"), SpeculativeMode::kDraftModel);
  EXPECT_EQ(parse_speculative_mode("draft-model"), SpeculativeMode::kDraftModel);
  EXPECT_EQ(parse_speculative_mode("medusa"), std::nullopt);
  EXPECT_EQ(speculative_mode_name(SpeculativeMode::kPromptLookup), "prompt_lookup");
  EXPECT_EQ(speculative_mode_name(SpeculativeMode::kDraftModel), "draft_model");
}

TEST(SpeculationState, AutoPausesWithDoublingBackoffAndResetsOnSuccess) {
  SpeculationState s;
  const auto mode = SpeculativeMode::kAuto;
  const SpeculativeParams params{.mode = mode, .max_draft = 8};
  constexpr int32_t kWindow = SpeculationState::kAutoWindowSteps;
  // Rejected drafts: the draft length halves from 4 to 1, and after the window drafting pauses for 16 steps.
  std::vector<int32_t> limits;
  for (int32_t i = 0; i < kWindow; ++i) {
    EXPECT_TRUE(s.wants_draft(mode));
    limits.push_back(s.draft_limit(params));
    s.on_verified(mode, limits.back(), 0);
  }
  EXPECT_EQ(limits, (std::vector<int32_t>{4, 2, 1, 1}));
  for (int i = 0; i < SpeculationState::kAutoFirstBackoff; ++i) EXPECT_FALSE(s.wants_draft(mode)) << i;
  EXPECT_TRUE(s.wants_draft(mode));
  // A second failed window pauses twice as long.
  for (int32_t i = 0; i < kWindow; ++i) s.on_verified(mode, 1, 0);
  for (int i = 0; i < 2 * SpeculationState::kAutoFirstBackoff; ++i) EXPECT_FALSE(s.wants_draft(mode)) << i;
  EXPECT_TRUE(s.wants_draft(mode));
  // Whole acceptances double the draft up to max_draft, and a good window resets the backoff.
  for (int32_t i = 0; i < kWindow; ++i) s.on_verified(mode, s.draft_limit(params), s.draft_limit(params));
  EXPECT_EQ(s.draft_limit(params), 8);
  EXPECT_EQ(s.backoff, SpeculationState::kAutoFirstBackoff);
  EXPECT_TRUE(s.wants_draft(mode));
  EXPECT_EQ(s.num_verify_steps, 3 * kWindow);
  EXPECT_EQ(s.num_drafted, 4 + 2 + 1 + 1 + 4 * 1 + 1 + 2 + 4 + 8);
  EXPECT_EQ(s.num_accepted, 1 + 2 + 4 + 8);
  // Prompt lookup never pauses and always drafts max_draft; off never drafts.
  SpeculationState p;
  const SpeculativeParams lookup{.mode = SpeculativeMode::kPromptLookup, .max_draft = 8};
  for (int32_t i = 0; i < 3 * kWindow; ++i) p.on_verified(SpeculativeMode::kPromptLookup, 8, 0);
  EXPECT_TRUE(p.wants_draft(SpeculativeMode::kPromptLookup));
  EXPECT_EQ(p.draft_limit(lookup), 8);
  EXPECT_FALSE(p.wants_draft(SpeculativeMode::kOff));
}

TEST(SpeculationState, BackoffIsBounded) {
  SpeculationState s;
  for (int i = 0; i < 20 * SpeculationState::kAutoWindowSteps; ++i) {
    s.on_verified(SpeculativeMode::kAuto, 1, 0);
    s.paused_steps = 0;
  }
  EXPECT_EQ(s.backoff, SpeculationState::kAutoMaxBackoff);
}

TEST(PredictionDraft, FollowsThePredictionWhileTheOutputIsItsHead) {
  const std::vector<TokenId> prediction = ids({10, 11, 12, 13, 14, 15});
  PredictionCursor cursor;
  std::vector<TokenId> draft;
  EXPECT_EQ(prediction_draft(prediction, {}, 1, 3, 4, cursor, draft), 4);
  EXPECT_EQ(draft, ids({10, 11, 12, 13}));
  const std::vector<TokenId> out = ids({10, 11, 12});
  EXPECT_EQ(prediction_draft(prediction, out, 1, 3, 4, cursor, draft), 3);
  EXPECT_EQ(draft, ids({13, 14, 15}));
  EXPECT_EQ(cursor.aligned, 3);
  const std::vector<TokenId> whole = ids({10, 11, 12, 13, 14, 15});
  EXPECT_EQ(prediction_draft(prediction, whole, 1, 3, 4, cursor, draft), 0) << "nothing is left to draft";
  EXPECT_TRUE(draft.empty());
}

TEST(PredictionDraft, AfterAnEditRejoinsThePredictionWhereTheOutputDoes) {
  // The answer replaces 12 13 by 99, then goes on as predicted from 14.
  const std::vector<TokenId> prediction = ids({10, 11, 12, 13, 14, 15, 16, 17});
  PredictionCursor cursor;
  std::vector<TokenId> draft;
  EXPECT_EQ(prediction_draft(prediction, ids({10, 11, 99}), 1, 3, 3, cursor, draft), 0) << "99 is nowhere in it";
  EXPECT_TRUE(cursor.diverged);
  EXPECT_EQ(prediction_draft(prediction, ids({10, 11, 99, 14}), 1, 3, 3, cursor, draft), 3);
  EXPECT_EQ(draft, ids({15, 16, 17}));
  // An output that leaves the prediction for good drafts nothing, never past the prediction's end.
  EXPECT_EQ(prediction_draft(prediction, ids({10, 11, 99, 14, 15, 16, 17}), 1, 3, 3, cursor, draft), 0);
}

TEST(PredictionDraft, PrefersTheOccurrenceAfterTheLastOneDraftedFrom) {
  // 5 6 occurs twice; the answer has moved past the first, so the second one's continuation is drafted.
  const std::vector<TokenId> prediction = ids({5, 6, 1, 2, 5, 6, 3, 4});
  PredictionCursor cursor;
  std::vector<TokenId> draft;
  EXPECT_EQ(prediction_draft(prediction, ids({0, 5, 6}), 2, 2, 2, cursor, draft), 2);
  EXPECT_EQ(draft, ids({1, 2})) << "the first occurrence at first";
  EXPECT_EQ(prediction_draft(prediction, ids({0, 5, 6, 1, 2, 5, 6}), 2, 2, 2, cursor, draft), 2);
  EXPECT_EQ(draft, ids({3, 4}));
  EXPECT_EQ(prediction_draft({}, ids({1}), 1, 3, 2, cursor, draft), 0);
  EXPECT_EQ(prediction_draft(prediction, ids({5}), 1, 3, 0, cursor, draft), 0);
}

TEST(VerifyRowCost, MeasuresTheMarginalRowAgainstAOneRowStep) {
  VerifyRowCost cost;
  EXPECT_FALSE(cost.ratio());
  cost.observe(9, 0.009);  // no one-row step yet: nothing to take the margin from
  for (int i = 0; i < 3; ++i) cost.observe(1, 0.010);
  EXPECT_FALSE(cost.ratio()) << "no multi-row step measured yet";
  for (int i = 0; i < 3; ++i) cost.observe(9, 0.018);  // 8 more rows cost 8 ms: 0.1 of a step each
  ASSERT_TRUE(cost.ratio());
  EXPECT_NEAR(*cost.ratio(), 0.1, 1e-9);
  cost.observe(0, 1.0);   // ignored
  cost.observe(5, -1.0);  // ignored
  EXPECT_NEAR(*cost.ratio(), 0.1, 1e-9);
}

TEST(SpeculationState, AutoJudgesAgainstTheMeasuredBreakEven) {
  // Half the drafts accepted: worth it where a row costs 0.1 of a step, not where it costs 0.9.
  for (const double row_cost : {0.1, 0.9}) {
    SpeculationState s;
    for (int i = 0; i < SpeculationState::kAutoWindowSteps; ++i) {
      s.on_verified(SpeculativeMode::kAuto, 4, 2, row_cost);
    }
    if (row_cost < 0.5) {
      EXPECT_EQ(s.paused_steps, 0);
    } else {
      EXPECT_EQ(s.paused_steps, static_cast<int32_t>(SpeculationState::kAutoFirstBackoff * 0.9 /
                                                     SpeculationState::kAutoMinAcceptance))
          << "pauses as much longer as a row costs more";
    }
  }
}

}  // namespace
}  // namespace hearth
