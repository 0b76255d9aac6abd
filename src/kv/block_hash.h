#pragma once
// Block keys of the prefix cache.
//
//   key(block i) = SHA-256( parent ‖ namespace ‖ u32 n_tokens ‖ n_tokens × i32 token )      (all little-endian)
//   parent       = key(block i-1), or the namespace digest itself for block 0
//   namespace    = SHA-256 of the length-prefixed fields of CacheNamespace
//
// The layout is fixed and versioned ("hearth-kv-ns-v1"), so keys are stable across builds and restarts
// and can name blocks on disk. Two requests share a block only when every namespace field and every
// token of the whole prefix up to and including that block are equal.

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>

#include "util/ids.h"
#include "util/sha256.h"

namespace hearth {

struct BlockHash {
  Sha256Digest bytes{};
  auto operator<=>(const BlockHash&) const = default;
  std::string hex() const { return to_hex(bytes); }
};

struct CacheNamespace {
  std::string model_fingerprint;  // hash of the model's metadata and tensor layout
  std::string kv_dtype = "f32";
  int32_t block_size = 16;
  std::string adapter_id;  // empty: base model
  std::string cache_salt;  // empty: shared with every request without a salt
  std::string arithmetic;  // which kernels compute the K/V (Model::kernel_arithmetic()); empty: not said

  // The digest every block key of this namespace starts from.
  BlockHash digest() const;
};

// Key of one full block given its parent key (or the namespace digest for block 0).
BlockHash hash_block(const BlockHash& parent, const BlockHash& ns, std::span<const TokenId> tokens);

}  // namespace hearth

template <>
struct std::hash<hearth::BlockHash> {
  size_t operator()(const hearth::BlockHash& h) const noexcept {
    size_t v;
    std::memcpy(&v, h.bytes.data(), sizeof(v));  // SHA-256 output is uniform; its first bytes are a fine hash
    return v;
  }
};
