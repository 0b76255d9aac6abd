#version 450
#extension GL_GOOGLE_include_directive : require
// Activations to Q8_K blocks on the device (the activations of Q4_K and Q6_K weights), byte for byte what
// quantize_row_q8_k writes: per block of 256, d = amax / 127 (an fp32, through div_rn), inverse = 1 / d (0 when d
// is 0), q = clamp(roundEven(x · inverse), −127, 127), bsums[g] = Σ of q over elements 16g .. 16g + 15.
// A block is 292 bytes, 73 whole words: one invocation writes one block. Needs shaderFloat64 (div_rn).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };  // [n_tokens, n_cols] fp32, contiguous
layout(std430, binding = 1) writeonly buffer Output { uint q[]; };  // n_tokens · n_cols / 256 Q8_K blocks
layout(push_constant) uniform Push {
  uint n_blocks_total;  // n_tokens · n_cols / 256
} pc;

const uint kBlockWords = 73;

void main() {
  const uint b = gl_GlobalInvocationID.x;
  if (b >= pc.n_blocks_total) return;
  const uint base = b * 256u;
  const uint out_word = b * kBlockWords;
  float amax = 0.0;
  for (uint i = 0; i < 256u; ++i) {
    const float a = abs(x[base + i]);
    if (a > amax) amax = a;
  }
  const float d = div_rn(amax, 127.0);
  const float inverse = d != 0.0 ? div_rn(1.0, d) : 0.0;
  q[out_word] = floatBitsToUint(d);
  uint even_bsum = 0u;  // bsums start at byte 260 = word 65, two int16 per word, the even group in the low half
  for (uint g = 0; g < 16u; ++g) {
    int bsum = 0;
    for (uint w = 0; w < 4u; ++w) {  // 4 words of 4 quants each
      uint word = 0u;
      for (uint k = 0; k < 4u; ++k) {
        precise const float scaled = x[base + 16u * g + 4u * w + k] * inverse;
        const int v = clamp(int(roundEven(scaled)), -127, 127);
        bsum += v;
        word |= (uint(v) & 0xFFu) << (8u * k);
      }
      q[out_word + 1u + 4u * g + w] = word;
    }
    if ((g & 1u) == 0u) {
      even_bsum = uint(bsum) & 0xFFFFu;
    } else {
      q[out_word + 65u + g / 2u] = even_bsum | ((uint(bsum) & 0xFFFFu) << 16u);
    }
  }
}
