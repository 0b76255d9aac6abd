// WordPiece (tokenizer.ggml.model "bert"), as llama.cpp's llm_tokenizer_wpm: normalise and split the text into
// words, then cover each word greedily with the longest vocabulary pieces.
//
// GGUF stores BERT's vocabulary with phantom spaces (llama.cpp's converter): a word-initial piece "x" as "▁x", a
// continuation "##x" as plain "x", control tokens ([CLS], [SEP], ...) as they are. So a word is looked up as "▁" +
// word, from its first byte, and each next piece from where the last one ended, longest first (up to the longest
// token's bytes). When some position has no piece, the whole word becomes [UNK].
//
// Splitting, per code point: with strip_accents, first mapped to the first code point of its canonical
// decomposition (NFD), and dropped when it is a mark (\p{M}); whitespace ends a word; NUL, U+FFFD and \p{C} are
// dropped; lowercased (simple case mapping) with lowercase; punctuation (\p{P}), ASCII symbols (\p{S} below 0x7F)
// and CJK ideographs are words of their own.

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include "tokenizer/tokenizer_unicode.h"
#include "tokenizer/tokenizer_vocab.h"

namespace hearth {
namespace {

using Vocab = Tokenizer::Vocab;

constexpr std::string_view kPhantomSpace = "\xE2\x96\x81";

// llama.cpp's is_chinese_char ranges (with its 0x2B920 lower bound, which the Hugging Face code uses).
bool is_cjk_ideograph(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// The first code point of cp's full canonical decomposition (cp itself when it has none).
char32_t nfd_first(char32_t cp) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  if (U_FAILURE(status)) return cp;
  icu::UnicodeString decomposition;
  if (!nfd->getDecomposition(static_cast<UChar32>(cp), decomposition) || decomposition.isEmpty()) return cp;
  return static_cast<char32_t>(decomposition.char32At(0));
}

bool in_categories(char32_t cp, uint32_t mask) {
  return (U_GET_GC_MASK(static_cast<UChar32>(cp)) & mask) != 0;
}

// The words of `text` after normalisation (file comment).
std::vector<std::string> wpm_words(const Tokenizer::Vocab& vocab, std::string_view text) {
  std::vector<std::string> words(1);
  auto end_word = [&] {
    if (!words.back().empty()) words.emplace_back();
  };
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Scan scan = utf8_scan(text, pos);
    char32_t cp = scan.status == Utf8Status::kValid ? utf8_decode(text, pos) : 0xFFFD;
    pos += scan.status == Utf8Status::kValid ? scan.length : 1;  // llama.cpp: one U+FFFD per bad byte
    if (vocab.wpm_strip_accents) cp = nfd_first(cp);
    if (char_class(cp) == CharClass::kWhitespace) {
      end_word();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || in_categories(cp, U_GC_C_MASK)) continue;
    if (vocab.wpm_strip_accents && in_categories(cp, U_GC_M_MASK)) continue;
    const char32_t cased = vocab.wpm_lowercase ? static_cast<char32_t>(u_tolower(static_cast<UChar32>(cp))) : cp;
    if (in_categories(cp, U_GC_P_MASK) || (cp < 0x7F && in_categories(cp, U_GC_S_MASK)) || is_cjk_ideograph(cp)) {
      end_word();
      utf8_append(words.back(), cased);
      words.emplace_back();
    } else {
      utf8_append(words.back(), cased);
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wpm_encode_fragment(const Tokenizer::Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  std::string word1;
  for (const std::string& word : wpm_words(vocab, text)) {
    word1.assign(kPhantomSpace);
    word1 += word;
    const size_t n = word1.size();
    const size_t first = out.size();
    for (size_t i = 0; i < n;) {
      int32_t id = Vocab::kNone;
      size_t j = std::min(n, i + vocab.max_token_bytes);
      for (; j > i; --j) {
        id = vocab.find(std::string_view(word1).substr(i, j - i));
        if (id != Vocab::kNone) break;
      }
      if (id == Vocab::kNone) {
        out.resize(first);
        break;
      }
      out.emplace_back(id);
      i = j;
    }
    if (out.size() == first) out.emplace_back(vocab.unknown);
  }
}

}  // namespace hearth
