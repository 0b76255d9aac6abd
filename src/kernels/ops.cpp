#include "kernels/ops.h"

#include "kernels/cpu_isa.h"
#include "kernels/dot_lanes.h"
#include "kernels/rms_lanes.h"
#include "kernels/silu_lanes.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace hearth {
namespace {

using kernels::dot_lanes_avx2;
using kernels::dot_lanes_scalar;

bool have_avx2() {
  return isa_at_least(IsaLevel::kAvx2);
}

}  // namespace

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  if (have_avx2()) {
    kernels::rms_norm_lanes_avx2(x, w, out, n, eps);
  } else {
    kernels::rms_norm_lanes_scalar(x, w, out, n, eps);
  }
}

void rms_norm_reference(const float* x, const float* w, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  const auto mean_f = static_cast<float>(mean);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - mean_f) * scale * w[i] + b[i];
}

void layer_norm_reference(const float* x, const float* w, const float* b, float* out, int64_t n, float eps) {
  long double sum = 0.0L;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const long double mean = sum / n;
  long double sq = 0.0L;
  for (int64_t i = 0; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const long double inv = 1.0L / std::sqrt(sq / n + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((x[i] - mean) * inv * w[i] + b[i]);
}

void rope_fill_cos_sin(int32_t pos, int32_t rope_dim, float base, float* cos_sin) {
  for (int32_t i = 0; i < rope_dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * i / rope_dim);
    const double angle = pos * freq;
    cos_sin[2 * i] = static_cast<float>(std::cos(angle));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(angle));
  }
}

void rope_apply(float* x, const float* cos_sin, int32_t rope_dim, bool neox) {
  const int32_t half = rope_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    const int32_t a = neox ? i : 2 * i;
    const int32_t b = neox ? i + half : 2 * i + 1;
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    const float x0 = x[a];
    const float x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  if (have_avx2()) {
    kernels::silu_mul_lanes_avx2(gate, up, out, n);
  } else {
    kernels::silu_mul_lanes_scalar(gate, up, out, n);
  }
}

void silu_mul_reference(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void gelu_mul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + 0.044715f * g * g))) * up[i];
  }
}

void gelu_mul_reference(const float* gate, const float* up, float* out, int64_t n) {
  const double sqrt_2_over_pi = std::sqrt(2.0 / 3.14159265358979323846);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(0.5 * g * (1.0 + std::tanh(sqrt_2_over_pi * g * (1.0 + 0.044715 * g * g))) * up[i]);
  }
}

void softcap_inplace(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return have_avx2() ? dot_lanes_avx2(a, b, n) : dot_lanes_scalar(a, b, n);
}

float dot_f32_reference(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

}  // namespace hearth
