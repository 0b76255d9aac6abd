#version 450
#extension GL_GOOGLE_include_directive : require
// y[t][r] = vec_dot_q4_0_reference(W row r, X row t): Q4_0 weights times Q8_0 activations. Per block, in order:
//   sum += (d·dx)·Σ (q − 8)·qx     (low nibbles take elements 0..15, high nibbles 16..31)
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };      // [n_rows] rows of n_blocks Q4_0 blocks
layout(std430, binding = 1) readonly buffer Activations { uint x[]; };  // [n_tokens] rows of n_blocks Q8_0 blocks
layout(std430, binding = 2) writeonly buffer Output { float y[]; };     // [n_tokens, n_rows]
layout(push_constant) uniform Push {
  uint n_rows;
  uint n_blocks;
  uint w_row_bytes;
  uint x_row_bytes;
} pc;

const uint kWeightBlockBytes = 18;  // fp16 d, 16 bytes of nibbles
const uint kActBlockBytes = 34;

void main() {
  const uint r = gl_GlobalInvocationID.x;
  const uint t = gl_GlobalInvocationID.y;
  if (r >= pc.n_rows) return;
  precise float sum = 0.0;
  for (uint b = 0; b < pc.n_blocks; ++b) {
    const uint wo = r * pc.w_row_bytes + b * kWeightBlockBytes;
    const uint xo = t * pc.x_row_bytes + b * kActBlockBytes;
    int sumi = 0;
    for (uint j = 0; j < 16; ++j) {
      const uint q = LOAD_U8(w, wo + 2 + j);
      sumi += (int(q & 0x0Fu) - 8) * LOAD_I8(x, xo + 2 + j);
      sumi += (int(q >> 4u) - 8) * LOAD_I8(x, xo + 2 + 16 + j);
    }
    precise const float d = fp16_to_fp32(LOAD_U16(w, wo)) * fp16_to_fp32(LOAD_U16(x, xo));
    sum = sum + d * float(sumi);
  }
  y[t * pc.n_rows + r] = sum;
}
