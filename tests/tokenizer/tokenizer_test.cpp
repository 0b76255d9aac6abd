// Tokenizer encoding: golden ids against llama.cpp's reference files, byte fallback, special tokens, bad vocabularies.

#include <gtest/gtest.h>

#include <random>

#include "gguf/gguf_writer.h"
#include "tokenizer_test_util.h"

namespace hearth {
namespace {

using test::ids;
using test::stories;

TEST(TokenizerSpm, StoriesOnceUponATime) {
  const Tokenizer& tok = stories();
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.kind(), TokenizerKind::kSpm);
  EXPECT_EQ(tok.bos(), TokenId(1));
  EXPECT_EQ(tok.eos(), TokenId(2));
  EXPECT_EQ(tok.unknown(), TokenId(0));
  EXPECT_EQ(tok.padding(), std::nullopt);  // stored as 0xFFFFFFFF
  EXPECT_TRUE(tok.add_bos_token());
  EXPECT_FALSE(tok.add_eos_token());
  EXPECT_TRUE(tok.add_space_prefix());
  EXPECT_EQ(ids(tok.encode("Once upon a time", true)), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(ids(tok.encode("Once upon a time", false)), (std::vector<int32_t>{403, 407, 261, 378}));
}

TEST(TokenizerSpm, EmptyInput) {
  EXPECT_EQ(ids(stories().encode("", true)), (std::vector<int32_t>{1}));
  EXPECT_TRUE(stories().encode("", false).empty());
}

// Stories260K has 512 pieces, so most non-ASCII characters are spelled as <0xNN> byte tokens (id = 3 + byte).
TEST(TokenizerSpm, ByteFallbackForCharactersOutsideTheVocab) {
  const Tokenizer& tok = stories();
  EXPECT_EQ(ids(tok.encode("é", false)), (std::vector<int32_t>{410, 485}));  // in the vocab as a piece
  EXPECT_EQ(ids(tok.encode("ü", false)), (std::vector<int32_t>{410, 3 + 0xC3, 3 + 0xBC}));
  EXPECT_EQ(ids(tok.encode("🦙", false)), (std::vector<int32_t>{410, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99}));
  EXPECT_EQ(ids(tok.encode("a\nb", false)), (std::vector<int32_t>{261, 3 + 0x0A, 430}));
  for (const char* text : {"Grüße aus Köln 🦙!", "日本語のテキスト", "tab\there\r\nnew line", "mixed é ü ñ €"}) {
    const auto encoded = tok.encode(text, true);
    EXPECT_EQ(tok.decode(encoded), text) << text;
  }
}

TEST(TokenizerSpm, WhitespaceRuns) {
  const Tokenizer& tok = stories();
  // "▁" is a piece of its own; runs of spaces are runs of "▁", the last one fused with the word that follows.
  EXPECT_EQ(ids(tok.encode(" ", false)), (std::vector<int32_t>{410, 410}));
  EXPECT_EQ(ids(tok.encode("a   b", false)), (std::vector<int32_t>{261, 410, 410, 268}));
  for (const char* text : {" ", "   ", "a   b", "  leading", "trailing  ", "\n\n", " \t \n "}) {
    EXPECT_EQ(tok.decode(tok.encode(text, true)), text) << '"' << text << '"';
  }
}

// Ill-formed UTF-8 never crashes: each bad byte is a character of its own and takes the byte fallback.
TEST(TokenizerSpm, InvalidUtf8BecomesByteTokens) {
  const Tokenizer& tok = stories();
  EXPECT_EQ(ids(tok.encode("\xFF", false)), (std::vector<int32_t>{410, 3 + 0xFF}));
  // A truncated 2-byte sequence followed by ASCII: the ASCII still merges as usual.
  EXPECT_EQ(ids(tok.encode("\xC3time", false)), (std::vector<int32_t>{410, 3 + 0xC3, 413, 369}));
  // Overlong encoding of '/', a surrogate, a truncated 4-byte sequence at the end, lone continuation bytes.
  const std::vector<std::pair<std::string, size_t>> cases = {
      {"\xC0\xAF", 2}, {"\xED\xA0\x80", 3}, {"abc\xF0\x9F\xA6", 3}, {"\x80\x80\x80", 3}};
  for (const auto& [text, num_bad_bytes] : cases) {
    const auto encoded = tok.encode(text, false);
    const auto num_byte_tokens =
        std::count_if(encoded.begin(), encoded.end(), [&](TokenId t) { return tok.token_type(t) == TokenType::kByte; });
    EXPECT_EQ(static_cast<size_t>(num_byte_tokens), num_bad_bytes) << "one byte token per bad byte";
    const std::string decoded = tok.decode(encoded, {.starts_text = true});
    EXPECT_NE(decoded.find("\xEF\xBF\xBD"), std::string::npos) << "bad bytes decode to U+FFFD";
  }
}

TEST(TokenizerSpm, SpecialTokensOnlyWhenAsked) {
  const Tokenizer& tok = stories();
  const auto plain = ids(tok.encode("a</s>", false));
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0) << "</s> in text is text by default";
  EXPECT_EQ(ids(tok.encode("a</s>", false, /*parse_special=*/true)), (std::vector<int32_t>{261, 2}));
  // After a special token, the next fragment gets its own space prefix, as in llama.cpp.
  EXPECT_EQ(ids(tok.encode("<s>a", false, true)), (std::vector<int32_t>{1, 261}));
  EXPECT_EQ(tok.decode(tok.encode("a</s>", true)), "a</s>");
}

// A continuation gets no BOS and no space prefix, so prompt ids + encode_continuation(rest) decode to the prompt
// text + rest exactly; a special token inside it still starts a new text with its own space prefix.
TEST(TokenizerSpm, ContinuationHasNoBosAndNoSpacePrefix) {
  const Tokenizer& tok = stories();
  EXPECT_EQ(ids(tok.encode_continuation(" upon a time", false)), (std::vector<int32_t>{407, 261, 378}));
  EXPECT_EQ(ids(tok.encode_continuation(" upon a time", false)), ids(tok.encode("upon a time", false)));
  EXPECT_TRUE(tok.encode_continuation("", true).empty());
  const auto start = tok.encode("Once", true);
  auto whole = start;
  for (TokenId t : tok.encode_continuation(" upon a time", false)) whole.push_back(t);
  EXPECT_EQ(whole, tok.encode("Once upon a time", true));
  EXPECT_EQ(tok.decode(whole), "Once upon a time");
  EXPECT_EQ(ids(tok.encode_continuation("</s>a", true)), (std::vector<int32_t>{2, 261}));
}

TEST(TokenizerSpm, AddsEosWhenTheModelAsks) {
  TokenizerVocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "▁a"};
  v.token_types = {2, 3, 3, 1};
  v.add_eos = true;
  auto tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ(ids(tok->encode("a", true)), (std::vector<int32_t>{1, 3, 2}));
  EXPECT_EQ(ids(tok->encode("a", false)), (std::vector<int32_t>{3}));
}

