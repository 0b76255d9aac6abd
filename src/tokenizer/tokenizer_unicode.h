#pragma once
// Unicode character classes used by the BPE pre-tokenizers: the regex classes \p{L}, \p{N} and \s.

#include <cstdint>

namespace hearth {

enum class CharClass : uint8_t {
  kOther,       // anything else, including unassigned code points and ill-formed bytes
  kLetter,      // \p{L}: general category Lu, Ll, Lt, Lm, Lo
  kNumber,      // \p{N}: Nd, Nl, No
  kWhitespace,  // \s as llama.cpp defines it: \t..\r, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
                // U+2029, U+202F, U+205F, U+3000
};

// Classifies a code point (Unicode 14.0 categories).
CharClass char_class(char32_t cp);

// Letter case as the o200k regex (gpt-4o) tells characters apart: its classes [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
// ("upper") and [\p{Ll}\p{Lm}\p{Lo}\p{M}] ("lower") overlap on Lm, Lo and the marks.
enum class LetterCase : uint8_t {
  kNone,   // in neither class: numbers, whitespace, punctuation, symbols, ...
  kUpper,  // Lu, Lt: upper only
  kLower,  // Ll: lower only
  kBoth,   // Lm, Lo, and the marks Mn, Mc, Me (which are not \p{L}: char_class calls them kOther)
};

// The letter case of `cp`, whose char_class is `cls`. Every kLetter gets a case other than kNone, so a letter always
// starts a word. Letters subdivide by ICU's tables (one Lm or Lo where ICU disagrees with the letter table).
LetterCase letter_case(char32_t cp, CharClass cls);

// \p{P}: general category Pc, Pd, Ps, Pe, Pi, Pf or Po (ICU's Unicode tables).
bool is_unicode_punctuation(char32_t cp);

}  // namespace hearth
