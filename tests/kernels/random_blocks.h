#pragma once
// Random weight blocks for the types Hearth reads but does not write (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K,
// IQ4_XS), and for Q4_K and Q6_K where a test wants bit patterns the quantizer never writes: every quant and scale bit
// uniformly random, and each fp16 scale/min field set to a random value of magnitude 2^-10 to 2^-6 (signed for mins),
// so every code path and scale range is exercised with finite values.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/fp16.h"

namespace hearth::test_data {

struct Fp16Field {
  size_t offset;
  bool is_signed;
};

// Offsets of the fp16 fields inside one block of `type`; empty for types without any.
inline std::vector<Fp16Field> fp16_fields(DType type) {
  switch (type) {
    case DType::Q4_1:
    case DType::Q5_1:
      return {{0, false}, {2, true}};
    case DType::Q5_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return {{0, false}};
    case DType::Q4_K:
    case DType::Q5_K:
      return {{0, false}, {2, false}};
    case DType::Q6_K:
      return {{208, false}};
    case DType::Q2_K:
      return {{80, false}, {82, false}};
    case DType::Q3_K:
      return {{108, false}};
    default:
      return {};
  }
}

inline void fill_random_blocks(DType type, uint8_t* dst, size_t n_bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n_bytes; ++i) dst[i] = static_cast<uint8_t>(rng() & 0xFF);
  std::uniform_real_distribution<float> exponent(-10.0f, -6.0f);
  const size_t block_bytes = dtype_info(type).block_bytes;
  for (size_t b = 0; b + block_bytes <= n_bytes; b += block_bytes) {
    for (const Fp16Field& field : fp16_fields(type)) {
      float value = std::exp2(exponent(rng));
      if (field.is_signed && (rng() & 1)) value = -value;
      const uint16_t half = fp32_to_fp16(value);
      std::memcpy(dst + b + field.offset, &half, sizeof(half));
    }
  }
}

}  // namespace hearth::test_data
