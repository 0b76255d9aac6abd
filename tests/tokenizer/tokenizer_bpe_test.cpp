// Byte-level BPE ("gpt2" tokenizer model): golden ids against llama.cpp's reference files and the pre-tokenizers.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_normalize.h"
#include "tokenizer/tokenizer_pretokenize.h"
#include "tokenizer_test_util.h"

namespace hearth {
namespace {

using test::ids;

TEST(TokenizerBpe, Gpt2Basics) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.bos(), TokenId(50256));
  EXPECT_FALSE(tok.add_bos_token());
  EXPECT_FALSE(tok.add_space_prefix());
  EXPECT_EQ(ids(tok.encode("Hello world", false)), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(ids(tok.encode("Hello world", true)), (std::vector<int32_t>{15496, 995})) << "GPT-2 adds no BOS";
  EXPECT_EQ(tok.token_to_piece(TokenId(995)), " world") << "Ġ spells a space";
  EXPECT_EQ(tok.token_to_piece(TokenId(198)), "\n");
  EXPECT_EQ(tok.token_to_piece(TokenId(50256)), "");
  EXPECT_EQ(tok.token_to_piece(TokenId(50256), true), "<|endoftext|>");
  EXPECT_EQ(ids(tok.encode("a<|endoftext|>", false, true)), (std::vector<int32_t>{64, 50256}));
  EXPECT_TRUE(tok.encode("", true).empty());
  EXPECT_EQ(tok.decode(tok.encode(" leading space kept", false)), " leading space kept");
}

TEST(TokenizerBpe, InvalidUtf8RoundTripsAsBytes) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  const std::string text = "ok \xFF\xC3 x\xE2\x82";
  const auto encoded = tok.encode(text, false);
  EXPECT_FALSE(encoded.empty());
  std::string raw;
  for (const TokenId t : encoded) raw += tok.token_to_piece(t);
  EXPECT_EQ(raw, text) << "byte-level pieces keep every byte";
  EXPECT_EQ(tok.decode(encoded), "ok \xEF\xBF\xBD\xEF\xBF\xBD x\xEF\xBF\xBD") << "decode() stays well-formed";
}

std::vector<std::string> split(PreTokenizer pre, std::string_view text) {
  std::vector<std::string_view> words;
  pre_tokenize(pre, text, words);
  return std::vector<std::string>(words.begin(), words.end());
}

