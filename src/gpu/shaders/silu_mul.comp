#version 450
#extension GL_GOOGLE_include_directive : require
// out[i] = gate[i] / (1 + exp(−gate[i])) · up[i], as kernels/silu_lanes.h (what silu_mul runs on the CPU): exp is
// its Cephes polynomial, every step an IEEE operation or an fma (fma_rn) in the same order, the constants by their bits;
// the division corrected to IEEE (common.glsl). Needs shaderFloat64 (fma_rn). Bitwise equal for gates whose results stay normal floats.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Gate { float gate[]; };  // [n]
layout(std430, binding = 1) readonly buffer Up { float up[]; };      // [n]
layout(std430, binding = 2) writeonly buffer Output { float y[]; };  // [n]
layout(push_constant) uniform Push {
  uint n;
} pc;

float exp_poly(float x) {
  const float kLow = uintBitsToFloat(0xC2AEAC50u);  // -87.3365447504
  const float kHigh = uintBitsToFloat(0x42B00000u);  // 88
  x = x < kHigh ? x : kHigh;
  x = x > kLow ? x : kLow;
  precise const float n = floor(fma_rn(x, uintBitsToFloat(0x3FB8AA3Bu), 0.5));  // log2(e)
  precise float r = fma_rn(n, uintBitsToFloat(0xBF318000u), x);                 // −C1
  r = fma_rn(n, uintBitsToFloat(0x395E8083u), r);                               // −C2
  precise const float r2 = r * r;
  precise float p = fma_rn(uintBitsToFloat(0x39506967u), r, uintBitsToFloat(0x3AB743CEu));  // P0, P1
  p = fma_rn(p, r, uintBitsToFloat(0x3C088908u));                                           // P2
  p = fma_rn(p, r, uintBitsToFloat(0x3D2AA9C1u));                                           // P3
  p = fma_rn(p, r, uintBitsToFloat(0x3E2AAAAAu));                                           // P4
  p = fma_rn(p, r, uintBitsToFloat(0x3F000000u));                                           // P5
  precise const float e = fma_rn(p, r2, r) + 1.0;
  const float scale = uintBitsToFloat(uint(int(n) + 127) << 23u);
  precise const float result = e * scale;
  return result;
}

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  const float g = gate[i];
  precise const float denominator = 1.0 + exp_poly(-g);
  precise const float result = div_rn(g, denominator) * up[i];
  y[i] = result;
}
