#pragma once
// Sizes as people write and read them: "512MiB" in, "1.13 MiB" and "61,680" out.

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace hearth {

// "1.18 MiB", "3.50 GiB": binary units, three significant digits.
std::string format_bytes(uint64_t bytes);
// "61,680": thousands separated by commas.
std::string format_thousands(int64_t n);
// Parses "8GiB", "512MiB", "2G", "1.5 GiB", "4096" (bytes). Error, with the reason, on anything else or a
// value ≤ 0.
Result<int64_t> parse_bytes(std::string_view text);

}  // namespace hearth
