#version 450
#extension GL_GOOGLE_include_directive : require
// y[t][r] = vec_dot_q4_k_reference(W row r, X row t): Q4_K weights times Q8_K activations (quantize_row_q8_k on
// the host). Per super-block of 256, in order, the integer sums exact:
//   sumi = Σ_s sc[s]·Σ q·qx,  summ = Σ_s m[s]·(bsums[2s] + bsums[2s+1])
//   sum += (d·dx)·float(sumi) − (dmin·dx)·float(summ)
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };      // [n_rows] rows of n_blocks Q4_K blocks
layout(std430, binding = 1) readonly buffer Activations { uint x[]; };  // [n_tokens] rows of n_blocks Q8_K blocks
layout(std430, binding = 2) writeonly buffer Output { float y[]; };     // [n_tokens, n_rows]
layout(push_constant) uniform Push {
  uint n_rows;
  uint n_blocks;  // n_cols / 256
  uint w_row_bytes;
  uint x_row_bytes;
} pc;

const uint kWeightBlockBytes = 144;  // fp16 d, fp16 dmin, 12 bytes of scales and mins, 128 bytes of nibbles
const uint kActBlockBytes = 292;     // fp32 d, 256 int8, 16 int16 bsums

// tensor/quant.h's unpack_q4_k_scales: scale (want_min false) or min of sub-block s.
uint q4_k_scale(uint so, uint s, bool want_min) {
  const uint off = want_min ? 4u : 0u;
  if (s < 4u) return LOAD_U8(w, so + s + off) & 63u;
  const uint high = LOAD_U8(w, so + s - 4u + off) >> 6u;
  const uint packed = LOAD_U8(w, so + s + 4u);
  return (want_min ? (packed >> 4u) : (packed & 0x0Fu)) | (high << 4u);
}

void main() {
  const uint r = gl_GlobalInvocationID.x;
  const uint t = gl_GlobalInvocationID.y;
  if (r >= pc.n_rows) return;
  precise float sum = 0.0;
  for (uint b = 0; b < pc.n_blocks; ++b) {
    const uint wo = r * pc.w_row_bytes + b * kWeightBlockBytes;
    const uint xo = t * pc.x_row_bytes + b * kActBlockBytes;
    int sumi = 0;
    int summ = 0;
    for (uint s = 0; s < 8u; ++s) {
      const uint shift = 4u * (s % 2u);
      int sub = 0;
      for (uint i = 0; i < 32u; ++i) {
        const int q = int((LOAD_U8(w, wo + 16u + 32u * (s / 2u) + i) >> shift) & 0x0Fu);
        sub += q * LOAD_I8(x, xo + 4u + 32u * s + i);
      }
      sumi += int(q4_k_scale(wo + 4u, s, false)) * sub;
      const int bsum = (int(LOAD_U16(x, xo + 260u + 4u * s) << 16u) >> 16) +
                       (int(LOAD_U16(x, xo + 262u + 4u * s) << 16u) >> 16);
      summ += int(q4_k_scale(wo + 4u, s, true)) * bsum;
    }
    const float dx = uintBitsToFloat(x[xo >> 2u]);
    precise const float d = fp16_to_fp32(LOAD_U16(w, wo)) * dx;
    precise const float dmin = fp16_to_fp32(LOAD_U16(w, wo + 2u)) * dx;
    precise const float term = d * float(sumi) - dmin * float(summ);
    sum = sum + term;
  }
  y[t * pc.n_rows + r] = sum;
}
