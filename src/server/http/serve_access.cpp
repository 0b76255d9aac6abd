#include "server/http/serve_access.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace hearth::server {
namespace {

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

Result<std::string> resolve_api_key(const std::optional<std::string>& flag, const char* env) {
  if (flag) {
    if (blank(*flag)) {
      return make_error("--api-key is empty; give a key, or leave the flag out to serve without authentication");
    }
    return *flag;
  }
  if (env == nullptr) return std::string();
  if (blank(env)) {
    return make_error("HEARTH_API_KEY is set but empty; give a key, or unset it to serve without authentication");
  }
  return std::string(env);
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

std::string exposure_warning(std::string_view host, bool has_api_key) {
  if (has_api_key || is_loopback_host(host)) return {};
  return fmt::format(
      "listening on {} with no API key: anyone who can reach this address can run requests and read /metrics; "
      "set --api-key (or HEARTH_API_KEY), or listen on 127.0.0.1",
      host);
}

std::optional<std::string_view> bearer_credentials(std::string_view header) {
  // RFC 7235: the scheme is case-insensitive and one or more spaces separate it from the credentials.
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() || header[kScheme.size()] != ' ') return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
  }
  std::string_view given = header.substr(kScheme.size());
  given.remove_prefix(std::min(given.find_first_not_of(' '), given.size()));
  return given;
}

bool bearer_matches(std::string_view header, std::string_view key) {
  const auto given = bearer_credentials(header);
  return given && api_key_matches(*given, key);
}

bool api_key_matches(std::string_view given, std::string_view key) {
  // Compare every byte of the longer length so timing reveals neither the key nor the matching prefix length.
  const size_t n = std::max(given.size(), key.size());
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    const unsigned char b = i < key.size() ? static_cast<unsigned char>(key[i]) : 0;
    diff |= static_cast<unsigned>(a ^ b);
  }
  return diff == 0;
}

}  // namespace hearth::server
