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

// \p{P}: general category Pc, Pd, Ps, Pe, Pi, Pf or Po (ICU's Unicode tables).
bool is_unicode_punctuation(char32_t cp);

}  // namespace hearth
