#pragma once
// UTF-8 helpers for the tokenizers: validating scans that never read past the end and never loop forever on bad input.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hearth {

enum class Utf8Status {
  kValid,       // `length` bytes form one well-formed character
  kIncomplete,  // the text ends inside a character: the `length` remaining bytes are a valid prefix of one
  kInvalid,     // `length` bytes (>= 1) are ill-formed: the maximal subpart of a sequence, as Unicode §3.9 defines it
};

struct Utf8Scan {
  Utf8Status status = Utf8Status::kInvalid;
  size_t length = 1;
};

// Classifies the bytes of `text` starting at `pos` (requires pos < text.size()). Overlong forms, surrogates and code
// points above U+10FFFF are ill-formed. Always returns length >= 1, so a loop that advances by `length` terminates.
Utf8Scan utf8_scan(std::string_view text, size_t pos);

// Decodes the well-formed character at `pos` (requires utf8_scan(text, pos).status == kValid).
char32_t utf8_decode(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of `cp` (requires cp <= 0x10FFFF).
void utf8_append(std::string& out, char32_t cp);

// U+FFFD REPLACEMENT CHARACTER, which decoders emit in place of ill-formed bytes.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

// Appends the longest prefix of `bytes` that ends on a character boundary to `out`, replacing each ill-formed
// subpart with U+FFFD. Returns how many bytes were consumed; the rest (< 4 bytes) is an incomplete final character
// that a streaming caller keeps until more bytes arrive. With `final` set, an incomplete tail is replaced too and
// everything is consumed.
size_t utf8_append_complete(std::string& out, std::string_view bytes, bool final);

}  // namespace hearth
