#pragma once
// KvStorage: the K/V memory of every block, for every layer. Bookkeeping (which block belongs to whom) lives
// in the `kv` layer; this class only holds the bytes and hands out rows by (layer, block, slot).
//
// Layout, per layer and per K/V:  [block][slot][kv head][head slice in the K or V dtype]
// so one token's K for all heads is one contiguous row, quantized straight from the K projection output.
// The pool is one allocation of exactly bytes_total() bytes, scales included; its pages are committed by the
// OS as blocks are first written, so a process's memory grows with the KV it really holds, up to the budget.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kernels/attention.h"
#include "tensor/kv_dtype.h"
#include "util/ids.h"
#include "util/kv_shape.h"
#include "util/result.h"

namespace hearth {

class KvStorage {
 public:
  // Error when a dtype cannot hold this head size, or the shape is not positive.
  static Result<std::unique_ptr<KvStorage>> create(const KvShape& shape, const KvFormat& format, int32_t block_size,
                                                   int32_t num_blocks);
  // f32 K and V; aborts on a bad shape (tests and single-sequence generation).
  KvStorage(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size, int32_t num_blocks);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  const KvShape& shape() const { return shape_; }
  const KvFormat& format() const { return format_; }
  int32_t kv_dim() const { return shape_.n_kv_heads * shape_.head_dim; }
  size_t row_bytes(int kv) const { return kv == 0 ? k_row_bytes_ : v_row_bytes_; }
  size_t bytes_per_token() const { return static_cast<size_t>(shape_.n_layers) * (k_row_bytes_ + v_row_bytes_); }
  size_t bytes_per_block() const { return bytes_per_token() * block_size_; }
  size_t bytes_total() const { return bytes_per_block() * num_blocks_; }

  // Stores one token's K (kv == 0) or V (kv == 1) row of kv_dim floats, converted to the storage dtype.
  void store_row(int32_t layer, int kv, BlockId block, int32_t slot, const float* row);
  // The stored bytes of one token's row. Requires block < num_blocks(), slot < block_size().
  const uint8_t* row(int32_t layer, int kv, BlockId block, int32_t slot) const;

  // The K (kv == 0) or V (kv == 1) rows of `layer` as a paged view through `block_table`.
  PagedKvView layer_view(int32_t layer, int kv, std::span<const BlockId> block_table) const;

  // Copies the first `n_slots` token slots of `src` into `dst`, in every layer (copy-on-partial-reuse).
  void copy_slots(BlockId dst, BlockId src, int32_t n_slots);

  // One block's K/V as bytes_per_block() bytes, layer by layer, K rows then V rows (what a lower tier stores), and
  // back. `out`/`bytes` must be exactly bytes_per_block() long.
  void read_block(BlockId block, std::span<uint8_t> out) const;
  void write_block(BlockId block, std::span<const uint8_t> bytes);
  // How read_block lays a block out, as text a tier entry carries: blocks are interchangeable only when it is equal.
  std::string block_layout() const;

 private:
  KvStorage(const KvShape& shape, const KvFormat& format, int32_t block_size, int32_t num_blocks);
  size_t offset(int32_t layer, int kv, BlockId block, int32_t slot) const;
  size_t plane_offset(int32_t layer, int kv) const;

  KvShape shape_;
  KvFormat format_;
  int32_t block_size_;
  int32_t num_blocks_;
  size_t k_row_bytes_;
  size_t v_row_bytes_;
  std::unique_ptr<uint8_t[]> data_;  // [layer][k|v][block][slot][row bytes]
};

}  // namespace hearth
