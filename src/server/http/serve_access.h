#pragma once
// Who may reach a server: the API key it runs with, whether its listen address is reachable from other
// machines, and the comparison of the key a request sends. `hearth serve` refuses an empty key (it would turn
// authentication off without saying so) and warns when it listens beyond loopback without a key.

#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace hearth::server {

// The key from --api-key when the flag was given (`flag`), else from HEARTH_API_KEY when it is set (`env`, null when
// unset); an empty string when neither is given (no authentication). Error when the key given is empty or
// whitespace only, naming where it came from.
[[nodiscard]] Result<std::string> resolve_api_key(const std::optional<std::string>& flag, const char* env);

// True for addresses only this machine can reach: localhost, 127.0.0.0/8, ::1 (bracketed or not), and IPv4-mapped
// 127.x. Every other host (0.0.0.0, ::, a LAN address, a hostname) counts as reachable from elsewhere.
[[nodiscard]] bool is_loopback_host(std::string_view host);

// The warning to log at start, or empty: listening on `host` beyond loopback with no API key.
[[nodiscard]] std::string exposure_warning(std::string_view host, bool has_api_key);

// The credentials of an "Authorization: Bearer KEY" header (the scheme case-insensitive), or nullopt.
[[nodiscard]] std::optional<std::string_view> bearer_credentials(std::string_view header);
// Constant-time comparison of an Authorization header against "Bearer KEY" (the scheme case-insensitive).
[[nodiscard]] bool bearer_matches(std::string_view header, std::string_view key);
// Constant-time comparison of a bare key (the x-api-key header) against `key`.
[[nodiscard]] bool api_key_matches(std::string_view given, std::string_view key);

}  // namespace hearth::server
