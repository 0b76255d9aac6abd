// Every shared reference vocabulary (shared/vocab/*.gguf), table-driven: each .inp string must encode to exactly
// the ids of the matching .out line (llama.cpp's or Hugging Face tokenizers' output, without BOS; see
// shared/vocab/README.md), and decode back to its text, whole and streamed token by token.

#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace hearth {
namespace {

using test::ids;

struct VocabReference {
  const char* file;  // under shared/vocab
  TokenizerKind kind;
  bool round_trips;  // decode(encode(text)) == text (false where the normalizer changes the text)
};

// The name of a case: the file without "ggml-vocab-" and ".gguf", '-' as '_'.
std::string case_name(const testing::TestParamInfo<VocabReference>& info) {
  std::string name = info.param.file;
  name = name.substr(11, name.size() - 16);
  for (char& c : name) c = (c == '-' ? '_' : c);
  return name;
}

class TokenizerVocabReference : public testing::TestWithParam<VocabReference> {};

TEST_P(TokenizerVocabReference, EncodesEveryReferenceStringExactly) {
  const std::string file = std::string("vocab/") + GetParam().file;
  const Tokenizer& tok = test::cached_tokenizer(file);
  EXPECT_EQ(tok.kind(), GetParam().kind);
  const auto cases = test::read_vocab_cases(file);
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) {
    const auto encoded = tok.encode(c.text, false);
    EXPECT_EQ(ids(encoded), c.expected) << "text: \"" << c.text << '"';
    if (!GetParam().round_trips) continue;
    const auto with_bos = tok.encode(c.text, true);
    EXPECT_EQ(tok.decode(with_bos), c.text);
    EXPECT_EQ(test::stream_decode(tok, with_bos), c.text);
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, TokenizerVocabReference,
                         testing::Values(VocabReference{"ggml-vocab-llama-spm.gguf", TokenizerKind::kSpm, true},
                                         VocabReference{"ggml-vocab-phi-3.gguf", TokenizerKind::kSpm, true},
                                         VocabReference{"ggml-vocab-gemma3.gguf", TokenizerKind::kSpm, true},
                                         VocabReference{"ggml-vocab-gpt-2.gguf", TokenizerKind::kBpe, true},
                                         VocabReference{"ggml-vocab-mpt.gguf", TokenizerKind::kBpe, true},
                                         VocabReference{"ggml-vocab-starcoder.gguf", TokenizerKind::kBpe, true},
                                         VocabReference{"ggml-vocab-refact.gguf", TokenizerKind::kBpe, true},
                                         VocabReference{"ggml-vocab-deepseek-coder.gguf", TokenizerKind::kBpe, true},
                                         VocabReference{"ggml-vocab-llama-bpe.gguf", TokenizerKind::kBpe, true},
                                         VocabReference{"ggml-vocab-qwen2.gguf", TokenizerKind::kBpe, true},
                                         VocabReference{"ggml-vocab-gpt-oss.gguf", TokenizerKind::kBpe, true}),
                         case_name);

}  // namespace
}  // namespace hearth
