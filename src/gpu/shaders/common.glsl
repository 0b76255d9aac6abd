// Helpers every Hearth shader shares. Buffers are bound as uint[] and read byte-wise, so GGUF blocks (34 bytes for
// Q8_0, 18 for Q4_0) need no alignment and no 8/16-bit storage feature.
//
// Bitwise agreement with the CPU twins: every float operation that feeds a result is `precise` (SPIR-V
// NoContraction), so the compiler fuses no a*b+c that the C++ (built with -ffp-contract=off) does not; fma() is
// written out where the C++ calls std::fma. Vulkan makes fp32 add, sub and mul correctly rounded; division and
// sqrt are not (2.5 ulp, 3 ulp), so they go through the exact corrections below.

// Byte `off` of a uint[] buffer, and the little-endian u16 at an even offset.
#define LOAD_U8(buf, off) ((buf[(off) >> 2u] >> (((off) & 3u) * 8u)) & 0xFFu)
#define LOAD_I8(buf, off) (int(LOAD_U8(buf, off) << 24u) >> 24)
#define LOAD_U16(buf, off) ((buf[(off) >> 2u] >> (((off) & 2u) * 8u)) & 0xFFFFu)

// tensor/fp16.h's fp16_to_fp32, bit for bit (subnormal halves are normal floats, so no denormal mode matters).
float fp16_to_fp32(uint h) {
  const uint sign = (h & 0x8000u) << 16u;
  const uint e = (h >> 10u) & 0x1Fu;
  const uint m = h & 0x3FFu;
  if (e == 0x1Fu) return uintBitsToFloat(sign | 0x7F800000u | (m << 13u));
  if (e == 0u) {
    precise const float magnitude = float(m) * 5.9604644775390625e-8;  // 2^-24: exact
    return uintBitsToFloat(sign | floatBitsToUint(magnitude));
  }
  return uintBitsToFloat(sign | ((e + 112u) << 23u) | (m << 13u));
}

// The float k steps up the number line from x (k < 0: down), x finite and nonzero, not crossing zero.
float float_step(float x, int k) {
  return uintBitsToFloat(uint(int(floatBitsToUint(x)) + (x < 0.0 ? -k : k)));
}

// fma(a, b, c) with one rounding, as std::fma. GLSL's fma() is not that on every driver: Vulkan lets it be a
// multiply then an add, and the Fma instruction carries no NoContraction, so a compiler may rewrite it (lavapipe's
// results were ~2^-12 off). Here the product is exact in double (24 + 24 bits), the sum's rounding error is
// recovered exactly (TwoSum), and the one case double rounding gets wrong, a double sum on a float midpoint that
// the exact sum is not, is decided by that error. Needs shaderFloat64.
float fma_rn(float a, float b, float c) {
  precise const double p = double(a) * double(b);
  precise const double s = p + double(c);
  precise const double bv = s - p;
  precise const double err = (p - (s - bv)) + (double(c) - bv);
  float f = float(s);
  if (err != 0.0LF && f != 0.0 && !isinf(f)) {
    const float other = float_step(f, s > double(f) ? 1 : -1);
    precise const double mid = (double(f) + double(other)) * 0.5LF;
    if (s == mid && (err > 0.0LF) == (double(other) > double(f))) f = other;
  }
  return f;
}

// a / b correctly rounded (as the CPU's IEEE division), for finite a, b != 0 with a finite, normal quotient.
// Drivers may divide through an approximate reciprocal (llvmpipe's is ~8 ulp off), so the quotient is first
// refined by two Newton steps on the exact residual a − q·b (fma_rn), then of the candidates around it the one with
// the smallest exact residual wins: it is the nearest to a/b, and a quotient of two floats is never a tie.
float div_rn(float a, float b) {
  precise float q = a / b;
  if (q == 0.0 || isinf(q) || isnan(q)) return q;
  precise const float inv = 1.0 / b;
  for (int i = 0; i < 2; ++i) q = fma(fma_rn(-q, b, a), inv, q);
  float best = q;
  precise float best_r = abs(fma_rn(-q, b, a));
  for (int k = -2; k <= 2; ++k) {
    if (k == 0) continue;
    const float c = float_step(q, k);
    precise const float r = abs(fma_rn(-c, b, a));
    if (r < best_r) {
      best = c;
      best_r = r;
    }
  }
  return best;
}

// sqrt(a) correctly rounded, a > 0 finite and normal. The driver's root (maybe from an approximate rsqrt) is refined
// by two Newton steps, then s is right when a lies between the squares of the midpoints to its neighbours; those
// midpoints have 25 significant bits, so their squares are exact in double.
float sqrt_rn(float a) {
  precise float s = sqrt(a);
  for (int i = 0; i < 2; ++i) s = fma(fma(-s, s, a), 0.5 / s, s);
  for (int iter = 0; iter < 4; ++iter) {
    precise const double lo = (double(float_step(s, -1)) + double(s)) * 0.5LF;
    precise const double hi = (double(s) + double(float_step(s, 1))) * 0.5LF;
    if (double(a) < lo * lo) {
      s = float_step(s, -1);
    } else if (double(a) > hi * hi) {
      s = float_step(s, 1);
    } else {
      break;
    }
  }
  return s;
}
