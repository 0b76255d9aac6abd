#version 450
#extension GL_GOOGLE_include_directive : require
// y[t][r] = vec_dot_f16_reference(W row r, x row t): F16 weights times fp32 activations, element after element:
//   sum = sum + w[i]·x[i]     (no fma: the reference rounds the product, then the sum)
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };      // [n_rows] rows of n_cols fp16
layout(std430, binding = 1) readonly buffer Activations { float x[]; };  // [n_tokens, n_cols]
layout(std430, binding = 2) writeonly buffer Output { float y[]; };     // [n_tokens, n_rows]
layout(push_constant) uniform Push {
  uint n_rows;
  uint n_cols;
  uint w_row_bytes;  // even
} pc;

void main() {
  const uint r = gl_GlobalInvocationID.x;
  const uint t = gl_GlobalInvocationID.y;
  if (r >= pc.n_rows) return;
  precise float sum = 0.0;
  const uint wo = r * pc.w_row_bytes;
  const uint xo = t * pc.n_cols;
  for (uint i = 0; i < pc.n_cols; ++i) {
    precise const float p = fp16_to_fp32(LOAD_U16(w, wo + 2 * i)) * x[xo + i];
    sum = sum + p;
  }
  y[t * pc.n_rows + r] = sum;
}
