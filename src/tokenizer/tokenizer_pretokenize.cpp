#include "tokenizer/tokenizer_pretokenize.h"

#include "tokenizer/tokenizer_unicode.h"
#include "tokenizer/utf8.h"

namespace hearth {
namespace {

constexpr char32_t kOutOfRange = 0xFFFFFFFF;
constexpr char32_t kIllFormed = 0xFFFFFFFE;  // a byte that is not part of a well-formed character

struct Char {
  size_t offset;  // in the text
  size_t length;  // bytes
  char32_t cp;
  CharClass cls;
};

std::vector<Char> decode_chars(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Scan scan = utf8_scan(text, pos);
    if (scan.status == Utf8Status::kValid) {
      const char32_t cp = utf8_decode(text, pos);
      chars.push_back(Char{pos, scan.length, cp, char_class(cp)});
      pos += scan.length;
    } else {
      chars.push_back(Char{pos, 1, kIllFormed, CharClass::kOther});
      pos += 1;
    }
  }
  return chars;
}

// Shared by the splitters: the chars [begin, end) of one piece, and the words cut from them so far. Lookahead never
// sees past `end`, as when a regex runs on that piece alone.
class Splitter {
 public:
  Splitter(std::string_view text, const std::vector<Char>& chars, size_t begin, size_t end,
           std::vector<std::string_view>& words)
      : text_(text), chars_(chars), begin_(begin), end_(end), prev_end_(begin), words_(words) {}

 protected:
  bool in_range(size_t p) const { return p >= begin_ && p < end_; }
  char32_t cp(size_t p) const { return in_range(p) ? chars_[p].cp : kOutOfRange; }
  bool is(size_t p, CharClass cls) const { return in_range(p) && chars_[p].cls == cls; }
  bool is_newline(size_t p) const { return cp(p) == '\r' || cp(p) == '\n'; }

  // Emits chars [prev_end_, end) as a word; returns `end`.
  size_t add(size_t end) {
    if (end > prev_end_) {
      const size_t from = chars_[prev_end_].offset;
      words_.push_back(text_.substr(from, chars_[end - 1].offset + chars_[end - 1].length - from));
    }
    prev_end_ = end;
    return end;
  }

