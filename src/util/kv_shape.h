#pragma once
// The shape of a model's KV and what one token of it costs in bytes: plain data shared by the layer that stores KV
// (model, tensor dtypes) and the layer that plans and accounts for it (kv), which knows byte counts, never dtypes.

#include <cstdint>
#include <string>

namespace hearth {

struct KvShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

// One token's K and V over all layers in one KV format (tensor/kv_dtype.h: kv_token_cost).
struct KvTokenCost {
  std::string dtype;    // the format's name: "q8_0", or "k=q8_0,v=f16" when K and V differ
  std::string dtype_k;  // each part's dtype name
  std::string dtype_v;
  int64_t bytes_per_token = 0;        // scales included
  int64_t scale_bytes_per_token = 0;  // of which scales
};

}  // namespace hearth
