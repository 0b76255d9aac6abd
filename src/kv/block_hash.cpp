#include "kv/block_hash.h"

namespace hearth {

BlockHash CacheNamespace::digest() const {
  Sha256 h;
  h.update_string("hearth-kv-ns-v1");
  h.update_string(model_fingerprint);
  h.update_string(kv_dtype);
  h.update_u32(static_cast<uint32_t>(block_size));
  h.update_string(adapter_id);
  h.update_string(cache_salt);
  if (!arithmetic.empty()) h.update_string(arithmetic);  // absent, the digest is the one of earlier builds
  return BlockHash{h.finish()};
}

BlockHash hash_block(const BlockHash& parent, const BlockHash& ns, std::span<const TokenId> tokens) {
  Sha256 h;
  h.update(parent.bytes.data(), parent.bytes.size());
  h.update(ns.bytes.data(), ns.bytes.size());
  h.update_u32(static_cast<uint32_t>(tokens.size()));
  uint8_t buf[1024];  // tokens serialized little-endian in chunks, without allocating
  size_t used = 0;
  for (TokenId t : tokens) {
    const auto v = static_cast<uint32_t>(t.value);
    buf[used++] = static_cast<uint8_t>(v);
    buf[used++] = static_cast<uint8_t>(v >> 8);
    buf[used++] = static_cast<uint8_t>(v >> 16);
    buf[used++] = static_cast<uint8_t>(v >> 24);
    if (used == sizeof(buf)) {
      h.update(buf, used);
      used = 0;
    }
  }
  h.update(buf, used);
  return BlockHash{h.finish()};
}

}  // namespace hearth