TEST(PreTokenizer, Gpt2Regex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split(PreTokenizer::kGpt2, "Hello, world!"), (V{"Hello", ",", " world", "!"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "I'm y'all's"), (V{"I", "'m", " y", "'", "all", "'s"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "a   b"), (V{"a", "  ", " b"})) << "\\s+(?!\\S) leaves one space";
  EXPECT_EQ(split(PreTokenizer::kGpt2, "a  "), (V{"a", "  "})) << "trailing spaces stay together";
  EXPECT_EQ(split(PreTokenizer::kGpt2, "x\n\ny"), (V{"x", "\n", "\n", "y"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "abc123 45"), (V{"abc", "123", " 45"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "naïve café"), (V{"naïve", " café"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "🦙🦙 ok"), (V{"🦙🦙", " ok"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2SingleDigits, "abc123 45"), (V{"abc", "1", "2", "3", " ", "4", "5"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "\xFF\xFEz"), (V{"\xFF\xFE", "z"}));
  EXPECT_TRUE(split(PreTokenizer::kGpt2, "").empty());
}

// No reference vocabularies exist here for Llama 3 and Qwen2; these cases follow their regexes by hand.
TEST(PreTokenizer, Llama3AndQwen2Regexes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split(PreTokenizer::kLlama3, "Hello, world! 12345 I'M here\n\n  ok  "),
            (V{"Hello", ",", " world", "!", " ", "123", "45", " I", "'M", " here", "\n\n", " ", " ok", "  "}));
  EXPECT_EQ(split(PreTokenizer::kLlama3, "a.\n\nb"), (V{"a", ".\n\n", "b"}));
  EXPECT_EQ(split(PreTokenizer::kLlama3, "(hello)"), (V{"(hello", ")"}));
  EXPECT_EQ(split(PreTokenizer::kLlama3, "x \n y"), (V{"x", " \n", " y"}));
  EXPECT_EQ(split(PreTokenizer::kLlama3, "end "), (V{"end", " "}));
  EXPECT_EQ(split(PreTokenizer::kQwen2, "x2024"), (V{"x", "2", "0", "2", "4"}));
  EXPECT_EQ(split(PreTokenizer::kLlama3, "x2024"), (V{"x", "202", "4"}));
}

// o200k (gpt-oss): words split at letter case; marks (Mn) and Lm/Lo letters count as both cases, and the regex's
// backtracking decides where a word ends (each case checked with Python's `regex` on the same pattern).
TEST(PreTokenizer, O200kRegex) {
  using V = std::vector<std::string>;
  const auto o200k = [](std::string_view text) { return split(PreTokenizer::kO200k, text); };
  EXPECT_EQ(o200k("HelloWorld, I'M here"), (V{"Hello", "World", ",", " I'M", " here"}));
  EXPECT_EQ(o200k("HTTPServer ABCdef's don'T"), (V{"HTTPServer", " ABCdef's", " don'T"}));
  EXPECT_EQ(o200k("it'\u017F it'K"), (V{"it'\u017F", " it", "'K"})) << "(?i) folds U+017F long s to s";
  EXPECT_EQ(o200k("  Hello\n\n  ok  "), (V{" ", " Hello", "\n\n", " ", " ok", "  "}));
  EXPECT_EQ(o200k("\tHello (hello)"), (V{"\tHello", " (", "hello", ")"})) << "P? is one char";
  EXPECT_EQ(o200k(" 12345 x"), (V{" ", "123", "45", " x"}));
  EXPECT_EQ(o200k("a/\n/b"), (V{"a", "/\n/", "b"})) << "[\\r\\n/]* after punctuation";
  EXPECT_EQ(o200k("ABC\u02B0DEF"), (V{"ABC\u02B0", "DEF"})) << "U* gives back the Lm for L+";
  EXPECT_EQ(o200k("A\u0301B"), (V{"A\u0301", "B"})) << "a mark is in both classes";
  EXPECT_EQ(o200k("\u0301AB"), (V{"\u0301", "AB"})) << "a mark tried as P? first, then as a letter";
  EXPECT_EQ(o200k("!!\u0301x"), (V{"!!\u0301", "x"})) << "a mark is not \\p{L}";
  EXPECT_EQ(o200k("x\u0915\u093F y"), (V{"x\u0915\u093F", " y"}));
  EXPECT_TRUE(o200k("").empty());
}

// Llama 3 takes a word that is itself a vocabulary piece without merging; GPT-2 always merges.
TEST(TokenizerBpe, Llama3IgnoresMergesForWholeWords) {
  TokenizerVocab v;
  v.model = "gpt2";
  v.tokens = {"a", "b", "c", "ab", "abc", "<s>"};
  v.token_types = {1, 1, 1, 1, 1, 3};
  v.merges = {"a b"};
  v.bos_id = 5;
  v.eos_id = 5;
  v.pre = "gpt-2";
  auto gpt2 = Tokenizer::from_vocab(v);
  ASSERT_TRUE(gpt2) << gpt2.error().message;
  EXPECT_EQ(ids(gpt2->encode("abc", true)), (std::vector<int32_t>{3, 2}));
  v.pre = "llama-bpe";
  auto llama3 = Tokenizer::from_vocab(v);
  ASSERT_TRUE(llama3) << llama3.error().message;
  EXPECT_EQ(ids(llama3->encode("abc", true)), (std::vector<int32_t>{5, 4})) << "Llama 3 adds BOS by default";
}

TEST(PreTokenizer, UnsupportedNamesAreErrors) {
  EXPECT_TRUE(pre_tokenizer_from_name("gpt-2"));
  EXPECT_TRUE(pre_tokenizer_from_name("smollm"));
  EXPECT_TRUE(pre_tokenizer_from_name("llama-bpe"));
  EXPECT_TRUE(pre_tokenizer_from_name("qwen2"));
  EXPECT_TRUE(pre_tokenizer_from_name("deepseek-coder"));
  EXPECT_TRUE(pre_tokenizer_from_name("gpt-4o"));
  EXPECT_FALSE(pre_tokenizer_from_name(""));
  const auto unsupported = pre_tokenizer_from_name("chatglm-bpe");
  ASSERT_FALSE(unsupported);
  EXPECT_NE(unsupported.error().message.find("pre-tokenizer 'chatglm-bpe' (tokenizer.ggml.pre) is not supported"),
            std::string::npos);
}

// Five regexes in turn, each splitting the pieces of the ones before into matches and the gaps between them.
TEST(PreTokenizer, DeepseekCoderRegexSequence) {
  using V = std::vector<std::string>;
  const PreTokenizer pre = PreTokenizer::kDeepseekCoder;
  EXPECT_EQ(split(pre, "Hello, world!\n"), (V{"Hello", ",", " world", "!", "\n"}));
  EXPECT_EQ(split(pre, "x = 42;"), (V{"x", " = ", "4", "2", ";"})) << "'=' is a symbol, not \\p{P}: it stays in a gap";
  EXPECT_EQ(split(pre, "a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(split(pre, "\xE6\x88\x91\xE6\x83\xB3 ok"), (V{"\xE6\x88\x91\xE6\x83\xB3", " ok"})) << "CJK runs";
  EXPECT_EQ(split(pre, "\xC2\xBFqu\xC3\xA9?"), (V{"\xC2\xBF", "qu\xC3\xA9", "?"})) << "non-ASCII punctuation";
  EXPECT_TRUE(split(pre, "").empty());
}

// encode() merges each distinct word of a call once and copies its tokens for every repeat (tokenizer_memo.h);
// encode_unsplit() merges every word. On every byte-level BPE vocabulary both give the same tokens: random texts
// that repeat words with and without a leading space, after newlines and punctuation, in other scripts, words
// longer than the memo takes and ill-formed bytes, with special tokens parsed and not, and the reference cases.
TEST(TokenizerBpe, RepeatedWordsGiveTheTokensOfEveryWordMerged) {
  const char* const kPieces[] = {"the",
                                 " the",
                                 "The",
                                 " kitchen",
                                 "kitchen",
                                 " light",
                                 "  ",
                                 " ",
                                 "\n",
                                 "\n\n",
                                 ",",
                                 ".",
                                 "'s",
                                 " don't",
                                 "42",
                                 " 1234567",
                                 "é",
                                 " naïve",
                                 " Zürich",
                                 "日本語",
                                 " 🦙",
                                 "\t",
                                 "\x80",
                                 "\xff",
                                 "<|endoftext|>",
                                 "<|begin_of_text|>",
                                 " supercalifragilisticexpialidocious-and-then-some-more-to-pass-sixty-four-bytes"};
  std::mt19937 rng(11);
  std::uniform_int_distribution<size_t> piece(0, std::size(kPieces) - 1);
  std::uniform_int_distribution<int> length(1, 400);
  std::vector<std::string> texts = {"", "the the the", " the the the ", "kitchen\nkitchen\n kitchen"};
  for (int i = 0; i < 60; ++i) {
    std::string text;
    for (int n = length(rng); n > 0; --n) text += kPieces[piece(rng)];
    texts.push_back(text);
  }
  for (const char* file :
       {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen2.gguf",
        "vocab/ggml-vocab-deepseek-coder.gguf", "vocab/ggml-vocab-starcoder.gguf", "vocab/ggml-vocab-refact.gguf",
        "vocab/ggml-vocab-mpt.gguf"}) {
    const Tokenizer& tok = test::cached_tokenizer(file);
    std::vector<std::string> cases = texts;
    for (const test::VocabCase& c : test::read_vocab_cases(file)) cases.push_back(c.text);
    for (const std::string& text : cases) {
      for (const bool parse_special : {false, true}) {
        ASSERT_EQ(ids(tok.encode(text, true, parse_special)), ids(tok.encode_unsplit(text, true, parse_special)))
            << file << ": '" << text << "' parse_special " << parse_special;
      }
    }
  }
}

// Past WordMemo::kMaxWords distinct words an encode call records no more of them and merges each new one every
// time; the words it recorded before still come from the memo. The tokens stay those of every word merged.
TEST(TokenizerBpe, AHistoryOfMoreDistinctWordsThanTheMemoKeepsItsTokens) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-llama-bpe.gguf");
  std::string text;
  auto word = [](int i) {
    std::string w = " q";
    for (; i > 0; i /= 26) w += static_cast<char>('a' + i % 26);
    return w;
  };
  for (int i = 0; i < 70000; ++i) text += word(i);
  for (const int i : {0, 1, 17, 65535, 65536, 65537, 69999}) text += word(i);
  EXPECT_EQ(ids(tok.encode(text, false)), ids(tok.encode_unsplit(text, false)));
}

TEST(TokenizerBpe, MalformedVocabularies) {
  TokenizerVocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens = {"a", "b", "ab", "<|endoftext|>"};
  v.token_types = {1, 1, 1, 3};
  v.bos_id = 3;
  v.eos_id = 3;
  auto missing = Tokenizer::from_vocab(v);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("tokenizer.ggml.merges is missing"), std::string::npos);
  v.merges = {"ab"};
  auto bad = Tokenizer::from_vocab(v);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("tokenizer.ggml.merges[0] = 'ab' is not two pieces"), std::string::npos);
  v.merges = {"a b"};
  auto good = Tokenizer::from_vocab(v);
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(ids(good->encode("abba", false)), (std::vector<int32_t>{2, 1, 0}));
  v.bos_id.reset();
  auto no_bos = Tokenizer::from_vocab(v);
  ASSERT_FALSE(no_bos);
  EXPECT_NE(no_bos.error().message.find("no tokenizer.ggml.bos_token_id"), std::string::npos);
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

// Qwen's tokenizer.json normalizes to NFC before splitting, so a decomposed "e" + U+0301 is the same token as
// the precomposed "é", as Hugging Face tokenizers gives. NFC is not compatibility folding: "ﬁ" stays "ﬁ".
TEST(TokenizerBpe, Qwen2NormalizesToNfc) {
  const Tokenizer& qwen = test::cached_tokenizer("vocab/ggml-vocab-qwen2.gguf");
  EXPECT_EQ(ids(qwen.encode("Cafe\xCC\x81 nai\xCC\x88ve", false)), ids(qwen.encode("Caf\xC3\xA9 na\xC3\xAFve", false)));
  EXPECT_EQ(ids(qwen.encode("\xE1\x84\x80\xE1\x85\xA1", false)), ids(qwen.encode("\xEA\xB0\x80", false)))
      << "Hangul jamo compose";
  EXPECT_NE(ids(qwen.encode("\xEF\xAC\x81", false)), ids(qwen.encode("fi", false)));
  // Ill-formed bytes are left for the byte-level encoder, every one of them kept.
  const std::string bad = "e\xCC\x81\xFF";
  std::string raw;
  for (const TokenId t : qwen.encode(bad, false)) raw += qwen.token_to_piece(t);
  EXPECT_EQ(raw, bad);
  // Llama 3 has no normalizer: the decomposed form stays two characters.
  const Tokenizer& llama3 = test::cached_tokenizer("vocab/ggml-vocab-llama-bpe.gguf");
  EXPECT_NE(ids(llama3.encode("Cafe\xCC\x81", false)), ids(llama3.encode("Caf\xC3\xA9", false)));
}

TEST(Normalize, Nfc) {
  EXPECT_TRUE(is_nfc("plain ASCII"));
  EXPECT_TRUE(is_nfc("Caf\xC3\xA9"));
  EXPECT_FALSE(is_nfc("Cafe\xCC\x81"));
  EXPECT_TRUE(is_nfc("e\xCC\x81\xFF")) << "ill-formed text is left as it is";
  std::string out;
  to_nfc("Cafe\xCC\x81", out);
  EXPECT_EQ(out, "Caf\xC3\xA9");
  to_nfc("\xE2\x84\xAB", out);  // ANGSTROM SIGN is canonically A WITH RING ABOVE
  EXPECT_EQ(out, "\xC3\x85");
}

}  // namespace
}  // namespace hearth
