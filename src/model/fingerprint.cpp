#include "model/fingerprint.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include <xxhash.h>

#include "util/sha256.h"

namespace hearth {
namespace {

void hash_value(Sha256& h, const GgufValue& v) {
  h.update_u32(static_cast<uint32_t>(v.type));
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, uint64_t> || std::is_same_v<T, int64_t>) {
          h.update_u64(static_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, double>) {
          uint64_t bits;
          std::memcpy(&bits, &x, sizeof(bits));
          h.update_u64(bits);
        } else if constexpr (std::is_same_v<T, bool>) {
          h.update_u32(x ? 1 : 0);
        } else if constexpr (std::is_same_v<T, std::string>) {
          h.update_string(x);
        } else {
          h.update_u32(static_cast<uint32_t>(x->elem_type));
          h.update_u64(x->items.size());
          for (const GgufValue& item : x->items) hash_value(h, item);
        }
      },
      v.data);
}

}  // namespace

std::string model_fingerprint(const GgufFile& file) {
  Sha256 h;
  h.update_string("hearth-model-fingerprint-v2");
  h.update_u64(file.metadata().size());
  for (const auto& [key, value] : file.metadata()) {
    h.update_string(key);
    hash_value(h, value);
  }
  h.update_u64(file.tensors().size());
  for (const GgufTensor& t : file.tensors()) {
    h.update_string(t.name);
    h.update_u32(static_cast<uint32_t>(t.type));
    for (int64_t ne : t.ne) h.update_u64(static_cast<uint64_t>(ne));
    h.update_u64(t.offset);
  }
  XXH3_state_t* weights = XXH3_createState();
  XXH3_128bits_reset(weights);
  // Hashed a slice at a time, each slice's mapped pages released after it: reading every weight once must not leave
  // a second, file-backed copy of the model in RSS beside the repacked one (69 MiB of 110M's were).
  constexpr size_t kSlice = 16u << 20;
  for (const GgufTensor& t : file.tensors()) {
    if (t.data == nullptr) continue;
    const auto* bytes = static_cast<const uint8_t*>(t.data);
    for (size_t at = 0; at < t.nbytes; at += kSlice) {
      const size_t n = std::min(kSlice, t.nbytes - at);
      XXH3_128bits_update(weights, bytes + at, n);
      file.release_resident({bytes + at, n});
    }
  }
  const XXH128_hash_t digest = XXH3_128bits_digest(weights);
  XXH3_freeState(weights);
  h.update_u64(digest.high64);
  h.update_u64(digest.low64);
  return to_hex(h.finish());
}

}  // namespace hearth
