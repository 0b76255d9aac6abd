#pragma once
// The dashboard page (src/server/observe/dashboard/index.html), embedded at build time (CMake turns the file into
// dashboard_page_data.cpp), and the Content-Security-Policy that lets exactly its one inline <script> and one
// inline <style> run: their SHA-256 hashes, no 'unsafe-inline', and no origin but the server's own.

#include <string>
#include <string_view>

namespace hearth::server {

// The page's bytes, as in the source file.
[[nodiscard]] std::string_view dashboard_html();

// "default-src 'none'; script-src 'sha256-…'; style-src 'sha256-…'; connect-src 'self'; img-src 'self' data:;
// base-uri 'none'; form-action 'none'; frame-ancestors 'none'" for `html`. Aborts when `html` does not hold exactly
// one <script> and one <style> element (a page edit that would otherwise be blocked at run time).
[[nodiscard]] std::string dashboard_csp(std::string_view html);

// RFC 4648 base64 (with padding).
[[nodiscard]] std::string base64(std::string_view bytes);

}  // namespace hearth::server
