// The logprobs objects of both OpenAI formats, rendered with stories260K's vocabulary.

#include "server/api/logprobs_json.h"

#include <gtest/gtest.h>

#include "../tokenizer/tokenizer_test_util.h"

namespace hearth::server {
namespace {

using nlohmann::json;
using test::stories;

std::vector<TokenLogprobs> two_tokens(const Tokenizer& tok) {
  const auto ids = tok.encode("Once upon", false);
  EXPECT_EQ(ids.size(), 2u);
  return {
      TokenLogprobs{ids[0], -0.5f, {{ids[0], -0.5f}, {tok.eos(), -1.5f}}},
      TokenLogprobs{ids[1], -2.0f, {{tok.eos(), -0.25f}, {ids[1], -2.0f}}},
  };
}

TEST(LogprobsJson, ChatEntriesHaveTokenTextBytesAndAlternatives) {
  const Tokenizer& tok = stories();
  const json j = chat_logprobs_json(two_tokens(tok), tok);
  ASSERT_EQ(j["content"].size(), 2u);
  EXPECT_TRUE(j["refusal"].is_null());
  const json& first = j["content"][0];
  EXPECT_EQ(first["token"], " Once");
  EXPECT_EQ(first["logprob"], -0.5f);
  EXPECT_EQ(first["bytes"], json::array({' ', 'O', 'n', 'c', 'e'}));
  ASSERT_EQ(first["top_logprobs"].size(), 2u);
  EXPECT_EQ(first["top_logprobs"][1]["token"], "</s>");  // control tokens by their text
  EXPECT_FALSE(first["top_logprobs"][0].contains("top_logprobs"));
  EXPECT_EQ(j["content"][1]["token"], " upon");
}

TEST(LogprobsJson, CompletionsHaveParallelArraysAndByteOffsets) {
  const Tokenizer& tok = stories();
  int64_t offset = 3;
  const json j = completion_logprobs_json(two_tokens(tok), tok, offset);
  EXPECT_EQ(j["tokens"], json::array({" Once", " upon"}));
  EXPECT_EQ(j["token_logprobs"], json::array({-0.5f, -2.0f}));
  EXPECT_EQ(j["text_offset"], json::array({3, 8}));
  EXPECT_EQ(offset, 13);
  EXPECT_EQ(j["top_logprobs"][0], json({{" Once", -0.5f}, {"</s>", -1.5f}}));
  EXPECT_EQ(j["top_logprobs"][1], json({{"</s>", -0.25f}, {" upon", -2.0f}}));
  // With no alternatives asked, the object still holds the chosen token (as vLLM).
  const std::vector<TokenLogprobs> bare = {TokenLogprobs{two_tokens(tok)[0].token, -0.5f, {}}};
  EXPECT_EQ(completion_logprobs_json(bare, tok, offset)["top_logprobs"][0], json({{" Once", -0.5f}}));
}

TEST(LogprobsJson, BytesThatAreNotWholeUtf8RenderAsReplacementCharacters) {
  EXPECT_EQ(valid_utf8("abc"), "abc");
  EXPECT_EQ(valid_utf8("\xC3\xA9"), "\xC3\xA9");                  // é
  EXPECT_EQ(valid_utf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // two bytes of a three-byte character
  EXPECT_EQ(valid_utf8("a\xFF"), "a\xEF\xBF\xBD");
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(valid_utf8("\xF0\x9F\x94\xA5"), "\xF0\x9F\x94\xA5");                  // an emoji
}

}  // namespace
}  // namespace hearth::server
