#include "tokenizer/tokenizer_normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "tokenizer/utf8.h"
#include "util/result.h"

namespace hearth {
namespace {

const icu::Normalizer2& nfc() {
  static const icu::Normalizer2* const instance = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
    HEARTH_CHECK(U_SUCCESS(status) && n != nullptr, "ICU has no NFC normalizer: {}", u_errorName(status));
    return n;
  }();
  return *instance;
}

bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

bool is_well_formed(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Scan scan = utf8_scan(text, pos);
    if (scan.status != Utf8Status::kValid) return false;
    pos += scan.length;
  }
  return true;
}

}  // namespace

bool is_nfc(std::string_view text) {
  if (is_ascii(text) || !is_well_formed(text)) return true;
  UErrorCode status = U_ZERO_ERROR;
  const bool normalized =
      nfc().isNormalizedUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), status);
  return U_SUCCESS(status) && normalized;
}

void to_nfc(std::string_view text, std::string& out) {
  out.clear();
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  nfc().normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, status);
  HEARTH_CHECK(U_SUCCESS(status), "NFC normalization failed: {}", u_errorName(status));
}

}  // namespace hearth
