#pragma once
// KvDtype: the element formats of the KV cache, and their reference (scalar) quantizers.
//
// KV is stored per token row, head by head. One head's slice of `head_dim` values is stored as:
//   f32   4 bytes per value                      f16 / bf16   2 bytes per value
//   q8_0  groups of g values: [f16 scale d][g × int8 q],      x ≈ d × q,         g = largest divisor of
//         head_dim ≤ 64
//   q4_0  groups of g values: [f16 scale d][g/2 bytes],       x ≈ d × (q − 8),   g = largest even divisor of
//         head_dim ≤ 32; byte i holds value 2i in its low nibble and value 2i+1 in its high nibble
// Groups never cross a head, so attention dequantizes exactly the head it reads. Scales are counted in every
// size this file reports.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <vector>
#include "util/kv_shape.h"
#include "util/result.h"

namespace hearth {

enum class KvDtype : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0 };

std::string_view kv_dtype_name(KvDtype type);
Result<KvDtype> parse_kv_dtype(std::string_view name);
// The dtypes of K and V (they may differ: keys often need more precision than values).
struct KvFormat {
  KvDtype k = KvDtype::kF32;
  KvDtype v = KvDtype::kF32;

  // "q8_0", or "k=q8_0,v=f16" when K and V differ. Part of the prefix-cache namespace.
  std::string name() const;
  bool operator==(const KvFormat&) const = default;
};

// Every KV dtype, widest first.
std::span<const KvDtype> all_kv_dtypes();

// Values per scale group (head_dim itself for the float formats). Error when the format cannot hold this
// head size (q4_0 needs an even group).
Result<int32_t> kv_group_size(KvDtype type, int32_t head_dim);
// Bytes of one head's slice, scales included. Requires kv_group_size to succeed.
size_t kv_head_bytes(KvDtype type, int32_t head_dim);
// Of those, bytes spent on scales.
size_t kv_head_scale_bytes(KvDtype type, int32_t head_dim);

// One head's slice: head_dim floats <-> kv_head_bytes bytes. Reference versions; the dequantizer is exact
// (each value is d × q computed in fp32), so vector twins must agree bit for bit.
void kv_quantize_head(KvDtype type, const float* src, uint8_t* dst, int32_t head_dim);
// One token's KV cost for a model shape in `format`, or an error when the shape is not positive or a dtype cannot
// hold this head size.
Result<KvTokenCost> kv_token_cost(const KvShape& shape, const KvFormat& format);
// Its bytes_per_token.
Result<int64_t> kv_bytes_per_token(const KvShape& shape, const KvFormat& format);
// The cost in every KV dtype that holds this head size (K = V), widest first, then `format` itself when K and V
// differ: the rows of a memory plan.
std::vector<KvTokenCost> kv_dtype_costs(const KvShape& shape, const KvFormat& format);

void kv_dequantize_head_reference(KvDtype type, const uint8_t* src, float* dst, int32_t head_dim);

}  // namespace hearth
