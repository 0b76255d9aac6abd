#include "model/kv_storage.h"

#include <cstring>

#include "util/result.h"

namespace hearth {

KvStorage::KvStorage(int32_t n_layers, int32_t kv_dim, int32_t block_size, int32_t num_blocks)
    : n_layers_(n_layers), kv_dim_(kv_dim), block_size_(block_size), num_blocks_(num_blocks) {
  HEARTH_CHECK(n_layers > 0 && kv_dim > 0 && block_size > 0 && num_blocks > 0, "bad KvStorage shape");
  data_.assign(static_cast<size_t>(n_layers) * 2 * num_blocks * block_size * kv_dim, 0.0f);
}

size_t KvStorage::offset(int32_t layer, int kv, BlockId block, int32_t slot) const {
  HEARTH_CHECK(layer >= 0 && layer < n_layers_ && block.value >= 0 && block.value < num_blocks_ && slot >= 0 &&
                   slot < block_size_,
               "KV access out of range: layer {} block {} slot {}", layer, block.value, slot);
  const size_t per_block = static_cast<size_t>(block_size_) * kv_dim_;
  const size_t per_kv = per_block * num_blocks_;
  return (static_cast<size_t>(layer) * 2 + kv) * per_kv + block.value * per_block +
         static_cast<size_t>(slot) * kv_dim_;
}

void KvStorage::copy_slots(BlockId dst, BlockId src, int32_t n_slots) {
  HEARTH_CHECK(n_slots >= 0 && n_slots <= block_size_, "copy_slots: {} slots", n_slots);
  if (n_slots == 0) return;
  const size_t n = static_cast<size_t>(n_slots) * kv_dim_ * sizeof(float);
  for (int32_t layer = 0; layer < n_layers_; ++layer) {
    std::memcpy(k_row(layer, dst, 0), k_row(layer, src, 0), n);
    std::memcpy(v_row(layer, dst, 0), v_row(layer, src, 0), n);
  }
}

}  // namespace hearth
