#include "tensor/kv_dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"

namespace hearth {
namespace {

constexpr std::array<KvDtype, 5> kAll = {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kQ8_0, KvDtype::kQ4_0};

int32_t largest_divisor_at_most(int32_t n, int32_t limit, bool even) {
  for (int32_t g = std::min(n, limit); g >= 1; --g) {
    if (n % g == 0 && (!even || g % 2 == 0)) return g;
  }
  return 0;
}

int32_t group_of(KvDtype type, int32_t head_dim) {
  switch (type) {
    case KvDtype::kQ8_0:
      return largest_divisor_at_most(head_dim, 64, false);
    case KvDtype::kQ4_0:
      return largest_divisor_at_most(head_dim, 32, true);
    default:
      return head_dim;
  }
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void store_u16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, sizeof(v));
}

void quantize_q8_group(const float* x, uint8_t* dst, int32_t g) {
  float amax = 0.0f;
  for (int32_t i = 0; i < g; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t d16 = fp32_to_fp16(amax / 127.0f);
  const float d = fp16_to_fp32(d16);
  store_u16(dst, d16);
  auto* q = reinterpret_cast<int8_t*>(dst + 2);
  for (int32_t i = 0; i < g; ++i) {
    const float v = d == 0.0f ? 0.0f : std::nearbyint(x[i] / d);
    q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
}

void quantize_q4_group(const float* x, uint8_t* dst, int32_t g) {
  // The value of largest magnitude maps to -8, so its sign gets the extra level of the 4-bit range.
  float max = 0.0f;
  for (int32_t i = 0; i < g; ++i) {
    if (std::fabs(x[i]) > std::fabs(max)) max = x[i];
  }
  const uint16_t d16 = fp32_to_fp16(max / -8.0f);
  const float d = fp16_to_fp32(d16);
  store_u16(dst, d16);
  uint8_t* q = dst + 2;
  auto level = [&](float v) {
    const float l = d == 0.0f ? 8.0f : std::nearbyint(v / d) + 8.0f;
    return static_cast<uint8_t>(std::clamp(l, 0.0f, 15.0f));
  };
  for (int32_t i = 0; i < g / 2; ++i) q[i] = static_cast<uint8_t>(level(x[2 * i]) | (level(x[2 * i + 1]) << 4));
}

}  // namespace

std::string_view kv_dtype_name(KvDtype type) {
  switch (type) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kBF16:
      return "bf16";
    case KvDtype::kQ8_0:
      return "q8_0";
    case KvDtype::kQ4_0:
      return "q4_0";
  }
  return "?";
}

Result<KvDtype> parse_kv_dtype(std::string_view name) {
  for (KvDtype t : kAll) {
    if (kv_dtype_name(t) == name) return t;
  }
  return make_error("unknown KV dtype '{}': expected one of f32, f16, bf16, q8_0, q4_0", name);
}

std::string KvFormat::name() const {
  if (k == v) return std::string(kv_dtype_name(k));
  return fmt::format("k={},v={}", kv_dtype_name(k), kv_dtype_name(v));
}

std::span<const KvDtype> all_kv_dtypes() {
  return kAll;
}

Result<int32_t> kv_group_size(KvDtype type, int32_t head_dim) {
  if (head_dim < 1) return make_error("head size {} is not positive", head_dim);
  const int32_t g = group_of(type, head_dim);
  if (g < 1)
    return make_error("KV dtype {} needs an even head size; this model's is {}", kv_dtype_name(type), head_dim);
  return g;
}

size_t kv_head_bytes(KvDtype type, int32_t head_dim) {
  const size_t n = static_cast<size_t>(head_dim);
  switch (type) {
    case KvDtype::kF32:
      return n * 4;
    case KvDtype::kF16:
    case KvDtype::kBF16:
      return n * 2;
    case KvDtype::kQ8_0:
      return n + kv_head_scale_bytes(type, head_dim);
    case KvDtype::kQ4_0:
      return n / 2 + kv_head_scale_bytes(type, head_dim);
  }
  return 0;
}

size_t kv_head_scale_bytes(KvDtype type, int32_t head_dim) {
  if (type != KvDtype::kQ8_0 && type != KvDtype::kQ4_0) return 0;
  const int32_t g = group_of(type, head_dim);
  HEARTH_CHECK(g > 0, "KV dtype {} cannot hold head size {}", kv_dtype_name(type), head_dim);
  return 2 * static_cast<size_t>(head_dim / g);
}

void kv_quantize_head(KvDtype type, const float* src, uint8_t* dst, int32_t head_dim) {
  switch (type) {
    case KvDtype::kF32:
      std::memcpy(dst, src, static_cast<size_t>(head_dim) * 4);
      return;
    case KvDtype::kF16:
      for (int32_t i = 0; i < head_dim; ++i) store_u16(dst + 2 * i, fp32_to_fp16(src[i]));
      return;
    case KvDtype::kBF16:
      for (int32_t i = 0; i < head_dim; ++i) store_u16(dst + 2 * i, fp32_to_bf16(src[i]));
      return;
    case KvDtype::kQ8_0:
    case KvDtype::kQ4_0: {
      const int32_t g = group_of(type, head_dim);
      HEARTH_CHECK(g > 0, "KV dtype {} cannot hold head size {}", kv_dtype_name(type), head_dim);
      const size_t group_bytes = 2 + (type == KvDtype::kQ8_0 ? g : g / 2);
      for (int32_t i = 0; i < head_dim; i += g, dst += group_bytes) {
        if (type == KvDtype::kQ8_0) {
          quantize_q8_group(src + i, dst, g);
        } else {
          quantize_q4_group(src + i, dst, g);
        }
      }
      return;
    }
  }
}

void kv_dequantize_head_reference(KvDtype type, const uint8_t* src, float* dst, int32_t head_dim) {
  switch (type) {
    case KvDtype::kF32:
      std::memcpy(dst, src, static_cast<size_t>(head_dim) * 4);
      return;
    case KvDtype::kF16:
      for (int32_t i = 0; i < head_dim; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
      return;
    case KvDtype::kBF16:
      for (int32_t i = 0; i < head_dim; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
      return;
    case KvDtype::kQ8_0:
    case KvDtype::kQ4_0: {
      const int32_t g = group_of(type, head_dim);
      HEARTH_CHECK(g > 0, "KV dtype {} cannot hold head size {}", kv_dtype_name(type), head_dim);
      for (int32_t i = 0; i < head_dim; i += g) {
        const float d = fp16_to_fp32(load_u16(src));
        const uint8_t* q = src + 2;
        if (type == KvDtype::kQ8_0) {
          for (int32_t k = 0; k < g; ++k) dst[i + k] = d * static_cast<float>(static_cast<int8_t>(q[k]));
          src += 2 + g;
        } else {
          for (int32_t k = 0; k < g / 2; ++k) {
            dst[i + 2 * k] = d * static_cast<float>((q[k] & 0x0F) - 8);
            dst[i + 2 * k + 1] = d * static_cast<float>((q[k] >> 4) - 8);
          }
          src += 2 + g / 2;
        }
      }
      return;
    }
  }
}

Result<KvTokenCost> kv_token_cost(const KvShape& shape, const KvFormat& format) {
  if (shape.n_layers < 1 || shape.n_kv_heads < 1 || shape.head_dim < 1 ||
      (!shape.uniform() && static_cast<int32_t>(shape.layers.size()) != shape.n_layers)) {
    return make_error("bad model shape for KV: {} layers, {} KV heads, head size {}", shape.n_layers, shape.n_kv_heads,
                      shape.head_dim);
  }
  KvTokenCost cost;
  cost.dtype = format.name();
  cost.dtype_k = std::string(kv_dtype_name(format.k));
  cost.dtype_v = std::string(kv_dtype_name(format.v));
  for (int32_t il = 0; il < shape.n_layers; ++il) {
    const KvLayerShape l = shape.layer(il);
    if (l.n_kv_heads < 1 || l.head_dim < 1 || l.n_kv_heads > shape.n_kv_heads || l.head_dim > shape.head_dim) {
      return make_error("bad model shape for KV: layer {} has {} KV heads of {}", il, l.n_kv_heads, l.head_dim);
    }
    HEARTH_TRY(kv_group_size(format.k, l.head_dim));
    HEARTH_TRY(kv_group_size(format.v, l.head_dim));
    // Each factor is bounded (heads, head size ≤ 2^31, layers ≤ 2^31) and checked below far from overflow.
    const int64_t bytes = int64_t{l.n_kv_heads} * static_cast<int64_t>(kv_head_bytes(format.k, l.head_dim) +
                                                                       kv_head_bytes(format.v, l.head_dim));
    const int64_t scales = int64_t{l.n_kv_heads} * static_cast<int64_t>(kv_head_scale_bytes(format.k, l.head_dim) +
                                                                        kv_head_scale_bytes(format.v, l.head_dim));
    // Bounded far below overflow so that bytes per block (× 1024 tokens at most) stays exact too.
    if (bytes > (int64_t{1} << 40) || cost.bytes_per_token + bytes > (int64_t{1} << 40)) {
      return make_error("KV bytes per token for {} layers × {} KV heads × head size {} are out of range",
                        shape.n_layers, shape.n_kv_heads, shape.head_dim);
    }
    cost.layer_bytes_per_token.push_back(bytes);
    cost.bytes_per_token += bytes;
    cost.scale_bytes_per_token += scales;
  }
  return cost;
}

Result<int64_t> kv_bytes_per_token(const KvShape& shape, const KvFormat& format) {
  auto cost = kv_token_cost(shape, format);
  if (!cost) return cost.error();
  return cost->bytes_per_token;
}

std::vector<KvTokenCost> kv_dtype_costs(const KvShape& shape, const KvFormat& format) {
  std::vector<KvFormat> formats;
  for (KvDtype t : all_kv_dtypes()) formats.push_back({t, t});
  if (format.k != format.v) formats.push_back(format);
  std::vector<KvTokenCost> costs;
  for (const KvFormat& f : formats) {
    if (auto cost = kv_token_cost(shape, f)) costs.push_back(std::move(*cost));
  }
  return costs;
}

}  // namespace hearth
