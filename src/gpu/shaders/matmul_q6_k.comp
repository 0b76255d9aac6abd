#version 450
#extension GL_GOOGLE_include_directive : require
// y[t][r] = vec_dot_q6_k_reference(W row r, X row t): Q6_K weights times Q8_K activations. Per super-block, the
// integer sum Σ_e sc[e/16]·(q_e − 32)·qx_e exact, then sum += (d·dx)·float(sumi), in order.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };      // [n_rows] rows of n_blocks Q6_K blocks
layout(std430, binding = 1) readonly buffer Activations { uint x[]; };  // [n_tokens] rows of n_blocks Q8_K blocks
layout(std430, binding = 2) writeonly buffer Output { float y[]; };     // [n_tokens, n_rows]
layout(push_constant) uniform Push {
  uint n_rows;
  uint n_blocks;  // n_cols / 256
  uint w_row_bytes;
  uint x_row_bytes;
} pc;

const uint kWeightBlockBytes = 210;  // ql[128], qh[64], int8 scales[16], fp16 d
const uint kActBlockBytes = 292;

void main() {
  const uint r = gl_GlobalInvocationID.x;
  const uint t = gl_GlobalInvocationID.y;
  if (r >= pc.n_rows) return;
  precise float sum = 0.0;
  for (uint b = 0; b < pc.n_blocks; ++b) {
    const uint wo = r * pc.w_row_bytes + b * kWeightBlockBytes;
    const uint xo = t * pc.x_row_bytes + b * kActBlockBytes;
    int sumi = 0;
    for (uint half_index = 0; half_index < 2u; ++half_index) {
      const uint ql = wo + 64u * half_index;
      const uint qh = wo + 128u + 32u * half_index;
      const uint qx = xo + 4u + 128u * half_index;
      const uint sc = wo + 192u + 8u * half_index;
      for (uint l = 0; l < 32u; ++l) {
        const uint lo0 = LOAD_U8(w, ql + l);
        const uint lo1 = LOAD_U8(w, ql + l + 32u);
        const uint hi = LOAD_U8(w, qh + l);
        const int q0 = int((lo0 & 0x0Fu) | ((hi & 3u) << 4u)) - 32;
        const int q1 = int((lo1 & 0x0Fu) | (((hi >> 2u) & 3u) << 4u)) - 32;
        const int q2 = int((lo0 >> 4u) | (((hi >> 4u) & 3u) << 4u)) - 32;
        const int q3 = int((lo1 >> 4u) | (((hi >> 6u) & 3u) << 4u)) - 32;
        const uint g = l / 16u;
        sumi += LOAD_I8(w, sc + g) * q0 * LOAD_I8(x, qx + l) + LOAD_I8(w, sc + g + 2u) * q1 * LOAD_I8(x, qx + l + 32u) +
                LOAD_I8(w, sc + g + 4u) * q2 * LOAD_I8(x, qx + l + 64u) +
                LOAD_I8(w, sc + g + 6u) * q3 * LOAD_I8(x, qx + l + 96u);
      }
    }
    const float dx = uintBitsToFloat(x[xo >> 2u]);
    precise const float d = fp16_to_fp32(LOAD_U16(w, wo + 208u)) * dx;
    sum = sum + d * float(sumi);
  }
  y[t * pc.n_rows + r] = sum;
}
