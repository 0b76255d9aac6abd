#version 450
#extension GL_GOOGLE_include_directive : require
// y[t][r] = vec_dot_q8_0_reference(W row r, X row t): Q8_0 weights times Q8_0 activations (quantized on the host by
// quantize_row_q8_0, as matmul_reference does). One invocation per output, blocks in order:
//   sum += (d·dx)·Σ q·qx     (the integer sum exact, the two products and the add correctly rounded)
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };      // [n_rows] rows of n_blocks blocks
layout(std430, binding = 1) readonly buffer Activations { uint x[]; };  // [n_tokens] rows of n_blocks blocks
layout(std430, binding = 2) writeonly buffer Output { float y[]; };     // [n_tokens, n_rows]
layout(push_constant) uniform Push {
  uint n_rows;
  uint n_blocks;     // n_cols / 32
  uint w_row_bytes;  // bytes from one weight row to the next
  uint x_row_bytes;  // bytes from one activation row to the next
} pc;

const uint kBlockBytes = 34;  // fp16 d, 32 int8

void main() {
  const uint r = gl_GlobalInvocationID.x;
  const uint t = gl_GlobalInvocationID.y;
  if (r >= pc.n_rows) return;
  precise float sum = 0.0;
  for (uint b = 0; b < pc.n_blocks; ++b) {
    const uint wo = r * pc.w_row_bytes + b * kBlockBytes;
    const uint xo = t * pc.x_row_bytes + b * kBlockBytes;
    int sumi = 0;
    for (uint i = 0; i < 32; ++i) sumi += LOAD_I8(w, wo + 2 + i) * LOAD_I8(x, xo + 2 + i);
    precise const float d = fp16_to_fp32(LOAD_U16(w, wo)) * fp16_to_fp32(LOAD_U16(x, xo));
    sum = sum + d * float(sumi);
  }
  y[t * pc.n_rows + r] = sum;
}