// The highest-scoring merge goes first, wherever it is; equal scores merge the leftmost pair first.
TEST(TokenizerSpm, MergeOrderFollowsScoresThenPosition) {
  TokenizerVocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "▁", "a", "b", "c", "ab", "bc", "aa"};
  v.scores = {0, 0, 0, -1, -1, -1, -1, -5, -2, -3};
  v.token_types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  v.add_space_prefix = false;
  auto tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ(ids(tok->encode("abc", false)), (std::vector<int32_t>{4, 8}));  // "bc" beats "ab"
  EXPECT_EQ(ids(tok->encode("aaa", false)), (std::vector<int32_t>{9, 4}));  // leftmost "aa"
  EXPECT_EQ(ids(tok->encode("aaaa", false)), (std::vector<int32_t>{9, 9}));
  EXPECT_EQ(ids(tok->encode("x", false)), (std::vector<int32_t>{0})) << "no byte tokens: <unk>";
}

// Phi-3 marks "</s>" user-defined: it is matched even without parse_special, and (llama.cpp's Phi-3 rule)
// whitespace after it is dropped.
TEST(TokenizerSpm, Phi3UserDefinedTokenIsAlwaysMatched) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-phi-3.gguf");
  EXPECT_EQ(tok.token_type(TokenId(2)), TokenType::kUserDefined);
  const auto with_space = ids(tok.encode("Hi</s>  there", false));
  EXPECT_EQ(with_space, ids(tok.encode("Hi</s>there", false)));
  EXPECT_EQ(std::count(with_space.begin(), with_space.end(), 2), 1);
  std::vector<int32_t> expected = {32007};
  for (const int32_t id : ids(tok.encode("x", false))) expected.push_back(id);
  EXPECT_EQ(ids(tok.encode("<|end|>\nx", false, true)), expected);
  EXPECT_TRUE(tok.is_eog(TokenId(32000))) << "EOS, <|endoftext|>";
  EXPECT_TRUE(tok.is_eog(TokenId(32007))) << "<|end|> ends a chat turn";
  EXPECT_FALSE(tok.is_eog(TokenId(32010))) << "<|user|>";
}

