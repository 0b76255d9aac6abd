#pragma once
// Helpers shared by the quantizer translation units; not part of the public tensor API.

#include <cmath>
#include <cstdint>
#include <cstring>

namespace hearth::quant_detail {

// Round to nearest, ties to even. Adding 1.5·2^23 leaves the rounded integer in the low mantissa bits; this avoids
// a libm call per element (nearbyintf is not inlined for baseline x86-64). Larger magnitudes take the slow path.
inline int round_to_int(float x) {
  if (!(std::fabs(x) < 4194303.0f)) return static_cast<int>(std::nearbyint(x));
  const float shifted = x + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007FFFFF) - 0x00400000;
}

// Aborts unless n is a non-negative multiple of `block`.
void check_blocks(int64_t n, int64_t block, const char* what);

}  // namespace hearth::quant_detail