  // 's|'t|'re|'ve|'m|'ll|'d at `pos`, case-insensitive when asked; returns the end, or 0 for no match. Case folding
  // as the regex engines do it: ASCII, and U+017F LATIN SMALL LETTER LONG S folds to 's'.
  size_t match_contraction(size_t pos, bool ignore_case) const {
    if (cp(pos) != '\'' || pos + 1 >= end_) return 0;
    const auto lower = [&](char32_t c) -> char32_t {
      if (!ignore_case) return c;
      if (c == 0x17F) return 's';
      return c >= 'A' && c <= 'Z' ? c + 32 : c;
    };
    const char32_t c1 = lower(cp(pos + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
    if (pos + 2 >= end_) return 0;
    const char32_t c2 = lower(cp(pos + 2));
    const bool two = (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l');
    return two ? pos + 3 : 0;
  }

  std::string_view text_;
  const std::vector<Char>& chars_;
  size_t begin_;
  size_t end_;
  size_t prev_end_;
  std::vector<std::string_view>& words_;
};

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
class Gpt2Splitter : public Splitter {
 public:
  using Splitter::Splitter;

  void run() {
    for (size_t pos = begin_; pos < end_;) pos = match_at(pos);
  }

 private:
  // Matches one word starting at `pos`; returns where the next one starts.
  size_t match_at(size_t pos) {
    if (const size_t end = match_contraction(pos, /*ignore_case=*/false)) return add(end);
    const size_t start = cp(pos) == ' ' ? pos + 1 : pos;  // the optional leading space of the next three
    for (const CharClass cls : {CharClass::kLetter, CharClass::kNumber, CharClass::kOther}) {
      if (!is(start, cls)) continue;  //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
      size_t p = start;
      while (is(p, cls)) ++p;
      return add(p);
    }
    size_t num_spaces = 0;
    while (is(pos + num_spaces, CharClass::kWhitespace)) ++num_spaces;
    if (num_spaces > 1 && in_range(pos + num_spaces)) return add(pos + num_spaces - 1);  // \s+(?!\S)
    if (num_spaces > 0) return add(pos + num_spaces);                                    // \s+
    return add(pos + 1);
  }
};

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with N = 3 (Llama 3) or 1 (Qwen2).
class Llama3Splitter : public Splitter {
 public:
  Llama3Splitter(std::string_view text, const std::vector<Char>& chars, size_t begin, size_t end,
                 std::vector<std::string_view>& words, size_t max_digits)
      : Splitter(text, chars, begin, end, words), max_digits_(max_digits) {}

  void run() {
    for (size_t pos = begin_; pos < end_;) pos = match_at(pos);
  }

 private:
  size_t match_at(size_t pos) {
    if (const size_t end = match_contraction(pos, /*ignore_case=*/true)) return add(end);
    const CharClass cls = chars_[pos].cls;
    if (!is_newline(pos) && cls != CharClass::kNumber &&
        (cls == CharClass::kLetter || is(pos + 1, CharClass::kLetter))) {
      size_t p = pos + 1;  // [^\r\n\p{L}\p{N}]?\p{L}+
      while (is(p, CharClass::kLetter)) ++p;
      return add(p);
    }
    if (cls == CharClass::kNumber) {  // \p{N}{1,N}
      size_t p = pos;
      while (p < pos + max_digits_ && is(p, CharClass::kNumber)) ++p;
      return add(p);
    }
    const bool space = cp(pos) == ' ';
    const size_t start = space ? pos + 1 : pos;
    // A lone space that ends the piece lands here too, as in llama.cpp's matcher (the regex's \s+ cuts the same word).
    if (is(start, CharClass::kOther) || (space && !in_range(start))) {
      size_t p = start;  //  ?[^\s\p{L}\p{N}]+[\r\n]*
      while (is(p, CharClass::kOther)) ++p;
      while (is_newline(p)) ++p;
      return add(p);
    }
    size_t num_spaces = 0;
    size_t newline_end = 0;
    for (; is(pos + num_spaces, CharClass::kWhitespace); ++num_spaces) {
      if (is_newline(pos + num_spaces)) newline_end = pos + num_spaces + 1;
    }
    if (newline_end > 0) return add(newline_end);                                        // \s*[\r\n]+
    if (num_spaces > 1 && in_range(pos + num_spaces)) return add(pos + num_spaces - 1);  // \s+(?!\S)
    if (num_spaces > 0) return add(pos + num_spaces);                                    // \s+
    return add(pos + 1);
  }

  size_t max_digits_;
};

// o200k (gpt-4o, gpt-oss), with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
// C = (?i:'s|'t|'re|'ve|'m|'ll|'d) and P = [^\r\n\p{L}\p{N}]:
//   P?U*L+C?|P?U+L*C?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Each alternative is tried in order as a backtracking engine tries it (P? taken first, then left out), so where
// U and L overlap (Lm, Lo, marks) the word ends where the regex's backtracking ends it, never by a longest match.
class O200kSplitter : public Splitter {
 public:
  O200kSplitter(std::string_view text, const std::vector<Char>& chars, size_t begin, size_t end,
                std::vector<std::string_view>& words)
      : Splitter(text, chars, begin, end, words) {
    cases_.reserve(end - begin);
    for (size_t p = begin; p < end; ++p) cases_.push_back(letter_case(chars[p].cp, chars[p].cls));
  }

  void run() {
    for (size_t pos = begin_; pos < end_;) pos = match_at(pos);
  }

 private:
  LetterCase letter(size_t p) const { return in_range(p) ? cases_[p - begin_] : LetterCase::kNone; }
  bool is_upper(size_t p) const { return letter(p) == LetterCase::kUpper || letter(p) == LetterCase::kBoth; }
  bool is_lower(size_t p) const { return letter(p) == LetterCase::kLower || letter(p) == LetterCase::kBoth; }
  // P = [^\r\n\p{L}\p{N}]: whitespace other than newlines, punctuation, symbols, marks.
  bool is_prefix(size_t p) const {
    return in_range(p) && !is_newline(p) && !is(p, CharClass::kLetter) && !is(p, CharClass::kNumber);
  }
  // C? after a word ending at `p`.
  size_t with_contraction(size_t p) const {
    const size_t end = match_contraction(p, /*ignore_case=*/true);
    return end != 0 ? end : p;
  }

  // U*L+C? from `s`; 0 for no match. U* first takes its whole run; L+ then needs an Ll char after it, or else U* gives
  // back chars until it gives back one that is also in L (an Lm, Lo or mark), which L+ then takes alone.
  size_t match_upper_then_lower(size_t s) const {
    size_t e = s;
    while (is_upper(e)) ++e;
    if (is_lower(e)) {
      while (is_lower(e)) ++e;
      return with_contraction(e);
    }
    for (size_t p = e; p > s; --p) {
      if (letter(p - 1) == LetterCase::kBoth) return with_contraction(p);
    }
    return 0;
  }

  // U+L*C? from `s`; 0 for no match.
  size_t match_upper_run(size_t s) const {
    size_t e = s;
    while (is_upper(e)) ++e;
    if (e == s) return 0;
    while (is_lower(e)) ++e;
    return with_contraction(e);
  }

  size_t match_at(size_t pos) {
    const bool prefix = is_prefix(pos);
    if (prefix) {
      if (const size_t end = match_upper_then_lower(pos + 1)) return add(end);  // P U*L+C?
    }
    if (const size_t end = match_upper_then_lower(pos)) return add(end);  // U*L+C?
    if (prefix) {
      if (const size_t end = match_upper_run(pos + 1)) return add(end);  // P U+L*C?
    }
    if (const size_t end = match_upper_run(pos)) return add(end);  // U+L*C?
    if (is(pos, CharClass::kNumber)) {                             // \p{N}{1,3}
      size_t p = pos;
      while (p < pos + 3 && is(p, CharClass::kNumber)) ++p;
      return add(p);
    }
    const size_t start = cp(pos) == ' ' ? pos + 1 : pos;
    if (is(start, CharClass::kOther)) {  //  ?[^\s\p{L}\p{N}]+[\r\n/]*
      size_t p = start;
      while (is(p, CharClass::kOther)) ++p;
      while (is_newline(p) || cp(p) == '/') ++p;
      return add(p);
    }
    size_t num_spaces = 0;
    size_t newline_end = 0;
    for (; is(pos + num_spaces, CharClass::kWhitespace); ++num_spaces) {
      if (is_newline(pos + num_spaces)) newline_end = pos + num_spaces + 1;
    }
    if (newline_end > 0) return add(newline_end);                                        // \s*[\r\n]+
    if (num_spaces > 1 && in_range(pos + num_spaces)) return add(pos + num_spaces - 1);  // \s+(?!\S)
    if (num_spaces > 0) return add(pos + num_spaces);                                    // \s+
    return add(pos + 1);
  }

  std::vector<LetterCase> cases_;  // of chars [begin_, end_)
};

// DeepSeek Coder: llama.cpp applies five regexes in turn, each splitting every piece so far into its matches and
// the gaps between them: [\r\n], \s?\p{L}+, \s?\p{P}+, [\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+,
// \p{N}. A stage is a function that returns the end of the match starting at a char, or 0 for none.
class DeepseekCoderSplitter {
 public:
  DeepseekCoderSplitter(std::string_view text, const std::vector<Char>& chars) : text_(text), chars_(chars) {}

  void run(std::vector<std::string_view>& words) {
    std::vector<std::pair<size_t, size_t>> pieces = {{0, chars_.size()}};
    split(pieces, [&](size_t p, size_t) { return is_newline(p) ? p + 1 : 0; });
    split(pieces, [&](size_t p, size_t end) { return space_then_run(p, end, [&](size_t q) { return is_letter(q); }); });
    split(pieces, [&](size_t p, size_t end) { return space_then_run(p, end, [&](size_t q) { return is_punct(q); }); });
    split(pieces, [&](size_t p, size_t end) {
      size_t q = p;
      while (q < end && is_cjk(chars_[q].cp)) ++q;
      return q > p ? q : 0;
    });
    split(pieces, [&](size_t p, size_t) { return chars_[p].cls == CharClass::kNumber ? p + 1 : 0; });
    for (const auto& [begin, end] : pieces) {
      const size_t from = chars_[begin].offset;
      words.push_back(text_.substr(from, chars_[end - 1].offset + chars_[end - 1].length - from));
    }
  }

 private:
  bool is_newline(size_t p) const { return chars_[p].cp == '\r' || chars_[p].cp == '\n'; }
  bool is_letter(size_t p) const { return chars_[p].cls == CharClass::kLetter; }
  // \p{P}: ASCII punctuation as llama.cpp lists it, and the Unicode punctuation categories beyond ASCII.
  bool is_punct(size_t p) const {
    const char32_t cp = chars_[p].cp;
    if (cp < 0x80)
      return std::string_view("!\"#%&'()*,-./:;?@[\\]_{}").find(static_cast<char>(cp)) != std::string_view::npos;
    return cp != kIllFormed && is_unicode_punctuation(cp);
  }
  static bool is_cjk(char32_t cp) { return (cp >= 0x0800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF); }

  // \s?X+ at p: an optional whitespace char, then one or more chars where `x` holds.
  template <class X>
  size_t space_then_run(size_t p, size_t end, X x) const {
    size_t q = chars_[p].cls == CharClass::kWhitespace && p + 1 < end && x(p + 1) ? p + 1 : p;
    const size_t start = q;
    while (q < end && x(q)) ++q;
    return q > start ? q : 0;
  }

  // Replaces each piece by its matches and the gaps between them, in order.
  template <class Match>
  void split(std::vector<std::pair<size_t, size_t>>& pieces, Match match) const {
    std::vector<std::pair<size_t, size_t>> out;
    for (const auto& [begin, end] : pieces) {
      size_t gap = begin;
      for (size_t p = begin; p < end;) {
        const size_t m = match(p, end);
        if (m == 0) {
          ++p;
          continue;
        }
        if (p > gap) out.emplace_back(gap, p);
        out.emplace_back(p, m);
        gap = p = m;
      }
      if (end > gap) out.emplace_back(gap, end);
    }
    pieces.swap(out);
  }

  std::string_view text_;
  const std::vector<Char>& chars_;
};

}  // namespace

Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  if (name == "gpt-2" || name == "mpt" || name == "olmo") return PreTokenizer::kGpt2;
  if (name == "starcoder" || name == "refact" || name == "smollm") return PreTokenizer::kGpt2SingleDigits;
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "falcon3") return PreTokenizer::kLlama3;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizer::kQwen2;
  if (name == "deepseek-coder") return PreTokenizer::kDeepseekCoder;
  if (name == "gpt-4o") return PreTokenizer::kO200k;
  return make_error(
      "pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported; supported: gpt-2, mpt, olmo, "
      "starcoder, refact, smollm, llama3/llama-bpe, qwen2, deepseek-coder, gpt-4o",
      name);
}

void pre_tokenize(PreTokenizer pre, std::string_view text, std::vector<std::string_view>& words) {
  const std::vector<Char> chars = decode_chars(text);
  switch (pre) {
    case PreTokenizer::kGpt2:
      Gpt2Splitter(text, chars, 0, chars.size(), words).run();
      break;
    case PreTokenizer::kGpt2SingleDigits:
      for (size_t begin = 0; begin < chars.size();) {
        size_t end = begin + 1;
        if (chars[begin].cls != CharClass::kNumber) {
          while (end < chars.size() && chars[end].cls != CharClass::kNumber) ++end;
        }
        Gpt2Splitter(text, chars, begin, end, words).run();
        begin = end;
      }
      break;
    case PreTokenizer::kLlama3:
      Llama3Splitter(text, chars, 0, chars.size(), words, 3).run();
      break;
    case PreTokenizer::kQwen2:
      Llama3Splitter(text, chars, 0, chars.size(), words, 1).run();
      break;
    case PreTokenizer::kDeepseekCoder:
      if (!chars.empty()) DeepseekCoderSplitter(text, chars).run(words);
      break;
    case PreTokenizer::kO200k:
      O200kSplitter(text, chars, 0, chars.size(), words).run();
      break;
  }
}

}  // namespace hearth
