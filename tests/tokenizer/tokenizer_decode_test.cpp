// Detokenization: pieces, whole-sequence decode, streaming through IncrementalDecoder, and the UTF-8 scanner.

#include <gtest/gtest.h>

#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace hearth {
namespace {

using test::stories;
using test::tokens;

constexpr int32_t kByte0 = 3;  // stories260K: <0x00> is token 3, so byte b is token 3 + b

TEST(TokenizerDecode, Pieces) {
  const Tokenizer& tok = stories();
  EXPECT_EQ(tok.token_to_piece(TokenId(403)), " Once");
  EXPECT_EQ(tok.token_to_piece(TokenId(410)), " ");
  EXPECT_EQ(tok.token_to_piece(TokenId(kByte0 + 0x0A)), "\n");
  EXPECT_EQ(tok.token_to_piece(TokenId(kByte0 + 0xF0)), "\xF0") << "a byte token is one raw byte";
  EXPECT_EQ(tok.token_to_piece(TokenId(2)), "");
  EXPECT_EQ(tok.token_to_piece(TokenId(2), /*render_special=*/true), "</s>");
  EXPECT_EQ(tok.token_to_piece(TokenId(0)), "<unk>") << "llama.cpp renders <unk> as its text";
  EXPECT_EQ(tok.token_text(TokenId(403)), "▁Once");
  EXPECT_EQ(tok.find_token("▁Once"), TokenId(403));
  EXPECT_EQ(tok.find_token("no such piece"), std::nullopt);
  EXPECT_TRUE(tok.is_control(TokenId(1)));
  EXPECT_TRUE(tok.is_eog(TokenId(2)));
  EXPECT_FALSE(tok.is_eog(TokenId(1)));
}

TEST(TokenizerDecode, LeadingSpaceIsDroppedOnlyAtTheStartOfAText) {
  const Tokenizer& tok = stories();
  EXPECT_EQ(tok.decode(tokens({1, 403, 407, 261, 378})), "Once upon a time");
  EXPECT_EQ(tok.decode(tokens({403, 407, 261, 378})), " Once upon a time") << "a continuation decodes verbatim";
  EXPECT_EQ(tok.decode(tokens({403, 407}), {.starts_text = true}), "Once upon");
  EXPECT_EQ(tok.decode(tokens({1, 403, 2}), {.render_special = true}), "<s> Once</s>");
  EXPECT_EQ(tok.decode(tokens({1, 1, 403})), " Once") << "only the first BOS starts the text";
  EXPECT_EQ(tok.decode(tokens({1, 432, 403})), ", Once") << "nothing to strip: the chance is used up";
  EXPECT_EQ(tok.decode({}), "");
}

TEST(TokenizerDecode, RoundTrips) {
  const Tokenizer& tok = stories();
  for (const char* text : {"Once upon a time", "Lily's mom said \"hi\"!", "naïve café 🦙🦙", "  two spaces", "x",
                           "\n", "ends with space "}) {
    EXPECT_EQ(tok.decode(tok.encode(text, true)), text);
    EXPECT_EQ(tok.decode(tok.encode(text, false), {.starts_text = true}), text);
  }
}

// A 4-byte character spelled as 4 byte tokens comes out whole, on the push of its last byte.
TEST(IncrementalDecoder, HoldsBackIncompleteCharacters) {
  const Tokenizer& tok = stories();
  const auto encoded = tok.encode("🦙", true);
  ASSERT_EQ(test::ids(encoded),
            (std::vector<int32_t>{1, 410, kByte0 + 0xF0, kByte0 + 0x9F, kByte0 + 0xA6, kByte0 + 0x99}));
  IncrementalDecoder decoder(tok);
  std::vector<std::string> outputs;
  for (const TokenId t : encoded) outputs.push_back(decoder.push(t));
  EXPECT_EQ(outputs, (std::vector<std::string>{"", "", "", "", "", "🦙"}));
  EXPECT_EQ(decoder.num_pending_bytes(), 0u);
  EXPECT_EQ(decoder.flush(), "");
}

TEST(IncrementalDecoder, ContinuationAfterAPrompt) {
  const Tokenizer& tok = stories();
  IncrementalDecoder decoder(tok);  // generated tokens: no BOS, so nothing is stripped
  EXPECT_EQ(decoder.push(TokenId(432)), ",");
  EXPECT_EQ(decoder.push(TokenId(383)), " there");
  EXPECT_EQ(decoder.push(TokenId(kByte0 + 0xC3)), "");
  EXPECT_EQ(decoder.num_pending_bytes(), 1u);
  EXPECT_EQ(decoder.push(TokenId(kByte0 + 0xBC)), "ü");
  EXPECT_EQ(decoder.push(TokenId(2)), "");
}

TEST(IncrementalDecoder, InvalidSequencesBecomeReplacementCharacters) {
  const Tokenizer& tok = stories();
  IncrementalDecoder decoder(tok);
  EXPECT_EQ(decoder.push(TokenId(kByte0 + 0xF0)), "");
  EXPECT_EQ(decoder.push(TokenId(412)),
            "\xEF\xBF\xBD"
            "a")
      << "a cut-off character is replaced, not dropped";
  EXPECT_EQ(decoder.push(TokenId(kByte0 + 0x80)), "\xEF\xBF\xBD") << "a lone continuation byte";
  EXPECT_EQ(decoder.push(TokenId(kByte0 + 0xFF)), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.push(TokenId(kByte0 + 0xE2)), "");
  EXPECT_EQ(decoder.push(TokenId(kByte0 + 0x82)), "");
  EXPECT_EQ(decoder.flush(), "\xEF\xBF\xBD") << "an incomplete tail is replaced at the end";
  EXPECT_EQ(decoder.num_pending_bytes(), 0u);
  // After flush the decoder starts a new sequence.
  EXPECT_EQ(decoder.push(TokenId(1)), "");
  EXPECT_EQ(decoder.push(TokenId(403)), "Once");
}

// Streaming texts spelled mostly in byte tokens: each output is well-formed UTF-8, and together they are decode().
TEST(IncrementalDecoder, StreamingEqualsDecodeOnReferenceTexts) {
  const Tokenizer& tok = stories();
  for (const auto& c : test::read_vocab_cases("vocab/ggml-vocab-llama-spm.gguf")) {
    const auto encoded = tok.encode(c.text, true);
    const std::string streamed = test::stream_decode(tok, encoded);
    EXPECT_EQ(streamed, tok.decode(encoded));
    EXPECT_EQ(streamed, c.text);
  }
}

// Random token streams (bytes mixed with pieces) never hang, crash or emit ill-formed UTF-8.
TEST(IncrementalDecoder, RandomTokensStayWellFormed) {
  const Tokenizer& tok = stories();
  uint32_t state = 12345;
  for (int round = 0; round < 200; ++round) {
    IncrementalDecoder decoder(tok);
    std::string all;
    for (int i = 0; i < 32; ++i) {
      state = state * 1664525u + 1013904223u;
      const std::string out = decoder.push(TokenId(static_cast<int32_t>((state >> 8) % 512)));
      EXPECT_TRUE(test::is_well_formed(out));
      EXPECT_LE(decoder.num_pending_bytes(), 3u);
      all += out;
    }
    all += decoder.flush();
    EXPECT_TRUE(test::is_well_formed(all));
  }
}

struct ScanCase {
  const char* bytes;
  Utf8Status status;
  size_t length;
};

TEST(Utf8, ScanFollowsUnicodeTable3_7) {
  const ScanCase cases[] = {
      {"A", Utf8Status::kValid, 1},
      {"\xC3\xA9", Utf8Status::kValid, 2},
      {"\xE2\x96\x81", Utf8Status::kValid, 3},
      {"\xF0\x9F\xA6\x99", Utf8Status::kValid, 4},
      {"\xF4\x8F\xBF\xBF", Utf8Status::kValid, 4},    // U+10FFFF
      {"\x80", Utf8Status::kInvalid, 1},              // lone continuation
      {"\xC0\xAF", Utf8Status::kInvalid, 1},          // overlong
      {"\xE0\x80\x80", Utf8Status::kInvalid, 1},      // overlong
      {"\xED\xA0\x80", Utf8Status::kInvalid, 1},      // surrogate
      {"\xF4\x90\x80\x80", Utf8Status::kInvalid, 1},  // above U+10FFFF
      {"\xF5", Utf8Status::kInvalid, 1},
      {"\xE2\x82"
       "A",
       Utf8Status::kInvalid, 2},  // maximal subpart: both bytes
      {"\xE2\x82", Utf8Status::kIncomplete, 2},
      {"\xF0\x9F\xA6", Utf8Status::kIncomplete, 3},
  };
  for (const ScanCase& c : cases) {
    const Utf8Scan scan = utf8_scan(c.bytes, 0);
    EXPECT_EQ(scan.status, c.status) << testing::PrintToString(std::string(c.bytes));
    EXPECT_EQ(scan.length, c.length) << testing::PrintToString(std::string(c.bytes));
  }
}

TEST(Utf8, DecodeAndAppendRoundTrip) {
  for (const char32_t cp : {U'A', U'\u00E9', U'\u2581', U'\U0001F999', U'\U0010FFFF'}) {
    std::string s;
    utf8_append(s, cp);
    ASSERT_EQ(utf8_scan(s, 0).status, Utf8Status::kValid);
    EXPECT_EQ(utf8_scan(s, 0).length, s.size());
    EXPECT_EQ(utf8_decode(s, 0), cp);
  }
}

}  // namespace
}  // namespace hearth
