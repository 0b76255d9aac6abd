#pragma once
// Scalar conversions between fp32 and the two 16-bit float formats GGUF stores:
//   - IEEE 754 binary16 ("half", GGML F16): 1 sign, 5 exponent, 10 mantissa bits;
//   - bfloat16 (GGML BF16): the top 16 bits of an fp32.
// fp32 -> 16-bit rounds to nearest, ties to even, and handles subnormals, infinities and NaN (NaN stays NaN,
// quieted, keeping as much payload as fits). 16-bit -> fp32 is exact. These are the reference conversions:
// vector kernels (F16C) must agree with them bit for bit.

#include <bit>
#include <cstdint>

namespace hearth {

// Exact: every half is representable in fp32. NaN payloads are kept.
constexpr float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

// Round to nearest, ties to even. Magnitudes >= 65520 become inf; below 2^-25 (inclusive) become zero.
constexpr uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {  // NaN: quiet it, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: overflows to inf
  if (magnitude >= 0x38800000u) {                                              // >= 2^-14: normal half
    uint32_t h = (magnitude >> 13) - ((127u - 15u) << 10);
    const uint32_t rest = magnitude & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still correct
    return static_cast<uint16_t>(sign | h);
  }
  if (magnitude <= 0x33000000u) return sign;  // <= 2^-25: rounds to (signed) zero
  // Subnormal half: value / 2^-24 = m * 2^(e - 126) with m the 24-bit significand, e the biased exponent.
  const uint32_t e = magnitude >> 23;
  const uint32_t m = (magnitude & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half_way = 1u << (shift - 1u);
  if (rest > half_way || (rest == half_way && (h & 1u))) ++h;  // may become 0x400, the smallest normal
  return static_cast<uint16_t>(sign | h);
}

// Exact.
constexpr float bf16_to_fp32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// Round to nearest, ties to even; overflow goes to inf as in fp32 arithmetic. NaN is quieted, sign kept.
constexpr uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace hearth
