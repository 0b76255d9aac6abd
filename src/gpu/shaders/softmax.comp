#version 450
#extension GL_GOOGLE_include_directive : require
// One step of attention's online softmax (kernels/attention.cpp, softmax_step_scalar) from a fresh state, per row of
// n scores: m = max_j s_j, p_j = exp(s_j − m), l = Σ_j p_j with the sum in dot_lanes' order (lane j mod 8 over the
// first n − n%8, the lanes combined as ((0+4)+(2+6)) + ((1+5)+(3+7)), then the tail in order). exp is attention's
// (exp_scalar: Cephes' polynomial after a two-constant ln 2 reduction), step for step with fma_rn: bitwise what
// attention_exp gives. Needs shaderFloat64 (fma_rn). Dividing p by l is left to the caller, as attention does.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Scores { float s[]; };  // [n_rows, n]
layout(std430, binding = 1) writeonly buffer Probs { float p[]; };  // [n_rows, n]: exp(s − m)
layout(std430, binding = 2) writeonly buffer Sums { float l[]; };   // [n_rows]: Σ p in the lanes' order
layout(push_constant) uniform Push {
  uint n;
} pc;

shared float partial_max[64];
shared float lanes[8];

float attention_exp(float x) {
  if (isnan(x)) return x;
  if (x < uintBitsToFloat(0xC2AE999Au)) return 0.0;  // kExpMin = -87.3
  if (x > 88.0) return uintBitsToFloat(0x7F800000u);
  precise const float scaled = x * uintBitsToFloat(0x3FB8AA3Bu);  // log2(e)
  const float n = roundEven(scaled);
  precise float r = fma_rn(n, uintBitsToFloat(0xBF318000u), x);  // −ln2_hi
  r = fma_rn(n, uintBitsToFloat(0x395E8083u), r);                // −ln2_lo
  precise float poly = uintBitsToFloat(0x39506967u);
  poly = fma_rn(poly, r, uintBitsToFloat(0x3AB743CEu));
  poly = fma_rn(poly, r, uintBitsToFloat(0x3C088908u));
  poly = fma_rn(poly, r, uintBitsToFloat(0x3D2AA9C1u));
  poly = fma_rn(poly, r, uintBitsToFloat(0x3E2AAAAAu));
  poly = fma_rn(poly, r, uintBitsToFloat(0x3F000000u));
  precise const float r2 = r * r;
  precise const float y = fma_rn(poly, r2, r) + 1.0;
  const float scale = uintBitsToFloat(uint(int(n) + 127) << 23u);
  precise const float result = y * scale;
  return result;
}

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint t = gl_LocalInvocationID.x;
  const uint base = row * pc.n;
  float m = uintBitsToFloat(0xFF800000u);  // -inf
  for (uint j = t; j < pc.n; j += 64u) m = max(m, s[base + j]);
  partial_max[t] = m;
  barrier();
  if (t == 0u) {
    for (uint k = 1u; k < 64u; ++k) m = max(m, partial_max[k]);
    partial_max[0] = m;
  }
  barrier();
  m = partial_max[0];
  for (uint j = t; j < pc.n; j += 64u) {
    precise const float shifted = s[base + j] - m;
    p[base + j] = attention_exp(shifted);
  }
  // Each lane sums its own exps in order (recomputed, so no invocation reads another's writes to p).
  const uint n8 = pc.n - pc.n % 8u;
  if (t < 8u) {
    precise float acc = 0.0;
    for (uint j = t; j < n8; j += 8u) {
      precise const float shifted = s[base + j] - m;
      acc = acc + attention_exp(shifted);
    }
    lanes[t] = acc;
  }
  barrier();
  if (t == 0u) {
    precise float sum = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    for (uint j = n8; j < pc.n; ++j) {
      precise const float shifted = s[base + j] - m;
      sum = sum + attention_exp(shifted);
    }
    l[row] = sum;
  }
}