// A long prompt (10k tokens, mixed scripts) encodes, decodes back to its text, and gives the same tokens as the
// fragment merged whole. Its speed is hearth-bench-tokenizer's to measure, not a test's.
TEST(TokenizerSpm, LongPromptRoundTripsAndMatchesTheUnsplitEncode) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  std::string text;
  while (text.size() < 31000) {
    text += "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ";
    text += "Über den Wolken 🦙 — naïve café, 1234567 tokens\n";
  }
  const auto encoded = tok.encode(text, true);
  EXPECT_GE(encoded.size(), 10000u);
  EXPECT_EQ(tok.decode(encoded), text);
  EXPECT_EQ(ids(encoded), ids(tok.encode_unsplit(text, true)));
}

// The encoder splits a fragment where two characters never sit side by side in a vocabulary text, and merges each
// part alone. On every SentencePiece vocabulary that must give exactly the tokens of the fragment merged whole:
// random texts from letters, runs of spaces, "▁" itself, newlines, tabs, digits, punctuation, accented, CJK and
// emoji characters, and ill-formed bytes (a lone continuation byte, a truncated sequence, 0xFF).
TEST(TokenizerSpm, SplitEncodeIsTheUnsplitOneOnEveryVocabulary) {
  const char* const kPieces[] = {"a", "e", "th", "the", "ing", "Lily", " ", "  ", "   ", "\t", "\n", "\n\n", "▁",
                                 "0", "42", ".", ",", "'s", "—", "é", "naïve", "Zürich", "日本", "語", "🦙", "😀",
                                 "\x80", "\xe2\x96", "\xff", "<s>", "</s>", "<0x0A>", "ab", "ba", "x"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> piece(0, std::size(kPieces) - 1);
  std::uniform_int_distribution<int> length(1, 60);
  std::vector<std::string> texts = {"", " ", "▁", "a", "\xff", "  hello  world  ", "x\xe2\x96y"};
  for (int i = 0; i < 300; ++i) {
    std::string text;
    for (int n = length(rng); n > 0; --n) text += kPieces[piece(rng)];
    texts.push_back(text);
  }
  for (const char* file : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf",
                           "vocab/ggml-vocab-gemma3.gguf", "models/stories260K.gguf"}) {
    const Tokenizer& tok = test::cached_tokenizer(file);
    std::vector<std::string> cases = texts;
    if (std::string(file).find("vocab/") == 0) {
      for (const test::VocabCase& c : test::read_vocab_cases(file)) cases.push_back(c.text);
    }
    for (const std::string& text : cases) {
      for (const bool parse_special : {false, true}) {
        ASSERT_EQ(ids(tok.encode(text, true, parse_special)), ids(tok.encode_unsplit(text, true, parse_special)))
            << file << ": '" << text << "' parse_special " << parse_special;
      }
    }
  }
}

// Pieces that span a space, or an ill-formed byte, are still found: the split never separates two characters that
// sit side by side in a vocabulary text, and never splits next to an ill-formed byte.
TEST(TokenizerSpm, APieceAcrossASpaceOrAnIllFormedByteIsStillMerged) {
  TokenizerVocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "▁", "a", "b", "x", "y", "a▁b", "x\xffy", "▁b", "x\xff"};
  v.scores = {0, 0, 0, -1, -1, -1, -1, -1, -2, -2, -1.5, -1.5};
  v.token_types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  v.add_space_prefix = false;
  auto tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ(ids(tok->encode("a b", false)), (std::vector<int32_t>{8}));
  EXPECT_EQ(ids(tok->encode("b a b a", false)), (std::vector<int32_t>{5, 3, 8, 3, 4}));
  EXPECT_EQ(ids(tok->encode("x\xffy", false)), (std::vector<int32_t>{9}));
  EXPECT_EQ(ids(tok->encode("b a", false)), (std::vector<int32_t>{5, 3, 4})) << "no piece holds 'b▁'";
}

