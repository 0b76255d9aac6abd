#version 450
#extension GL_GOOGLE_include_directive : require
// out = x · scale · w per row, as kernels/rms_lanes.h (what rms_norm runs on the CPU, scalar and AVX2 alike):
// the squares summed in double over 8 lanes (lane l takes i ≡ l mod 8 of the first n − n%8), the lanes combined as
// ((0+4)+(2+6)) + ((1+5)+(3+7)), the tail added in order; scale = 1 / sqrt(float(sum / n) + eps).
// Needs shaderFloat64. Lanes 0..7 are summed by invocations 0..7, each in order, so the sums are the CPU's.
// The one step not proven bitwise on every GPU: the double division sum / n, which Vulkan does not require to be
// correctly rounded; a wrong last double bit changes the float only when the quotient lies within 2^-29 relative
// of a float rounding boundary (docs/vulkan.md). The float sqrt and reciprocal are corrected to IEEE (common.glsl).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };    // [n_rows, n]
layout(std430, binding = 1) readonly buffer Weight { float w[]; };   // [n]
layout(std430, binding = 2) writeonly buffer Output { float y[]; };  // [n_rows, n]
layout(push_constant) uniform Push {
  uint n;
  float eps;
} pc;

shared double lanes[8];
shared float row_scale;

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint l = gl_LocalInvocationID.x;
  const uint base = row * pc.n;
  const uint n8 = pc.n - pc.n % 8u;
  if (l < 8u) {
    precise double acc = 0.0LF;
    for (uint i = l; i < n8; i += 8u) {
      const double v = double(x[base + i]);
      precise const double sq = v * v;
      acc = acc + sq;
    }
    lanes[l] = acc;
  }
  barrier();
  if (l == 0u) {
    precise double sum = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    for (uint i = n8; i < pc.n; ++i) {
      const double v = double(x[base + i]);
      precise const double sq = v * v;
      sum = sum + sq;
    }
    precise const float mean = float(sum / double(pc.n));
    precise const float shifted = mean + pc.eps;
    row_scale = div_rn(1.0, sqrt_rn(shifted));
  }
  barrier();
  const float scale = row_scale;
  for (uint i = l; i < pc.n; i += 64u) {
    precise const float scaled = x[base + i] * scale;
    y[base + i] = scaled * w[i];
  }
}
