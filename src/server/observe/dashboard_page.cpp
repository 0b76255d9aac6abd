#include "server/observe/dashboard_page.h"

#include <fmt/format.h>

#include "util/result.h"
#include "util/sha256.h"

namespace hearth::server {
namespace {

// The text between `<tag>` and `</tag>`; aborts unless there is exactly one such element.
std::string_view element_body(std::string_view html, std::string_view tag) {
  const std::string open = fmt::format("<{}>", tag), close = fmt::format("</{}>", tag);
  const size_t begin = html.find(open);
  HEARTH_CHECK(begin != std::string_view::npos, "the dashboard page has no {}", open);
  const size_t body = begin + open.size();
  const size_t end = html.find(close, body);
  HEARTH_CHECK(end != std::string_view::npos, "the dashboard page has no {}", close);
  HEARTH_CHECK(html.find(fmt::format("<{}", tag), end) == std::string_view::npos,
               "the dashboard page has more than one <{}> element", tag);
  return html.substr(body, end - body);
}

std::string hash_source(std::string_view text) {
  Sha256 sha;
  sha.update(text.data(), text.size());
  const Sha256Digest d = sha.finish();
  return "'sha256-" + base64(std::string_view(reinterpret_cast<const char*>(d.data()), d.size())) + "'";
}

}  // namespace

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

std::string dashboard_csp(std::string_view html) {
  return fmt::format(
      "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
      "form-action 'none'; frame-ancestors 'none'",
      hash_source(element_body(html, "script")), hash_source(element_body(html, "style")));
}

}  // namespace hearth::server
