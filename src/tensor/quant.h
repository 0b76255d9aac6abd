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
//   Q4_1  as Q4_0 with a min: x = d * q + m, q the unsigned nibble.
//   Q5_0  as Q4_0 with a fifth bit: q = nibble | (bit e of the little-endian uint32 qh) << 4, x = d * (q - 16).
//   Q5_1  as Q5_0 without the offset and with a min: x = d * q + m.
//   IQ4_NL as Q4_0, but the nibble indexes a non-linear table: x = d * kIq4NlValues[nibble].
//   Q5_K  as Q4_K (same scales, same qs order) plus bit s of qh[l] as the fifth bit of element 32s + l.
//   Q3_K  256 elements; element e = 128n + 32j + l (l < 32) keeps 2 bits at (qs[32n + l] >> 2j) & 3 and a high
//         bit at bit e/32 of hmask[l]; q = low 2 bits - (high bit ? 0 : 4), in [-4, 3]. 16 six-bit scales
//         (unpack_q3_k_scales), biased by 32: x = d * (sc[e/16] - 32) * q.
//   Q2_K  element e = 128n + 32j + l keeps 2 bits at (qs[32n + l] >> 2j) & 3; scales[e/16] holds a 4-bit scale
//         (low nibble) and 4-bit min (high nibble): x = d * sc * q - dmin * m.
//   IQ4_XS 256 elements = 8 sub-blocks of 32, each laid out like one IQ4_NL block (qs[16s ..]); sub-block s has
//         a 6-bit scale (low nibble from scales_l[s/2] >> 4(s%2), high 2 bits from scales_h >> 2s), biased by 32:
//         x = d * (sc - 32) * kIq4NlValues[nibble].
//   MXFP4 as Q4_0's nibble order, the nibble an E2M1 code that indexes kMxfp4Values (the E2M1 values doubled, as
//         GGML keeps them), the scale an E8M0 exponent byte e taken at half its value (mxfp4_scale_half):
//         x[j] = kMxfp4Values[qs[j] & 15] * 2^(e-128),  x[j + 16] = kMxfp4Values[qs[j] >> 4] * 2^(e-128).
//         e 0 and 1 give subnormal scales; 255 is no NaN (GGML reads it as 2^127 like any other exponent).
//   Q8_K  activations only (never in files Hearth reads): x[i] = d * qs[i], d an fp32;
//         bsums[g] = sum of qs[16g .. 16g+16), which the K-quant dot products use for the mins / offsets.

#include <bit>
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

struct BlockQ4_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 min (added)
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;     // fp16 scale
  uint8_t qh[4];  // fifth bits, one per element (read as a little-endian uint32)
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 min (added)
  uint8_t qh[4];
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockIQ4_NL {
  uint16_t d;  // fp16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// The 16 levels of IQ4_NL and IQ4_XS, as GGML defines them.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// MXFP4 (OCP microscaling FP4): 32 E2M1 codes sharing one power-of-two scale.
struct BlockMXFP4 {
  uint8_t e;  // E8M0 scale: the exponent of 2^(e-127), no sign, no mantissa
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);

// The 16 E2M1 codes' values doubled (sign bit 3; 0, 0.5, 1, 1.5, 2, 3, 4, 6 become integers), as GGML's
// kvalues_mxfp4: a block's values are these times half its scale.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the E8M0 scale 2^(e-127), 2^(e-128), built from its bits as GGML's GGML_E8M0_TO_FP32_HALF: exponent field
// e - 1 for e >= 2, and the subnormals 2^-127 (e 1) and 2^-128 (e 0) below.
constexpr float mxfp4_scale_half(uint8_t e) {
  return std::bit_cast<float>(e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23);
}

struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble: scale, high nibble: min
  uint8_t qs[kQK_K / 4];
  uint16_t d;     // fp16 super-block scale of the scales
  uint16_t dmin;  // fp16 super-block scale of the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // high bits
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[12];        // 16 six-bit scales, see unpack_q3_k_scales
  uint16_t d;                // fp16 super-block scale
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];  // packed as Q4_K's
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;  // high 2 bits of the 8 sub-block scales
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

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

// Unpacks the 12 `scales` bytes of a Q3_K block into 16 six-bit scales (still biased by 32). Scale s takes its
// low nibble from byte s (s < 8) or the high nibble of byte s - 8, and its top 2 bits from bits 2(s/4).. of
// byte 8 + s % 4.
inline void unpack_q3_k_scales(const uint8_t* packed, uint8_t* scale) {  // [12] -> [16]
  for (int s = 0; s < 16; ++s) {
    const int low = s < 8 ? (packed[s] & 0x0F) : (packed[s - 8] >> 4);
    const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
    scale[s] = static_cast<uint8_t>(low | (high << 4));
  }
}

// The 6-bit scale of IQ4_XS sub-block s (still biased by 32).
inline int iq4_xs_scale(const BlockIQ4_XS& block, int s) {
  return ((block.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F) | (((block.scales_h >> (2 * s)) & 3) << 4);
}

// True for the types quantize_row handles: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, MXFP4. dequantize_row handles
// every type whose dtype_info says compute_supported (these plus Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K,
// IQ4_XS).
bool quant_row_supported(DType type);

// dst[0, n) = the values of the row at `src` (row_bytes(type, n) bytes). Requires dtype_info(type).compute_supported
// and n % block_size == 0; aborts otherwise. Each value is computed with exactly GGML's (and gguf-py's) fp32
// expression, so results match theirs bit for bit.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Writes row_bytes(type, n) bytes to `dst` encoding src[0, n). Same requirements as dequantize_row.
// Q8_0/Q4_0 use GGML's round-to-nearest scheme; Q4_K/Q6_K use a simple min/max fit (not GGML's search), which
// is good enough for synthetic models and tests; MXFP4 takes GGML's reference choice (quantize_row_mxfp4).
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
void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, int64_t n);
void dequantize_row_iq4_nl(const BlockIQ4_NL* src, float* dst, int64_t n);
void dequantize_row_q2_k(const BlockQ2_K* src, float* dst, int64_t n);
void dequantize_row_q3_k(const BlockQ3_K* src, float* dst, int64_t n);
void dequantize_row_q5_k(const BlockQ5_K* src, float* dst, int64_t n);
void dequantize_row_iq4_xs(const BlockIQ4_XS* src, float* dst, int64_t n);
void dequantize_row_mxfp4(const BlockMXFP4* src, float* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);
void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n);
void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n);
// As GGML's quantize_row_mxfp4_ref: per block e = floor(log2(absmax)) - 2 + 127 (0 for an all-zero block), so the
// absmax lands in [4, 8) times 2^(e-127) and values beyond E2M1's largest 6 clip to it; each element takes the code
// whose value is nearest (the lower code on ties).
void quantize_row_mxfp4(const float* src, BlockMXFP4* dst, int64_t n);

}  // namespace hearth
