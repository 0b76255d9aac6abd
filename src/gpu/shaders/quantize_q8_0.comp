#version 450
#extension GL_GOOGLE_include_directive : require
// Activations to Q8_0 blocks on the device, byte for byte what quantize_row_q8_0 writes on the host (so a matmul
// fed by it equals matmul_reference): per block of 32, amax = the largest |x| (first on ties), d16 = fp16(amax /
// 127), d = float(d16), inverse = 1 / d (0 when d is 0), q = clamp(roundEven(x · inverse), −127, 127). The division
// and reciprocal go through div_rn (IEEE), the fp16 rounding is fp32_to_fp16's integer code. Needs shaderFloat64.
//
// Blocks are 34 bytes, so neighbours share 32-bit words: one invocation writes a pair of blocks (68 bytes, 17 whole
// words) counted over the whole [n_tokens, n_cols] buffer, whose rows are contiguous.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };  // [n_tokens, n_cols] fp32, contiguous
layout(std430, binding = 1) writeonly buffer Output { uint q[]; };  // n_tokens · n_cols / 32 Q8_0 blocks
layout(push_constant) uniform Push {
  uint n_blocks_total;  // n_tokens · n_cols / 32
} pc;

// tensor/fp16.h's fp32_to_fp16: round to nearest even, overflow to inf, subnormal halves, NaN quieted.
uint fp32_to_fp16(float f) {
  const uint bits = floatBitsToUint(f);
  const uint sign = (bits >> 16u) & 0x8000u;
  const uint magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u | ((magnitude >> 13u) & 0x3FFu);
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;
  if (magnitude >= 0x38800000u) {
    uint h = (magnitude >> 13u) - ((127u - 15u) << 10u);
    const uint rest = magnitude & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) ++h;
    return sign | h;
  }
  if (magnitude <= 0x33000000u) return sign;
  const uint e = magnitude >> 23u;
  const uint m = (magnitude & 0x7FFFFFu) | 0x800000u;
  const uint shift = 126u - e;
  uint h = m >> shift;
  const uint rest = m & ((1u << shift) - 1u);
  const uint half_way = 1u << (shift - 1u);
  if (rest > half_way || (rest == half_way && (h & 1u) != 0u)) ++h;
  return sign | h;
}

uint words[17];

void put_byte(uint at, uint value) { words[at >> 2u] |= (value & 0xFFu) << ((at & 3u) * 8u); }

// Quantizes global block `b` into bytes [at, at + 34) of `words`.
void quantize_block(uint b, uint at) {
  const uint base = b * 32u;
  float amax = 0.0;
  for (uint i = 0; i < 32u; ++i) {
    const float a = abs(x[base + i]);
    if (a > amax) amax = a;
  }
  const uint d16 = fp32_to_fp16(div_rn(amax, 127.0));
  const float d = fp16_to_fp32(d16);
  const float inverse = d != 0.0 ? div_rn(1.0, d) : 0.0;
  put_byte(at, d16);
  put_byte(at + 1u, d16 >> 8u);
  for (uint i = 0; i < 32u; ++i) {
    precise const float scaled = x[base + i] * inverse;
    const int v = clamp(int(roundEven(scaled)), -127, 127);
    put_byte(at + 2u + i, uint(v));
  }
}

void main() {
  const uint pair = gl_GlobalInvocationID.x;
  const uint first = 2u * pair;
  if (first >= pc.n_blocks_total) return;
  for (uint w = 0; w < 17u; ++w) words[w] = 0u;
  quantize_block(first, 0u);
  const bool has_second = first + 1u < pc.n_blocks_total;
  if (has_second) quantize_block(first + 1u, 34u);
  const uint n_words = has_second ? 17u : 9u;
  for (uint w = 0; w < n_words; ++w) q[17u * pair + w] = words[w];
}
