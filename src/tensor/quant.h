#pragma once
// Block-quantized formats, byte-for-byte as GGML stores them in GGUF files, and their scalar reference
// (de)quantizers. A row of n elements of a block type is n / block_size consecutive blocks.
//
// Element order inside the blocks (the part that is easy to get wrong):
//   Q8_0  x[i] = d * qs[i]                                        i in [0, 32)
//   Q4_0  x[j] = d * ((qs[j] & 15) - 8),  x[j + 16] = d * ((qs[j] >> 4) - 8)      j in [0, 16)
//   Q4_K  256 elements = 8 sub-blocks of 32. Sub-block s has a 6-bit scale sc[s] and 6-bit min m[s]
//         (packed into `scales`, see unpack_q4_k_scales). Bytes qs[32c .. 32c+32) hold sub-block 2c in their
//         low nibbles and sub-block 2c+1 in their high nibbles:  x = d * sc[s] * q - dmin * m[s].
//   Q6_K  256 elements in two halves of 128; half h uses ql[64h ..], qh[32h ..]. For l in [0, 32):
//           x[128h + l]      = low  nibble of ql[64h + l]      | bits 0-1 of qh[32h + l] << 4
//           x[128h + l + 32] = low  nibble of ql[64h + l + 32] | bits 2-3 of qh[32h + l] << 4
//           x[128h + l + 64] = high nibble of ql[64h + l]      | bits 4-5 of qh[32h + l] << 4
//           x[128h + l + 96] = high nibble of ql[64h + l + 32] | bits 6-7 of qh[32h + l] << 4
//         each 6-bit q gives d * scales[e / 16] * (q - 32), e the element index in the block.
//   Q8_K  activations only (never in files Hearth reads): x[i] = d * qs[i], d an fp32;
//         bsums[g] = sum of qs[16g .. 16g+16), which the K-quant dot products use for the mins / offsets.

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace hearth {

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;
inline constexpr int kQK_K = 256;

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_K {
  uint16_t d;     // fp16 super-block scale of the sub-block scales
  uint16_t dmin;  // fp16 super-block scale of the sub-block mins
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];  // low 4 bits
  uint8_t qh[kQK_K / 4];  // high 2 bits
  int8_t scales[kQK_K / 16];
  uint16_t d;  // fp16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// Unpacks the 12 `scales` bytes of a Q4_K block into 8 six-bit scales and 8 six-bit mins.
// Bytes 0-3: scale s (bits 0-5) for s < 4 and the top 2 bits of scale s+4 (bits 6-7).
// Bytes 4-7: min s (bits 0-5) for s < 4 and the top 2 bits of min s+4 (bits 6-7).
// Bytes 8-11: low 4 bits of scale s+4 (bits 0-3) and of min s+4 (bits 4-7).
inline void unpack_q4_k_scales(const uint8_t* packed, uint8_t* scale, uint8_t* min) {  // [12] -> [8], [8]
  for (int s = 0; s < 4; ++s) {
    scale[s] = packed[s] & 63;
    min[s] = packed[s + 4] & 63;
    scale[s + 4] = static_cast<uint8_t>((packed[s + 8] & 0x0F) | ((packed[s] >> 6) << 4));
    min[s + 4] = static_cast<uint8_t>((packed[s + 8] >> 4) | ((packed[s + 4] >> 6) << 4));
  }
}

// True for the types dequantize_row / quantize_row handle: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K.
bool quant_row_supported(DType type);

// dst[0, n) = the values of the row at `src` (row_bytes(type, n) bytes). Requires quant_row_supported(type)
// and n % block_size == 0; aborts otherwise.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Writes row_bytes(type, n) bytes to `dst` encoding src[0, n). Same requirements as dequantize_row.
// Q8_0/Q4_0 use GGML's round-to-nearest scheme; Q4_K/Q6_K use a simple min/max fit (not GGML's search), which
// is good enough for synthetic models and tests.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// Activation quantizers (symmetric, |q| <= 127, ties to even). Deterministic per row: the output depends only
// on src[0, n). n must be a multiple of 32 (Q8_0) or 256 (Q8_K).
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n);
void dequantize_row_q8_k(const BlockQ8_K* src, float* dst, int64_t n);

// Per-format entry points (n elements, n a multiple of the block size).
void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n);
void dequantize_row_q4_k(const BlockQ4_K* src, float* dst, int64_t n);
void dequantize_row_q6_k(const BlockQ6_K* src, float* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);
void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n);
void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n);

}  // namespace hearth