// Builds a GGUF in memory from a llama-style tokenizer, after `edit` has changed it.
Result<Tokenizer> tokenizer_from_edited_gguf(const std::function<void(GgufWriter&)>& edit,
                                             std::vector<std::string> keys_to_skip = {}) {
  GgufWriter w;
  const auto skip = [&](const std::string& key) {
    return std::find(keys_to_skip.begin(), keys_to_skip.end(), key) != keys_to_skip.end();
  };
  if (!skip("tokenizer.ggml.model")) w.add("tokenizer.ggml.model", gguf_string("llama"));
  if (!skip("tokenizer.ggml.tokens")) w.add("tokenizer.ggml.tokens", gguf_string_array({"<unk>", "<s>", "</s>", "▁a"}));
  if (!skip("tokenizer.ggml.scores")) {
    std::vector<GgufValue> scores(4, gguf_f32(0.0f));
    w.add("tokenizer.ggml.scores", gguf_array(GgufType::FLOAT32, scores));
  }
  edit(w);
  static std::vector<uint8_t> bytes;  // GgufFile::parse needs the bytes to outlive the file
  auto buffer = w.write_buffer();
  if (!buffer) return buffer.error();
  bytes = std::move(*buffer);
  auto file = GgufFile::parse(bytes, "test.gguf");
  if (!file) return file.error();
  return Tokenizer::from_gguf(*file);
}

void expect_error(const Result<Tokenizer>& result, const std::string& fragment) {
  ASSERT_FALSE(result) << "expected an error containing: " << fragment;
  EXPECT_NE(result.error().message.find(fragment), std::string::npos) << result.error().message;
  EXPECT_NE(result.error().message.find("test.gguf"), std::string::npos) << result.error().message;
}

TEST(TokenizerErrors, ValidMinimalFileLoads) {
  auto tok = tokenizer_from_edited_gguf([](GgufWriter&) {});
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ(ids(tok->encode("a", true)), (std::vector<int32_t>{1, 3}));
}

TEST(TokenizerErrors, NameWhatIsWrong) {
  const auto none = [](GgufWriter&) {};
  expect_error(tokenizer_from_edited_gguf(none, {"tokenizer.ggml.model"}), "tokenizer.ggml.model' is missing");
  expect_error(tokenizer_from_edited_gguf(none, {"tokenizer.ggml.tokens"}), "tokenizer.ggml.tokens is missing");
  expect_error(tokenizer_from_edited_gguf([](GgufWriter& w) { w.add("tokenizer.ggml.model", gguf_string("ugm")); },
                                          {"tokenizer.ggml.model"}),
               "unsupported tokenizer model 'ugm'");
  expect_error(tokenizer_from_edited_gguf(
                   [](GgufWriter& w) {
                     w.add("tokenizer.ggml.scores", gguf_array(GgufType::FLOAT32, {gguf_f32(0), gguf_f32(0)}));
                   },
                   {"tokenizer.ggml.scores"}),
               "tokenizer.ggml.scores has 2 entries but tokenizer.ggml.tokens has 4");
  expect_error(tokenizer_from_edited_gguf([](GgufWriter& w) { w.add("tokenizer.ggml.bos_token_id", gguf_u32(7)); }),
               "tokenizer.ggml.bos_token_id = 7 is out of range: the vocabulary has 4 tokens");
  expect_error(tokenizer_from_edited_gguf([](GgufWriter& w) {
                 std::vector<GgufValue> types(4, gguf_int(GgufType::INT32, 1));
                 types[3] = gguf_int(GgufType::INT32, 9);
                 w.add("tokenizer.ggml.token_type", gguf_array(GgufType::INT32, types));
               }),
               "tokenizer.ggml.token_type[3] = 9 is not a token type");
  expect_error(
      tokenizer_from_edited_gguf([](GgufWriter& w) { w.add("tokenizer.ggml.eos_token_id", gguf_string("2")); }),
      "tokenizer.ggml.eos_token_id");
  expect_error(tokenizer_from_edited_gguf([](GgufWriter& w) {
                 std::vector<GgufValue> types(4, gguf_int(GgufType::INT32, 1));
                 types[3] = gguf_int(GgufType::INT32, 6);  // byte, but its text is "▁a"
                 w.add("tokenizer.ggml.token_type", gguf_array(GgufType::INT32, types));
               }),
               "token 3 has type byte but its text '▁a' is not <0xNN>");
  expect_error(tokenizer_from_edited_gguf(
                   [](GgufWriter& w) { w.add("tokenizer.ggml.unknown_token_id", gguf_int(GgufType::INT32, -1)); }),
               "no byte token <0x00> and no unknown token");
}

}  // namespace
}  // namespace hearth
