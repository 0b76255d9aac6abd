#include "tokenizer/utf8.h"

namespace hearth {
namespace {

struct LeadInfo {
  size_t length;      // bytes in the whole sequence; 0 when the byte cannot start one
  uint8_t second_lo;  // allowed range of the second byte (excludes overlongs, surrogates, > U+10FFFF)
  uint8_t second_hi;
};

// Unicode Table 3-7, "Well-Formed UTF-8 Byte Sequences".
LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Utf8Scan utf8_scan(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const LeadInfo info = lead_info(lead);
  if (info.length == 0) return {Utf8Status::kInvalid, 1};
  for (size_t i = 1; i < info.length; ++i) {
    if (pos + i >= text.size()) return {Utf8Status::kIncomplete, i};
    const auto b = static_cast<uint8_t>(text[pos + i]);
    const uint8_t lo = i == 1 ? info.second_lo : 0x80;
    const uint8_t hi = i == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return {Utf8Status::kInvalid, i};
  }
  return {Utf8Status::kValid, info.length};
}

char32_t utf8_decode(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) return lead;
  const size_t length = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  char32_t cp = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  return cp;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t utf8_append_complete(std::string& out, std::string_view bytes, bool final) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Scan scan = utf8_scan(bytes, pos);
    switch (scan.status) {
      case Utf8Status::kValid:
        out.append(bytes.substr(pos, scan.length));
        break;
      case Utf8Status::kInvalid:
        out.append(kUtf8Replacement);
        break;
      case Utf8Status::kIncomplete:
        if (!final) return pos;
        out.append(kUtf8Replacement);
        break;
    }
    pos += scan.length;
  }
  return pos;
}

}  // namespace hearth
