#version 450
// y[t][r] = vec_dot_f32_reference (F32 weights) or, compiled with -DHEARTH_BF16 (matmul_bf16),
// vec_dot_bf16_reference (BF16 weights) of W row r and x row t,
// element after element with fp32 activations:
//   sum = sum + w[i]·x[i]     (no fma: the reference rounds the product, then the sum)
// A BF16 weight is the top half of its fp32 (bf16_to_fp32), exact.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };       // [n_rows] rows of n_cols fp32 or bf16
layout(std430, binding = 1) readonly buffer Activations { float x[]; };  // [n_tokens, n_cols]
layout(std430, binding = 2) writeonly buffer Output { float y[]; };      // [n_tokens, n_rows]
layout(push_constant) uniform Push {
  uint n_rows;
  uint n_cols;
  uint w_row_bytes;  // a multiple of 4 (F32) or 2 (BF16)
} pc;

float weight(uint row_offset, uint i) {
#ifdef HEARTH_BF16
  const uint at = row_offset + 2u * i;
  return uintBitsToFloat(((w[at >> 2u] >> ((at & 2u) * 8u)) & 0xFFFFu) << 16u);
#else
  return uintBitsToFloat(w[(row_offset >> 2u) + i]);
#endif
}

void main() {
  const uint r = gl_GlobalInvocationID.x;
  const uint t = gl_GlobalInvocationID.y;
  if (r >= pc.n_rows) return;
  precise float sum = 0.0;
  const uint wo = r * pc.w_row_bytes;
  const uint xo = t * pc.n_cols;
  for (uint i = 0; i < pc.n_cols; ++i) {
    precise const float p = weight(wo, i) * x[xo + i];
    sum = sum + p;
  }
  y[t * pc.n_rows + r] = sum;
}
