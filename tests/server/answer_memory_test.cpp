// AnswerMemory: a later turn that quotes an answer is built from the answer's generated ids, exactly where its
// text repeats them, and the rest is tokenized as a continuation; everything else is tokenized as usual.

#include "server/cache/answer_memory.h"

#include <gtest/gtest.h>

#include "../tokenizer/tokenizer_test_util.h"

namespace hearth::server {
namespace {

using test::stories;

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// An answer spelled one character per token: what a model may generate, and not what tokenizing its text gives.
std::vector<TokenId> spelled(const Tokenizer& tok, std::string_view text) {
  std::vector<TokenId> out;
  for (char c : text) out = concat(std::move(out), tok.encode_continuation(std::string(1, c), false));
  return out;
}

struct Turn {
  std::string prompt_text = "User: Hi\nAssistant:";
  std::vector<TokenId> prompt = stories().encode(prompt_text, true);
  std::vector<TokenId> answer = spelled(stories(), " Hello there");
};

TEST(AnswerMemory, NextTurnReusesTheGeneratedIds) {
  const Tokenizer& tok = stories();
  AnswerMemory memory(tok, 8);
  Turn t;
  memory.remember("", false, t.prompt_text, t.prompt, t.answer);
  const std::string next = t.prompt_text + " Hello there\nUser: More?\nAssistant:";
  const std::vector<TokenId> canonical = tok.encode(next, true);
  const std::vector<TokenId> ours = concat(t.prompt, t.answer);
  ASSERT_GE(canonical.size(), ours.size());
  ASSERT_FALSE(std::equal(ours.begin(), ours.end(), canonical.begin()))
      << "the spelled answer must differ from what tokenizing its text gives, or this test proves nothing";
  const auto spliced = memory.splice("", false, next);
  ASSERT_TRUE(spliced);
  EXPECT_EQ(spliced->answer_tokens, static_cast<int32_t>(t.answer.size()));
  EXPECT_EQ(spliced->tokens,
            concat(concat(t.prompt, t.answer), tok.encode_continuation("\nUser: More?\nAssistant:", false)));
  EXPECT_EQ(tok.decode(spliced->tokens), next);
}

// Tenant isolation: a turn remembered under one cache_salt is never spliced into another salt's prompt (the count of
// reused answer ids would tell that tenant what the other was answered).
TEST(AnswerMemory, OnlyTheSameSaltReusesATurn) {
  AnswerMemory memory(stories(), 8);
  Turn t;
  memory.remember("tenant-a", false, t.prompt_text, t.prompt, t.answer);
  const std::string next = t.prompt_text + " Hello there\nUser: More?\nAssistant:";
  EXPECT_FALSE(memory.splice("tenant-b", false, next).has_value());
  EXPECT_FALSE(memory.splice("", false, next).has_value());
  const auto own = memory.splice("tenant-a", false, next);
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->answer_tokens, static_cast<int32_t>(t.answer.size()));
}

TEST(AnswerMemory, StopsWhereTheTextStopsRepeatingTheAnswer) {
  const Tokenizer& tok = stories();
  AnswerMemory memory(tok, 8);
  Turn t;
  memory.remember("", false, t.prompt_text, t.prompt, t.answer);
  // The client got " Hel" (a stop string cut the rest), or edited the answer after it.
  const std::string next = t.prompt_text + " Help!\nUser: More?\nAssistant:";
  const auto spliced = memory.splice("", false, next);
  ASSERT_TRUE(spliced);
  EXPECT_EQ(spliced->answer_tokens, 4);  // " ", "H", "e", "l"
  EXPECT_EQ(tok.decode(spliced->tokens), next);
  EXPECT_TRUE(std::equal(t.answer.begin(), t.answer.begin() + 4, spliced->tokens.begin() + t.prompt.size()));
}

TEST(AnswerMemory, NoMatchTokenizesAsUsual) {
  AnswerMemory memory(stories(), 8);
  Turn t;
  memory.remember("", false, t.prompt_text, t.prompt, t.answer);
  EXPECT_FALSE(memory.splice("", false, "User: Hello\nAssistant: Hello there"));  // another prompt
  EXPECT_FALSE(memory.splice("", false, t.prompt_text + "Hello there"));            // answer not repeated at all
  EXPECT_FALSE(memory.splice("", true, t.prompt_text + " Hello there"));            // tokenized another way
  EXPECT_FALSE(memory.splice("", false, t.prompt_text));
}

TEST(AnswerMemory, ControlTokensMatchOnlyTheirTextWhereSpecialsParse) {
  const Tokenizer& tok = stories();
  Turn t;
  const std::vector<TokenId> answer = concat(spelled(tok, " Hi"), {tok.eos()});
  for (const bool parse_special : {false, true}) {
    AnswerMemory memory(tok, 8);
    memory.remember("", parse_special, t.prompt_text, t.prompt, answer);
    const std::string next = t.prompt_text + " Hi</s>User: More?";
    const auto spliced = memory.splice("", parse_special, next);
    ASSERT_TRUE(spliced);
    const int32_t k = parse_special ? 4 : 3;
    EXPECT_EQ(spliced->answer_tokens, k) << parse_special;
    // After a control token the rest starts a new text (with its space prefix), as tokenizing the whole would.
    const auto rest = parse_special ? tok.encode("User: More?", false, true)
                                    : tok.encode_continuation("</s>User: More?", false);
    EXPECT_EQ(spliced->tokens, concat(concat(t.prompt, std::vector<TokenId>(answer.begin(), answer.begin() + k)), rest))
        << parse_special;
  }
}

TEST(AnswerMemory, NeverCutsACharacter) {
  const Tokenizer& tok = stories();
  AnswerMemory memory(tok, 8);
  Turn t;
  // "ü" is two byte tokens in stories260K's 512 pieces; "ý" shares the first byte.
  const std::vector<TokenId> answer = tok.encode_continuation(" M\xC3\xBC", false);
  ASSERT_EQ(answer.back(), TokenId(3 + 0xBC));
  memory.remember("", false, t.prompt_text, t.prompt, answer);
  const std::string next = t.prompt_text + " M\xC3\xBD!";
  const auto spliced = memory.splice("", false, next);
  ASSERT_TRUE(spliced);
  EXPECT_EQ(spliced->answer_tokens, static_cast<int32_t>(answer.size()) - 2);
  EXPECT_EQ(tok.decode(spliced->tokens), next);
}

TEST(AnswerMemory, PrefersTheTurnThatCoversMostAndForgetsTheOldest) {
  const Tokenizer& tok = stories();
  AnswerMemory memory(tok, 2);
  Turn t;
  memory.remember("", false, t.prompt_text, t.prompt, spelled(tok, " Hello"));
  memory.remember("", false, t.prompt_text, t.prompt, spelled(tok, " Hello there"));
  const auto spliced = memory.splice("", false, t.prompt_text + " Hello there\nUser: And?");
  ASSERT_TRUE(spliced);
  EXPECT_EQ(spliced->answer_tokens, 12);
  EXPECT_EQ(memory.size(), 2u);
  memory.remember("", false, "User: Bye\nAssistant:", tok.encode("User: Bye\nAssistant:", true), spelled(tok, " Bye"));
  EXPECT_EQ(memory.size(), 2u);
  // " Hello" was used least recently, so it went; " Hello there" (used by the splice) stayed.
  EXPECT_EQ(memory.splice("", false, t.prompt_text + " Hello there")->answer_tokens, 12);
}

TEST(AnswerMemory, BoundedInBytes) {
  const Tokenizer& tok = stories();
  Turn t;
  AnswerMemory probe(tok, 8);
  probe.remember("", false, t.prompt_text, t.prompt, t.answer);
  const size_t one = probe.bytes();
  ASSERT_GT(one, 0u);
  AnswerMemory memory(tok, 8, 2 * one + one / 2);
  for (const std::string q : {"User: A\nAssistant:", "User: B\nAssistant:", "User: C\nAssistant:"}) {
    memory.remember("", false, q, tok.encode(q, true), t.answer);
    EXPECT_LE(memory.bytes(), 2 * one + one / 2);
  }
  EXPECT_EQ(memory.size(), 2u);
  EXPECT_FALSE(memory.splice("", false, "User: A\nAssistant: Hello there"));  // the oldest went
  EXPECT_TRUE(memory.splice("", false, "User: C\nAssistant: Hello there"));
  AnswerMemory tiny(tok, 8, one - 1);  // a turn larger than the whole budget is not kept
  tiny.remember("", false, t.prompt_text, t.prompt, t.answer);
  EXPECT_EQ(tiny.size(), 0u);
  EXPECT_EQ(tiny.bytes(), 0u);
}

TEST(AnswerMemory, ZeroEntriesIsOff) {
  AnswerMemory memory(stories(), 0);
  Turn t;
  memory.remember("", false, t.prompt_text, t.prompt, t.answer);
  EXPECT_EQ(memory.size(), 0u);
  EXPECT_FALSE(memory.splice("", false, t.prompt_text + " Hello there"));
}

}  // namespace
}  // namespace hearth::server
