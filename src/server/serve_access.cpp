#include "server/serve_access.h"

#include <arpa/inet.h>

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

}  // namespace hearth::server
