#pragma once
// The shape of a model's KV and what one token of it costs in bytes: plain data shared by the layer that stores KV
// (model, tensor dtypes) and the layer that plans and accounts for it (kv), which knows byte counts, never dtypes.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace hearth {

// One KV layer's heads: what that layer stores per token.
struct KvLayerShape {
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

// The layers that store K/V (a Gemma 4 layer that reads an earlier layer's K/V stores none and is not counted).
// Uniform models leave `layers` empty: every layer holds n_kv_heads heads of head_dim. Models whose layers differ
// (Gemma 4: sliding layers with other head sizes and KV-head counts than global ones) list each layer; n_kv_heads
// and head_dim are then the largest of them.
struct KvShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  std::vector<KvLayerShape> layers;  // empty, or n_layers entries

  KvLayerShape layer(int32_t il) const { return layers.empty() ? KvLayerShape{n_kv_heads, head_dim} : layers[il]; }
  bool uniform() const { return layers.empty(); }
};

// One token's K and V over all layers in one KV format (tensor/kv_dtype.h: kv_token_cost).
struct KvTokenCost {
  std::string dtype;    // the format's name: "q8_0", or "k=q8_0,v=f16" when K and V differ
  std::string dtype_k;  // each part's dtype name
  std::string dtype_v;
  int64_t bytes_per_token = 0;        // scales included
  int64_t scale_bytes_per_token = 0;  // of which scales
  std::vector<int64_t> layer_bytes_per_token;  // each KV layer's share of bytes_per_token, in layer order
};

// The bytes per token of the KV layers flagged in `which` (one flag per KV layer), from a cost's per-layer shares.
inline int64_t kv_layer_bytes(const KvTokenCost& cost, const std::vector<bool>& which) {
  int64_t bytes = 0;
  const size_t n = std::min(which.size(), cost.layer_bytes_per_token.size());
  for (size_t il = 0; il < n; ++il) bytes += which[il] ? cost.layer_bytes_per_token[il] : 0;
  return bytes;
}

}  // namespace hearth
