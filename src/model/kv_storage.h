#pragma once
// KvStorage: the K/V memory of every block, for every layer. Bookkeeping (which block belongs to whom) lives
// in the `kv` layer; this class only holds the numbers and hands out rows by (layer, block, slot).
//
// Layout, per layer and per K/V:  [block][slot][kv_dim]   (kv_dim = n_kv_heads × head_dim)
// so one token's K for all heads is a contiguous row, written straight from the K projection output.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ops.h"
#include "util/ids.h"

namespace hearth {

class KvStorage {
 public:
  KvStorage(int32_t n_layers, int32_t kv_dim, int32_t block_size, int32_t num_blocks);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t kv_dim() const { return kv_dim_; }
  size_t bytes_per_token() const { return 2 * static_cast<size_t>(n_layers_) * kv_dim_ * sizeof(float); }
  size_t bytes_total() const { return bytes_per_token() * block_size_ * num_blocks_; }

  // Row of one token's K (or V) in `layer`. Requires block < num_blocks(), slot < block_size().
  float* k_row(int32_t layer, BlockId block, int32_t slot) { return data_.data() + offset(layer, 0, block, slot); }
  float* v_row(int32_t layer, BlockId block, int32_t slot) { return data_.data() + offset(layer, 1, block, slot); }
  const float* k_row(int32_t layer, BlockId block, int32_t slot) const {
    return data_.data() + offset(layer, 0, block, slot);
  }
  const float* v_row(int32_t layer, BlockId block, int32_t slot) const {
    return data_.data() + offset(layer, 1, block, slot);
  }

  // The K (kv == 0) or V (kv == 1) rows of `layer` as a paged view through `block_table`.
  PagedKvView layer_view(int32_t layer, int kv, std::span<const BlockId> block_table) const {
    const size_t per_block = static_cast<size_t>(block_size_) * kv_dim_;
    return PagedKvView{data_.data() + offset(layer, kv, BlockId{0}, 0), per_block, static_cast<size_t>(kv_dim_),
                       block_size_, block_table};
  }

  // Copies the first `n_slots` token slots of `src` into `dst`, in every layer (copy-on-partial-reuse).
  void copy_slots(BlockId dst, BlockId src, int32_t n_slots);

 private:
  size_t offset(int32_t layer, int kv, BlockId block, int32_t slot) const;

  int32_t n_layers_;
  int32_t kv_dim_;
  int32_t block_size_;
  int32_t num_blocks_;
  std::vector<float> data_;  // [layer][k|v][block][slot][kv_dim]
};

// A sequence's view of the storage: position p lives in block_table[p / block_size], slot p % block_size.
struct SequenceKv {
  std::span<const BlockId> block_table;
};

}  // namespace hearth
